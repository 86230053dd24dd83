"""Risk and lost content of a pass's operations: what the Review tab, the guards and the figures
read.

Scores come from :mod:`consolidation.review` (documented there): each stored operation carries
``risk`` (0..1), ``risk_reasons``, ``lost`` (an ``OperationLoss`` dict) and ``lost_sentences``,
computed once when the proposal is stored (:func:`plan_scores`, against the whole snapshot) and
again for one operation after its merged text is edited (from the stored rows only); the
pass-wide loss totals read only the operations that lose something.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime, timedelta
from typing import Any

from django.utils.timesince import timesince

from consolidation import FieldMap, MemoryRecord, Policy
from consolidation.review import (
    ContentLoss,
    LossTotals,
    OperationLoss,
    OperationText,
    Risk,
    SourceText,
    content_loss,
    operation_loss,
    operation_risk,
    operation_text,
    review_operations,
)
from consolidation.review.content import plan_content_loss
from memoryadmin.agents.models import Agent
from memoryadmin.proposals.models import Operation, OperationSource, Pass
from memoryadmin.proposals.selectors.evaluation import figures_current

__all__ = [
    "RECENT_DAYS",
    "pass_content",
    "pass_loss_figures",
    "pass_loss_totals",
    "plan_review",
    "plan_scores",
    "recent_writes",
    "rescore_operation",
    "run_settings",
    "stored_operation_text",
    "stored_scores",
]


RECENT_DAYS = 7
"""A memory written by a pass applied within this many days counts as "touched by a recent
pass" (risk factor): a second rewrite within a week deserves a look."""


def recent_writes(agent: Agent, *, now: datetime) -> dict[str, str]:
    """``{memory id: "pass #12, 2 days ago"}`` for memories written (merged, distilled, promoted)
    by passes of ``agent`` applied in the last :data:`RECENT_DAYS` days."""
    rows = (
        Operation.objects.filter(
            run__agent=agent,
            status=Operation.Status.APPLIED,
            run__finished_at__gte=now - timedelta(days=RECENT_DAYS),
        )
        .exclude(result_id="")
        .values_list("result_id", "run_id", "run__finished_at")
    )
    return {rid: f"pass #{pk}, {timesince(at or now, now, depth=1)} ago" for rid, pk, at in rows}


def plan_scores(
    *,
    agent: Agent,
    records: Sequence[MemoryRecord],
    operations: Sequence[Any],
    policy: Policy,
    fieldmap: FieldMap,
    now: datetime,
) -> list[tuple[OperationLoss, Risk]]:
    """Loss and risk of every engine operation of a plan, against the whole snapshot ``records``
    (one sentence index, O(store + operations)); ``operations`` are ``consolidation.Operation``."""
    return plan_review(
        agent=agent,
        records=records,
        operations=operations,
        policy=policy,
        fieldmap=fieldmap,
        now=now,
    )[0]


def plan_review(
    *,
    agent: Agent,
    records: Sequence[MemoryRecord],
    operations: Sequence[Any],
    policy: Policy,
    fieldmap: FieldMap,
    now: datetime,
) -> tuple[list[tuple[OperationLoss, Risk]], int]:
    """:func:`plan_scores` and the number of sentences of the store before the pass
    (:attr:`consolidation.review.ContentLoss.store_sentences`, the base of the content guard's
    ``max_lost_sentence_fraction``), from the same one sentence index."""
    docs = {r.id: r.document for r in records}
    metas = {r.id: r.metadata for r in records}
    texts = [operation_text(op, docs, metas) for op in operations]
    loss = plan_content_loss(texts, ((r.id, r.document) for r in records))
    recent = recent_writes(agent, now=now)
    scored = [
        (lost, operation_risk(op, lost, policy=policy, fieldmap=fieldmap, recent=recent))
        for op, lost in zip(texts, loss.operations, strict=True)
    ]
    return scored, loss.store_sentences


def stored_operation_text(op: Operation) -> OperationText:
    """The :class:`OperationText` of a stored operation (its sources, ideally prefetched)."""
    sources = sorted(op.sources.all(), key=lambda s: s.position)
    return OperationText(
        kind=op.kind,
        sources=tuple(
            SourceText(s.memory_id, s.document, s.removed, s.metadata or {}) for s in sources
        ),
        result_document=op.result_document or None,
        rule=op.rule or "",
        scores=dict(op.scores or {}),
    )


def run_settings(run: Pass) -> tuple[Policy, FieldMap]:
    """The pass's policy and the agent's field map (defaults where either is invalid)."""
    try:
        policy = Policy.from_dict(run.policy or {})
    except ValueError:
        policy = Policy()
    try:
        fieldmap = run.agent.get_field_map()
    except ValueError:
        fieldmap = FieldMap()
    return policy, fieldmap


def stored_scores(run: Pass, ops: Sequence[Operation]) -> list[tuple[OperationLoss, Risk]]:
    """Loss and risk of stored operations (sources prefetched) without the store: the store is
    what the rows hold (every source, and the results)."""
    policy, fieldmap = run_settings(run)
    texts = [stored_operation_text(op) for op in ops]
    store = {s.memory_id: s.document for t in texts for s in t.sources}
    return review_operations(
        texts,
        store.items(),
        policy=policy,
        fieldmap=fieldmap,
        recent=recent_writes(run.agent, now=run.planned_at or run.created_at),
    )


def rescore_operation(op: Operation) -> tuple[OperationLoss, Risk]:
    """Loss and risk of a stored operation after its text changed, without the store: sentences
    kept elsewhere are the ones recorded when the proposal was stored."""
    run = op.run
    text = stored_operation_text(op)
    stored = OperationLoss.from_dict(op.lost)
    loss = operation_loss(text, elsewhere=set(stored.elsewhere))
    policy, fieldmap = run_settings(run)
    risk = operation_risk(
        text,
        loss,
        policy=policy,
        fieldmap=fieldmap,
        recent=recent_writes(run.agent, now=run.planned_at or run.created_at),
    )
    return loss, risk


def pass_content(run: Pass) -> tuple[list[Operation], list[OperationText], ContentLoss]:
    """The one measure of what ``run`` loses as it now stands, per operation and in total:
    :func:`consolidation.review.content_loss` of the operations it includes (not excluded, not
    skipped in conflict or failed), in plan order, against the memories its operations read
    (their stored sources: an excluded operation's stay) with what the rest of the store keeps
    recorded at planning (``outside``). Returns those operations, their
    :class:`OperationText` and the loss, whose ``operations`` follow them; a word several
    operations lose is counted under the first (``shared``). Two queries (operations, then
    their sources as plain rows), whatever the pass's size."""
    unread = ("source_ids", "removes", "result_metadata", "planned_document", "reason")
    ops = list(run.operations.defer(*unread, "status_detail", "risk_reasons").order_by("index"))
    rows: dict[int, list[tuple[Any, ...]]] = {}
    for row in (
        OperationSource.objects.filter(operation__run=run)
        .order_by("operation_id", "position")
        .values_list("operation_id", "memory_id", "document", "removed", "metadata")
    ):
        rows.setdefault(row[0], []).append(row)
    store = {mid: doc for srcs in rows.values() for _, mid, doc, _, _ in srcs}
    active = [op for op in ops if op.status not in _NOT_COUNTED]
    texts = [
        OperationText(
            kind=op.kind,
            sources=tuple(
                SourceText(mid, doc, removed, meta or {})
                for _, mid, doc, removed, meta in rows.get(op.pk, ())
            ),
            result_document=op.result_document or None,
            rule=op.rule or "",
            scores=dict(op.scores or {}),
        )
        for op in active
    ]
    loss = content_loss(
        texts,
        store.items(),
        outside=[OperationLoss.from_dict(op.lost) for op in active],
        numbers=[op.index for op in active],
    )
    return active, texts, loss


_NOT_COUNTED = (Operation.Status.CONFLICT, Operation.Status.EXCLUDED, Operation.Status.FAILED)


def pass_loss_totals(run: Pass) -> LossTotals:
    """What the operations now included would lose (sentences, memories, distinct content
    words, numbers): the totals of :func:`pass_content`, so the sum of the operations'
    figures."""
    return pass_content(run)[2].totals


def pass_loss_figures(run: Pass) -> LossTotals:
    """:func:`pass_loss_totals` of ``run`` as the services kept it with the pass's figures
    (``run.figures["loss"]``, :func:`memoryadmin.proposals.services.evaluation.store_figures`), when
    they still describe its operations (one aggregate query); else computed now."""
    data = run.figures.get("loss") if isinstance(run.figures, dict) else None
    if isinstance(data, dict) and figures_current(run):
        try:
            return LossTotals(**{f.name: int(data[f.name]) for f in fields(LossTotals)})
        except (KeyError, TypeError, ValueError):
            pass
    return pass_loss_totals(run)
