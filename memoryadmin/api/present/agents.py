"""Agents as the API and the MCP tools show them (model → schema, reads only)."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import Count

from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.agents import store_status
from memoryadmin.agents.selectors.schedules import next_runs
from memoryadmin.api import schemas as s
from memoryadmin.proposals.models import Pass

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
