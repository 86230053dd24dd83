"""One click back under the loss budget: a reviewer's "keep A" on a conflict
pushed a plan trimmed exactly to its budget over it (25.4 % of 25 %) and Approve was blocked
with no way forward but excluding operations one by one. The page offers the fix: exclude the
fewest operations that fit the budget, never the reviewer's own pick."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.agents.models import Agent
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.evaluation import pass_store_figures
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db


@pytest.fixture
def over_budget(unique_name) -> Pass:
    """20 memories, threshold 25 % (5 may go): two merges (2 each) fit, and a reviewer's pick
    (a decided conflict, 1) plus a third merge push it to 7."""
    agent = Agent.objects.create(
        name="Support bot", slug=unique_name("a"), collection_name=unique_name("c")
    )
    run = make_proposal(agent, entries_before=20, merges=3, reconciles=1)
    run.operations.filter(kind="reconcile").update(rule="reviewer_pick")
    pass_store_figures(run=run)
    run.refresh_from_db()
    return run


def test_the_page_offers_the_fewest_exclusions_that_fit_the_budget(
    client: Client, bob, over_budget
) -> None:
    client.force_login(bob)
    page = client.get(reverse("pass_detail", args=[over_budget.pk])).content.decode()
    assert re.search(r'id="approve-btn"[^>]*disabled', page)
    assert "Exclude at least 1 operation to approve" in page
    assert ">Exclude 1 operation to fit the budget</button>" in page
    assert 'id="budget-fix"' in page and 'name="scope" value="budget"' in page

    r = client.post(
        reverse("review_bulk", args=[over_budget.pk]),
        {"scope": "budget", "action": "exclude"},
        HTTP_HX_REQUEST="true",
    )
    html = r.content.decode()
    assert r.status_code == 200 and "1 operation excluded." in html
    excluded = list(over_budget.operations.filter(status="excluded"))
    assert [op.kind for op in excluded] == ["merge"]  # never the reviewer's pick
    assert not re.search(r'id="approve-btn"[^>]*disabled', html)  # the approve line, oob
    assert 'data-testid="budget-fix"' not in html


def test_fitting_the_budget_only_excludes(client: Client, bob, over_budget) -> None:
    client.force_login(bob)
    r = client.post(
        reverse("review_bulk", args=[over_budget.pk]),
        {"scope": "budget", "action": "include"},
        HTTP_HX_REQUEST="true",
    )
    assert "Fitting the loss budget excludes operations." in r.content.decode()
    assert not over_budget.operations.filter(status="excluded").exists()
