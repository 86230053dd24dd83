"""``/api/v1/agents/{slug}/forget`` and ``/api/v1/forget/{id}…``: forget requests (reviewers)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import get_agent
from memoryadmin.api.actions.forget import approve, forget, get_forget, reject, show

router = Router(tags=["forget"])


@router.post(
    "/agents/{slug}/forget",
    response=s.ForgetOut,
    summary="Request a forget (or a dry run): every memory it would remove, for a reviewer",
)
def forget_create(request: HttpRequest, slug: str, payload: s.ForgetIn):
    """Select by scope, ids, text contains or similarity; ``dry_run`` lists without storing.
    Otherwise stored as ``proposed``: never applied until a reviewer approves it. 422 for an
    invalid selection, 409 when it matches nothing."""
    return forget(agent=get_agent(slug), payload=payload, user=request.user)


@router.get("/forget/{forget_id}", response=s.ForgetOut, summary="A forget request")
def forget_detail(request: HttpRequest, forget_id: int):
    """While proposed: every memory it removes; afterwards its tombstone (hashed selection)."""
    return show(req=get_forget(forget_id))


@router.post(
    "/forget/{forget_id}/approve",
    response=s.ForgetOut,
    summary="Approve a forget request: the worker purges it (reviewers); cannot be rolled back",
)
def forget_approve(request: HttpRequest, forget_id: int, payload: s.NoteIn | None = None):
    """The worker removes the memories, their archived copies and every text of them for good
    (``applying`` until done: ``GET /forget/{id}`` shows the outcome and ``skipped``, ids that
    changed since planning); 409 while a pass of the agent is queued, running, approved,
    applying or rolling back."""
    note = payload.note if payload is not None else ""
    return approve(req=get_forget(forget_id), user=request.user, note=note)


@router.post("/forget/{forget_id}/reject", response=s.ForgetOut, summary="Reject a forget request")
def forget_reject(request: HttpRequest, forget_id: int, payload: s.NoteIn | None = None):
    """Nothing is removed; the typed selection and the ids are dropped."""
    note = payload.note if payload is not None else ""
    return reject(req=get_forget(forget_id), user=request.user, note=note)
