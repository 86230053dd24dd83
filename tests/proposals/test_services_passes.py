"""Pass lifecycle through the services: request → run → proposal → review → apply, with audit.

Real Chroma (in-process EphemeralClient) and real embeddings; django-q2 runs tasks inline.
"""

from __future__ import annotations

from typing import Any

import pytest

from memoryadmin.agents.models import StoreSample
from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.agents.services.agents import agent_update
from memoryadmin.core import stores
from memoryadmin.core.errors import GuardRefused, PassAlreadyActive, ServiceError
from memoryadmin.core.models import AuditEvent
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.evaluation import pass_evaluate
from memoryadmin.proposals.services.passes import pass_request, pass_run
from memoryadmin.proposals.services.review import (
    operation_edit_text,
    operation_set_excluded,
    pass_approve,
    pass_reject,
)
from tests.conftest import DISTINCT_FACTS, days_ago

pytestmark = pytest.mark.django_db

F = DISTINCT_FACTS
# 16 distinct facts + exact duplicates of two of them: 2 merges removing 4 of 18 (loss 0.222).
DUPES = F[:16] + [F[0], F[1]]
# 4 distinct + 2 duplicates: 2 merges removing 4 of 6 (loss 0.667 > 0.25).
LOSSY = F[:4] + [F[0], F[1]]


NO_BUDGET = {"trim_to_guard": False}
"""A policy without the budget option: the guard rejects a plan over the threshold."""


def run_pass(agent: Any, capture: Any, **kwargs: Any) -> Pass:
    """Request a pass and let its on-commit task run (django-q2 sync mode); return it fresh."""
    with capture(execute=True):
        run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, **kwargs)
    run.refresh_from_db()
    return run


def census(agent: Any) -> dict[str, Any]:
    return agent_census(agent=agent)


def verbs(run: Pass) -> list[tuple[str, str, str]]:
    return [(e.verb, e.from_status, e.to_status) for e in run.events.order_by("created_at", "id")]


def test_it_runs_a_pass_to_a_stored_proposal(
    agent_with_memories, alice, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    before = census(agent)
    run = run_pass(agent, django_capture_on_commit_callbacks, user=alice)

    assert run.status == Pass.Status.PROPOSED
    assert (run.entries_before, run.entries_after, run.merged) == (18, 16, 4)
    assert run.loss_fraction == pytest.approx(4 / 18)
    assert run.max_loss_fraction == 0.25 and run.guard_passed is True
    assert "passed" in run.guard_reason and run.progress == 1.0
    assert run.telemetry["timings"] and run.snapshot_hash
    ops = list(run.operations.order_by("index"))
    assert [op.kind for op in ops] == ["merge", "merge"]
    src = ops[0].sources.order_by("position")[0]
    assert src.document in DUPES and len(src.content_hash) == 64
    assert src.get_embedding().shape == (384,) and src.removed
    assert verbs(run) == [
        ("requested", "", "queued"),
        ("started", "queued", "running"),
        ("proposed", "running", "proposed"),
    ]
    # alice asked for it; the steps the pass takes by itself are done by "system"
    assert [(e.verb, e.actor) for e in run.events.order_by("created_at", "id")] == [
        ("requested", "alice"),
        ("started", "system"),
        ("proposed", "system"),
    ]
    assert census(agent) == before  # planning never writes


def test_it_rejects_by_guard_and_leaves_the_store_byte_identical(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(LOSSY, policy=NO_BUDGET)
    before = census(agent)
    run = run_pass(agent, django_capture_on_commit_callbacks)

    assert run.status == Pass.Status.REJECTED_BY_GUARD
    assert run.guard_passed is False and run.loss_fraction == pytest.approx(4 / 6)
    assert "tripped" in run.guard_reason and "66.7%" in run.guard_reason
    assert run.operations.count() == 2  # the proposal is kept for the record
    assert census(agent) == before
    assert not ArchivedMemory.objects.filter(agent=agent).exists()


def test_it_applies_an_approved_pass_archiving_first(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks, user=alice)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob, note="looks right")
    run.refresh_from_db()

    assert run.status == Pass.Status.APPLIED
    assert run.decided_actor == "bob" and run.decided_by == bob and run.note == "looks right"
    assert [v[2] for v in verbs(run)][-3:] == ["approved", "applying", "applied"]
    assert set(run.operations.values_list("status", flat=True)) == {"applied"}
    c = census(agent)
    assert c["store"]["count"] == 16 and c["archive"]["count"] == 4
    store = stores.get_store(agent)
    merged = store.get([op.result_id for op in run.operations.all()])
    assert sorted(r.document for r in merged) == sorted([F[0], F[1]])
    assert all(r.embedding is not None for r in merged)
    assert sorted(merged[0].metadata["merged_from"]) == sorted(
        run.operations.get(result_id=merged[0].id).source_ids
    )
    agent.refresh_from_db()
    assert len(agent.checkpoint) == 16
    assert list(StoreSample.objects.filter(agent=agent).values_list("count", flat=True)) == [18, 16]


def test_it_rejects_with_a_required_note(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    before = census(agent)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    with pytest.raises(ValueError, match="note is required"):
        pass_reject(run=run, user=bob, note="  ")
    run = pass_reject(run=run, user=bob, note="not now")

    assert run.status == Pass.Status.REJECTED and run.note == "not now"
    assert verbs(run)[-1] == ("rejected", "proposed", "rejected")
    assert census(agent) == before
    with pytest.raises(ServiceError, match="only a proposed pass"):
        pass_approve(run=run, user=bob)


def test_a_newer_pass_marks_the_older_proposal_stale(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    first = run_pass(agent, django_capture_on_commit_callbacks)
    second = run_pass(agent, django_capture_on_commit_callbacks)
    first.refresh_from_db()

    assert (first.status, second.status) == ("stale", "proposed")
    stale = first.events.get(verb="stale")
    assert (stale.from_status, stale.to_status) == ("proposed", "stale")
    assert f"#{second.pk}" in stale.note


def test_auto_apply_is_approved_by_the_policy_and_applied(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES, auto_apply=True)
    run = run_pass(agent, django_capture_on_commit_callbacks)

    assert run.status == Pass.Status.APPLIED
    assert run.decided_actor == "policy" and run.decided_by is None
    approved = run.events.get(verb="approved")
    assert approved.actor == "policy" and (approved.from_status, approved.to_status) == (
        "proposed",
        "approved",
    )
    assert census(agent)["store"]["count"] == 16


def test_auto_apply_never_overrides_the_guard(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(LOSSY, auto_apply=True, policy=NO_BUDGET)
    before = census(agent)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.REJECTED_BY_GUARD
    assert census(agent) == before


def test_a_second_request_while_active_is_refused_and_recorded(agent_with_memories, alice):
    agent = agent_with_memories(3)
    first = pass_request(agent=agent, trigger="operator", user=alice)  # stays queued
    with pytest.raises(PassAlreadyActive, match=f"pass #{first.pk} is queued"):
        pass_request(agent=agent, trigger="schedule", actor="schedule")

    assert Pass.objects.filter(agent=agent).count() == 1
    refused = AuditEvent.objects.get(agent=agent, verb="refused")
    assert refused.actor == "schedule" and refused.run is None
    assert refused.data["active_pass"] == first.pk


def test_a_pass_fails_with_the_reason_when_chroma_is_down(
    agent_with_memories, settings, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(3)
    settings.CHROMA_MODE = "http"
    settings.CHROMA_PORT = 9  # nothing listens there
    stores.reset_client_cache()
    run = run_pass(agent, django_capture_on_commit_callbacks)

    assert run.status == Pass.Status.FAILED
    assert "Cannot reach the Chroma server at http://127.0.0.1:9" in run.error
    assert run.events.order_by("-id").first().verb == "failed"
    assert not run.operations.exists()
    settings.CHROMA_MODE = "ephemeral"
    stores.reset_client_cache()
    assert census(agent)["store"]["count"] == 3


def test_running_a_pass_twice_does_nothing_the_second_time(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    again = pass_run(run=run)
    assert again.status == "proposed" and again.operations.count() == 2


def test_excluding_changes_the_verdict_and_approve_follows_it(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    # An admin tightens the threshold after planning: the pending proposal is held to it too.
    agent_update(agent=agent, user=alice, policy={"max_loss_fraction": 0.15})
    ev = pass_evaluate(run)
    assert ev.guard_passed is False and ev.max_loss_fraction == 0.15

    with pytest.raises(GuardRefused, match="tripped"):
        pass_approve(run=run, user=bob)
    assert AuditEvent.objects.filter(run=run, verb="approve_refused").exists()

    op = run.operations.order_by("index").first()
    ev = operation_set_excluded(operation=op, excluded=True, user=bob)
    assert (ev.guard_passed, ev.included_ops, ev.excluded_ops) == (True, 1, 1)
    assert ev.loss_fraction == pytest.approx(2 / 18) and ev.entries_after == 17
    run.refresh_from_db()
    assert run.loss_fraction == pytest.approx(2 / 18) and run.guard_passed is True

    ev = operation_set_excluded(operation=op, excluded=False, user=bob)
    assert ev.guard_passed is False
    ev = operation_set_excluded(operation=op, excluded=True, user=bob)
    assert [
        e.verb for e in run.events.filter(verb__in=["excluded", "included"]).order_by("id")
    ] == ["excluded", "included", "excluded"]

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "applied"
    op.refresh_from_db()
    assert op.status == Operation.Status.EXCLUDED
    assert census(agent)["store"]["count"] == 17  # the excluded merge's sources are untouched


def test_editing_a_merged_text_is_validated_recorded_and_applied(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    op = run.operations.order_by("index").first()
    for bad in ("", "   ", "x" * 1001):
        with pytest.raises(ValueError):
            operation_edit_text(operation=op, document=bad, user=bob)
    ev = operation_edit_text(operation=op, document="Edited: the merged fact.", user=bob)
    assert ev.guard_passed is True
    op.refresh_from_db()
    assert (
        op.edited
        and op.result_document == "Edited: the merged fact."
        and op.planned_document != op.result_document
    )
    assert run.events.get(verb="edited").data["after"] == "Edited: the merged fact."

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    written = stores.get_store(agent).get([op.result_id])[0]
    assert written.document == "Edited: the merged fact."
    from tests.conftest import embed_texts

    assert float(written.embedding @ embed_texts(["Edited: the merged fact."])[0]) > 0.999


def test_prune_is_archived_and_restorable_data_kept(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    texts = F[:8]
    metas = [{}] * 7 + [{"created_at": days_ago(400), "importance": 0.1}]
    agent = agent_with_memories(texts, metas)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == "proposed" and run.pruned == 1
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    archived = ArchivedMemory.objects.get(agent=agent)
    assert archived.action == "prune" and archived.document == F[7]
    assert archived.get_embedding().shape == (384,) and archived.metadata["importance"] == 0.1
    assert census(agent)["store"]["count"] == 7


def test_approving_while_another_pass_is_active_is_refused(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    pass_request(agent=agent, trigger="operator")  # queued, not run
    with pytest.raises(ServiceError, match="Another pass"):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "proposed"


def test_a_memory_written_between_planning_and_apply_is_new_to_the_next_pass(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    from tests.conftest import memory_records

    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    late = memory_records([F[2]], prefix="late")[0]  # a duplicate of mem-002, written meanwhile
    stores.get_store(agent).upsert([late])
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    agent.refresh_from_db()
    assert "late-000" not in agent.checkpoint and "mem-002" in agent.checkpoint
    assert "mem-016" not in agent.checkpoint  # merged away (into mem-000's record)
    assert {op.result_id for op in run.operations.all()} <= set(agent.checkpoint)

    nxt = run_pass(agent, django_capture_on_commit_callbacks)  # incremental: only late-000 is new
    assert [sorted(op.source_ids) for op in nxt.operations.all()] == [["late-000", "mem-002"]]
