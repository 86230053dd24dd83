"""``/api/v1/passes/{id}/rollback``: roll an applied pass back."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import get_pass
from memoryadmin.api.actions.rollback import roll_back

router = Router(tags=["passes"])


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
    return roll_back(run=get_pass(pass_id), user=request.user, note=note)
