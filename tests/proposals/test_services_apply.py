"""Apply (I-1 … I-4): stale sources become conflicts, the guard is re-checked, apply resumes.

Real Chroma (in-process) throughout; the one fault-injection test wraps the real store so that
one call raises as if the server had gone away.
"""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.core import stores
from memoryadmin.core.errors import PassAlreadyActive, StoreUnavailable
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.memories.services.memories import memory_delete, memory_edit, memory_set_pinned
from memoryadmin.ops.services.recovery import passes_recover
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.passes import pass_stale_operations
from memoryadmin.proposals.services.apply import batches, pass_apply
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import operation_set_excluded, pass_approve
from tests.conftest import DISTINCT_FACTS

pytestmark = pytest.mark.django_db

F = DISTINCT_FACTS
DUPES = F[:16] + [F[0], F[1]]  # mem-016 duplicates mem-000, mem-017 duplicates mem-001


def proposed(agent: Any, capture: Any) -> Pass:
    with capture(execute=True):
        run = pass_request(agent=agent, trigger="operator")
    run.refresh_from_db()
    assert run.status == "proposed"
    return run


def approve(run: Pass, user: Any, capture: Any) -> Pass:
    with capture(execute=True):
        pass_approve(run=run, user=user)
    run.refresh_from_db()
    return run


def op_for(run: Pass, memory_id: str) -> Operation:
    return next(op for op in run.operations.all() if memory_id in op.source_ids)


def test_an_edited_source_makes_its_operation_a_conflict(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = proposed(agent, django_capture_on_commit_callbacks)
    memory_edit(agent=agent, memory_id="mem-000", document="Caroline moved to Oslo.", user=alice)
    run = approve(run, bob, django_capture_on_commit_callbacks)

    assert run.status == Pass.Status.PARTIALLY_APPLIED
    edited, other = op_for(run, "mem-000"), op_for(run, "mem-001")
    assert (
        edited.status == "conflict" and "changed after the pass was planned" in edited.status_detail
    )
    assert other.status == "applied"
    live = {
        r.id: r.document
        for r in stores.get_store(agent).get(["mem-000", "mem-016", "mem-001", "mem-017"])
    }
    # the conflict untouched; the other merge kept mem-001's record (its text) and removed mem-017
    assert live == {"mem-000": "Caroline moved to Oslo.", "mem-016": F[0], "mem-001": F[1]}
    assert run.telemetry["apply_guard"]["included_ops"] == 1
    assert run.events.filter(verb="conflict").count() == 1


def test_affected_operations_are_listed_before_approval(
    agent_with_memories, alice, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = proposed(agent, django_capture_on_commit_callbacks)
    assert pass_stale_operations(run=run) == {}
    memory_set_pinned(agent=agent, memory_id="mem-016", pinned=True, user=alice)
    memory_delete(agent=agent, memory_id="mem-001", user=alice)
    stale = pass_stale_operations(run=run)
    assert stale == {
        op_for(run, "mem-016").pk: "Memory mem-016 changed after the pass was planned.",
        op_for(run, "mem-001").pk: "Memory mem-001 no longer exists in the store.",
    }
    run.refresh_from_db()
    assert run.status == "proposed"  # only read


def test_a_deleted_source_makes_its_operation_a_conflict(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = proposed(agent, django_capture_on_commit_callbacks)
    memory_delete(agent=agent, memory_id="mem-017", user=alice)
    run = approve(run, bob, django_capture_on_commit_callbacks)

    assert run.status == "partially_applied"
    assert "no longer exists" in op_for(run, "mem-017").status_detail
    assert op_for(run, "mem-000").status == "applied"
    assert stores.get_store(agent).get(["mem-001"])[0].document == F[1]
    assert ArchivedMemory.objects.filter(agent=agent, action="operator_delete").count() == 1


def test_the_guard_is_rechecked_at_apply_against_the_live_store(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = proposed(agent, django_capture_on_commit_callbacks)
    for mid in ("mem-010", "mem-011", "mem-012", "mem-013"):  # store shrinks from 18 to 14
        memory_delete(agent=agent, memory_id=mid, user=alice)
    before = agent_census(agent=agent)
    run = approve(run, bob, django_capture_on_commit_callbacks)

    assert run.status == Pass.Status.REJECTED_BY_GUARD
    assert "At apply time" in run.reason and "28.6%" in run.reason
    assert agent_census(agent=agent) == before  # nothing written or deleted
    assert set(run.operations.values_list("status", flat=True)) == {"pending"}


class FlakyStore:
    """The real store, except that ``delete`` raises once as if Chroma had gone away."""

    def __init__(self, store: Any, failures: list[str]) -> None:
        self._store, self._failures = store, failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def delete(self, ids: Any) -> None:
        if self._failures:
            raise StoreUnavailable(self._failures.pop())
        self._store.delete(ids)


def test_an_interrupted_apply_resumes_without_repeating_a_step(
    agent_with_memories, bob, monkeypatch, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = proposed(agent, django_capture_on_commit_callbacks)
    real_get_store = stores.get_store
    failures = ["Cannot reach the Chroma server (test)"]
    monkeypatch.setattr(stores, "get_store", lambda a: FlakyStore(real_get_store(a), failures))
    run = approve(run, bob, django_capture_on_commit_callbacks)

    assert run.status == Pass.Status.APPLYING and "test" in run.error
    first = run.operations.order_by("index").first()
    assert first.status == "verified"  # archived, written and read back; sources not yet deleted
    store = real_get_store(agent)
    # 18 originals, two of them already rewritten as the merged memories (each merge keeps
    # the record of the copy whose text it keeps): nothing lost, nothing deleted yet
    assert store.count() == 18
    assert {r.id for r in store.get(["mem-016", "mem-017"])} == {"mem-016", "mem-017"}
    with pytest.raises(PassAlreadyActive):
        pass_request(agent=agent, trigger="schedule", actor="schedule")

    out = io.StringIO()
    call_command("recover_passes", stdout=out)
    run.refresh_from_db()
    assert run.status == "applied" and f"pass #{run.pk} of {agent.slug}: applied" in out.getvalue()
    assert store.count() == 16
    assert ArchivedMemory.objects.filter(run=run).count() == 4  # each original archived once
    assert run.events.filter(verb="apply_interrupted").count() == 1


def test_an_approval_made_while_chroma_is_down_is_applied_by_recovery_when_it_is_back(
    client, agent_with_memories, bob, settings, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = proposed(agent, django_capture_on_commit_callbacks)
    operation_set_excluded(operation=op_for(run, "mem-001"), excluded=True, user=bob)
    before = agent_census(agent=agent)
    settings.CHROMA_MODE, settings.CHROMA_PORT = "http", 9
    stores.reset_client_cache()
    run = approve(run, bob, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.APPROVED and "Cannot reach" in run.error
    assert "applied automatically once the store answers" in run.error
    assert run.events.filter(verb="apply_postponed").count() == 1
    assert op_for(run, "mem-001").excluded  # the review work is kept
    client.force_login(bob)
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'data-testid="apply-postponed"' in page and "Apply postponed" in page
    call_command("recover_passes", stdout=io.StringIO())  # still down: waits, no new event
    run.refresh_from_db()
    assert run.status == Pass.Status.APPROVED
    assert run.events.filter(verb="apply_postponed").count() == 1
    settings.CHROMA_MODE = "ephemeral"
    stores.reset_client_cache()
    assert agent_census(agent=agent) == before
    call_command("recover_passes", stdout=io.StringIO())  # the store is back: recovery applies it
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED and run.decided_by == bob and not run.error


def test_applying_an_applied_pass_again_changes_nothing(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = approve(
        proposed(agent, django_capture_on_commit_callbacks), bob, django_capture_on_commit_callbacks
    )
    before = agent_census(agent=agent)
    events = run.events.count()
    again = pass_apply(run=run)
    assert again.status == "applied" and agent_census(agent=agent) == before
    assert run.events.count() == events


def test_every_kind_applies_and_every_original_is_live_or_archived(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    from tests.conftest import days_ago

    texts = F[:20] + [F[0], "Alice likes jazz", "Alice no longer likes jazz"]
    metas = [{}] * 23
    metas[3] = {"created_at": days_ago(400), "importance": 0.1}  # prune
    metas[4] = {"importance": 0.95}  # promote
    metas[21] = {"created_at": days_ago(10)}
    metas[22] = {"created_at": days_ago(2)}  # newer: wins the reconcile
    agent = agent_with_memories(texts, metas)
    run = proposed(agent, django_capture_on_commit_callbacks)
    assert sorted(run.operations.values_list("kind", flat=True)) == [
        "merge",
        "promote",
        "prune",
        "reconcile",
    ]
    originals = {r.id: r for page in stores.get_store(agent).iter_pages() for r in page}
    run = approve(run, bob, django_capture_on_commit_callbacks)

    assert run.status == "applied"
    live = {r.id: r for page in stores.get_store(agent).iter_pages() for r in page}
    archived = {a.memory_id: a for a in ArchivedMemory.objects.filter(run=run)}
    for mid, rec in originals.items():
        kept = live.get(mid)
        if kept is not None and kept.document == rec.document and kept.metadata == rec.metadata:
            continue
        arch = archived[mid]  # changed or removed → its original version is archived, whole
        assert (arch.document, arch.metadata, arch.content_hash) == (
            rec.document,
            rec.metadata,
            rec.content_hash,
        )
        assert (arch.get_embedding() == rec.embedding).all()
    assert live["mem-004"].metadata["tier"] == "curated" and archived["mem-004"].action == "promote"
    assert "mem-022" in live and "mem-021" not in live and archived["mem-021"].action == "reconcile"
    assert len(live) == 23 - 2 + 1 - 1 - 1


def test_an_operation_whose_write_fails_is_failed_and_the_others_apply(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = proposed(agent, django_capture_on_commit_callbacks)
    bad = op_for(run, "mem-000")
    Operation.objects.filter(pk=bad.pk).update(
        result_metadata={"$where": "Chroma refuses this key"}
    )
    run = approve(run, bob, django_capture_on_commit_callbacks)

    assert run.status == "partially_applied"
    bad.refresh_from_db()
    assert bad.status == "failed" and "$where" in bad.status_detail
    assert op_for(run, "mem-001").status == "applied"
    live = {
        r.id for page in stores.get_store(agent).iter_pages(include_embeddings=False) for r in page
    }
    assert {"mem-000", "mem-016", "mem-001"} <= live and "mem-017" not in live  # 017 → 001
    assert run.events.filter(verb="operation_failed").count() == 1
    assert not ArchivedMemory.objects.filter(operation=bad).exists()  # nothing left the store
    assert ArchivedMemory.objects.filter(run=run).count() == 2


def test_recover_replans_a_pass_stuck_running_past_the_task_timeout(
    agent_with_memories, settings, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    agent = agent_with_memories(DUPES)
    run = pass_request(agent=agent, trigger="operator")  # on_commit not run: queued
    Pass.objects.filter(pk=run.pk).update(status="running", started_at=timezone.now())
    out = io.StringIO()
    call_command("recover_passes", stdout=out)
    assert "still running" in out.getvalue()
    assert Pass.objects.get(pk=run.pk).status == "running"

    later = timezone.now() + timedelta(seconds=settings.Q_CLUSTER["timeout"] + 1)
    with django_capture_on_commit_callbacks(execute=True):  # planned again on the queue
        [recovered] = passes_recover(now=later)
    recovered.refresh_from_db()
    assert recovered.status == "proposed" and recovered.operations.count() == 2
    assert recovered.events.filter(verb="requeued").count() == 1


def test_an_apply_whose_every_operation_conflicts_is_recorded_as_no_changes_without_undo(
    client, agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = proposed(agent, django_capture_on_commit_callbacks)
    for op in run.operations.all():  # someone edits a source of every operation meanwhile
        memory_edit(
            agent=agent, memory_id=op.source_ids[0], document="Changed meanwhile.", user=bob
        )
    before = agent_census(agent=agent)
    run = approve(run, bob, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.NO_CHANGES and not run.can_roll_back
    assert agent_census(agent=agent) == before
    client.force_login(bob)
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "no changes" in page and 'id="rollback-link"' not in page


def test_apply_batches_hold_at_most_the_batch_size_and_touch_no_memory_twice(settings):
    ops = [SimpleNamespace(source_ids=[f"m{i}", f"d{i}"], result_id=f"m{i}") for i in range(5)]
    ops.insert(3, SimpleNamespace(source_ids=["m0"], result_id=None))  # m0 again: a new batch
    settings.APPLY_BATCH = 2
    assert [len(b) for b in batches(ops)] == [2, 2, 2]
    settings.APPLY_BATCH = 1000  # the default
    assert [len(b) for b in batches(ops)] == [3, 3]
    with pytest.raises(ValueError, match="at least 1"):
        batches(ops, 0)


def test_an_apply_in_batches_of_one_operation_applies_every_operation(
    agent_with_memories, bob, settings, django_capture_on_commit_callbacks
):
    settings.APPLY_BATCH = 1
    agent = agent_with_memories(DUPES)
    run = approve(
        proposed(agent, django_capture_on_commit_callbacks), bob, django_capture_on_commit_callbacks
    )
    assert run.status == "applied"
    assert set(run.operations.values_list("status", flat=True)) == {"applied"}
    assert stores.get_store(agent).count() == 16


def test_apply_work_grows_with_the_operations_not_with_their_square(
    agent_with_memories, bob, django_capture_on_commit_callbacks, monkeypatch
):
    # exact duplicates, one merge each, in one batch. A step that looked each operation up in
    # a list of them compared operations pairwise (≈ n²/2; 6M comparisons over the 12 batches
    # of a 12,000-operation apply: seconds of CPU in bench/propose_bench.py).
    agent = agent_with_memories(F + F, policy={"max_loss_fraction": 0.6})
    run = proposed(agent, django_capture_on_commit_callbacks)
    n = run.operations.count()
    assert n >= 10  # (the guard's budget keeps some duplicates for a later pass)
    compared = []
    model_eq = Operation.__eq__
    monkeypatch.setattr(Operation, "__eq__", lambda a, b: compared.append(1) or model_eq(a, b))
    run = approve(run, bob, django_capture_on_commit_callbacks)
    assert run.status == "applied"
    assert len(compared) < n  # none per pair of operations (n²/2 before)
