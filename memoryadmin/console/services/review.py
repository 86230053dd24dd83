"""Review services: exclude or edit operations of a proposed pass, approve it, reject it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from consolidation import Policy

from .. import stores, triage
from ..errors import GuardRefused, ServiceError
from ..models import Operation, Pass
from ..review import Evaluation, pass_evaluate
from .journal import (
    TASK_APPLY,
    actor_name,
    audit,
    enqueue,
    transition,
    user_or_none,
    validate_document,
)

__all__ = [
    "MAX_BULK_OPERATIONS",
    "operation_edit_text",
    "operation_set_excluded",
    "operations_carry_over",
    "operations_set_excluded",
    "pass_approve",
    "pass_reject",
    "pass_score_operations",
]

S = Pass.Status
OS = Operation.Status


def _reviewable(run: Pass) -> Pass:
    run = Pass.objects.select_related("agent").get(pk=run.pk)
    if not run.is_reviewable:
        raise ServiceError(f"Pass #{run.pk} is {run.status}; only a proposed pass can be reviewed.")
    return run


def _save_evaluation(run: Pass, ev: Evaluation) -> None:
    Pass.objects.filter(pk=run.pk).update(
        entries_after=ev.entries_after, merged=ev.merged, promoted=ev.promoted, pruned=ev.pruned,
        reconciled=ev.reconciled, loss_fraction=ev.loss_fraction, guard_passed=ev.guard_passed,
        guard_reason=ev.guard_reason,
    )


def _identity(op: Operation) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What makes two operations identical across passes: kind + every source id with the
    content hash it had when planned (a source that changed makes it a different operation)."""
    return op.kind, tuple(sorted((s.memory_id, s.content_hash) for s in op.sources.all()))


@transaction.atomic
def operations_carry_over(*, source: Pass, target: Pass, actor: str) -> dict[str, int]:
    """Carry a reviewer's work from the pending proposal ``source`` to the new pass ``target``:
    each operation of ``target`` identical to one of ``source`` (same kind, same sources with the
    same content hashes) gets its exclusion and its edited text. Returns
    ``{"excluded": n, "edited": m}``; audited on ``target`` as ``carried_over`` when any.
    ``target``'s summary is re-evaluated over what it now includes.
    """
    reviewed = {
        _identity(op): op
        for op in source.operations.filter(Q(excluded=True) | Q(edited=True)).prefetch_related("sources")
    }
    counts = {"excluded": 0, "edited": 0}
    if not reviewed:
        return counts
    for op in target.operations.prefetch_related("sources"):
        old = reviewed.get(_identity(op))
        if old is None:
            continue
        if old.excluded:
            op.excluded, op.status = True, OS.EXCLUDED
            counts["excluded"] += 1
        if old.edited and op.kind == Operation.Kind.MERGE:
            op.result_document, op.edited = old.result_document, True
            counts["edited"] += 1
        op.save(update_fields=["excluded", "status", "result_document", "edited"])
    if counts["excluded"] or counts["edited"]:
        audit(actor=actor, verb="carried_over", run=target, agent=target.agent,
              note=f"From pass #{source.pk}: {counts['excluded']} exclusion(s) and "
                   f"{counts['edited']} edited text(s) carried over to identical operations.",
              data={"from_pass": source.pk, **counts})
        _save_evaluation(target, pass_evaluate(target))
    return counts


@transaction.atomic
def operation_set_excluded(*, operation: Operation, excluded: bool, user: Any) -> Evaluation:
    """Exclude (or include again) one operation of a proposed pass; returns the new evaluation.

    The pass's summary fields are updated to the new evaluation; the event is audited.
    Raises :class:`ServiceError` when the pass is no longer proposed.
    """
    run = _reviewable(operation.run)
    op = Operation.objects.select_for_update().get(pk=operation.pk)
    excluded = bool(excluded)
    if op.excluded != excluded:
        op.excluded = excluded
        op.status = OS.EXCLUDED if excluded else OS.PENDING
        op.save(update_fields=["excluded", "status"])
        audit(actor=actor_name(user, "cli"), verb="excluded" if excluded else "included", run=run,
               user=user, data={"operation": op.index, "kind": op.kind})
    ev = pass_evaluate(run)
    _save_evaluation(run, ev)
    operation.excluded, operation.status = op.excluded, op.status
    return ev


@transaction.atomic
def operation_edit_text(*, operation: Operation, document: str, user: Any) -> Evaluation:
    """Replace the merged text of a merge operation of a proposed pass (audited).

    Raises ``ValueError`` for a non-merge operation, an empty text, one longer than the
    policy's ``max_merged_chars`` or one an attached collection of another model's vectors
    cannot take (no embedder for it); :class:`ServiceError` when the pass is no longer proposed.
    """
    run = _reviewable(operation.run)
    op = Operation.objects.select_for_update().get(pk=operation.pk)
    if op.kind != Operation.Kind.MERGE:
        raise ValueError("Only the text of a merge can be edited.")
    limit = Policy.from_dict(run.policy or {}).max_merged_chars
    text = validate_document(document, limit=limit)
    if run.agent.attached and text != op.result_document:
        # Another model's vectors: a new text is writable only with the agent's own embedder.
        reason = stores.get_store(run.agent).unwritable([text]).get(text)
        if reason:
            raise ValueError(f"This text cannot be written to the collection: {reason}.")
    if text != op.result_document:
        before = op.result_document
        op.result_document = text
        op.edited = text != op.planned_document
        loss, risk = triage.rescore_operation(op)
        op.lost, op.lost_sentences = loss.to_dict(), len(loss.sentences)
        op.risk, op.risk_reasons = risk.score, list(risk.reasons)
        op.save(update_fields=["result_document", "edited", "lost", "lost_sentences", "risk",
                               "risk_reasons"])
        audit(actor=actor_name(user, "cli"), verb="edited", run=run, user=user,
               data={"operation": op.index, "before": before, "after": text})
    operation.result_document, operation.edited = op.result_document, op.edited
    return pass_evaluate(run)


MAX_BULK_OPERATIONS = 100_000
"""Upper bound on the operations one bulk review action may name (a pass is far smaller)."""


@transaction.atomic
def operations_set_excluded(
    *, run: Pass, operation_ids: Iterable[int], excluded: bool, user: Any, scope: str = ""
) -> tuple[Evaluation, list[int]]:
    """Exclude (or include again) many operations of a proposed pass in one action.

    ``operation_ids`` are ``Operation`` primary keys of ``run`` (others are ignored); ``scope``
    says in words how they were chosen (``"all prunes below confidence 0.9"``). Only operations
    whose state changes are written; the action is audited as ONE event listing their indexes
    (``bulk_excluded`` / ``bulk_included``; a single operation without a scope is audited like
    :func:`operation_set_excluded`), and the pass's summary is re-evaluated once. Returns
    ``(evaluation, changed indexes)``. Raises :class:`ServiceError` when the pass is no longer
    proposed, ``ValueError`` for more than :data:`MAX_BULK_OPERATIONS` ids.
    """
    ids = {int(i) for i in operation_ids}
    if len(ids) > MAX_BULK_OPERATIONS:
        raise ValueError(f"Choose at most {MAX_BULK_OPERATIONS:,} operations at once.")
    run = _reviewable(run)
    excluded = bool(excluded)
    rows = (
        Operation.objects.select_for_update()
        .filter(run=run, pk__in=ids, excluded=not excluded)
        .exclude(status=OS.CONFLICT)
        .order_by("index")
    )
    changed = list(rows.values_list("pk", "index", "kind"))
    indexes = [index for _, index, _ in changed]
    actor = actor_name(user, "cli")
    if len(changed) == 1 and not scope:  # one operation: the same event as a single toggle
        audit(actor=actor, verb="excluded" if excluded else "included", run=run, user=user,
              data={"operation": indexes[0], "kind": changed[0][2]})
    elif changed:
        shown = ", ".join(f"#{i}" for i in indexes[:50]) + (" …" if len(indexes) > 50 else "")
        note = f"{len(indexes):,} operations: {shown}"
        audit(actor=actor, verb="bulk_excluded" if excluded else "bulk_included", run=run,
              user=user, note=f"{scope} — {note}" if scope else note,
              data={"operations": indexes, "scope": scope})
    if changed:
        Operation.objects.filter(pk__in=[pk for pk, _, _ in changed]).update(
            excluded=excluded, status=OS.EXCLUDED if excluded else OS.PENDING
        )
    ev = pass_evaluate(run)
    _save_evaluation(run, ev)
    return ev, indexes


@transaction.atomic
def pass_score_operations(*, run: Pass) -> int:
    """Compute the risk and lost content of every operation of ``run`` from its stored rows
    (for a pass planned before scoring existed, or built row by row). Without the store, a
    sentence counts as kept elsewhere only when another operation of the pass keeps it.
    Returns the number of operations scored."""
    ops = list(run.operations.prefetch_related("sources").order_by("index"))
    for op, (loss, risk) in zip(ops, triage.stored_scores(run, ops), strict=True):
        op.risk, op.risk_reasons = risk.score, list(risk.reasons)
        op.lost, op.lost_sentences = loss.to_dict(), len(loss.sentences)
    Operation.objects.bulk_update(ops, ["risk", "risk_reasons", "lost", "lost_sentences"],
                                  batch_size=500)
    telemetry = dict(run.telemetry or {})
    telemetry["review"] = {"scored": True, "risk_line": triage.RISK_LINE, "from": "stored rows"}
    Pass.objects.filter(pk=run.pk).update(telemetry=telemetry)
    return len(ops)


def pass_approve(*, run: Pass, user: Any, note: str = "") -> Pass:
    """Approve a proposed pass and enqueue its apply after commit.

    Raises :class:`GuardRefused` (with the guard's reason, audited as ``approve_refused``) when
    the loss guard fails on the operations now included, :class:`ServiceError` when the pass is
    not proposed or another pass of the agent is active.
    """
    actor = actor_name(user, "cli")
    with transaction.atomic():
        run = _reviewable(run)
        ev = pass_evaluate(run)
        if not ev.guard_passed:
            audit(actor=actor, verb="approve_refused", run=run, user=user, note=ev.guard_reason)
            refused = ev.guard_reason
        else:
            refused = ""
    if refused:
        raise GuardRefused(refused)
    try:
        with transaction.atomic():
            run = transition(
                run, frm=(S.PROPOSED,), to=S.APPROVED, actor=actor, verb="approved", user=user,
                note=note or "", pass_note=note or "", decided_by=user_or_none(user),
                decided_actor=actor, decided_at=timezone.now(), progress=0.0,
                progress_label="Waiting to apply",
            )
            enqueue(TASK_APPLY, run.pk)
    except IntegrityError:
        raise ServiceError(
            f"Another pass of {run.agent.name} is in progress; approve this one when it is done."
        ) from None
    return run


def pass_reject(*, run: Pass, user: Any, note: str) -> Pass:
    """Dismiss a proposed pass; ``note`` (why) is required (``ValueError`` when blank)."""
    note = (note or "").strip()
    if not note:
        raise ValueError("Say why the proposal is rejected (a note is required).")
    actor = actor_name(user, "cli")
    run = _reviewable(run)
    return transition(
        run, frm=(S.PROPOSED,), to=S.REJECTED, actor=actor, verb="rejected", user=user, note=note,
        pass_note=note, decided_by=user_or_none(user), decided_actor=actor,
        decided_at=timezone.now(), finished_at=timezone.now(),
    )
