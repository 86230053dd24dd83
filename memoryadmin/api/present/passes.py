"""Passes and operations as the API and the MCP tools show them (model → schema, reads only)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.paginator import Paginator

from consolidation.review import OperationLoss
from consolidation.snapshot import llm_brief
from memoryadmin.api import schemas as s
from memoryadmin.core.errors import ServiceError
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.guards import content_guard
from memoryadmin.proposals.selectors.passes import (
    operation_view,
    pass_as_approved,
    pass_stale_check,
    pass_summary,
    promoted_counts,
)
from memoryadmin.proposals.selectors.review import pass_revision


def _recall(rc: dict[str, Any] | None) -> s.RecallOut:
    rc = rc or {}
    return s.RecallOut(**{k: rc.get(k) for k in s.RecallOut.model_fields})


def pass_out(run: Pass) -> s.PassOut:
    """A pass with its summary: the figures the pass page shows (:func:`pass_summary`: over the
    operations it counts now, so a partly applied pass says what it applied), the figures as
    planned under ``planned_*``; a pass without operations: its stored figures."""
    return s.PassOut(**_pass_fields(run))


def _pass_fields(run: Pass) -> dict[str, Any]:
    n_ops = run.operations.count()
    n_excluded = run.operations.filter(status=Operation.Status.EXCLUDED).count()
    # The pass page's figures (pass_summary: the operations it counts now, so a partly applied
    # pass shows what it applied); the planned ones stay under planned_*.
    summary = pass_summary(run) if n_ops else run
    ev: Any = summary
    approved = pass_as_approved(run, summary) if n_ops else run
    promoted, curated = promoted_counts(summary)
    return {
        "id": run.pk,
        "agent": run.agent.slug,
        "status": run.status,
        "trigger": run.trigger,
        "requested_by": run.requester,
        "decided_by": (run.decided_by.get_username() if run.decided_by else run.decided_actor)
        or None,
        "note": run.note,
        "reason": run.reason,
        "error": run.error,
        "entries_before": ev.entries_before,
        "entries_after": ev.entries_after,
        "merged": ev.merged,
        "promoted": promoted if n_ops else ev.promoted,
        "merged_to_curated": curated,
        "pruned": ev.pruned,
        "reconciled": ev.reconciled,
        "loss_fraction": ev.loss_fraction,
        "max_loss_fraction": ev.max_loss_fraction,
        "guard_passed": ev.guard_passed,
        "guard_reason": ev.guard_reason,
        "planned_entries_after": approved.entries_after,
        "planned_loss_fraction": approved.loss_fraction,
        "planned_guard_reason": approved.guard_reason,
        "counts": dict(summary.labels()) if n_ops and hasattr(summary, "labels") else {},
        "content_guard": _content(run) if n_ops else None,
        "recall": _recall(run.recall),
        "operations": n_ops,
        "excluded_operations": n_excluded,
        "uncounted_operations": int(getattr(ev, "excluded_ops", n_excluded)),
        "progress": run.progress,
        "progress_label": run.progress_label,
        "created_at": run.created_at,
        "planned_at": run.planned_at,
        "finished_at": run.finished_at,
        "url": run.get_absolute_url(),
        "llm": llm_brief({"llm": run.telemetry_data.llm}, settings.LLM_PRICES),
        "revision": pass_revision(run=run) if run.status == Pass.Status.PROPOSED else None,
    }


def _content(run: Pass) -> s.ContentGuardOut:
    g = content_guard(run)
    return s.ContentGuardOut(
        passed=g.passed,
        reason=g.reason,
        lost_content_words=g.totals.content_words,
        lost_sentences=g.totals.sentences,
        store_sentences=g.store_sentences,
        overridden=g.overridden,
    )


def operation_out(op: Operation, stale: dict[int, str] | None = None) -> s.OperationOut:
    """One operation with its frozen sources; ``stale`` maps ``Operation.pk`` → why it is stale."""
    view = operation_view(op)
    loss = OperationLoss.from_dict(op.lost)
    return s.OperationOut(
        index=op.index,
        kind=op.kind,
        rule=op.rule,
        reason=op.reason,
        scores=op.scores or {},
        status=op.status,
        excluded=op.excluded,
        edited=op.edited,
        result_id=op.result_id,
        result_document=op.result_document,
        sources=[
            s.SourceOut(
                memory_id=src.memory_id,
                document=src.document,
                metadata=src.metadata or {},
                removed=src.removed,
            )
            for src in view["sources"]
        ],
        stale=(stale or {}).get(op.pk, ""),
        written_by=op.written_by,
        lost_sentences=len(loss.sentences),
        lost_content_words=loss.counted_words,
        shared_content_words=dict(loss.shared),
    )


OPS_PER_PAGE = 20
"""Operations per page of a pass's detail (the pass page shows 20 per kind)."""


def pass_detail_out(run: Pass, *, kind: str | None = None, page: int = 1) -> s.PassDetailOut:
    """A pass with one page of its operations (``kind`` filters), each flagged when the store has
    overtaken it (proposed passes; ``stale_error`` says why that could not be checked).
    Raises ``EmptyPage`` for a page past the last one."""
    qs = run.operations.prefetch_related("sources").order_by("index")
    if kind:
        qs = qs.filter(kind=kind)
    paginator = Paginator(qs, OPS_PER_PAGE)
    current = paginator.page(page) if paginator.count else paginator.get_page(1)
    stale: dict[int, str] = {}
    stale_error = ""
    if run.status == Pass.Status.PROPOSED:
        try:
            ids = [op.pk for op in current]  # only this page's operations are flagged
            stale = {x.pk: x.reason for x in pass_stale_check(run=run, operation_ids=ids)}
        except ServiceError as exc:
            stale_error = str(exc)
    return s.PassDetailOut(
        **_pass_fields(run),
        policy=run.policy or {},
        stale_error=stale_error,
        operations_page=current.number,
        operations_pages=paginator.num_pages,
        operations_count=paginator.count,
        items=[operation_out(op, stale) for op in current],
    )
