"""Standing decisions for the API and the MCP tools: list an agent's, revoke one (reviewers),
through the console's decision selectors and services."""

from __future__ import annotations

from typing import Any

from memoryadmin.agents.models import Agent
from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import BadInput, NotFound, service_error
from memoryadmin.api.present.decisions import decision_out
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.validation import MAX_NOTE_CHARS
from memoryadmin.proposals.models import Decision
from memoryadmin.proposals.selectors.decisions import DECISIONS_PER_PAGE, decision_page
from memoryadmin.proposals.services.decisions import decision_revoke

STATES = ("active", "revoked", "all")


def list_decisions(*, agent: Agent, state: str = "active", page: int = 1) -> list[s.DecisionOut]:
    """The agent's decisions, newest first, ``state`` active | revoked | all, 50 a page
    (``DECISIONS_PER_PAGE``); 422 for another state, 404 past the last page."""
    if state not in STATES:
        raise BadInput("state is one of active, revoked, all.", field="state")
    pager = decision_page(agent=agent, state=state, page=page)
    if page > 1 and pager.number != page:
        raise NotFound(f"{agent.name} has no page {page} of {state} decisions.", field="page")
    return [decision_out(d, agent_slug=agent.slug) for d in pager.object_list]


def revoke(*, agent: Agent, decision_id: int, user: Any, note: str = "") -> s.DecisionOut:
    """Revoke decision ``decision_id`` of ``agent`` (reviewers, audited): later passes no
    longer plan with it; 404 when the agent has no such decision."""
    if len(note or "") > MAX_NOTE_CHARS:
        raise BadInput(f"The note is longer than {MAX_NOTE_CHARS:,} characters.", field="note")
    d = Decision.objects.filter(agent=agent, pk=decision_id).first()
    if d is None:
        raise NotFound(f"{agent.name} has no decision #{decision_id}.", field="decision_id")
    try:
        d = decision_revoke(decision=d, user=user, note=note)
    except (ServiceError, ValueError) as exc:
        raise service_error(exc) from None
    return decision_out(d, agent_slug=agent.slug)


__all__ = ["DECISIONS_PER_PAGE", "list_decisions", "revoke"]
