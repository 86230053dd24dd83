"""``/api/v1/agents…``: the agents with their counts, schedule and policy (reads)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from memoryadmin.agents.models import Agent
from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import get_agent
from memoryadmin.api.present.agents import agent_out

router = Router(tags=["agents"])


@router.get("/agents", response=list[s.AgentOut], summary="List agents with counts and schedule")
def agent_list(request: HttpRequest):
    """Every agent with its memory count (``None`` when Chroma cannot be read), pass counts and
    schedule."""
    return [agent_out(a) for a in Agent.objects.order_by("name")]


@router.get(
    "/agents/{slug}", response=s.AgentDetailOut, summary="One agent: counts, schedule, policy"
)
def agent_detail(request: HttpRequest, slug: str):
    """One agent: the list fields plus its policy, field map and probe-query count."""
    return agent_out(get_agent(slug), detail=True)
