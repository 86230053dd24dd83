"""Review services: exclude or edit operations of a proposed pass, approve it, reject it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import ngettext

from consolidation import Policy
from consolidation.planning.state import short
from memoryadmin.core import stores
from memoryadmin.core.errors import BadField, GuardRefused, ProposalChanged, ServiceError
from memoryadmin.core.roles import REVIEW, require
from memoryadmin.core.services import (
    TASK_APPLY,
    actor_name,
    audit,
    enqueue,
    transition,
    user_or_none,
)
from memoryadmin.core.validation import validate_document
from memoryadmin.memories.models import ForgetRequest
from memoryadmin.proposals.models import Operation, OperationSource, Pass
from memoryadmin.proposals.selectors.evaluation import Evaluation, applies_words, pass_evaluate
from memoryadmin.proposals.selectors.passes import stale_reason
from memoryadmin.proposals.selectors.review import RISK_LINE, pass_revision
from memoryadmin.proposals.selectors.scoring import rescore_operation, stored_scores
from memoryadmin.proposals.services.decisions import (
    decision_for_conflict,
    decisions_for_exclusion,
    decisions_for_inclusion,
    decisions_for_rejection,
)
from memoryadmin.proposals.services.evaluation import content_override_record, store_figures
from memoryadmin.proposals.telemetry import telemetry_save

__all__ = [
    "CONFLICT_CHOICES",
    "MAX_BULK_OPERATIONS",
    "REVIEWER_PICK",
    "conflict_origin",
    "conflict_resolve",
    "decide_conflict",
    "is_conflict",
    "operation_edit_text",
    "operation_set_excluded",
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


@transaction.atomic
def operation_set_excluded(*, operation: Operation, excluded: bool, user: Any) -> Evaluation:
    """Exclude (or include again) one operation of a proposed pass; returns the new evaluation.

    The pass's summary fields are updated to the new evaluation; the event is audited.
    Excluding a merge or a reconcile records a keep-apart decision of its memories (including
    it again revokes it): see :mod:`.decisions`.
    Raises :class:`ServiceError` when the pass is no longer proposed, :class:`NotAllowed` for a
    user who is not a reviewer.
    """
    require(
        user,
        REVIEW,
        f"{'exclude' if excluded else 'include'} operations of pass #{operation.run_id}",
    )
    run = _reviewable(operation.run)
    op = Operation.objects.select_for_update().get(pk=operation.pk)
    excluded = bool(excluded)
    if op.excluded != excluded:
        op.status = OS.EXCLUDED if excluded else OS.PENDING
        op.save(update_fields=["status"])
        audit(
            actor=actor_name(user, "cli"),
            verb="excluded" if excluded else "included",
            run=run,
            user=user,
            data={"operation": op.index, "kind": op.kind},
        )
        if excluded:
            decisions_for_exclusion(run=run, operations=[op], user=user)
        else:
            decisions_for_inclusion(operations=[op], user=user)
    ev = pass_evaluate(run)
    store_figures(run, ev)
    operation.status = op.status
    return ev


@transaction.atomic
def operation_edit_text(*, operation: Operation, document: str, user: Any) -> Evaluation:
    """Replace the merged text of a merge operation of a proposed pass (audited).

    Raises ``ValueError`` for a non-merge operation, an empty text, one longer than the
    policy's ``max_merged_chars`` or one an attached collection of another model's vectors
    cannot take (no embedder for it); :class:`ServiceError` when the pass is no longer proposed.
    """
    require(user, REVIEW, f"edit operations of pass #{operation.run_id}")
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
        loss, risk = rescore_operation(op)
        op.lost, op.lost_sentences = loss.to_dict(), len(loss.sentences)
        op.risk, op.risk_reasons = risk.score, list(risk.reasons)
        op.save(
            update_fields=[
                "result_document",
                "edited",
                "lost",
                "lost_sentences",
                "risk",
                "risk_reasons",
            ]
        )
        audit(
            actor=actor_name(user, "cli"),
            verb="edited",
            run=run,
            user=user,
            data={"operation": op.index, "before": before, "after": text},
        )
    operation.result_document, operation.edited = op.result_document, op.edited
    ev = pass_evaluate(run)
    store_figures(run, ev)
    return ev


CONFLICT_CHOICES = ("a", "b", "both")
"""A reviewer's answer to a conflict: keep memory A (``source_ids[0]`` as planned), keep B, or
keep both."""

REVIEWER_PICK = "reviewer_pick"
"""``rule`` of a reconcile a reviewer decided (a conflict where the reviewer picked a side)."""


def conflict_origin(op: Operation) -> dict[str, Any]:
    """The conflict as the engine planned it: ``{"ids": [a, b], "rule": cue}`` (kept in
    ``scores["conflict"]`` once a reviewer decided, so the decision can be changed)."""
    origin = (op.scores or {}).get("conflict")
    if isinstance(origin, dict) and len(origin.get("ids") or []) == 2:
        return origin
    return {"ids": list(op.source_ids[:2]), "rule": op.rule or "contradiction"}


def is_conflict(op: Operation) -> bool:
    """True for a conflict item, decided or not (a reviewer's pick is a ``reviewer_pick``
    reconcile that remembers the conflict it came from)."""
    return op.kind == Operation.Kind.CONFLICT or (
        op.kind == Operation.Kind.RECONCILE and op.rule == REVIEWER_PICK
    )


def decide_conflict(
    op: Operation, keep: str, *, by: str, at: str
) -> tuple[str, list[str], list[str]]:
    """Turn conflict ``op`` into the decision ``keep`` (``"a"``, ``"b"``, ``"both"``) made by
    ``by`` at ``at`` (ISO): kind, rule, sources' order and ``removed`` flags, reason, scores,
    re-scored risk and loss; saved. Returns ``(note, kept ids, removed ids)``."""
    origin = conflict_origin(op)
    a_id, b_id = origin["ids"]
    sources = {s.memory_id: s for s in op.sources.all()}
    scores = dict(op.scores or {})
    scores["conflict"] = origin
    scores["decision"] = {"keep": keep, "by": by, "at": at}
    if keep == "both":
        kept, gone = [a_id, b_id], list[str]()
        op.kind, op.rule, op.removes = Operation.Kind.CONFLICT, origin["rule"], []
        op.source_ids = [a_id, b_id]
        detail = f"Kept both: decided by {by}."
        note = (
            f"Conflict #{op.index}: {by} kept both “{short(sources[a_id].document)}” "
            f"and “{short(sources[b_id].document)}”; nothing is removed."
        )
    else:
        kept, gone = ([a_id], [b_id]) if keep == "a" else ([b_id], [a_id])
        op.kind, op.rule = Operation.Kind.RECONCILE, REVIEWER_PICK
        op.source_ids, op.removes = kept + gone, gone
        detail = f"Reviewer's pick: {by} kept {keep.upper()}."
        note = (
            f"Conflict #{op.index} ({origin['rule']}): {by} kept "
            f"{keep.upper()} “{short(sources[kept[0]].document)}”; "
            f"“{short(sources[gone[0]].document)}” is removed on apply (archived)."
        )
    op.reason = note
    op.scores, op.status_detail = scores, detail
    op.status = OS.PENDING
    for position, mid in enumerate(op.source_ids):
        OperationSource.objects.filter(pk=sources[mid].pk).update(
            position=position, removed=mid in gone
        )
    op.save()
    loss, risk = rescore_operation(op)
    op.lost, op.lost_sentences = loss.to_dict(), len(loss.sentences)
    op.risk, op.risk_reasons = risk.score, list(risk.reasons)
    if keep == "both":  # decided: below the risk line, the engine's doubt answered
        op.risk, op.risk_reasons = 0.0, [f"conflict decided by {by}: both kept"]
    op.save(update_fields=["lost", "lost_sentences", "risk", "risk_reasons"])
    return note, kept, gone


@transaction.atomic
def conflict_resolve(*, operation: Operation, keep: str | None, user: Any) -> Evaluation:
    """Decide a conflict of a proposed pass; returns the pass's new evaluation.

    ``keep`` is ``"a"`` (the conflict's first memory), ``"b"`` (its second) or ``"both"``
    (``None`` means ``"both"``). Keeping one side turns the operation into a ``reconcile`` with
    rule :data:`REVIEWER_PICK`: the kept memory is ``source_ids[0]``, the other is removed on
    apply (archived first, restored by a rollback, exactly as an engine reconcile) and now
    counts in the loss fraction. Keeping both leaves a ``conflict`` that removes nothing,
    marked decided. Either way the reviewer's name and the time are in
    ``scores["decision"] = {"keep", "by", "at"}`` and ``status_detail``, the planned conflict in
    ``scores["conflict"]`` (so the decision can be changed while the pass is proposed), the risk
    and lost content are re-scored, the pass's summary and loss guard are re-evaluated, and one
    ``conflict_resolved`` event is audited with a note naming what was kept. The pass's other
    operations touching the removed memory (a promote or merge of it, another conflict) are
    excluded, named in that note and in ``data["excluded"]``, so the apply never fails on them.
    The pick is remembered as a standing decision (keep A / B: a conflict pick; both: a keep
    of both, kept apart), replacing one made earlier on this conflict.

    Raises ``ValueError`` for another ``keep`` or an operation that is not a conflict;
    :class:`ServiceError` when the pass is not proposed, or (keeping one side) when a source
    changed or left the store since planning (:class:`StoreUnavailable` when the store cannot
    be read to check).
    """
    require(user, REVIEW, f"decide conflicts of pass #{operation.run_id}")
    keep = "both" if keep is None else str(keep).strip().lower()
    if keep not in CONFLICT_CHOICES:
        raise ValueError("Choose which memory to keep: a, b or both.")
    run = _reviewable(operation.run)
    op = Operation.objects.select_for_update().get(pk=operation.pk)
    if not is_conflict(op):
        raise ValueError(f"Operation #{op.index} is a {op.kind}, not a conflict.")
    origin = conflict_origin(op)
    a_id, b_id = origin["ids"]
    sources = {s.memory_id: s for s in op.sources.all()}
    if keep != "both":
        live = stores.get_live(stores.get_store(run.agent), [a_id, b_id], include_embeddings=False)
        why = stale_reason(op, list(sources.values()), live, {})
        if why:
            raise ServiceError(
                f"{why} Plan a new pass to decide this conflict on current memories."
            )
    actor = actor_name(user, "cli")
    note, kept, gone = decide_conflict(op, keep, by=actor, at=timezone.now().isoformat())
    decision = decision_for_conflict(run=run, operation=op, keep=keep, user=user)
    note += f" Remembered as decision #{decision.pk}."
    dropped = _exclude_touching(run, op, gone)
    if dropped:
        note += (
            f" Excluded {len(dropped)} other "
            f"{ngettext('operation', 'operations', len(dropped))} of this pass touching the "
            "removed "
            f"memory: {', '.join(f'#{i} ({k})' for i, k in dropped)}."
        )
    audit(
        actor=actor,
        verb="conflict_resolved",
        run=run,
        user=user,
        note=note,
        data={
            "operation": op.index,
            "keep": keep,
            "kept": kept,
            "removed": gone,
            "rule": conflict_origin(op)["rule"],
            **({"excluded": [i for i, _ in dropped]} if dropped else {}),
        },
    )
    ev = pass_evaluate(run)
    store_figures(run, ev)
    operation.refresh_from_db()
    return ev


def _exclude_touching(run: Pass, op: Operation, gone: list[str]) -> list[tuple[int, str]]:
    """Exclude every other included operation of ``run`` with a source in ``gone`` (memories the
    decision ``op`` removes on apply: a promote or merge of them would fail, the memory being
    gone). Returns their ``(index, kind)``, in plan order; the caller audits them."""
    if not gone:
        return []
    rows = list(
        Operation.objects.select_for_update()
        .filter(run=run)
        .exclude(status=OS.EXCLUDED)
        .filter(
            pk__in=OperationSource.objects.filter(operation__run=run, memory_id__in=gone).values(
                "operation_id"
            )
        )
        .exclude(pk=op.pk)
        .order_by("index")
        .values_list("pk", "index", "kind")
    )
    Operation.objects.filter(pk__in=[pk for pk, _, _ in rows]).update(status=OS.EXCLUDED)
    return [(index, kind) for _, index, kind in rows]


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
    :func:`operation_set_excluded`; decisions as it records them), and the pass's summary is
    re-evaluated once. Returns
    ``(evaluation, changed indexes)``. Raises :class:`ServiceError` when the pass is no longer
    proposed, ``ValueError`` for more than :data:`MAX_BULK_OPERATIONS` ids.
    """
    require(user, REVIEW, f"{'exclude' if excluded else 'include'} operations of pass #{run.pk}")
    ids = {int(i) for i in operation_ids}
    if len(ids) > MAX_BULK_OPERATIONS:
        raise ValueError(f"Choose at most {MAX_BULK_OPERATIONS:,} operations at once.")
    run = _reviewable(run)
    excluded = bool(excluded)
    rows = (
        Operation.objects.select_for_update()
        .filter(run=run, pk__in=ids)
        .filter(~Q(status__in=[OS.EXCLUDED, OS.CONFLICT]) if excluded else Q(status=OS.EXCLUDED))
        .order_by("index")
    )
    changed = list(rows.values_list("pk", "index", "kind"))
    indexes = [index for _, index, _ in changed]
    actor = actor_name(user, "cli")
    if len(changed) == 1 and not scope:  # one operation: the same event as a single toggle
        audit(
            actor=actor,
            verb="excluded" if excluded else "included",
            run=run,
            user=user,
            data={"operation": indexes[0], "kind": changed[0][2]},
        )
    elif changed:
        shown = ", ".join(f"#{i}" for i in indexes[:50]) + (" …" if len(indexes) > 50 else "")
        note = f"{len(indexes):,} operations: {shown}"
        audit(
            actor=actor,
            verb="bulk_excluded" if excluded else "bulk_included",
            run=run,
            user=user,
            note=f"{scope} — {note}" if scope else note,
            data={"operations": indexes, "scope": scope},
        )
    if changed:
        Operation.objects.filter(pk__in=[pk for pk, _, _ in changed]).update(
            status=OS.EXCLUDED if excluded else OS.PENDING
        )
        touched = Operation.objects.filter(pk__in=[pk for pk, _, _ in changed]).prefetch_related(
            "sources"
        )
        if excluded:
            decisions_for_exclusion(run=run, operations=touched, user=user)
        else:
            decisions_for_inclusion(operations=touched, user=user)
    ev = pass_evaluate(run)
    store_figures(run, ev)
    return ev, indexes


@transaction.atomic
def pass_score_operations(*, run: Pass) -> int:
    """Compute the risk and lost content of every operation of ``run`` from its stored rows
    (for a pass planned before scoring existed, or built row by row). Without the store, a
    sentence counts as kept elsewhere only when another operation of the pass keeps it.
    Returns the number of operations scored."""
    ops = list(run.operations.prefetch_related("sources").order_by("index"))
    for op, (loss, risk) in zip(ops, stored_scores(run, ops), strict=True):
        op.risk, op.risk_reasons = risk.score, list(risk.reasons)
        op.lost, op.lost_sentences = loss.to_dict(), len(loss.sentences)
    Operation.objects.bulk_update(
        ops, ["risk", "risk_reasons", "lost", "lost_sentences"], batch_size=500
    )
    review = {"scored": True, "risk_line": RISK_LINE, "from": "stored rows"}
    telemetry_save(run, run.telemetry_data.with_(review=review))
    return len(ops)


def pass_approve(*, run: Pass, user: Any, note: str = "", revision: str | None = None) -> Pass:
    """Approve a proposed pass and enqueue its apply after commit.

    ``revision``: the :func:`pass_revision` the reviewer saw (``None``: not checked, for clients
    that do not send one). Raises :class:`ProposalChanged` (audited as ``approve_refused``,
    nothing applied) when the operations changed since, :class:`GuardRefused` (with the guard's
    reason, audited likewise) when the loss guard fails on the operations now included,
    :class:`ServiceError` when the pass is not proposed, another pass of the agent is active or
    a forget request of the agent is being applied.
    A person may approve past a failing content guard
    (:func:`~memoryadmin.proposals.selectors.guards.content_guard`): that is recorded, as an
    ``approved_past_content_guard`` audit event and in ``telemetry_data.content_override``
    (``{"by", "at", "reason"}``, shown on the pass).
    """
    require(user, REVIEW, f"approve pass #{run.pk}")
    actor = actor_name(user, "cli")
    with transaction.atomic():
        run = _reviewable(run)
        current = pass_revision(run=run) if revision is not None else ""
        ev = pass_evaluate(run)
        if revision is not None and revision.strip() != current:
            changed = (
                f"Pass #{run.pk} changed since you opened it (operations were excluded, "
                "included, edited or decided by someone else): nothing was applied. Approving "
                f"now applies {applies_words(ev)}; check the figures and approve again."
            )
            audit(actor=actor, verb="approve_refused", run=run, user=user, note=changed)
        else:
            changed = ""
        if not changed and not ev.guard_passed:
            audit(actor=actor, verb="approve_refused", run=run, user=user, note=ev.guard_reason)
            refused = ev.guard_reason
        else:
            refused = ""
    if changed:
        raise ProposalChanged(changed)
    if refused:
        raise GuardRefused(refused)
    try:
        with transaction.atomic():
            # The worker is purging memories this pass may read or write (docs: Forget requests).
            forgetting = ForgetRequest.objects.filter(
                agent_id=run.agent_id, status=ForgetRequest.Status.APPLYING
            ).first()
            if forgetting is not None:
                raise ServiceError(
                    f"Forget request #{forgetting.pk} is being applied; approve this pass when "
                    "it is done (nothing was applied)."
                )
            content_override_record(run, actor, user)
            run = transition(
                run,
                frm=(S.PROPOSED,),
                to=S.APPROVED,
                actor=actor,
                verb="approved",
                user=user,
                note=note or "",
                pass_note=note or "",
                decided_by=user_or_none(user),
                decided_actor=actor,
                decided_at=timezone.now(),
                progress=0.0,
                progress_label="Waiting to apply",
            )
            enqueue(TASK_APPLY, run.pk)
    except IntegrityError:
        raise ServiceError(
            f"Another pass of {run.agent.name} is in progress; approve this one when it is done."
        ) from None
    return run


def pass_reject(*, run: Pass, user: Any, note: str, never_again: bool = False) -> Pass:
    """Dismiss a proposed pass; ``note`` (why) is required (``ValueError`` when blank).

    Recorded as a rejected-plan decision (the signatures of its included operations: a later
    pass planning any of them never applies it on its own); with ``never_again`` also a
    keep-apart decision per merge and reconcile and a keep per prune, so they are not proposed
    again (:func:`.decisions.decisions_for_rejection`).
    """
    require(user, REVIEW, f"reject pass #{run.pk}")
    note = (note or "").strip()
    if not note:
        raise BadField("Say why the proposal is rejected (a note is required).", field="note")
    actor = actor_name(user, "cli")
    run = _reviewable(run)
    with transaction.atomic():
        run = _reject(run, actor=actor, user=user, note=note)
        decisions_for_rejection(run=run, user=user, note=note, never_again=never_again)
    return run


def _reject(run: Pass, *, actor: str, user: Any, note: str) -> Pass:
    return transition(
        run,
        frm=(S.PROPOSED,),
        to=S.REJECTED,
        actor=actor,
        verb="rejected",
        user=user,
        note=note,
        pass_note=note,
        decided_by=user_or_none(user),
        decided_actor=actor,
        decided_at=timezone.now(),
        finished_at=timezone.now(),
    )
