"""Model → schema: how agents, memories, passes, operations and events look in the API and MCP.

Reads only, through the console's public selectors (``store_status``, ``next_runs``,
``operation_view``, ``pass_figures``); nothing here writes.
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from django.core.paginator import Paginator
from django.db.models import Count

from memoryadmin.console.errors import ServiceError
from memoryadmin.console.models import Agent, AuditEvent, Operation, Pass
from memoryadmin.console.selectors.agents import store_status
from memoryadmin.console.selectors.evaluation import pass_figures
from memoryadmin.console.selectors.memories import MemoryView
from memoryadmin.console.selectors.passes import operation_view, pass_stale_check
from memoryadmin.console.selectors.review import pass_revision
from memoryadmin.console.selectors.schedules import next_runs

from . import schemas as s

UTC = ZoneInfo("UTC")


def agent_out(agent: Agent, *, detail: bool = False) -> s.AgentOut:
    """Agent with its store count (``None`` + reason when Chroma cannot be read) and pass counts."""
    store = store_status(agent)
    counts = dict(agent.passes.values_list("status").annotate(n=Count("id")).order_by())
    next_run = None
    if agent.schedule_enabled:
        try:
            next_run = next(iter(next_runs(cron=agent.schedule_cron, tz=UTC, count=1)), None)
        except ValueError:
            next_run = None
    active = agent.passes.filter(status__in=Pass.ACTIVE).values_list("id", flat=True).first()
    last = agent.passes.order_by("-created_at", "-id").values_list("id", flat=True).first()
    fields: dict[str, Any] = {
        "slug": agent.slug,
        "name": agent.name,
        "description": agent.description,
        "collection": agent.collection_name,
        "attached": agent.attached,
        "auto_apply": agent.auto_apply,
        "schedule": s.ScheduleOut(
            cron=agent.schedule_cron, enabled=agent.schedule_enabled, next_run=next_run
        ),
        "memories": store.count,
        "store_error": store.error,
        "pending_proposals": counts.get(Pass.Status.PROPOSED, 0),
        "passes": counts,
        "active_pass_id": active,
        "last_pass_id": last,
    }
    if not detail:
        return s.AgentOut(**fields)
    return s.AgentDetailOut(
        **fields,
        policy=agent.get_policy().to_dict(),
        field_map=agent.get_field_map().to_dict(),
        probes=agent.probes.count(),
    )


def memory_out(m: MemoryView) -> s.MemoryOut:
    """A browser :class:`MemoryView` as the API's memory."""
    return s.MemoryOut(
        id=m.id,
        document=m.document,
        metadata=m.metadata,
        tier=m.tier,
        pinned=m.pinned,
        score=m.score,
    )


def _recall(rc: dict[str, Any] | None) -> s.RecallOut:
    rc = rc or {}
    return s.RecallOut(**{k: rc.get(k) for k in s.RecallOut.model_fields})


def pass_out(run: Pass) -> s.PassOut:
    """A pass with its summary: the live evaluation of the included operations while proposed or
    approved (what the pass page shows), the stored figures otherwise."""
    return s.PassOut(**_pass_fields(run))


def _pass_fields(run: Pass) -> dict[str, Any]:
    n_ops = run.operations.count()
    n_excluded = run.operations.filter(excluded=True).count()
    ev: Any = run
    if run.status in (Pass.Status.PROPOSED, Pass.Status.APPROVED) and n_ops:
        ev = pass_figures(run)
    return {
        "id": run.pk,
        "agent": run.agent.slug,
        "status": run.status,
        "trigger": run.trigger,
        "requested_by": run.requested_by.get_username() if run.requested_by else None,
        "decided_by": (run.decided_by.get_username() if run.decided_by else run.decided_actor)
        or None,
        "note": run.note,
        "reason": run.reason,
        "error": run.error,
        "entries_before": ev.entries_before,
        "entries_after": ev.entries_after,
        "merged": ev.merged,
        "promoted": ev.promoted,
        "pruned": ev.pruned,
        "reconciled": ev.reconciled,
        "loss_fraction": ev.loss_fraction,
        "max_loss_fraction": ev.max_loss_fraction,
        "guard_passed": ev.guard_passed,
        "guard_reason": ev.guard_reason,
        "recall": _recall(run.recall),
        "operations": n_ops,
        "excluded_operations": n_excluded,
        "progress": run.progress,
        "progress_label": run.progress_label,
        "created_at": run.created_at,
        "planned_at": run.planned_at,
        "finished_at": run.finished_at,
        "url": run.get_absolute_url(),
        "revision": pass_revision(run=run) if run.status == Pass.Status.PROPOSED else None,
    }


def operation_out(op: Operation, stale: dict[int, str] | None = None) -> s.OperationOut:
    """One operation with its frozen sources; ``stale`` maps ``Operation.pk`` → why it is stale."""
    view = operation_view(op)
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


def event_out(e: AuditEvent) -> s.EventOut:
    """One audit event."""
    return s.EventOut(
        id=e.pk,
        created_at=e.created_at,
        actor=e.actor,
        verb=e.verb,
        agent=e.agent.slug if e.agent else None,
        pass_id=e.run_id,
        from_status=e.from_status,
        to_status=e.to_status,
        note=e.note,
        data=e.data or {},
    )
