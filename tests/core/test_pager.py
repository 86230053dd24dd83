"""The one pager (``_pager.html``): its links keep the page's filters and, on the proposal page,
page one kind of operation at a time and swap only that kind's list."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.memories.selectors.memories import MEMORY_PAGE_SIZE
from memoryadmin.proposals.selectors.passes import OPS_PER_PAGE
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db


def test_the_proposal_pages_each_kind_of_operation_on_its_own(client: Client, carol, bare_agent):
    run = make_proposal(bare_agent(), entries_before=200, merges=OPS_PER_PAGE + 1, prunes=1)
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk]), {"merge_page": 1}).content.decode()
    assert 'href="?merge_page=2#ops-merge"' in html
    assert 'hx-get="?kind=merge&merge_page=2" hx-target="#ops-merge"' in html
    assert "prune_page=2" not in html  # one prune: no pager for that kind
    second = client.get(reverse("pass_detail", args=[run.pk]), {"merge_page": 2}).content.decode()
    assert "page 2 of 2" in second and 'href="?merge_page=1#ops-merge"' in second


def test_the_memory_pager_keeps_the_filters(client: Client, carol, agent_with_memories):
    texts = [f"Note number {i} about the garden." for i in range(MEMORY_PAGE_SIZE + 1)]
    agent = agent_with_memories(texts, [{"tier": "working"}] * len(texts))
    client.force_login(carol)
    html = client.get(reverse("memory_list", args=[agent.slug]), {"tier": "working"}).content
    assert b'href="?tier=working&page=2"' in html and b"page 1 of 2" in html
