"""Every count of a pass agrees, on every page, and says what it counts: the summary,
the operation groups, the loss guard's arithmetic, the store after apply and the rollback page;
a plan over the loss budget proposes what fits and shows the rest as deferred."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.core import stores
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import operation_edit_text, pass_approve
from tests.api.api_helpers import api_factory
from tests.conftest import DISTINCT_FACTS, days_ago

pytestmark = pytest.mark.django_db

TEXTS = DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2]  # two exact duplicate pairs: 2 merges of 2
META = (
    [{}] * 5 + [{"importance": 0.9}, {"created_at": days_ago(400), "importance": 0.1}] + [{}] * 11
)


def run_pass(agent: Any, capture: Any) -> Pass:
    with capture(execute=True):
        run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR)
    run.refresh_from_db()
    return run


def text_of(html: str, testid: str) -> str:
    m = re.search(rf'data-testid="{testid}">(.*?)</', html, re.S)
    assert m, f"no {testid} on the page"
    return " ".join(m.group(1).split())


def test_every_count_agrees_on_the_summary_groups_guard_store_and_rollback_page(
    client: Client, alice, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(TEXTS, META, policy={"max_loss_fraction": 0.5})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == "proposed"
    client.force_login(alice)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()

    # each merge keeps one source's text, so it is written in that source's record
    assert html.count('data-testid="merged-in-place"') == 2
    assert html.count("its text is the merged text") == 2
    # a reviewer's edit replaces that record's text: the note says it is rewritten whole
    merge = run.operations.filter(kind="merge").order_by("index").first()
    operation_edit_text(operation=merge, document=merge.result_document + " Noted.", user=alice)
    edited = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert edited.count("its text is the merged text") == 1
    assert edited.count("whose text your edit replaces: the record is rewritten whole") == 1
    operation_edit_text(operation=merge, document=merge.planned_document, user=alice)
    # summary and groups use the same words and the same numbers
    expected = {
        "merge": "2 merge operations · 4 memories merged into 2",
        "promote": "1 promote operation · 1 memory promoted",
        "prune": "1 prune operation · 1 memory pruned",
    }
    for kind, label in expected.items():
        assert text_of(html, f"count-{kind}") == label
        assert text_of(html, f"group-{kind}") == label
    # the store's change is the removed originals minus the new memories
    assert text_of(html, "entries") == "18 → 15"
    assert text_of(html, "net-change") == "(5 originals removed, 2 memories written: 3 fewer)"
    # the loss line shows its arithmetic, the guard reason the same figures
    assert text_of(html, "loss-arithmetic") == "= 5 originals removed ÷ 18 originals before"
    assert 'id="loss-fraction">27.8%' in html and "(5 removed)" in run.guard_reason

    # the API says the same, in the same words
    api = api_factory(alice, alice, alice)("viewer").get(f"/passes/{run.pk}").json()
    assert api["counts"] == expected and api["promoted"] == 1  # "1 memory promoted"

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=alice)
    run.refresh_from_db()
    assert run.status == "applied" and stores.get_store(agent).count() == 15
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    for kind, label in expected.items():  # the applied pass says the same
        assert text_of(page, f"count-{kind}") == label

    rollback = client.get(reverse("pass_rollback", args=[run.pk])).content.decode()
    assert text_of(rollback, "restore-originals") == "5 removed originals"
    assert text_of(rollback, "restore-promoted") == "1 promoted memory"
    # both merges kept one source's text, so they were written in that source's record: the
    # rollback restores those originals in place and has no new record to remove
    assert text_of(rollback, "restore-kept") == (
        "2 of them in place of the merged memories the pass wrote in their record"
    )
    assert text_of(rollback, "remove-written") == "0 new memories"


def test_a_plan_over_the_budget_proposes_what_fits_and_shows_the_rest_as_deferred(
    client: Client, alice, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(TEXTS, META)  # default policy: 5 of 18 removals > 25 % (4)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == "proposed" and run.guard_passed  # within the budget, not rejected
    assert run.loss_fraction == pytest.approx(4 / 18)
    kinds = set(run.operations.values_list("kind", flat=True))
    assert kinds == {"merge", "promote"}  # exact duplicates first, the prune waits
    client.force_login(alice)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    deferred = text_of(html, "deferred")
    assert deferred.startswith("1 operation deferred (1 prune): together they would remove 1 more")
    assert "about 1 more pass." in deferred
    # which one: the prune of the old, unimportant memory, linked to it
    [item] = re.findall(r'data-testid="deferred-item">(.*?)</li>', html, re.S)
    assert item.startswith("prune") and "mem-006" in item
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert text_of(dashboard, "convergence") == (
        f"pass #{run.pk} waits for review: {run.operations.count()} operations; "
        "then 1 operation deferred, about 1 more pass"
    )

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=alice)
    nxt = run_pass(agent, django_capture_on_commit_callbacks)  # the next slice: the prune
    assert list(nxt.operations.values_list("kind", flat=True)) == ["prune"]
    dashboard = client.get(reverse("dashboard")).content.decode()
    # a waiting proposal is not "converged": the dashboard says what waits
    assert text_of(dashboard, "convergence") == f"pass #{nxt.pk} waits for review: 1 operation"
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=nxt, user=alice)
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert text_of(dashboard, "convergence") == "converged"
