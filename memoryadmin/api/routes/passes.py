"""``/api/v1/passes…``: list, detail (summary, guard, recall, operations paged) and create (run
now or dry run)."""

from __future__ import annotations

from django.core.paginator import EmptyPage
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import NotFound, get_agent, get_pass
from memoryadmin.api.actions.passes import consolidate
from memoryadmin.api.paging import paginate
from memoryadmin.api.present.passes import pass_detail_out, pass_out
from memoryadmin.core.validation import DB_INT_MAX
from memoryadmin.proposals.models import Pass

router = Router(tags=["passes"])

PASSES_PER_PAGE = 50


class PassFilters(Schema):
    agent: str = ""
    status: s.PassStatus | None = None
    page: int = Field(1, ge=1, le=DB_INT_MAX)


@router.get("/passes", response=s.PassPage, summary="Passes, newest first; filter by agent, status")
def pass_list(request: HttpRequest, filters: Query[PassFilters]):
    """Passes, newest first, 50 a page, with their summaries."""
    qs = Pass.objects.select_related("agent", "requested_by", "decided_by").order_by(
        "-created_at", "-id"
    )
    if filters.agent:
        qs = qs.filter(agent=get_agent(filters.agent))
    if filters.status:
        qs = qs.filter(status=filters.status)
    page, count, pages = paginate(qs, filters.page, PASSES_PER_PAGE)
    return s.PassPage(count=count, page=page.number, pages=pages, items=[pass_out(p) for p in page])


class OpFilters(Schema):
    kind: s.OperationKind | None = None
    page: int = Field(1, ge=1, le=DB_INT_MAX)


@router.get(
    "/passes/{pass_id}",
    response=s.PassDetailOut,
    summary="One pass: summary, guard, recall and its operations (20 a page)",
)
def pass_detail(request: HttpRequest, pass_id: int, filters: Query[OpFilters]):
    """A pass with one page of its operations; ``?kind=`` filters them."""
    run = get_pass(pass_id)
    try:
        return pass_detail_out(run, kind=filters.kind, page=filters.page)
    except EmptyPage:
        raise NotFound(
            f"Page {filters.page} of pass #{pass_id}'s operations does not exist.", field="page"
        ) from None


@router.post(
    "/passes",
    response={200: s.DryRunOut, 202: s.ConsolidateOut | s.DryRunOut},
    summary="Run a pass now (admins) or queue a dry run (anyone; nothing is stored)",
)
def pass_create(request: HttpRequest, payload: s.PassCreateIn):
    """202 with the new pass's id and status (planned by the worker); a dry run: 202 with the
    dry run queued for the worker (its ``poll_url``), or 200 once it finished within ``wait``;
    429 (``Retry-After``) when a dry-run limit refuses it; 409 naming the agent's proposal
    waiting for review unless ``replace`` is true."""
    agent = get_agent(payload.agent)
    out = consolidate(
        agent=agent,
        user=request.user,
        dry_run=payload.dry_run,
        policy=payload.policy,
        replace=payload.replace,
        wait=payload.wait,
    )
    if isinstance(out, s.DryRunOut) and out.status in ("done", "failed"):
        return Status(200, out)
    return Status(202, out)
