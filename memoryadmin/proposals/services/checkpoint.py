"""The agent's checkpoint after a pass changed its store: what the next incremental pass treats as
already seen (memory id → content hash), and a :class:`StoreSample` of the store's size.

Apply sets it to what the pass saw, minus what it removed and what must be judged again, plus
what it wrote (:func:`checkpoint_after_apply`); a rollback takes out what the pass wrote and
the originals it restored, so they count as new again (:func:`checkpoint_after_rollback`).
"""

from __future__ import annotations

from typing import Any

from consolidation import content_hash
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.core.services import store_sampled
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Operation, Pass, PassSnapshot

__all__ = ["checkpoint_after_apply", "checkpoint_after_rollback"]

OS = Operation.Status
OK = Operation.Kind


def checkpoint_after_apply(run: Pass, ops: list[Operation], store: Any) -> None:
    """The agent's checkpoint := what this pass saw (its snapshot), minus the memories it removed
    and the sources of operations that failed (to be tried again) or were excluded merges,
    reconciles and prunes (judged again, held back by their decisions) and — auto-applied by
    policy — of conflicts nobody decided (to be asked again) and of the operations auto-apply
    left for review (planned again by the next pass), plus what it wrote; and a
    :class:`StoreSample` of the store's size.

    Memories written to the store after planning are not in the snapshot, so the next
    incremental pass still treats them as new.
    """
    snapshot = PassSnapshot.objects.filter(run=run).values_list("hashes", flat=True).first()
    if snapshot is None:  # planned before snapshots were kept: fall back to the live store
        snapshot = {
            rec.id: rec.content_hash for rec in store.iter_records(include_embeddings=False)
        }
    checkpoint = dict(snapshot)
    written: dict[str, str] = {}
    for op in ops:
        if op.status == OS.APPLIED:
            for mid in op.removes:
                checkpoint.pop(mid, None)
            if op.result_id:
                written[op.result_id] = content_hash(op.result_document, op.result_metadata or {})
        elif op.status == OS.FAILED:
            for mid in op.source_ids:
                checkpoint.pop(mid, None)
    # Excluded merges, reconciles and prunes: their memories leave the checkpoint, so the next
    # pass judges them again and the reviewer's keep-apart or keep decision visibly holds them
    # back (the checkpoint never hides an exclusion; revoking the decision brings it back).
    excluded = run.operations.filter(
        status=OS.EXCLUDED, kind__in=(OK.MERGE, OK.RECONCILE, OK.PRUNE)
    ).values_list("source_ids", flat=True)
    for ids in excluded:
        for mid in ids:
            checkpoint.pop(mid, None)
    if run.decided_actor == "policy":
        # Auto-applied: nobody saw its conflicts. Their memories leave the checkpoint, so the
        # next incremental pass finds the pair again and asks a reviewer.
        undecided = (
            run.operations.filter(kind=Operation.Kind.CONFLICT)
            .exclude(scores__has_key="decision")
            .values_list("source_ids", flat=True)
        )
        for ids in undecided:
            for mid in ids:
                checkpoint.pop(mid, None)
    # The part auto-apply left for review: its memories leave the checkpoint too, so the next
    # (scheduled) pass plans those operations again and its waiting part replaces this one.
    waiting_pass = run.telemetry_data.waiting_pass
    if waiting_pass:
        for ids in Operation.objects.filter(run_id=waiting_pass).values_list(
            "source_ids", flat=True
        ):
            for mid in ids:
                checkpoint.pop(mid, None)
    if written:
        live = stores.get_live(store, sorted(written), include_embeddings=False)
        checkpoint.update({mid: rec.content_hash for mid, rec in live.items()})
    Agent.objects.filter(pk=run.agent_id).update(checkpoint=checkpoint)
    run.agent.checkpoint = checkpoint
    store_sampled(run.agent, store)


def checkpoint_after_rollback(run: Pass, store: Any) -> None:
    """Checkpoint := current minus what the pass created and minus the restored originals; and a
    :class:`StoreSample` of the store's size (the dashboard's size chart shows the rollback).

    Restored originals count as new again, so the next pass plans them afresh and the operator
    gets a new proposal to review (excluding what was wrong) instead of an empty one: an undone
    consolidation is not a consolidated one.
    """
    ops = list(run.operations.filter(status=OS.ROLLED_BACK))
    checkpoint = dict(run.agent.checkpoint or {})
    for op in ops:
        if op.result_id:
            checkpoint.pop(op.result_id, None)
    restored = ArchivedMemory.objects.filter(operation__in=ops).values_list("memory_id", flat=True)
    for mid in restored:
        checkpoint.pop(mid, None)
    Agent.objects.filter(pk=run.agent_id).update(checkpoint=checkpoint)
    store_sampled(run.agent, store)
