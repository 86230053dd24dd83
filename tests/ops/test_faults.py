"""Nothing lost, in-process (real Chroma, EphemeralClient): passes that end without applying leave
the store and archive byte-identical (I-2); edits, deletes and additions between planning and
approval skip exactly the affected operations (I-4); a newer pass makes older proposals stale;
a merge keeps every metadata key of every source."""

from __future__ import annotations

from typing import Any

import pytest

from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError
from memoryadmin.memories.services.memories import memory_delete, memory_edit
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.selectors.passes import pass_stale_operations
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import pass_approve, pass_reject
from tests.conftest import DISTINCT_FACTS, memory_records

pytestmark = pytest.mark.django_db

F = DISTINCT_FACTS
DUPES = F[:16] + [F[0], F[1], F[2]]  # mem-016/017/018 duplicate mem-000/001/002: three merges
LOOSE = {"max_loss_fraction": 0.5}  # 6 of 19 originals leave the store: over the default 25 %


def propose(agent: Any, capture: Any) -> Pass:
    with capture(execute=True):
        run = pass_request(agent=agent, trigger="operator")
    run.refresh_from_db()
    return run


def op_for(run: Pass, memory_id: str) -> Any:
    return next(op for op in run.operations.all() if memory_id in op.source_ids)


def test_a_pass_rejected_by_the_guard_leaves_the_census_identical(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES, policy={"max_loss_fraction": 0.05, "trim_to_guard": False})
    before = agent_census(agent=agent)
    run = propose(agent, django_capture_on_commit_callbacks)
    assert run.status == "rejected_by_guard"
    assert agent_census(agent=agent) == before


def test_a_rejected_pass_leaves_the_census_identical(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES, policy=LOOSE)
    before = agent_census(agent=agent)
    run = propose(agent, django_capture_on_commit_callbacks)
    pass_reject(run=run, user=bob, note="not now")
    assert Pass.objects.get(pk=run.pk).status == "rejected"
    assert agent_census(agent=agent) == before


def test_a_failed_pass_leaves_the_census_identical(
    agent_with_memories, settings, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES, policy=LOOSE)
    before = agent_census(agent=agent)
    settings.CHROMA_MODE, settings.CHROMA_PORT = "http", 9  # Chroma is down while the pass runs
    stores.reset_client_cache()
    run = propose(agent, django_capture_on_commit_callbacks)
    settings.CHROMA_MODE = "ephemeral"
    stores.reset_client_cache()
    assert run.status == "failed" and "Cannot reach" in run.error
    assert agent_census(agent=agent) == before


def test_a_stale_pass_leaves_the_census_identical_and_a_newer_pass_supersedes_it(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES, policy=LOOSE)
    before = agent_census(agent=agent)
    old = propose(agent, django_capture_on_commit_callbacks)
    new = propose(agent, django_capture_on_commit_callbacks)
    old.refresh_from_db()
    assert (old.status, new.status) == ("stale", "proposed")
    assert f"newer pass #{new.pk}" in old.reason
    assert old.events.filter(verb="stale").count() == 1
    with pytest.raises(ServiceError, match="only a proposed pass"):
        pass_approve(run=old, user=bob)
    assert agent_census(agent=agent) == before


def test_edit_delete_and_add_between_planning_and_approval_skip_exactly_the_affected(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES, policy=LOOSE)
    run = propose(agent, django_capture_on_commit_callbacks)
    assert run.operations.filter(kind="merge").count() == 3
    memory_edit(agent=agent, memory_id="mem-000", document="Caroline moved to Oslo.", user=alice)
    memory_delete(agent=agent, memory_id="mem-017", user=alice)
    [added] = memory_records([F[2]], prefix="late")  # a new duplicate of mem-002, added late
    stores.get_store(agent).upsert([added])
    edited, deleted, untouched = (
        op_for(run, "mem-000"),
        op_for(run, "mem-017"),
        op_for(run, "mem-002"),
    )
    assert set(pass_stale_operations(run=run)) == {edited.pk, deleted.pk}

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()

    assert run.status == "partially_applied"
    statuses = {op.pk: op.status for op in run.operations.all()}
    assert statuses == {edited.pk: "conflict", deleted.pk: "conflict", untouched.pk: "applied"}
    live = {
        r.id: r.document for r in stores.get_store(agent).iter_records(include_embeddings=False)
    }
    assert live["mem-000"] == "Caroline moved to Oslo." and live["mem-016"] == F[0]  # untouched
    assert live["mem-001"] == F[1]  # the surviving source of the deleted-source merge is kept
    assert "late-000" in live and "mem-018" not in live  # added memory kept
    assert live["mem-002"] == F[2]  # the applied merge kept mem-002's record, its text
    assert run.events.filter(verb="conflict").count() == 2


def test_a_merge_keeps_every_metadata_key_of_every_source(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    metas = [{} for _ in range(16)] + [{"verified": True, "confidence": 0.7}, {"confidence": 0.95}]
    agent = agent_with_memories(
        F[:15] + ["Alice is vegetarian."] + ["Alice is vegetarian.", "Alice is vegetarian."],
        [*metas[:15], {"source": "chat-1"}, *metas[16:]],
    )
    run = propose(agent, django_capture_on_commit_callbacks)
    merge = run.operations.get(kind="merge")
    assert sorted(merge.source_ids) == ["mem-015", "mem-016", "mem-017"]
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    [rec] = stores.get_store(agent).get([merge.result_id])
    assert rec.metadata["verified"] is True
    assert rec.metadata["confidence"] == 0.95
    assert rec.metadata["source"] == "chat-1"
    assert sorted(rec.metadata["merged_from"]) == ["mem-015", "mem-016", "mem-017"]
