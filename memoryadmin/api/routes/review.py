"""``/api/v1/passes/{id}/…``: the review of a proposal: approve, reject, exclude/include an
operation, decide a conflict."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import get_pass
from memoryadmin.api.actions.review import approve, reject, resolve_conflict, set_excluded

router = Router(tags=["passes"])


@router.post(
    "/passes/{pass_id}/approve",
    response=s.PassOut,
    summary="Approve a proposal (reviewers); the guard is re-checked",
)
def pass_approve(request: HttpRequest, pass_id: int, payload: s.ApproveIn | None = None):
    """Approve; 409 with the guard's reason when the included operations now exceed it, or when
    ``revision`` is given and the operations changed since it was read (nothing applied)."""
    payload = payload or s.ApproveIn()
    return approve(
        run=get_pass(pass_id),
        user=request.user,
        note=payload.note,
        revision=payload.revision,
    )


@router.post(
    "/passes/{pass_id}/reject",
    response=s.PassOut,
    summary="Reject a proposal with a note (reviewers); the store is untouched",
)
def pass_reject(request: HttpRequest, pass_id: int, payload: s.RejectIn):
    """Reject with a required note (status "rejected"), remembered as a rejected-plan
    decision; ``never_again`` also keeps its merges' memories apart and its prunes kept."""
    return reject(
        run=get_pass(pass_id),
        user=request.user,
        note=payload.note,
        never_again=payload.never_again,
    )


@router.post(
    "/passes/{pass_id}/operations/{index}/exclude",
    response=s.PassOut,
    summary="Exclude one operation of a proposal (reviewers)",
)
def operation_exclude(request: HttpRequest, pass_id: int, index: int):
    """Exclude operation ``index``; the pass's summary and guard verdict follow."""
    return set_excluded(run=get_pass(pass_id), index=index, excluded=True, user=request.user)


@router.post(
    "/passes/{pass_id}/operations/{index}/include",
    response=s.PassOut,
    summary="Include an excluded operation again (reviewers)",
)
def operation_include(request: HttpRequest, pass_id: int, index: int):
    """Include operation ``index`` again."""
    return set_excluded(run=get_pass(pass_id), index=index, excluded=False, user=request.user)


@router.post(
    "/passes/{pass_id}/operations/{index}/resolve",
    response=s.PassOut,
    summary="Decide a conflict of a proposal: keep a, b or both (reviewers)",
)
def conflict_resolve(request: HttpRequest, pass_id: int, index: int, payload: s.ResolveIn):
    """Keep ``a`` or ``b`` (the other is removed on apply, archived, undone by a rollback: a
    ``reviewer_pick`` reconcile) or ``both`` (nothing removed); the summary and guard follow."""
    return resolve_conflict(
        run=get_pass(pass_id), index=index, keep=payload.keep, user=request.user
    )
