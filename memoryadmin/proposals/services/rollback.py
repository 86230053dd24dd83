"""Undo: roll back an applied pass, restore one archived memory.

Services (writes):

- :func:`pass_rollback_request` (reviewer, from the pass page) checks that nothing the pass wrote
  was changed since, then moves ``applied | partially_applied → rolling_back`` and enqueues
  :func:`pass_rollback` (``tasks.rollback_pass``) on commit.
- :func:`pass_rollback` (task body) undoes the applied operations in reverse plan order, journaled
  per operation in ``Operation.status`` (``applied → rolled_back``): restore the archived
  originals (ids, documents, metadata, embeddings) → read them back → delete the records the
  pass created → mark the operations ``rolled_back`` and their archive rows ``restored_at``.
  Every step is idempotent (upsert of the archived version, delete ignores missing ids), so a
  crash at any step is resumed by running it again; a second rollback is a no-op.
- :func:`archive_restore` puts one archived memory back (operator action, audited).
- :func:`archive_purge` (the worker, daily) deletes archived copies older than each agent's
  retention (:attr:`Agent.archive_retention_days`; 0 keeps them forever), audited with counts;
  passes applied before that date lose their Undo (:attr:`Pass.undo_expired`).

Resuming an interrupted rollback is :mod:`.recovery`'s job.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import ngettext

from consolidation import MemoryRecord, content_hash
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.core.errors import AlreadyDone, ServiceError, StoreUnavailable
from memoryadmin.core.roles import REVIEW, require
from memoryadmin.core.services import (
    TASK_ROLLBACK,
    actor_name,
    audit,
    failpoint,
    set_progress,
    store_sampled,
    transition,
)
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.memories.services.memories import memory_guard
from memoryadmin.proposals.models import Operation, OperationSource, Pass
from memoryadmin.proposals.selectors.decisions import decisions_of_pass
from memoryadmin.proposals.services.apply import batches
from memoryadmin.proposals.services.checkpoint import checkpoint_after_rollback
from memoryadmin.proposals.services.decisions import (
    decision_for_restore,
    decision_revoke,
    decisions_for_rejection,
)
from memoryadmin.proposals.telemetry import telemetry_save

__all__ = [
    "UNDONE",
    "RollbackBlocked",
    "archive_purge",
    "archive_restore",
    "pass_rollback",
    "pass_rollback_request",
    "rollback_blockers",
]

log = logging.getLogger(__name__)

S = Pass.Status
OS = Operation.Status


UNDONE = "undone (rolled back)"
"""The note of the rejected plan a rollback records (the reviewer's note follows it)."""


class RollbackBlocked(ServiceError):
    """A rollback was refused before writing anything: records the pass created were changed
    after it (or an original's id was taken again). ``memory_ids`` names them."""

    def __init__(self, message: str, memory_ids: list[str]) -> None:
        super().__init__(message)
        self.memory_ids = memory_ids


# ---------------------------------------------------------------------------------------------
# rollback


def _written_document(op: Operation, prior: dict[tuple[int | None, str], ArchivedMemory]) -> str:
    """The text apply wrote for ``op`` (its result text, else the rewritten source's text)."""
    if op.result_document:
        return op.result_document
    base = prior.get((op.pk, op.result_id))
    if base is not None:
        return base.document
    src = next((s for s in op.sources.all() if s.memory_id == op.result_id), None)
    return src.document if src is not None else ""


def _archived_of(ops: list[Operation]) -> list[ArchivedMemory]:
    return list(ArchivedMemory.objects.filter(operation__in=ops).order_by("id"))


def rollback_blockers(*, run: Pass, store: Any | None = None) -> dict[str, str]:
    """Why the applied operations of ``run`` cannot be undone now: ``{memory_id: reason}``.

    A record the pass created or rewrote whose live content hash differs from what apply wrote
    (edited after the pass), or an original whose id is live again with other content (restoring
    it would overwrite). A reason names the later passes, still applied, that changed the
    record (:func:`_later_passes`: roll those back first). Read-only. Raises
    :class:`StoreUnavailable` when Chroma is down.
    """
    ops = list(
        run.operations.filter(status=OS.APPLIED).prefetch_related("sources").order_by("index")
    )
    if not ops:
        return {}
    store = store if store is not None else stores.get_store(run.agent)
    archived = _archived_of(ops)
    prior = {(a.operation_id, a.memory_id): a for a in archived}
    written = {
        op.result_id: content_hash(_written_document(op, prior), op.result_metadata or {})
        for op in ops
        if op.result_id
    }
    restored = {a.memory_id: a.content_hash for a in archived}
    live = stores.get_live(store, sorted(set(written) | set(restored)), include_embeddings=False)
    out: dict[str, str] = {}
    for mid, expected in written.items():
        rec = live.get(mid)
        # Equal to the archived original: already restored (a resumed rollback), not an edit.
        if rec is not None and rec.content_hash not in (expected, restored.get(mid)):
            out[mid] = f"Memory {mid}, written by this pass, was changed after the pass."
    for mid, archived_hash in restored.items():
        rec = live.get(mid)
        if mid not in written and rec is not None and rec.content_hash != archived_hash:
            out[mid] = (
                f"Memory {mid} exists again with other content; restoring would overwrite it."
            )
    for mid, later in _later_passes(run, sorted(out)).items():
        names = ", ".join(f"#{n}" for n in later)
        which = "that pass" if len(later) == 1 else "those passes"
        out[mid] += f" Pass {names} changed it since: roll {which} back first."
    return out


def _later_passes(run: Pass, ids: list[str]) -> dict[str, list[int]]:
    """``{memory id: [pass pk, …]}``: the agent's passes after ``run``, still applied (or
    partially), whose applied operations read or wrote the memories ``ids`` — what an operator
    must roll back before ``run``."""
    if not ids:
        return {}
    later = {
        "run__agent_id": run.agent_id,
        "run__pk__gt": run.pk,
        "run__status__in": Pass.ROLLBACKABLE,
        "status": OS.APPLIED,
    }
    wrote = Operation.objects.filter(result_id__in=ids, **later).values_list("run_id", "result_id")
    read = OperationSource.objects.filter(
        memory_id__in=ids, **{f"operation__{k}": v for k, v in later.items()}
    ).values_list("operation__run_id", "memory_id")
    out: dict[str, set[int]] = {}
    for run_id, mid in [*wrote, *read]:
        out.setdefault(mid, set()).add(run_id)
    return {mid: sorted(runs) for mid, runs in out.items()}


def archive_purge(*, now: Any = None, dry_run: bool = False) -> dict[str, int]:
    """Delete the archived copies older than each agent's retention: ``{agent slug: copies
    deleted}`` for every agent with something to purge (``dry_run``: counted, nothing
    deleted). Agents keeping copies forever (retention 0) are skipped; copies of a pass that is
    being applied or rolled back are kept until it is done (its journal reads them). Each
    agent's purge is one transaction and one audit event ``archive_purged`` (count, retention
    days, cutoff); the ids are not listed (the texts are gone, so are their names)."""
    now = now or timezone.now()
    out: dict[str, int] = {}
    for agent in Agent.objects.order_by("pk"):
        cutoff = agent.archive_cutoff(now)
        if cutoff is None:
            continue
        rows = ArchivedMemory.objects.filter(agent=agent, archived_at__lt=cutoff).exclude(
            run__status__in=(S.APPLYING, S.ROLLING_BACK)
        )
        n = rows.count()
        if not n:
            continue
        out[agent.slug] = n
        if dry_run:
            continue
        with transaction.atomic():
            rows.delete()
            audit(
                actor="worker",
                verb="archive_purged",
                agent=agent,
                note=f"{n} archived cop{'y' if n == 1 else 'ies'} older than "
                f"{agent.archive_retention_days} days purged.",
                data={
                    "count": n,
                    "retention_days": agent.archive_retention_days,
                    "cutoff": cutoff.isoformat(),
                },
            )
    return out


def pass_rollback_request(
    *, run: Pass, user: Any, note: str = "", revoke_decisions: bool = False
) -> Pass:
    """Start undoing an applied or partially applied pass (reviewer action, audited).

    Checks first, writing nothing on refusal: raises :class:`RollbackBlocked` naming every record
    changed after the pass (audited as ``rollback_refused``), :class:`ServiceError` when the pass
    is in another state or another pass of the agent is active (I-5), :class:`StoreUnavailable`
    when Chroma is down, :class:`AlreadyDone` (nothing written) for a pass already
    ``rolling_back`` or ``rolled_back``, :class:`NotAllowed` for a user who is not a reviewer.
    Otherwise the pass becomes ``rolling_back`` and :func:`pass_rollback` is enqueued when the
    transaction commits. ``revoke_decisions`` also revokes the standing
    decisions made on the pass (its exclusions, conflict picks); else they stay. Either way the
    undone operations become a rejected plan (note :data:`UNDONE`), so auto-apply leaves them
    for a person when a later pass plans them again; revoking it on the Decisions tab lets
    them apply on their own again.
    """
    require(user, REVIEW, f"roll back pass #{run.pk}")
    run = Pass.objects.select_related("agent").get(pk=run.pk)
    if run.status in (S.ROLLING_BACK, S.ROLLED_BACK):
        already = "rolled back" if run.status == S.ROLLED_BACK else "rolling back"
        raise AlreadyDone(f"Pass #{run.pk} is already {already}; nothing was done.")
    if run.undo_expired:
        raise ServiceError(run.undo_expired)
    if not run.can_roll_back:
        raise ServiceError(
            f"Pass #{run.pk} is {run.status.replace('_', ' ')}. "
            "Only an applied or partially applied pass can be rolled back."
        )
    actor = actor_name(user, "cli")
    blockers = rollback_blockers(run=run)
    if blockers:
        ids = sorted(blockers)
        message = (
            f"Rollback refused, nothing was changed: {len(ids)} "
            f"{ngettext('record was', 'records were', len(ids))} changed "
            "after the pass "
            f"({', '.join(ids)}). " + " ".join(blockers[i] for i in ids)
        )
        audit(
            actor=actor,
            verb="rollback_refused",
            run=run,
            user=user,
            note=message,
            data={"memory_ids": ids},
        )
        raise RollbackBlocked(message, ids)
    telemetry = run.telemetry_data.with_(
        rollback={"from": run.status, "actor": actor, "requested_at": timezone.now().isoformat()}
    )
    try:
        with transaction.atomic():
            run = transition(
                run,
                frm=Pass.ROLLBACKABLE,
                to=S.ROLLING_BACK,
                actor=actor,
                verb="rollback_requested",
                user=user,
                note=note or "",
                telemetry=telemetry.to_json(),
                progress=0.0,
                progress_label="Waiting to roll back",
                finished_at=None,
            )
            if revoke_decisions:
                for d in decisions_of_pass(run):
                    decision_revoke(
                        decision=d, user=user, note=f"revoked with the rollback of pass #{run.pk}"
                    )
            # Undoing is deciding: the undone operations wait for a person when planned again
            # (a rejected plan on the Decisions tab, revocable), so a schedule never redoes an
            # undo on its own.
            # (recorded in the rollback's name: whoever may roll back may record its decision)
            decisions_for_rejection(
                run=run, user=None, actor=actor, note=UNDONE + (f": {note}" if note else "")
            )
            _enqueue_rollback(run.pk)
    except IntegrityError:
        raise ServiceError(
            f"Another pass of {run.agent.name} is in progress; roll this one back when it is done."
        ) from None
    return run


def _enqueue_rollback(pk: int) -> None:
    def send() -> None:
        from django_q.tasks import async_task

        async_task(TASK_ROLLBACK, pk, task_name=f"rollback_pass:{pk}")

    transaction.on_commit(send)


def _rollback_actor(run: Pass) -> str:
    return run.telemetry_data.rollback_actor


def _back_to_applied(run: Pass, reason: str, actor: str, verb: str) -> Pass:
    """Nothing was written yet: return the pass to the status it was rolled back from."""
    frm = (run.telemetry_data.rollback or {}).get("from") or S.APPLIED
    return transition(
        run,
        frm=(S.ROLLING_BACK,),
        to=frm,
        actor=actor,
        verb=verb,
        note=reason,
        error=reason,
        finished_at=timezone.now(),
        progress=1.0,
        progress_label="Rollback not started",
    )


def pass_rollback(*, run: Pass) -> Pass:
    """Task body: undo a ``rolling_back`` pass, or resume one (a no-op in any other state).

    Applied operations are undone in reverse plan order, in batches where no memory is touched
    twice (``batches``): restore archived originals (upsert: original id, document,
    metadata, embedding) → read them back and compare content hashes → delete the records the
    operations created (a rewritten source keeps its restored id) → mark the operations
    ``rolled_back`` and their archive rows ``restored_at`` in one transaction. Failpoints
    ``rollback:restored``, ``rollback:verified``, ``rollback:deleted``, ``rollback:marked``
    (``$MEMORYADMIN_FAILPOINT``) kill the process after each step for the crash tests.

    On a fresh start the blockers are checked again; if any (or Chroma is down before anything
    was written) the pass returns to ``applied``/``partially_applied`` with the reason. After a
    write, an outage leaves it ``rolling_back`` with the error for :func:`passes_recover`.
    Ends ``rolled_back`` (audited) and refreshes the agent's checkpoint.
    """
    run = Pass.objects.select_related("agent").get(pk=run.pk)
    if run.status != S.ROLLING_BACK:
        return run
    actor = _rollback_actor(run)
    ops = list(
        run.operations.filter(status=OS.APPLIED).prefetch_related("sources").order_by("-index")
    )
    info = dict(run.telemetry_data.rollback or {})
    fresh = not info.get("started") and not run.operations.filter(status=OS.ROLLED_BACK).exists()
    wrote = False
    total = len(ops) + run.operations.filter(status=OS.ROLLED_BACK).count()
    done = total - len(ops)
    try:
        store = stores.get_store(run.agent)
        if fresh:
            set_progress(run, 0.02, "Checking what the pass wrote against the live store")
            blockers = rollback_blockers(run=run, store=store)
            if blockers:
                ids = sorted(blockers)
                changed = ", ".join(ids)
                return _back_to_applied(
                    run,
                    f"Rollback refused, nothing was changed: changed after the pass: {changed}.",
                    actor,
                    "rollback_refused",
                )
        if fresh:  # from here on a failure leaves the pass rolling_back, to be resumed
            telemetry_save(run, run.telemetry_data.with_(rollback=info | {"started": True}))
        for batch in batches(ops):
            set_progress(
                run,
                0.05 + 0.9 * done / max(1, total),
                f"Undoing operations {done + 1}–{done + len(batch)} of {total}",
            )
            wrote = True
            _rollback_batch(run, batch, store)
            done += len(batch)
    except Exception as exc:
        if not (
            isinstance(exc, StoreUnavailable) or stores.looks_unavailable(exc)
        ) and not isinstance(exc, ServiceError):
            log.exception("rollback of pass %s failed", run.pk)
        message = str(exc) if isinstance(exc, ServiceError) else f"{type(exc).__name__}: {exc}"
        if fresh and not wrote:
            return _back_to_applied(
                run, f"Rollback could not start: {message}", actor, "rollback_failed"
            )
        log.warning("rollback of pass %s interrupted, resumed later: %s", run.pk, message)
        Pass.objects.filter(pk=run.pk).update(
            error=message, progress_label="Rollback interrupted; resumed once the store answers"
        )
        audit(actor=actor, verb="rollback_interrupted", run=run, note=message)
        run.refresh_from_db()
        return run
    run = transition(
        run,
        frm=(S.ROLLING_BACK,),
        to=S.ROLLED_BACK,
        actor=actor,
        verb="rolled_back",
        note=f"{total} {ngettext('operation', 'operations', total)} undone.",
        error="",
        finished_at=timezone.now(),
        progress=1.0,
        progress_label="Rolled back",
    )
    try:
        checkpoint_after_rollback(run, store)
    except Exception:  # the pass is rolled back; a stale checkpoint only costs a wider next plan
        log.exception("could not refresh the checkpoint of agent %s", run.agent_id)
    return run


def _rollback_batch(run: Pass, batch: list[Operation], store: Any) -> None:
    archived = _archived_of(batch)
    records = []
    missing = [a for a in archived if a.embedding is None]
    vectors = dict(
        zip([a.pk for a in missing], stores.embed([a.document for a in missing]), strict=True)
    )
    for a in archived:
        emb = a.get_embedding() if a.embedding is not None else vectors[a.pk]
        records.append(MemoryRecord(a.memory_id, a.document, emb, dict(a.metadata or {})))
    # 1. restore the originals first: no moment where neither they nor the merged record is live
    if records:
        store.upsert(records)
    failpoint("rollback:restored")
    # 2. read them back
    if records:
        live = stores.get_live(store, [r.id for r in records], include_embeddings=False)
        for a in archived:
            rec = live.get(a.memory_id)
            if rec is None or rec.content_hash != a.content_hash:
                raise ServiceError(
                    f"Restored memory {a.memory_id} could not be read back as archived."
                )
    failpoint("rollback:verified")
    # 3. remove what the operations created (a rewritten source was restored under its own id)
    restored_ids = {a.memory_id for a in archived}
    doomed = sorted(
        {op.result_id for op in batch if op.result_id and op.result_id not in restored_ids}
    )
    if doomed:
        store.delete(doomed)
    failpoint("rollback:deleted")
    # 4. journal
    with transaction.atomic():
        Operation.objects.filter(pk__in=[op.pk for op in batch]).update(
            status=OS.ROLLED_BACK, status_detail="Undone by rollback."
        )
        ArchivedMemory.objects.filter(
            pk__in=[a.pk for a in archived], restored_at__isnull=True
        ).update(restored_at=timezone.now())
    failpoint("rollback:marked")


# ---------------------------------------------------------------------------------------------
# archive browser: restore one, list


def archive_restore(*, archived: ArchivedMemory, user: Any) -> MemoryRecord:
    """Put one archived memory back in its agent's store (id, document, metadata, embedding).

    Refuses (:class:`ServiceError`, nothing written) when a live memory with the same id exists
    and differs, or while a pass of the agent is applying or rolling back;
    :class:`StoreUnavailable` when Chroma is down. Restoring a memory that is already live and
    identical only records ``restored_at``. Sets ``restored_at``, records a keep decision (no
    later pass removes it again until revoked) and audits ``memory_restored``. Idempotent: a
    second restore of a row already restored whose memory is still live and identical (a
    double click, ten tabs at once) writes, decides and audits nothing.

    The live check, the write and the archive row's update are one critical section: a
    transaction holding the agent's row lock (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's
    ``BEGIN IMMEDIATE`` write lock), so of concurrent restores of versions of one memory one wins
    and the others find it live (refused when it differs, ``already_live`` when identical).
    """
    a = ArchivedMemory.objects.select_related("agent").get(pk=archived.pk)
    if a.agent_id is None:
        raise ServiceError("The agent of this archived memory was deleted: no store to restore to.")
    emb = a.get_embedding()
    if emb is None:  # computed before taking the lock: the embedder may take seconds
        emb = stores.embed([a.document])[0]
    record = MemoryRecord(a.memory_id, a.document, emb, dict(a.metadata or {}))
    actor = actor_name(user, "cli")
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=a.agent_id)
        memory_guard(agent)
        store = stores.get_store(agent)
        live = stores.get_live(store, [a.memory_id], include_embeddings=False).get(a.memory_id)
        if live is not None and live.content_hash != a.content_hash:
            raise ServiceError(
                f"A live memory with the id {a.memory_id!r} exists and differs from this "
                "archived version; nothing was restored. Edit or delete the live memory first."
            )
        restored = ArchivedMemory.objects.filter(pk=a.pk, restored_at__isnull=False).exists()
        if live is not None and restored:
            return record  # restored by an earlier (or concurrent) request: nothing more to do
        if live is None:
            store.upsert([record])
            store_sampled(agent, store)  # the dashboard's count follows the restore
        ArchivedMemory.objects.filter(pk=a.pk).update(restored_at=timezone.now())
        decision = decision_for_restore(archived=a, agent=agent, user=user)
        audit(
            actor=actor,
            verb="memory_restored",
            agent=agent,
            user=user,
            data={
                "memory_id": a.memory_id,
                "archived": a.pk,
                "already_live": live is not None,
                "decision": decision.pk,
            },
        )
    return record
