"""Forget requests and dry runs as :class:`~..schemas.ForgetOut` (over the console's forget
selector)."""

from __future__ import annotations

from memoryadmin.api import schemas as s
from memoryadmin.memories.models import ForgetRequest
from memoryadmin.memories.selectors.forget import ForgetPlan, forget_request_items


def plan_out(*, agent_slug: str, plan: ForgetPlan) -> s.ForgetOut:
    """A dry run: what the selection would remove, nothing stored."""
    memories = [s.ForgetMemoryOut(id=m["id"], document=m["document"]) for m in plan.live]
    memories += [
        s.ForgetMemoryOut(id=a["memory_id"], document=a["document"], where="archived")
        for a in plan.archived
    ]
    return s.ForgetOut(
        dry_run=True,
        agent=agent_slug,
        status="dry_run",
        kind=plan.selection.kind,
        selection=plan.selection.hashed(),
        display=plan.selection.describe(),
        count=plan.count,
        live_count=len(plan.live),
        archived_count=len(plan.archived),
        related_count=len(plan.related),
        memories=memories,
        related=[s.ForgetMemoryOut(**m) for m in plan.related],
        not_undoable=ForgetRequest.NOT_UNDOABLE,
    )


def forget_out(req: ForgetRequest) -> s.ForgetOut:
    """A stored request: its list (read now) while proposed, its tombstone afterwards."""
    items = forget_request_items(request=req)
    memories = [s.ForgetMemoryOut(id=m["id"], document=m["document"]) for m in items["live"]]
    memories += [
        s.ForgetMemoryOut(id=a.memory_id, document=a.document, where="archived")
        for a in items["archived"]
    ]
    return s.ForgetOut(
        id=req.pk,
        agent=req.agent_slug,
        status=req.status,
        kind=req.kind,
        selection=req.selection,
        display=req.display,
        count=req.total,
        live_count=req.live_count,
        archived_count=req.archived_count,
        related_count=req.related_count,
        memories=memories,
        related=[s.ForgetMemoryOut(id=m["id"], document=m["document"]) for m in items["related"]],
        purged=req.purged or {},
        skipped=req.skipped,
        requested_by=req.requested_actor,
        decided_by=req.decided_actor,
        reason=req.reason,
        note=req.note,
        error=req.error,
        created_at=req.created_at,
        decided_at=req.decided_at,
        finished_at=req.finished_at,
        not_undoable=ForgetRequest.NOT_UNDOABLE,
    )
