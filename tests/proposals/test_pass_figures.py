"""The figures a proposal page shows are kept on the pass: after planning and
after every kind of review action they equal a fresh evaluation of the operations, the guard's
verdict follows the agent's current threshold, and an operation changed behind the services'
back never shows stale figures. The loss totals of the Review tab are kept with them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from memoryadmin.agents.models import Agent
from memoryadmin.memories.services.memories import memory_delete
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.evaluation import (
    Evaluation,
    effective_threshold,
    pass_evaluate,
    pass_figures,
)
from memoryadmin.proposals.selectors.scoring import pass_loss_figures, pass_loss_totals
from memoryadmin.proposals.services.apply import pass_apply
from memoryadmin.proposals.services.passes import pass_request, pass_run
from memoryadmin.proposals.services.review import (
    conflict_resolve,
    operation_edit_text,
    operation_set_excluded,
    operations_set_excluded,
    pass_approve,
)
from tests.conftest import DISTINCT_FACTS, days_ago

pytestmark = pytest.mark.django_db

CONTRADICTION = ["Is allergic to penicillin", "Is not allergic to penicillin"]
# two exact duplicate pairs (2 merges), an important memory (promote), a decayed one (prune)
# and two contradicting memories of the same time (a conflict for the reviewer)
TEXTS = DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2] + CONTRADICTION
META = (
    [{}] * 5
    + [{"importance": 0.9}, {"created_at": days_ago(400), "importance": 0.1}]
    + [{}] * 11
    + [{"created_at": "2025-03-01T00:00:00+00:00"}] * 2
)


def planned(agent: Agent) -> Pass:
    return pass_run(run=pass_request(agent=agent, trigger="operator"))


def same(run: Pass) -> Evaluation:
    """The stored figures, judged now, equal a fresh evaluation, and the stored loss totals
    fresh ones (and the page's reads do too)."""
    run = Pass.objects.select_related("agent").get(pk=run.pk)
    fresh = pass_evaluate(run)
    assert run.figures, "the pass keeps no figures"
    assert (
        Evaluation.from_figures(run.figures, effective_threshold(run), run.entries_before) == fresh
    )
    assert "entries_before" not in run.figures  # the pass's input, kept once (its column)
    assert pass_figures(run) == fresh
    loss = pass_loss_totals(run)
    assert run.figures["loss"] == asdict(loss) and pass_loss_figures(run) == loss
    return fresh


def lost(run: Pass) -> dict[str, int]:
    return Pass.objects.get(pk=run.pk).figures["loss"]


@pytest.fixture
def run(agent_with_memories: Any) -> Pass:
    agent = agent_with_memories(TEXTS, META, policy={"max_loss_fraction": 0.5})
    run = planned(agent)
    assert run.status == Pass.Status.PROPOSED
    kinds = set(run.operations.values_list("kind", flat=True))
    assert kinds == {"merge", "promote", "prune", "conflict"}
    return run


def test_the_figures_stay_a_fresh_evaluation_through_every_review_action(run: Pass, alice: Any):
    ev = same(run)
    assert (ev.included_ops, ev.excluded_ops, ev.removed) == (5, 0, 5)
    merge = run.operations.filter(kind="merge").first()
    operation_set_excluded(operation=merge, excluded=True, user=alice)
    assert same(run).excluded_ops == 1
    operation_set_excluded(operation=merge, excluded=False, user=alice)
    assert same(run) == ev
    ids = list(run.operations.filter(kind__in=["merge", "prune"]).values_list("pk", flat=True))
    operations_set_excluded(
        run=run, operation_ids=ids, excluded=True, user=alice, scope="merges and prunes"
    )
    assert same(run).removed == 0
    operations_set_excluded(run=run, operation_ids=ids, excluded=False, user=alice)
    assert same(run) == ev
    before = lost(run)
    operation_edit_text(operation=merge, document="One merged fact.", user=alice)
    assert same(run) == ev and lost(run)["sentences"] > before["sentences"]
    conflict = run.operations.get(kind="conflict")
    for keep, removed in (("a", 6), ("b", 6), ("both", 5)):
        conflict_resolve(operation=conflict, keep=keep, user=alice)
        assert same(run).removed == removed


def test_the_verdict_follows_the_agents_current_threshold(run: Pass):
    assert same(run).guard_passed
    Agent.objects.filter(pk=run.agent_id).update(policy={"max_loss_fraction": 0.1})
    ev = same(run)
    assert not ev.guard_passed and ev.max_loss_fraction == 0.1
    assert ev.guard_reason.startswith("Loss guard tripped")


def test_review_work_carried_to_a_new_pass_is_in_its_figures(run: Pass, alice: Any):
    merge = run.operations.filter(kind="merge").first()
    operation_set_excluded(operation=merge, excluded=True, user=alice)
    newer = planned(run.agent)
    # the exclusion is a standing decision now: the next pass holds the merge back, visibly
    assert sorted(merge.source_ids) not in [
        sorted(op.source_ids) for op in newer.operations.filter(kind="merge")
    ]
    assert newer.telemetry["held_back_count"] >= 1
    assert same(newer).excluded_ops == 0


def test_operations_found_in_conflict_at_apply_leave_the_figures(run: Pass, alice: Any, bob: Any):
    merge = run.operations.filter(kind="merge").first()
    memory_delete(agent=run.agent, memory_id=merge.source_ids[0], user=alice)
    pass_approve(run=run, user=bob)
    run = pass_apply(run=run)
    assert run.operations.get(pk=merge.pk).status == Operation.Status.CONFLICT
    assert same(run).excluded_ops == 1  # the overtaken merge, no longer counted


def test_an_operation_changed_behind_the_services_back_is_never_shown_stale(run: Pass):
    kept = dict(Pass.objects.get(pk=run.pk).figures)
    merge = run.operations.filter(kind="merge").first()
    Operation.objects.filter(pk=merge.pk).update(status="excluded")
    run = Pass.objects.select_related("agent").get(pk=run.pk)
    assert run.figures == kept  # not refreshed ...
    assert pass_figures(run) == pass_evaluate(run)  # ... yet the page's figures are current
    assert pass_figures(run).excluded_ops == 1
    assert pass_loss_figures(run) == pass_loss_totals(run)
