"""Undo (I-1): an applied pass rolled back restores the store byte for byte; a record edited
after the pass blocks the rollback before anything is written; rollback is idempotent, audited
and resumable. Real Chroma (in-process) throughout."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from consolidation import MemoryRecord
from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.core import stores
from memoryadmin.core.errors import (
    AlreadyDone,
    PassAlreadyActive,
    ServiceError,
    StoreUnavailable,
)
from memoryadmin.core.leases import lease_acquire, lease_release
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.memories.services.memories import memory_edit, memory_set_pinned
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import operation_edit_text, pass_approve
from memoryadmin.proposals.services.rollback import (
    RollbackBlocked,
    pass_rollback,
    pass_rollback_request,
)
from tests.conftest import DISTINCT_FACTS, days_ago

pytestmark = pytest.mark.django_db

F = DISTINCT_FACTS


def state(agent: Any) -> dict[str, tuple[str, str, Any]]:
    """id → (document, canonical metadata JSON, embedding): the store's content.

    Embeddings are compared with a tolerance of 1e-6: Chroma normalises vectors it indexes for
    cosine (hnswlib), so a vector written back byte for byte may read back 1 ulp apart,
    depending on whether the record has been indexed yet.
    """
    import json

    return {
        r.id: (r.document, json.dumps(r.metadata, sort_keys=True), r.embedding)
        for r in stores.get_store(agent).iter_records()
    }


def same(a: dict, b: dict) -> bool:
    import numpy as np

    return a.keys() == b.keys() and all(
        a[k][:2] == b[k][:2] and np.allclose(a[k][2], b[k][2], rtol=0, atol=1e-6) for k in a
    )


def every_kind(agent_with_memories: Any) -> Any:
    """23 memories: one merge (mem-000 + mem-020), a prune, a promote and a reconcile."""
    texts = F[:20] + [F[0], "Alice likes jazz", "Alice no longer likes jazz"]
    metas: list[dict] = [{}] * 23
    metas[3] = {"created_at": days_ago(400), "importance": 0.1}
    metas[4] = {"importance": 0.95}
    metas[21] = {"created_at": days_ago(10)}
    metas[22] = {"created_at": days_ago(2)}
    return agent_with_memories(texts, metas)


def applied(agent: Any, user: Any, capture: Any) -> Pass:
    with capture(execute=True):
        run = pass_request(agent=agent, trigger="operator")
    run.refresh_from_db()
    assert run.status == "proposed", run.guard_reason
    with capture(execute=True):
        pass_approve(run=run, user=user)
    run.refresh_from_db()
    assert run.status in ("applied", "partially_applied")
    return run


def roll_back(run: Pass, user: Any, capture: Any) -> Pass:
    with capture(execute=True):
        pass_rollback_request(run=run, user=user, note="undo")
    run.refresh_from_db()
    return run


def test_it_restores_the_store_byte_identical(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = every_kind(agent_with_memories)
    before = state(agent)
    run = applied(agent, bob, django_capture_on_commit_callbacks)
    assert sorted(run.operations.values_list("kind", flat=True)) == [
        "merge",
        "promote",
        "prune",
        "reconcile",
    ]
    assert not same(state(agent), before)

    run = roll_back(run, bob, django_capture_on_commit_callbacks)

    assert run.status == "rolled_back"
    assert same(state(agent), before)  # ids, documents, metadata, embeddings
    assert set(run.operations.values_list("status", flat=True)) == {"rolled_back"}
    assert not ArchivedMemory.objects.filter(run=run, restored_at__isnull=True).exists()
    verbs = list(run.events.order_by("id").values_list("verb", flat=True))
    assert verbs[-2:] == ["rollback_requested", "rolled_back"]
    assert run.events.get(verb="rollback_requested").actor == "bob"
    # the dashboard's store-size chart ends at the size after the rollback
    from memoryadmin.ops.selectors.dashboard import agent_chart_data

    samples = [s["count"] for s in agent_chart_data(agent)["samples"]]
    assert samples[-1] == len(before) and samples[-2] < len(before)


def test_a_merge_kept_in_a_sources_record_is_rewritten_whole_when_edited_and_undone_exactly(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    import numpy as np

    # mem-006 copies mem-000, mem-007 mem-001
    agent = agent_with_memories([*F[:6], F[0], F[1]], policy={"max_loss_fraction": 0.5})
    before = state(agent)
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger="operator")
    run.refresh_from_db()
    edited, kept = sorted(run.operations.filter(kind="merge"), key=lambda op: op.index)
    assert (edited.result_id, kept.result_id) == ("mem-000", "mem-001")  # each copy's record
    text = F[0] + " She still lives there."
    operation_edit_text(operation=edited, document=text, user=bob)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "applied"
    live = state(agent)
    assert set(live) == {f"mem-{i:03d}" for i in range(6)}  # the copies left
    # the edited text was written whole under the kept id: a new text, its own new vector
    (new_vector,) = stores.embed([text])
    assert live["mem-000"][0] == text
    assert np.allclose(live["mem-000"][2], new_vector, atol=1e-6)
    assert not np.allclose(live["mem-000"][2], before["mem-000"][2], atol=1e-3)
    # the other kept its text and vector, its metadata rewritten (the sources united)
    assert live["mem-001"][0] == F[1] and '"merged_from"' in live["mem-001"][1]
    assert np.array_equal(live["mem-001"][2], before["mem-001"][2])

    run = roll_back(run, bob, django_capture_on_commit_callbacks)
    assert run.status == "rolled_back"
    assert same(state(agent), before)  # ids, documents, metadata, embeddings


def test_running_it_twice_is_a_no_op(agent_with_memories, bob, django_capture_on_commit_callbacks):
    agent = every_kind(agent_with_memories)
    run = roll_back(
        applied(agent, bob, django_capture_on_commit_callbacks),
        bob,
        django_capture_on_commit_callbacks,
    )
    census, events = agent_census(agent=agent), run.events.count()

    with pytest.raises(AlreadyDone, match=f"Pass #{run.pk} is already rolled back; nothing was"):
        roll_back(run, bob, django_capture_on_commit_callbacks)
    assert pass_rollback(run=run).status == "rolled_back"
    assert agent_census(agent=agent) == census and run.events.count() == events


def test_a_created_record_edited_afterwards_blocks_it_before_writing(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = every_kind(agent_with_memories)
    run = applied(agent, bob, django_capture_on_commit_callbacks)
    merged = run.operations.get(kind="merge").result_id
    memory_edit(agent=agent, memory_id=merged, document="Caroline moved to Oslo.", user=alice)
    census = agent_census(agent=agent)

    with pytest.raises(RollbackBlocked) as info:
        roll_back(run, bob, django_capture_on_commit_callbacks)

    assert info.value.memory_ids == [merged] and merged in str(info.value)
    assert "changed after the pass" in str(info.value)
    assert "Pass #" not in str(info.value)  # an operator's edit: no pass to roll back first
    run.refresh_from_db()
    assert run.status == "applied"
    assert agent_census(agent=agent) == census  # nothing written, archive included
    assert run.events.filter(verb="rollback_refused").count() == 1


def test_a_record_a_later_pass_rewrote_blocks_it_and_names_that_pass(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = every_kind(agent_with_memories)
    first = applied(agent, bob, django_capture_on_commit_callbacks)
    kept = first.operations.get(kind="merge").result_id
    assert kept == "mem-000"  # the merge kept its first source's record
    store = stores.get_store(agent)
    again = next(r for r in store.iter_records() if r.id == kept)
    store.upsert([MemoryRecord("mem-030", F[0], again.embedding, {})])  # the agent wrote it again
    second = applied(agent, bob, django_capture_on_commit_callbacks)
    assert second.operations.get(kind="merge").result_id == kept  # rewritten in place again

    with pytest.raises(RollbackBlocked) as info:
        roll_back(first, bob, django_capture_on_commit_callbacks)
    assert f"Pass #{second.pk} changed it since: roll that pass back first." in str(info.value)
    # in that order both undo, and the store is as before the first
    assert roll_back(second, bob, django_capture_on_commit_callbacks).status == "rolled_back"
    assert roll_back(first, bob, django_capture_on_commit_callbacks).status == "rolled_back"
    assert {r.id for r in store.iter_records()} == {f"mem-{i:03d}" for i in range(23)} | {"mem-030"}


def test_a_promoted_record_edited_afterwards_blocks_it(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = every_kind(agent_with_memories)
    run = applied(agent, bob, django_capture_on_commit_callbacks)
    memory_set_pinned(agent=agent, memory_id="mem-004", pinned=True, user=alice)
    with pytest.raises(RollbackBlocked, match="mem-004"):
        roll_back(run, bob, django_capture_on_commit_callbacks)


def test_a_partially_applied_pass_undoes_only_what_it_applied(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(F[:16] + [F[0], F[1]])
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger="operator")
    run.refresh_from_db()
    memory_edit(agent=agent, memory_id="mem-000", document="Caroline moved to Oslo.", user=alice)
    before = state(agent)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "partially_applied"

    run = roll_back(run, bob, django_capture_on_commit_callbacks)
    assert run.status == "rolled_back"
    assert sorted(run.operations.values_list("status", flat=True)) == ["conflict", "rolled_back"]
    assert same(state(agent), before)


@pytest.mark.parametrize("status", ["proposed", "rejected", "failed", "rejected_by_guard", "stale"])
def test_only_an_applied_pass_can_be_rolled_back(agent_with_memories, bob, status):
    agent = agent_with_memories(3)
    run = Pass.objects.create(agent=agent, trigger="operator", status=status)
    words = status.replace("_", " ")
    with pytest.raises(ServiceError, match=f"Pass #{run.pk} is {words}. Only an applied or part"):
        pass_rollback_request(run=run, user=bob)


def test_an_interrupted_rollback_is_resumed_by_recover_passes(
    agent_with_memories, bob, monkeypatch, django_capture_on_commit_callbacks
):
    agent = every_kind(agent_with_memories)
    before = state(agent)
    run = applied(agent, bob, django_capture_on_commit_callbacks)
    real = stores.get_store

    class WriteFails:  # Chroma goes away as the originals are being restored
        def __init__(self, store: Any) -> None:
            self._store = store

        def __getattr__(self, name: str) -> Any:
            return getattr(self._store, name)

        def upsert(self, records: Any) -> None:
            raise StoreUnavailable("Cannot reach the Chroma server (test)")

    monkeypatch.setattr(stores, "get_store", lambda a: WriteFails(real(a)))
    run = roll_back(run, bob, django_capture_on_commit_callbacks)
    assert run.status == "rolling_back" and "test" in run.error
    with pytest.raises(PassAlreadyActive):  # I-5 holds while rolling back
        pass_request(agent=agent, trigger="schedule", actor="schedule")
    monkeypatch.setattr(stores, "get_store", real)

    out = io.StringIO()
    call_command("recover_passes", stdout=out)
    run.refresh_from_db()
    assert run.status == "rolled_back", out.getvalue()
    assert f"pass #{run.pk} of {agent.slug}: rolled_back" in out.getvalue()
    assert same(state(agent), before)
    assert run.events.filter(verb="rollback_interrupted").count() == 1


def test_chroma_down_before_it_starts_returns_the_pass_to_applied(
    agent_with_memories, bob, settings, django_capture_on_commit_callbacks
):
    agent = every_kind(agent_with_memories)
    run = applied(agent, bob, django_capture_on_commit_callbacks)
    census = agent_census(agent=agent)
    settings.CHROMA_MODE, settings.CHROMA_PORT = "http", 9
    stores.reset_client_cache()
    with pytest.raises(StoreUnavailable):
        pass_rollback_request(run=run, user=bob)
    settings.CHROMA_MODE = "ephemeral"
    stores.reset_client_cache()
    run.refresh_from_db()
    assert run.status == "applied" and agent_census(agent=agent) == census


def test_a_lease_keeps_a_second_recoverer_off_a_pass(agent_with_memories, bob):
    agent = agent_with_memories(3)
    run = Pass.objects.create(agent=agent, trigger="operator", status="applying")
    from datetime import timedelta

    from django.utils import timezone

    Pass.objects.filter(pk=run.pk).update(  # a live worker elsewhere
        lease_owner="other-host:1234", lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    assert not lease_acquire(run)
    out = io.StringIO()
    call_command("recover_passes", stdout=out)
    assert "being resumed by other-host:1234" in out.getvalue()
    assert Pass.objects.get(pk=run.pk).status == "applying"


def test_a_lease_of_a_dead_process_on_this_host_is_taken_over(agent_with_memories):
    import socket
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    agent = agent_with_memories(3)
    run = Pass.objects.create(
        agent=agent,
        trigger="operator",
        status="applying",
        lease_owner=f"{socket.gethostname()}:{dead.stdout.strip()}",
    )
    assert lease_acquire(run)
    lease_release(run)
    assert Pass.objects.get(pk=run.pk).lease_owner == ""


def test_a_pass_after_an_undo_proposes_the_undone_operations_again(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    """An undone consolidation is not a consolidated one: the restored originals are planned
    afresh (found by a fresh-user test: Run now after Undo proposed nothing)."""
    agent = every_kind(agent_with_memories)
    first = applied(agent, bob, django_capture_on_commit_callbacks)
    assert roll_back(first, bob, django_capture_on_commit_callbacks).status == "rolled_back"
    with django_capture_on_commit_callbacks(execute=True):
        again = pass_request(agent=agent, trigger="operator")
    again.refresh_from_db()
    kinds = sorted(again.operations.values_list("kind", flat=True))
    assert kinds == sorted(first.operations.values_list("kind", flat=True))
