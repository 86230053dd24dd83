"""Storing a planned pass: its operations, its snapshot and its figures in one transaction,
the pending proposal it supersedes, and the guards' verdict (``proposed`` or
``rejected_by_guard``); an auto-applying agent's proposal goes on to
:func:`~.auto_apply.pass_auto_apply`.

:func:`proposal_store` is called by :mod:`.passes` once a pass is planned (:class:`PassPlan`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from consolidation import MemoryRecord, OpKind, Plan, Policy
from consolidation.decisions import StandingDecisions, operation_signature
from memoryadmin.agents.models import StoreSample
from memoryadmin.core.models import embedding_to_bytes
from memoryadmin.core.services import jsonable, transition
from memoryadmin.proposals.models import Operation, OperationSource, Pass, PassSnapshot
from memoryadmin.proposals.selectors.evaluation import Evaluation
from memoryadmin.proposals.selectors.passes import plan_inputs_digest
from memoryadmin.proposals.selectors.review import RISK_LINE
from memoryadmin.proposals.selectors.scoring import plan_review
from memoryadmin.proposals.services.auto_apply import (
    ROW_BATCH,
    auto_apply_content_hold,
    auto_apply_drift_hold,
    mark_rejected_before,
    pass_auto_apply,
)
from memoryadmin.proposals.services.carry_over import operations_carry_over
from memoryadmin.proposals.services.decisions import decisions_count_held_back
from memoryadmin.proposals.services.evaluation import store_figures
from memoryadmin.proposals.telemetry import PassTelemetry

__all__ = ["RECALL_SPLIT", "PassPlan", "proposal_store", "recall_split"]

S = Pass.Status


def _snapshot_hash(hashes: Mapping[str, str]) -> str:
    """SHA-256 over ``{memory id: content hash}`` of a snapshot, in id order."""
    h = hashlib.sha256()
    for rid, ch in sorted(hashes.items()):
        h.update(f"{rid}\x00{ch}\x01".encode())
    return h.hexdigest()


@dataclass
class PassPlan:
    """What a pass plans and measures before anything is stored (:func:`pass_plan`).

    ``records``: the snapshot (every memory with its ``(384,) float32`` embedding); ``plan``:
    the engine's plan; ``evaluation``: summary and loss guard over every operation; ``recall``:
    the recall check (``Pass.recall`` shape); ``guard_passed`` / ``guard_reason``: every guard
    together (:func:`memoryadmin.proposals.selectors.evaluation.plan_verdict`), as the pass records
    it.
    """

    records: list[MemoryRecord]
    plan: Plan
    evaluation: Evaluation
    recall: dict[str, Any]
    guard_passed: bool
    guard_reason: str
    decisions: StandingDecisions | None = None


def _store_operations(
    run: Pass, operations: list[Any], scored: list[Any], by_id: dict[str, MemoryRecord]
) -> None:
    """One ``Operation`` row per planned operation (in plan order, with its risk and lost
    content from :func:`plan_scores`) and one ``OperationSource`` per source memory: the
    original's document, metadata, content hash and embedding, kept for review, the stale
    check (I-4) and the archive (I-1). Written with ``bulk_create`` in batches of
    :data:`ROW_BATCH` (the database returns the new ids, which the sources point to)."""
    rows = Operation.objects.bulk_create(
        (
            Operation(
                run=run,
                index=index,
                kind=op.kind.value,
                rule=op.rule or "",
                reason=op.reason or "",
                scores=jsonable(op.scores or {}),
                source_ids=list(op.source_ids),
                removes=list(op.removes),
                result_id=op.result_id or "",
                result_document=op.result_document or "",
                planned_document=op.result_document or "",
                result_metadata=jsonable(op.result_metadata)
                if op.result_metadata is not None
                else None,
                risk=risk.score,
                risk_reasons=list(risk.reasons),
                lost=loss.to_dict(),
                lost_sentences=len(loss.sentences),
                signature=operation_signature(op),
            )
            for index, (op, (loss, risk)) in enumerate(zip(operations, scored, strict=True))
        ),
        batch_size=ROW_BATCH,
    )
    sources = (
        OperationSource(
            operation=row,
            position=position,
            memory_id=sid,
            document=by_id[sid].document,
            metadata=jsonable(by_id[sid].metadata),
            content_hash=by_id[sid].content_hash,
            embedding=embedding_to_bytes(by_id[sid].embedding),
            removed=sid in op.removes,
        )
        for row, op in zip(rows, operations, strict=True)
        for position, sid in enumerate(op.source_ids)
    )
    OperationSource.objects.bulk_create(sources, batch_size=ROW_BATCH)


def _supersede_pending(run: Pass, actor: str) -> list[Pass]:
    """Mark the agent's other ``proposed`` passes ``stale`` (superseded by ``run``); returns
    them newest first (the newest's review work is carried over to ``run``)."""
    older = list(
        Pass.objects.filter(agent=run.agent, status=S.PROPOSED)
        .exclude(pk=run.pk)
        .order_by("-created_at", "-id")
    )
    for old in older:
        why = f"Superseded by the newer pass #{run.pk}."
        transition(
            old,
            frm=(S.PROPOSED,),
            to=S.STALE,
            actor=actor,
            verb="stale",
            note=why,
            reason=why,
            finished_at=timezone.now(),
        )
    return older


RECALL_SPLIT = (
    "The whole plan fails the recall guard, so auto-apply safe leaves the operations behind the "
    "lost answers for review and applies the rest only if it passes the recall guard on its own:"
)
"""What a ``safe`` agent's pass says when only the recall guard failed on its whole plan."""


def recall_split(run: Pass, planned: PassPlan) -> bool:
    """Whether ``planned`` failed only the recall guard, for an agent that auto-applies
    ``safe`` and with something other than conflicts to apply: such a pass is stored as a
    proposal (not ``rejected_by_guard``) so that auto-apply can hold the operations that cost a
    probe its answer and apply the rest, as it holds any other operation it is unsure of; the
    applied part must then pass the recall guard by itself. The loss guard and an engine
    rejection still reject the whole pass, and with auto-apply ``off`` or ``all`` a recall
    failure still does (a person approving, or ``all``, applies the plan as a whole)."""
    recall = planned.recall or {}
    return (
        run.agent.auto_apply == "safe"
        and not planned.guard_passed
        and planned.evaluation.guard_passed
        and not getattr(planned.plan.result, "rejected", False)
        and recall.get("passed", True) is False
        and any(op.kind != OpKind.CONFLICT for op in planned.plan.operations)
    )


def _telemetry(
    run: Pass, planned: PassPlan, policy: Policy, now: datetime, hashes: Mapping[str, str]
) -> PassTelemetry:
    """The pass's telemetry: the plan's context (JSON-safe), what the request fixed
    (``policy_override``, ``layer``), ``now`` (ISO 8601) and the digest of
    what the plan was made from (``inputs_digest``: the schedule skips a pass that would repeat
    it, ``passes.pass_request_scheduled``)."""
    requested = run.telemetry_data  # what the request fixed, kept with the plan
    telemetry = PassTelemetry.from_json(jsonable(dict(planned.plan.context or {})))
    telemetry = telemetry.with_(
        policy_override=requested.policy_override or telemetry.policy_override,
        layer=requested.layer or telemetry.layer,
        now=now.isoformat(),
    )
    digest = plan_inputs_digest(
        run.agent,
        hashes=hashes,
        policy=jsonable(policy.to_dict()),
        now=now,
        layer=telemetry.layer,
    )
    return telemetry.with_(inputs_digest=digest)


def proposal_store(run: Pass, planned: PassPlan, policy: Policy, actor: str, now: datetime) -> Pass:
    """Store the planned pass ``run`` (``running``): its operations with their stored risk and
    loss, its snapshot, its figures and the store size sample, in one transaction; supersede
    the agent's pending proposal (carrying the reviewer's work over); then ``proposed``, or
    ``rejected_by_guard`` with the first failing guard's reason (the recall guard alone does not
    reject a ``safe`` agent's pass: :func:`recall_split`), or ``no_changes`` for an empty plan;
    an auto-applying agent's proposal goes on to :func:`~.auto_apply.pass_auto_apply`. Returns
    the refreshed pass. Raises what the database raises (nothing is then stored)."""
    records, plan, ev, recall = planned.records, planned.plan, planned.evaluation, planned.recall
    guard_passed, guard_reason = planned.guard_passed, planned.guard_reason
    split_note = ""
    if recall_split(run, planned):
        # auto-apply safe: the operations behind the lost answers wait for a person and the
        # rest is held to the recall guard on its own (auto_apply.pass_auto_apply)
        guard_passed = True
        split_note = f"{RECALL_SPLIT} {(recall or {}).get('reason', '')}"
    by_id = {r.id: r for r in records}
    hashes = {r.id: r.content_hash for r in records}  # computed once: ~15 µs per memory
    trimmed = (plan.context or {}).get("trimmed") or {}
    # Sources of operations the loss budget deferred leave the snapshot (and so the checkpoint
    # after apply): the next incremental pass sees them as new and plans them again.
    deferred_ids = set(trimmed.pop("deferred_ids", None) or ())
    telemetry = _telemetry(run, planned, policy, now, hashes)
    scored, store_sentences = plan_review(
        agent=run.agent,
        records=records,
        operations=plan.operations,
        policy=policy,
        fieldmap=run.agent.get_field_map(),
        now=now,
    )
    telemetry = telemetry.with_(
        review={"scored": True, "risk_line": RISK_LINE, "store_sentences": store_sentences}
    )
    held = (plan.context or {}).get("held_back_by_decision") or {}
    held_keys = (plan.context or {}).get("held_back_keys") or {}
    with transaction.atomic():
        decisions_count_held_back(agent=run.agent, counts=held, keys=held_keys)
        StoreSample.objects.create(agent=run.agent, count=len(records))  # dashboard: size over time
        PassSnapshot.objects.create(
            run=run, hashes={rid: ch for rid, ch in hashes.items() if rid not in deferred_ids}
        )
        _store_operations(run, plan.operations, scored, by_id)
        store_figures(run, ev)  # the operations stored are plan.operations, all counted
        older = _supersede_pending(run, actor)
        to = S.PROPOSED if guard_passed else S.REJECTED_BY_GUARD
        # A conflict is never settled nor auto-applied: a pass with only conflicts waits for a
        # reviewer; with other operations, auto-apply applies those only.
        actionable = [op for op in plan.operations if op.kind != OpKind.CONFLICT]
        label = (
            "Rejected by the loss guard"
            if not guard_passed
            else "Conflicts to review"
            if plan.operations and not actionable
            else "Proposal ready"
        )
        fields: dict[str, Any] = {
            "entries_before": ev.entries_before,
            "telemetry": telemetry.to_json(),
            "recall": jsonable(recall or {}),
            "snapshot_hash": _snapshot_hash(hashes),
            "planned_at": timezone.now(),
            "progress": 1.0,
            "progress_label": label,
        }
        if not guard_passed:
            fields.update(reason=guard_reason, finished_at=timezone.now())
        run = transition(
            run,
            frm=(S.RUNNING,),
            to=to,
            actor=actor,
            verb="proposed" if guard_passed else "rejected_by_guard",
            note=split_note if guard_passed else guard_reason,
            data={"operations": len(plan.operations), "loss_fraction": ev.loss_fraction},
            **fields,
        )
        if older and guard_passed:  # the reviewer's work on the latest pending proposal is kept
            operations_carry_over(source=older[0], target=run, actor=actor)
            run.refresh_from_db()
        if guard_passed and not plan.operations:
            # Nothing to review and nothing to write: settle it instead of leaving an empty
            # "pending" proposal for an operator to approve.
            run = transition(
                run,
                frm=(S.PROPOSED,),
                to=S.NO_CHANGES,
                actor="policy",
                verb="nothing_to_apply",
                note="Nothing to consolidate: the plan has no operations; nothing was written.",
                decided_by=None,
                decided_actor="policy",
                decided_at=timezone.now(),
                finished_at=timezone.now(),
                progress_label="No changes: nothing to consolidate",
            )
        elif guard_passed and actionable and run.agent.auto_apply != "off":
            # "all" applies the whole pass: it needs the content guard too ("safe" splits by
            # it) and the recall kept since a person last approved ("safe" holds each answer);
            # when one fails, every operation waits, marked like any other waiting operation
            hold = None
            if run.agent.auto_apply == "all":
                if (why := auto_apply_content_hold(run)) is not None:
                    hold = ("content", why)
                elif (why := auto_apply_drift_hold(run, policy.min_recall_retention)) is not None:
                    hold = ("drift", why)
            run = pass_auto_apply(run, planned, scored, policy, actor, hold=hold)
        elif guard_passed and actionable:  # auto-apply off: a person decides all of it
            mark_rejected_before(run, planned, scored, policy)
    return run
