"""Conflict items end to end: a pass whose only operations are conflicts is
proposed for review, never settled as "nothing to do", never auto-approved, and shows both
memories on the pass page; applying a pass never touches a conflict."""

from __future__ import annotations

import pytest
from django.urls import reverse

from consolidation import MemoryRecord
from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Decision, Operation, OperationSource, Pass
from memoryadmin.proposals.services.apply import pass_apply
from memoryadmin.proposals.services.passes import pass_request, pass_run
from memoryadmin.proposals.services.review import conflict_resolve, pass_approve, pass_reject
from memoryadmin.proposals.services.rollback import pass_rollback_request
from tests.conftest import DISTINCT_FACTS
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db

CONTRADICTION = ["Is allergic to penicillin", "Is not allergic to penicillin"]
SAME_TIME = [{"created_at": "2025-03-01T00:00:00+00:00"}] * 2  # which one is current: unknown


def _run(agent):
    return pass_run(run=pass_request(agent=agent, trigger="operator"))


@pytest.mark.parametrize("auto_apply", [False, True])
def test_a_pass_with_only_conflicts_waits_for_review(agent_with_memories, auto_apply):
    agent = agent_with_memories(CONTRADICTION, SAME_TIME, auto_apply=auto_apply)
    before = agent_census(agent=agent)
    run = _run(agent)
    (op,) = run.operations.all()
    assert op.kind == Operation.Kind.CONFLICT and op.removes == [] and op.rule == "negation"
    assert run.status == Pass.Status.PROPOSED and run.progress_label == "Conflicts to review"
    assert run.loss_fraction == 0.0
    assert not run.events.filter(verb__in=["nothing_to_apply", "approved"]).exists()
    assert agent_census(agent=agent) == before


def test_the_pass_page_shows_both_sides_of_a_conflict(agent_with_memories, client, alice):
    agent = agent_with_memories(CONTRADICTION, SAME_TIME)
    run = _run(agent)
    client.force_login(alice)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'data-testid="conflict-note"' in html
    # both sides, on the Review tab's card and in "All operations", with their dates
    assert html.count('data-testid="conflict-side"') == 4
    assert html.count('data-testid="conflict-created">2025-03-01T00:00:00+00:00<') == 4
    for keep in ("a", "b", "both"):
        assert html.count(f'data-conflict-keep="{keep}"') == 2
    for text in CONTRADICTION:
        assert text in html


def test_approving_a_pass_never_applies_its_conflicts(agent_with_memories, bob):
    agent = agent_with_memories(CONTRADICTION, SAME_TIME)
    run = _run(agent)
    before = agent_census(agent=agent)
    pass_approve(run=run, user=bob)
    run = pass_apply(run=run)
    assert run.status == Pass.Status.NO_CHANGES  # nothing written: nothing to undo
    assert run.operations.get().status == Operation.Status.PENDING
    assert agent_census(agent=agent) == before


# ----- the reviewer's decision (conflict_resolve) ---------------------------------------------

CONTEXT = DISTINCT_FACTS[:6]  # unrelated memories: removing one side stays under the loss guard


def _conflicted(agent_with_memories, **fields):
    """A proposed pass whose operations are one conflict (A = "Is allergic…", B = "… not …")
    over a store of 8 memories; returns ``(agent, run, op)``."""
    agent = agent_with_memories(CONTRADICTION + CONTEXT, SAME_TIME + [{}] * len(CONTEXT), **fields)
    run = _run(agent)
    op = run.operations.get(kind=Operation.Kind.CONFLICT)
    return agent, run, op


def _ids(agent):
    return {r.id for page in stores.get_store(agent).iter_pages(page_size=100) for r in page}


def test_keep_a_is_a_reviewers_reconcile_archived_on_apply_and_undone_by_rollback(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent, run, op = _conflicted(agent_with_memories)
    a_id, b_id = op.source_ids
    before = _ids(agent)

    ev = conflict_resolve(operation=op, keep="a", user=bob)

    op.refresh_from_db()
    assert op.kind == Operation.Kind.RECONCILE and op.rule == "reviewer_pick"
    assert op.source_ids == [a_id, b_id] and op.removes == [b_id]
    assert op.scores["decision"]["by"] == "bob" and op.scores["decision"]["keep"] == "a"
    assert "bob" in op.status_detail
    assert [(s.memory_id, s.removed) for s in op.sources.order_by("position")] == [
        (a_id, False),
        (b_id, True),
    ]
    run.refresh_from_db()
    assert ev.loss_fraction == run.loss_fraction == pytest.approx(1 / len(before))
    assert run.reconciled == 1 and run.guard_passed
    (event,) = run.events.filter(verb="conflict_resolved")
    assert event.user == bob and event.data["removed"] == [b_id] and CONTRADICTION[0] in event.note

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED
    assert _ids(agent) == before - {b_id}
    archived = ArchivedMemory.objects.get(run=run, memory_id=b_id)
    assert archived.action == "reconcile" and archived.document == CONTRADICTION[1]

    with django_capture_on_commit_callbacks(execute=True):
        pass_rollback_request(run=run, user=bob, note="wrong pick")
    run.refresh_from_db()
    assert run.status == Pass.Status.ROLLED_BACK
    assert _ids(agent) == before


def test_keep_a_excludes_the_other_operations_touching_the_removed_memory(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    """A promote of B in the same pass (as an older planner proposed) is excluded when the
    reviewer keeps A, named in the audit, and the apply ends "applied", not partially."""
    agent, run, op = _conflicted(agent_with_memories)
    a_id, b_id = op.source_ids
    side = op.sources.get(memory_id=b_id)
    promote = Operation.objects.create(
        run=run,
        index=run.operations.count(),
        kind=Operation.Kind.PROMOTE,
        rule="access",
        reason="durable",
        source_ids=[b_id],
        removes=[],
        result_id=b_id,
        result_document=side.document,
        result_metadata={**side.metadata, "tier": "curated"},
    )
    OperationSource.objects.create(
        operation=promote,
        position=0,
        memory_id=b_id,
        document=side.document,
        metadata=side.metadata,
        content_hash=side.content_hash,
    )
    conflict_resolve(operation=op, keep="a", user=bob)
    promote.refresh_from_db()
    assert promote.excluded and promote.status == Operation.Status.EXCLUDED
    (event,) = run.events.filter(verb="conflict_resolved")
    assert event.data["excluded"] == [promote.index]
    assert f"#{promote.index} (promote)" in event.note
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED, run.error
    assert b_id not in _ids(agent) and a_id in _ids(agent)


def test_keep_b_keeps_the_second_memory(agent_with_memories, bob):
    agent, run, op = _conflicted(agent_with_memories)
    a_id, b_id = op.source_ids
    conflict_resolve(operation=op, keep="b", user=bob)
    op.refresh_from_db()
    assert op.source_ids == [b_id, a_id] and op.removes == [a_id]
    pass_approve(run=run, user=bob)
    pass_apply(run=run)
    assert _ids(agent) == {f"mem-{i:03d}" for i in range(8)} - {a_id}


def test_keep_both_removes_nothing(agent_with_memories, bob):
    agent, run, op = _conflicted(agent_with_memories)
    before = agent_census(agent=agent)
    conflict_resolve(operation=op, keep="both", user=bob)
    op.refresh_from_db()
    assert op.kind == Operation.Kind.CONFLICT and op.removes == []
    assert op.scores["decision"]["keep"] == "both" and op.risk < 0.5
    run.refresh_from_db()
    assert run.loss_fraction == 0.0 and run.reconciled == 0
    pass_approve(run=run, user=bob)
    assert pass_apply(run=run).status == Pass.Status.NO_CHANGES
    assert agent_census(agent=agent) == before
    assert not ArchivedMemory.objects.filter(run=run).exists()


def test_a_pick_can_be_changed_while_proposed(agent_with_memories, bob):
    agent, run, op = _conflicted(agent_with_memories)
    a_id, b_id = op.source_ids
    conflict_resolve(operation=op, keep="a", user=bob)
    conflict_resolve(operation=op, keep="both", user=bob)
    op.refresh_from_db()
    assert op.kind == Operation.Kind.CONFLICT and op.removes == [] and op.source_ids == [a_id, b_id]
    assert not op.sources.filter(removed=True).exists()
    run.refresh_from_db()
    assert run.loss_fraction == 0.0 and run.events.filter(verb="conflict_resolved").count() == 2


def test_auto_apply_leaves_conflicts_undecided(agent_with_memories):
    dup = ["The standup meeting starts at nine sharp.", "The standup meeting starts at nine sharp."]
    agent = agent_with_memories(
        CONTRADICTION + dup + CONTEXT,
        SAME_TIME + [{}] * (len(dup) + len(CONTEXT)),
        auto_apply="all",
    )
    run = _run(agent)
    run = pass_apply(run=run) if run.status == Pass.Status.APPROVED else run
    assert run.status == Pass.Status.APPLIED and run.decided_actor == "policy"
    op = run.operations.get(kind=Operation.Kind.CONFLICT)
    assert op.status == Operation.Status.PENDING and "decision" not in op.scores
    assert set(op.source_ids) <= _ids(agent)  # both sides still in the store
    assert not run.events.filter(verb="conflict_resolved").exists()
    with pytest.raises(ServiceError, match="only a proposed pass"):
        conflict_resolve(operation=op, keep="a", user=None)
    # nobody saw it: the next (incremental) pass asks a reviewer again
    agent.refresh_from_db()
    assert agent.checkpoint and not set(op.source_ids) & set(agent.checkpoint)
    again = _run(agent)
    assert again.status == Pass.Status.PROPOSED
    assert [o.kind for o in again.operations.all()] == [Operation.Kind.CONFLICT]


def test_refused_when_the_pass_is_not_proposed(agent_with_memories, bob):
    agent, run, op = _conflicted(agent_with_memories)
    pass_reject(run=run, user=bob, note="later")
    with pytest.raises(ServiceError, match="rejected"):
        conflict_resolve(operation=op, keep="both", user=bob)
    op.refresh_from_db()
    assert op.kind == Operation.Kind.CONFLICT and "decision" not in op.scores


def test_refused_when_a_source_changed_since_planning(agent_with_memories, bob):
    agent, run, op = _conflicted(agent_with_memories)
    a_id = op.source_ids[0]
    store = stores.get_store(agent)
    (rec,) = store.get([a_id], include_embeddings=True)
    store.upsert([MemoryRecord(rec.id, rec.document + " (edited)", rec.embedding, rec.metadata)])
    with pytest.raises(ServiceError, match="changed after the pass was planned"):
        conflict_resolve(operation=op, keep="b", user=bob)
    op.refresh_from_db()
    assert op.kind == Operation.Kind.CONFLICT and op.removes == []
    assert not run.events.filter(verb="conflict_resolved").exists()


@pytest.mark.parametrize("keep", ["", "c", "A and B"])
def test_an_unknown_choice_is_refused(agent_with_memories, bob, keep):
    _, _, op = _conflicted(agent_with_memories)
    with pytest.raises(ValueError, match="a, b or both"):
        conflict_resolve(operation=op, keep=keep, user=bob)


def test_only_a_conflict_can_be_resolved(agent_with_memories, bob):
    run = make_proposal(agent_with_memories(0), merges=1)
    with pytest.raises(ValueError, match="not a conflict"):
        conflict_resolve(operation=run.operations.get(), keep="a", user=bob)


def test_the_approve_line_says_undecided_conflicts_stay(agent_with_memories, bob, client):
    _, run, op = _conflicted(agent_with_memories)
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "1 undecided conflict stays as “kept both” (nothing removed)" in html
    assert 'data-testid="conflict-count">1: 1 undecided' in html
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert 'data-testid="pending-conflicts">1 conflict to decide<' in dashboard
    conflict_resolve(operation=op, keep="a", user=bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "undecided conflict" not in html
    assert "pending-conflicts" not in client.get(reverse("dashboard")).content.decode()
    assert 'data-testid="conflict-count">1: 1 reviewer\'s pick' in html


def test_a_pick_is_remembered_by_the_next_pass_of_the_same_memories(agent_with_memories, bob):
    agent, run, op = _conflicted(agent_with_memories)
    a_id, b_id = op.source_ids
    conflict_resolve(operation=op, keep="b", user=bob)
    decision = Decision.objects.get(agent=agent, revoked_at__isnull=True)
    assert decision.kind == "conflict_pick" and decision.payload == {"keep": b_id}
    assert decision.created_actor == "bob" and decision.run_id == run.pk
    new = _run(agent)  # "Run now" again: the pending proposal goes stale
    run.refresh_from_db()
    assert run.status == Pass.Status.STALE and new.status == Pass.Status.PROPOSED
    (again,) = new.operations.all()
    # the engine itself resolves the same pair the same way, still for a person to review
    assert again.kind == "reconcile" and again.rule == "decided"
    assert again.removes == [a_id] and again.scores["decision"] == decision.pk
    assert f"decision #{decision.pk}" in again.reason
