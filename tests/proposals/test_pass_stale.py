"""The proposal checked against the store (I-4), loaded by the page once shown:
the page itself reads no store; the check lists the affected operations with a link to each one's
page, marks the rows shown, says when the store cannot be read, and works without scripts."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.proposals.models import Pass
from tests.conftest import DISTINCT_FACTS
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def overtaken(agent_with_memories: Any) -> Pass:
    """A proposal of 25 merges none of whose sources is in the agent's store (all affected)."""
    agent = agent_with_memories(DISTINCT_FACTS[:3])
    return make_proposal(agent, merges=25, entries_before=60)


def _merges(run: Pass) -> list[Any]:
    return list(run.operations.filter(kind="merge").order_by("index"))


def test_the_check_lists_every_affected_operation_and_marks_the_rows_shown(
    client: Client, carol: Any, overtaken: Pass
):
    client.force_login(carol)
    url = reverse("pass_stale", args=[overtaken.pk])
    html = client.get(url, **HTMX).content.decode()
    assert "25 operations are affected" in html and html.count("no longer exists") >= 25
    ops = _merges(overtaken)
    assert f'href="?merge_page=1#op-{ops[0].pk}">merge #0</a>' in html
    assert f'href="?merge_page=2#op-{ops[24].pk}">merge #24</a>' in html
    # a long proposal's groups load their rows when opened: none to mark yet ...
    assert 'hx-swap-oob="true"' not in html
    # ... the rows of the page shown are marked
    html = client.get(url, {"merge_page": 1}, **HTMX).content.decode()
    assert html.count('hx-swap-oob="true"') == 20 and f'id="stale-op-{ops[0].pk}"' in html
    html = client.get(url, {"merge_page": 2}, **HTMX).content.decode()
    assert html.count('hx-swap-oob="true"') == 5 and f'id="stale-op-{ops[24].pk}"' in html
    # opening the group, or paging it, marks its rows in the group itself
    for number, marks in ((1, 20), (2, 5)):
        group = client.get(
            reverse("pass_detail", args=[overtaken.pk]),
            {"kind": "merge", "merge_page": number},
            **HTMX,
        ).content.decode()
        assert group.count('data-testid="stale-op"') == marks


def test_the_page_loads_the_check_with_the_query_it_was_shown_with(
    client: Client, carol: Any, overtaken: Pass
):
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[overtaken.pk]), {"merge_page": 2})
    html = html.content.decode()
    url = reverse("pass_stale", args=[overtaken.pk])
    assert f'hx-get="{url}?merge_page=2" hx-trigger="load"' in html
    assert 'data-testid="stale-op"' not in html and 'id="stale-warning"' not in html


def test_a_long_list_names_the_first_fifty(client: Client, carol: Any, agent_with_memories: Any):
    run = make_proposal(agent_with_memories(DISTINCT_FACTS[:3]), merges=60, entries_before=200)
    client.force_login(carol)
    html = client.get(reverse("pass_stale", args=[run.pk]), **HTMX).content.decode()
    assert "60 operations are affected" in html and "… and 10 more." in html
    assert html.count("<li><a href=") == 50


def test_a_store_that_cannot_be_read_is_said(client: Client, carol: Any, bare_agent: Any):
    run = make_proposal(bare_agent(name="Orphan"))  # its collection was never created
    client.force_login(carol)
    html = client.get(reverse("pass_stale", args=[run.pk]), **HTMX).content.decode()
    assert "Could not check the proposal against the store:" in html and "does not exist" in html


def test_only_a_proposal_is_checked(client: Client, carol: Any, agent_with_memories: Any):
    run = make_proposal(agent_with_memories(DISTINCT_FACTS[:3]), status="rejected")
    client.force_login(carol)
    assert 'id="stale-check"' not in client.get(run.get_absolute_url()).content.decode()
    r = client.get(reverse("pass_stale", args=[run.pk]), **HTMX)
    assert r.status_code == 200 and "stale" not in r.content.decode()
