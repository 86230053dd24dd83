"""``/api/v1/passes…``: list, detail (summary, guard, recall, operations paged), create (run now
or dry run), approve, reject, exclude/include an operation, decide a conflict, roll back."""

from __future__ import annotations

from django.core.paginator import EmptyPage
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from memoryadmin.console.models import Pass

from . import actions
from . import schemas as s
from .paging import paginate
from .present import pass_detail_out, pass_out

router = Router(tags=["passes"])

PASSES_PER_PAGE = 50


class PassFilters(Schema):
    agent: str = ""
    status: s.PassStatus | None = None
    page: int = Field(1, ge=1)


@router.get("/passes", response=s.PassPage, summary="Passes, newest first; filter by agent, status")
def pass_list(request: HttpRequest, filters: Query[PassFilters]):
    """Passes, newest first, 50 a page, with their summaries."""
    qs = Pass.objects.select_related("agent", "requested_by", "decided_by").order_by(
        "-created_at", "-id"
    )
    if filters.agent:
        qs = qs.filter(agent=actions.get_agent(filters.agent))
    if filters.status:
        qs = qs.filter(status=filters.status)
    page, count, pages = paginate(qs, filters.page, PASSES_PER_PAGE)
    return s.PassPage(count=count, page=page.number, pages=pages, items=[pass_out(p) for p in page])


class OpFilters(Schema):
    kind: s.OperationKind | None = None
    page: int = Field(1, ge=1)


@router.get(
    "/passes/{pass_id}",
    response=s.PassDetailOut,
    summary="One pass: summary, guard, recall and its operations (20 a page)",
)
def pass_detail(request: HttpRequest, pass_id: int, filters: Query[OpFilters]):
    """A pass with one page of its operations; ``?kind=`` filters them."""
    run = actions.get_pass(pass_id)
    try:
        return pass_detail_out(run, kind=filters.kind, page=filters.page)
    except EmptyPage:
        raise actions.NotFound(
            f"Page {filters.page} of pass #{pass_id}'s operations does not exist.", field="page"
        ) from None


@router.post(
    "/passes",
    response={200: s.ConsolidateOut, 202: s.ConsolidateOut},
    summary="Run a pass now (admins) or a dry run (anyone; nothing is stored)",
)
def pass_create(request: HttpRequest, payload: s.PassCreateIn):
    """200 with the dry run's figures, or 202 with the new pass's id and status (planned by the
    worker); 409 naming the agent's proposal waiting for review unless ``replace`` is true."""
    agent = actions.get_agent(payload.agent)
    out = actions.consolidate(
        agent=agent,
        user=request.user,
        dry_run=payload.dry_run,
        policy=payload.policy,
        replace=payload.replace,
    )
    return Status(200 if out.dry_run else 202, out)


@router.post(
    "/passes/{pass_id}/approve",
    response=s.PassOut,
    summary="Approve a proposal (reviewers); the guard is re-checked",
)
def pass_approve(request: HttpRequest, pass_id: int, payload: s.ApproveIn | None = None):
    """Approve; 409 with the guard's reason when the included operations now exceed it, or when
    ``revision`` is given and the operations changed since it was read (nothing applied)."""
    payload = payload or s.ApproveIn()
    return actions.approve(
        run=actions.get_pass(pass_id),
        user=request.user,
        note=payload.note,
        revision=payload.revision,
    )


@router.post(
    "/passes/{pass_id}/reject",
    response=s.PassOut,
    summary="Reject a proposal with a note (reviewers); the store is untouched",
)
def pass_reject(request: HttpRequest, pass_id: int, payload: s.RequiredNoteIn):
    """Reject with a required note (status "rejected")."""
    return actions.reject(run=actions.get_pass(pass_id), user=request.user, note=payload.note)


@router.post(
    "/passes/{pass_id}/operations/{index}/exclude",
    response=s.PassOut,
    summary="Exclude one operation of a proposal (reviewers)",
)
def operation_exclude(request: HttpRequest, pass_id: int, index: int):
    """Exclude operation ``index``; the pass's summary and guard verdict follow."""
    return actions.set_excluded(
        run=actions.get_pass(pass_id), index=index, excluded=True, user=request.user
    )


@router.post(
    "/passes/{pass_id}/operations/{index}/include",
    response=s.PassOut,
    summary="Include an excluded operation again (reviewers)",
)
def operation_include(request: HttpRequest, pass_id: int, index: int):
    """Include operation ``index`` again."""
    return actions.set_excluded(
        run=actions.get_pass(pass_id), index=index, excluded=False, user=request.user
    )


@router.post(
    "/passes/{pass_id}/operations/{index}/resolve",
    response=s.PassOut,
    summary="Decide a conflict of a proposal: keep a, b or both (reviewers)",
)
def conflict_resolve(request: HttpRequest, pass_id: int, index: int, payload: s.ResolveIn):
    """Keep ``a`` or ``b`` (the other is removed on apply, archived, undone by a rollback: a
    ``reviewer_pick`` reconcile) or ``both`` (nothing removed); the summary and guard follow."""
    return actions.resolve_conflict(
        run=actions.get_pass(pass_id), index=index, keep=payload.keep, user=request.user
    )


@router.post(
    "/passes/{pass_id}/rollback",
    response=s.PassOut,
    summary="Roll back an applied pass (reviewers)",
)
def pass_rollback(request: HttpRequest, pass_id: int, payload: s.NoteIn | None = None):
    """Start undoing an applied pass (the body with its note is optional); 409 naming the
    records changed since, when blocked, or when the pass is not applied (or already rolled
    back)."""
    note = payload.note if payload is not None else ""
    return actions.roll_back(run=actions.get_pass(pass_id), user=request.user, note=note)
