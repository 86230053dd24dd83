"""Apply (I-1…I-4): write an approved pass to the store, journaled per operation.

``approved → applying → applied | partially_applied`` (or back to ``proposed`` when the store is
unreachable before anything was written). Each operation goes
``pending → archived → written → verified → applied`` (or ``conflict`` / ``failed``) in
``Operation.status``. Each step is idempotent (archive rows are unique per operation+memory,
merged ids are deterministic and written with upsert, deletes ignore missing ids) and the journal
is saved after each step, so re-running :func:`pass_apply` on an ``applying`` pass resumes where
it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import ngettext

from consolidation import MemoryRecord, content_hash
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.core.models import embedding_to_bytes
from memoryadmin.core.services import (
    SYSTEM_ACTOR,
    audit,
    failpoint,
    jsonable,
    set_progress,
    transition,
)
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Operation, OperationSource, Pass
from memoryadmin.proposals.selectors.evaluation import (
    effective_threshold,
    evaluate,
    to_engine_operation,
)
from memoryadmin.proposals.selectors.passes import stale_reason
from memoryadmin.proposals.services.checkpoint import checkpoint_after_apply
from memoryadmin.proposals.services.evaluation import store_figures
from memoryadmin.proposals.telemetry import telemetry_save

__all__ = ["batches", "pass_apply"]

log = logging.getLogger(__name__)

S = Pass.Status
OS = Operation.Status
OK = Operation.Kind

_ARCHIVE_ACTION = {
    Operation.Kind.MERGE: ArchivedMemory.Action.MERGE,
    Operation.Kind.PRUNE: ArchivedMemory.Action.PRUNE,
    Operation.Kind.RECONCILE: ArchivedMemory.Action.RECONCILE,
    Operation.Kind.PROMOTE: ArchivedMemory.Action.PROMOTE,
    Operation.Kind.DISTILL: ArchivedMemory.Action.MERGE,
    Operation.Kind.SUMMARIZE: ArchivedMemory.Action.SUMMARIZE,
}


class _Interrupted(Exception):
    """Chroma went away mid-apply: the pass stays ``applying`` for a later resume."""


def _archived_sources(op: Operation, sources: list[OperationSource]) -> list[OperationSource]:
    """Sources whose current version is archived: the removed ones, and a rewritten one."""
    return [s for s in sources if s.removed or s.memory_id == op.result_id]


def _result_records(ops: list[Operation]) -> list[MemoryRecord]:
    """The records ``ops`` write (one each). A text equal to a source's — the rewritten source
    (an edit of metadata only), or the source whose text a merge kept (an exact duplicate, or
    the near-duplicate whose text holds the other's) — keeps that source's embedding (its live
    version as archived, else the planned one): the same text has the same embedding. Any other
    text (a new merged text, an edit, a distillation) is embedded, in one call."""
    prior = {
        (a.operation_id, a.memory_id): a for a in ArchivedMemory.objects.filter(operation__in=ops)
    }
    docs: list[str] = []
    embeddings: list[np.ndarray | None] = []
    for op in ops:
        by_id = {s.memory_id: s for s in op.source_list}
        base = prior.get((op.pk, op.result_id)) or by_id.get(op.result_id)
        document = op.result_document or (base.document if base is not None else "")
        if not document:
            raise ServiceError(f"Operation #{op.index} has no text to write.")
        docs.append(document)
        same_text = (
            source
            for source in [base, *(prior.get((op.pk, m)) or s for m, s in by_id.items())]
            if source is not None and source.document == document
        )
        kept = next((e for e in (s.get_embedding() for s in same_text) if e is not None), None)
        embeddings.append(kept)
    missing = [i for i, e in enumerate(embeddings) if e is None]
    for i, vec in zip(missing, stores.embed([docs[i] for i in missing]), strict=True):
        embeddings[i] = vec
    return [
        MemoryRecord(op.result_id, doc, emb, dict(op.result_metadata or {}))
        for op, doc, emb in zip(ops, docs, embeddings, strict=True)
    ]


def batches(ops: list[Operation], size: int | None = None) -> list[list[Operation]]:
    """Contiguous batches (plan order kept) of at most ``size`` operations (default
    ``settings.APPLY_BATCH``, ``$MEMORYADMIN_APPLY_BATCH``, 1,000) in which no memory is touched
    by two operations, so a batch's stale check, read before any of its writes, stays valid for
    every operation in it.

    A batch is one Chroma read, archive transaction, upsert, read-back and delete per stage (the
    store splits a write above Chroma's ``get_max_batch_size()``; reads go 1,000 ids a call).
    1,000 rather than 100 (``bench/chroma_batch_bench.py``, ``chroma run``): deleting 3,000
    records took 0.6 s in batches of 1,000 against 1.7 s in batches of 100, and reads go in
    10× fewer calls; an upsert costs the server the same per record either way (≈ 2–3 ms), and
    upserts are most of an apply, so whole applies gain less (see ``bench/propose_bench.py``).
    Raises ``ValueError`` for a size under 1."""
    size = settings.APPLY_BATCH if size is None else size
    if size < 1:
        raise ValueError(f"the apply batch must be at least 1 operation, got {size}")
    out: list[list[Operation]] = []
    batch: list[Operation] = []
    touched: set[str] = set()
    for op in ops:
        ids = set(op.source_ids) | ({op.result_id} if op.result_id else set())
        if batch and (len(batch) >= size or ids & touched):
            out.append(batch)
            batch, touched = [], set()
        batch.append(op)
        touched |= ids
    if batch:
        out.append(batch)
    return out


def _mark(ops: Iterable[Operation], status: str, detail: str = "") -> None:
    """Journal: move ``ops`` to ``status`` in one statement (committed on its own)."""
    ops = list(ops)
    if ops:
        Operation.objects.filter(pk__in=[op.pk for op in ops]).update(
            status=status, status_detail=detail
        )
        for op in ops:
            op.status, op.status_detail = status, detail


def _fail_op(
    run: Pass, op: Operation, detail: str, actor: str, verb: str = "operation_failed"
) -> None:
    status = OS.CONFLICT if verb == "conflict" else OS.FAILED
    _mark([op], status, detail)
    audit(
        actor=actor, verb=verb, run=run, note=detail, data={"operation": op.index, "kind": op.kind}
    )


def _per_op(
    run: Pass, ops: list[Operation], actor: str, call: Callable[[list[Operation]], None]
) -> list[Operation]:
    """``call(ops)`` at once; when that fails for a reason other than Chroma being down, retry
    one operation at a time and mark those that still fail ``failed``. Returns those that passed.
    Raises :class:`_Interrupted` when Chroma is down."""
    try:
        call(ops)
        return ops
    except (StoreUnavailable, _Interrupted):
        raise
    except Exception as exc:
        if stores.looks_unavailable(exc):
            raise _Interrupted(f"{type(exc).__name__}: {exc}") from exc
        if len(ops) == 1:
            log.warning("operation %s of pass %s failed: %s", ops[0].index, run.pk, exc)
            detail = str(exc) if isinstance(exc, ServiceError) else f"{type(exc).__name__}: {exc}"
            _fail_op(run, ops[0], detail, actor)
            return []
    ok: list[Operation] = []
    for op in ops:
        ok.extend(_per_op(run, [op], actor, call))
    return ok


def _apply_batch(
    run: Pass, batch: list[Operation], store: Any, own_writes: dict[str, str], actor: str
) -> None:
    """Take a batch through the journal stages its operations have not done yet (I-3):
    ``pending`` → (stale check) → ``archived`` → ``written`` → ``verified`` → ``applied``."""
    try:
        _apply_batch_stages(run, batch, store, own_writes, actor)
    except StoreUnavailable as exc:
        raise _Interrupted(str(exc)) from exc
    except _Interrupted:
        raise
    except Exception as exc:
        if stores.looks_unavailable(exc):
            raise _Interrupted(f"{type(exc).__name__}: {exc}") from exc
        raise


def _archive(run: Pass, ops: list[Operation], live: dict[str, MemoryRecord], actor: str) -> None:
    """Archive the live version of each source ``ops`` remove or rewrite (I-1), in bulk
    inserts; a copy archived by an earlier, interrupted try is kept as it is (the first copy is
    the original)."""
    done = set(
        ArchivedMemory.objects.filter(operation__in=ops).values_list("operation_id", "memory_id")
    )
    rows = []
    for op in ops:
        for src in _archived_sources(op, op.source_list):
            if (op.pk, src.memory_id) in done:
                continue
            rec = live[src.memory_id]
            emb = rec.embedding if rec.embedding is not None else src.get_embedding()
            rows.append(
                ArchivedMemory(
                    operation=op,
                    memory_id=src.memory_id,
                    agent=run.agent,
                    document=rec.document,
                    metadata=jsonable(rec.metadata),
                    embedding=embedding_to_bytes(emb),
                    content_hash=rec.content_hash,
                    action=_ARCHIVE_ACTION[op.kind],
                    run=run,
                    actor=run.decided_actor or actor,
                )
            )
    ArchivedMemory.objects.bulk_create(rows, batch_size=500)


def _apply_batch_stages(
    run: Pass, batch: list[Operation], store: Any, own_writes: dict[str, str], actor: str
) -> None:
    # 1. stale check (I-4) and archive, committed before anything changes (I-1)
    pending = [op for op in batch if op.status == OS.PENDING]
    if pending:
        ids = sorted({sid for op in pending for sid in op.source_ids})
        live = stores.get_live(store, ids, include_embeddings=True)
        fresh = []
        for op in pending:
            reason = stale_reason(op, op.source_list, live, own_writes)
            if reason:
                _fail_op(run, op, reason, actor, verb="conflict")
            else:
                fresh.append(op)
        with transaction.atomic():
            _archive(run, fresh, live, actor)
            _mark(fresh, OS.ARCHIVED)
        failpoint("apply:archived")
    # 2. write merged/promoted/new records: deterministic ids, upsert (a retry is idempotent)
    archived = [op for op in batch if op.status == OS.ARCHIVED]
    if archived:
        writers = [op for op in archived if op.result_id]
        ok = (
            _per_op(run, writers, actor, lambda ops: store.upsert(_result_records(ops)))
            if writers
            else []
        )
        done = {op.pk for op in ok}  # not `op not in ok`: a model's == for each pair, O(n²)
        refused = [op for op in writers if op.pk not in done]
        if refused:  # nothing was written and nothing leaves the store: no archive copy needed
            ArchivedMemory.objects.filter(operation__in=refused).delete()
        _mark([op for op in archived if not op.result_id] + ok, OS.WRITTEN)
        failpoint("apply:written")
    # 3. verify the written records are readable
    written = [op for op in batch if op.status == OS.WRITTEN]
    if written:
        got = stores.get_live(
            store, [op.result_id for op in written if op.result_id], include_embeddings=False
        )
        verified = []
        for op in written:
            if op.result_id:
                rec = got.get(op.result_id)
                if rec is None or (op.result_document and rec.document != op.result_document):
                    _fail_op(
                        run,
                        op,
                        f"Written memory {op.result_id} could not be read back; "
                        "its sources were kept.",
                        actor,
                    )
                    continue
                own_writes[op.result_id] = rec.content_hash
            verified.append(op)
        _mark(verified, OS.VERIFIED)
        failpoint("apply:verified")
    # 4. delete the removed sources, then the operation is applied
    verified = [op for op in batch if op.status == OS.VERIFIED]
    if verified:

        def delete(ops: list[Operation]) -> None:
            doomed = sorted({i for op in ops for i in op.removes if i != op.result_id})
            if doomed:
                store.delete(doomed)
            failpoint("apply:deleted")

        _mark(_per_op(run, verified, actor, delete), OS.APPLIED)
        failpoint("apply:applied")


def pass_apply(*, run: Pass) -> Pass:
    """Task body: apply an approved pass, or resume an ``applying`` one.

    Operations go in plan order, in batches of ``settings.APPLY_BATCH`` (:func:`batches`: no
    memory touched twice in a batch); each stage is journaled per operation in
    ``Operation.status``. Order per operation (I-3): stale check against the live store (I-4:
    changed or vanished source → ``conflict``, skipped) → archive the originals in a committed
    transaction (I-1) → upsert the merged/promoted record (deterministic id; a merge's embedding
    is the embedding of its merged text; a merge whose text is one source's is written in that
    source's record, which the store updates in its metadata alone,
    :func:`consolidation.plans.merge_result_id`) → read it back → delete the removed sources
    (never the record just written) → ``applied``.

    Guard re-check (design choice): on a fresh apply, every operation is stale-checked first and
    the loss guard re-evaluated on the operations that will really be applied, against the live
    store size. If it trips, nothing is written: the pass ends ``rejected_by_guard`` with the
    reason. Operations that conflict later only lower the loss, so the check cannot newly trip.

    ``conflict`` operations are never applied (they remove and write nothing; a reviewer
    resolves them). Ends ``applied``, or ``partially_applied`` when any operation conflicted or
    failed. If Chroma is unreachable before any operation started, the pass goes back to
    ``approved`` (store untouched, the approval, exclusions and edits kept, audited as
    ``apply_postponed``) and recovery applies it once the store answers;
    after that it stays ``applying`` with the error and is resumed by running this again
    (``tasks.apply_pass`` / ``manage.py recover_passes``); no step is done twice. Afterwards the
    agent's checkpoint is refreshed and a :class:`StoreSample` is recorded.
    """
    run = Pass.objects.select_related("agent", "decided_by").get(pk=run.pk)
    actor = SYSTEM_ACTOR  # the worker applies; who approved is on the "approved" event
    if run.status == S.APPROVED:
        try:
            run = transition(
                run,
                frm=(S.APPROVED,),
                to=S.APPLYING,
                actor=actor,
                verb="applying",
                progress=0.0,
                progress_label="Checking the store",
            )
        except ServiceError:
            return Pass.objects.get(pk=run.pk)
    elif run.status != S.APPLYING:
        return run
    agent = run.agent
    # A conflict waits for a reviewer's pick; approving or auto-applying never resolves it.
    ops = list(
        run.operations.exclude(status=OS.EXCLUDED)
        .exclude(kind=Operation.Kind.CONFLICT)
        .prefetch_related("sources")
        .order_by("index")
    )
    # The guard re-check runs until its verdict is recorded (also after a crash in between).
    fresh = run.telemetry_data.apply_guard is None and all(
        op.status in (OS.PENDING, OS.CONFLICT) for op in ops
    )
    try:
        store = stores.get_store(agent)
        if fresh:
            verdict = _apply_precheck(run, ops, store, actor)
            if verdict is not None:
                return verdict
    except (StoreUnavailable, _Interrupted) as exc:
        return _apply_interrupted(run, ops, str(exc), actor)
    own_writes: dict[str, str] = {}
    for op in ops:  # on resume: what earlier operations of this pass already wrote
        if op.status in (OS.WRITTEN, OS.VERIFIED, OS.APPLIED) and op.result_id:
            own_writes[op.result_id] = content_hash(op.result_document, op.result_metadata or {})
    todo = [op for op in ops if op.status not in (OS.APPLIED, OS.CONFLICT, OS.FAILED)]
    done = len(ops) - len(todo)
    for batch in batches(todo):
        set_progress(
            run,
            0.05 + 0.9 * done / max(1, len(ops)),
            f"Applying operations {done + 1}–{done + len(batch)} of {len(ops)}",
        )
        try:
            _apply_batch(run, batch, store, own_writes, actor)
        except _Interrupted as exc:
            return _apply_interrupted(run, ops, str(exc), actor)
        done += len(batch)
    return _apply_finish(run, ops, store, actor)


def _apply_precheck(run: Pass, ops: list[Operation], store: Any, actor: str) -> Pass | None:
    """Stale-check all operations and re-check the guard; a ``Pass`` when apply must stop."""
    set_progress(run, 0.02, "Checking the operations against the live store")
    ids = sorted({sid for op in ops for sid in op.source_ids})
    live = stores.get_live(store, ids, include_embeddings=False)
    keep = []
    for op in ops:
        if op.status == OS.CONFLICT:
            continue
        reason = stale_reason(op, op.source_list, live, {})
        if reason:
            op.status, op.status_detail = OS.CONFLICT, reason
            op.save(update_fields=["status", "status_detail"])
            audit(
                actor=actor,
                verb="conflict",
                run=run,
                note=reason,
                data={"operation": op.index, "kind": op.kind},
            )
        else:
            keep.append(op)
    if len(keep) < len(ops):
        store_figures(run)  # the pages' figures leave the conflicts out, as pass_evaluate does
    live_count = store.count()
    ev = evaluate(
        entries_before=live_count,
        included=[to_engine_operation(op) for op in keep],
        excluded_count=len(ops) - len(keep),
        max_loss_fraction=effective_threshold(run),
    )
    telemetry = run.telemetry_data.with_(apply_guard=ev.to_dict())
    if ev.guard_passed:  # recorded verdict: a resumed apply does not check again
        telemetry_save(run, telemetry)
        return None
    reason = (
        f"At apply time, after {len(ops) - len(keep)} conflicting "
        f"{ngettext('operation', 'operations', len(ops) - len(keep))}: {ev.guard_reason}"
    )
    return transition(
        run,
        frm=(S.APPLYING,),
        to=S.REJECTED_BY_GUARD,
        actor=actor,
        verb="rejected_by_guard",
        note=reason,
        reason=reason,
        telemetry=telemetry.to_json(),
        finished_at=timezone.now(),
        progress=1.0,
        progress_label="Rejected by the loss guard at apply time",
    )


def _apply_interrupted(run: Pass, ops: list[Operation], error: str, actor: str) -> Pass:
    started = any(
        op.status not in (OS.PENDING, OS.CONFLICT, OS.EXCLUDED) for op in run.operations.all()
    )
    if not started:
        # Nothing was archived, written or deleted (store untouched, I-2): the pass stays
        # approved (the reviewer's decision, exclusions and edits kept) and the recovery schedule
        # applies it once the store answers, as it resumes an interrupted apply (an approval
        # sent back to "proposed" was never retried). The stale check and the guard re-check run
        # then, against the store as it is by then.
        Operation.objects.filter(run=run, status=OS.CONFLICT).update(
            status=OS.PENDING, status_detail=""
        )
        store_figures(run)  # the conflicts count again
        note = (
            f"Apply postponed, nothing was written: {error.rstrip('. ')}. The approval "
            "stands; it is applied automatically once the store answers (checked every minute)."
        )
        telemetry = run.telemetry_data.with_(apply_guard=None).to_json()
        return transition(
            run,
            frm=(S.APPLYING,),
            to=S.APPROVED,
            actor=actor,
            verb="apply_postponed",
            note=note,
            error=note,
            telemetry=telemetry,
            progress=0.0,
            progress_label="Apply postponed: the store is unreachable; applied once it answers",
        )
    # Resumed by the worker's recovery schedule (every minute) once the store answers.
    log.warning("apply of pass %s interrupted, resumed when the store answers: %s", run.pk, error)
    Pass.objects.filter(pk=run.pk).update(
        error=error,
        progress_label="Interrupted: the store is unreachable; resumed once it answers",
    )
    audit(actor=actor, verb="apply_interrupted", run=run, note=error)
    run.refresh_from_db()
    return run


def _apply_finish(run: Pass, ops: list[Operation], store: Any, actor: str) -> Pass:
    statuses = [op.status for op in ops]
    conflicts = statuses.count(OS.CONFLICT)
    failed = statuses.count(OS.FAILED)
    applied_ops = [op for op in ops if op.status == OS.APPLIED]
    if conflicts:  # operations found in conflict while applying (_fail_op) leave the figures
        store_figures(run)
    ev = evaluate(
        entries_before=run.entries_before,
        included=[to_engine_operation(op) for op in applied_ops],
        excluded_count=len(ops) - len(applied_ops),
        max_loss_fraction=run.max_loss_fraction,
    )
    applied = ev.to_dict() | {"conflicts": conflicts, "failed": failed}
    telemetry = run.telemetry_data.with_(applied=applied).to_json()
    to = S.PARTIALLY_APPLIED if conflicts or failed else S.APPLIED
    if not applied_ops and not failed:  # every operation in conflict: the store is untouched
        to = S.NO_CHANGES
    note = _plural(len(applied_ops), "operation") + " applied, " + _plural(conflicts, "conflict")
    note += f", {failed} failed." if to != S.NO_CHANGES else ": nothing was changed."
    run = transition(
        run,
        frm=(S.APPLYING,),
        to=to,
        actor=actor,
        verb=to,
        note=note,
        telemetry=telemetry,
        error="",
        reason="" if to == S.APPLIED else note,
        finished_at=timezone.now(),
        progress=1.0,
        progress_label=_FINISHED[to],
    )
    try:
        checkpoint_after_apply(run, ops, store)
    except Exception:  # the pass is applied; a missing sample or checkpoint is only a cost
        log.exception("could not refresh the checkpoint of agent %s", run.agent_id)
    return run


_FINISHED = {
    S.APPLIED: "Applied",
    S.PARTIALLY_APPLIED: "Partially applied",
    S.NO_CHANGES: "No changes",
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
