"""``/api/v1/agents/{slug}/decisions…``: an agent's standing decisions; revoke one."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import get_agent
from memoryadmin.api.actions.decisions import list_decisions, revoke
from memoryadmin.core.validation import DB_INT_MAX

router = Router(tags=["decisions"])


@router.get(
    "/agents/{slug}/decisions",
    response=list[s.DecisionOut],
    summary="An agent's standing decisions (active by default), newest first",
)
def decision_list(
    request: HttpRequest,
    slug: str,
    state: str = "active",
    page: int = Query(1, ge=1, le=DB_INT_MAX),
):
    """``state`` active | revoked | all; 50 a page (``page`` from 1: 0 or less is 422, like
    every list). Each decision says who set it, when, why,
    from which pass, the memory ids and content hashes it covers, and how many later
    operations it held back."""
    return list_decisions(agent=get_agent(slug), state=state, page=page)


@router.delete(
    "/agents/{slug}/decisions/{decision_id}",
    response=s.DecisionOut,
    summary="Revoke a standing decision (reviewers); later passes judge its memories again",
)
def decision_revoke(
    request: HttpRequest,
    slug: str,
    decision_id: int,
    note: str = "",
):
    """Revoke (audited), ``?note=`` why (optional); the decision is kept, marked revoked.
    Revoking twice is a no-op."""
    return revoke(agent=get_agent(slug), decision_id=decision_id, user=request.user, note=note)
