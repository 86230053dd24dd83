"""The memory browser's filters run in Chroma: the spellings the field map accepts, Unicode
case-insensitive text with regex characters taken literally, and a later page."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _ids(client: Client, agent, **params) -> list[str]:
    r = client.get(reverse("memory_list", args=[agent.slug]), params)
    assert r.status_code == 200
    return [m.id for m in r.context["page"].object_list]


def test_filters_follow_the_field_map_spellings(client: Client, carol, agent_with_memories):
    texts = [
        "Ünïcode ÉCOLE notes",
        "price is $5 (approx.)",
        "plain working memory",
        "pinned by string",
        "archived tier",
    ]
    metas = [
        {"tier": ""},
        {"pinned": "yes"},
        {},
        {"pinned": "True", "tier": "working"},
        {"tier": "cold"},
    ]
    agent = agent_with_memories(texts, metas)
    client.force_login(carol)
    assert _ids(client, agent, contains="école") == ["mem-000"]
    assert _ids(client, agent, contains="$5 (APPROX.)") == ["mem-001"]
    assert _ids(client, agent, pinned="yes") == ["mem-001", "mem-003"]
    assert _ids(client, agent, pinned="no") == ["mem-000", "mem-002", "mem-004"]
    assert _ids(client, agent, tier="working") == ["mem-000", "mem-001", "mem-002", "mem-003"]
    assert _ids(client, agent, tier="cold") == ["mem-004"]
    r = client.get(reverse("memory_list", args=[agent.slug]))
    assert r.context["tiers"] == ["cold", "working"]


def test_a_later_filtered_page(client: Client, carol, agent_with_memories):
    texts = [f"Note {i} about {'cats' if i % 2 else 'dogs'}." for i in range(130)]
    agent = agent_with_memories(texts)
    client.force_login(carol)
    r = client.get(reverse("memory_list", args=[agent.slug]), {"contains": "CATS", "page": 2})
    page = r.context["page"]
    assert page.paginator.count == 65 and page.paginator.num_pages == 2
    assert [m.id for m in page.object_list] == [f"mem-{i:03d}" for i in range(101, 130, 2)]
