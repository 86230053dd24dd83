"""Reads of the dashboard: one row per agent (memory count, pending proposals, last and active
pass, next run, convergence) in five queries, and one agent's chart series."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Count, OuterRef, Q, Subquery

from consolidation.llm_cost import llm_cost_usd
from memoryadmin.agents.models import Agent, StoreSample
from memoryadmin.agents.selectors.agents import StoreStatus, store_status
from memoryadmin.agents.selectors.schedules import next_runs
from memoryadmin.core import stores
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.passes import PLANNED, convergence_words
from memoryadmin.proposals.telemetry import LLM_MODEL_LOOKUP, LLM_TOTALS_LOOKUP

__all__ = ["AgentRow", "LlmSpend", "agent_chart_data", "dashboard_rows", "llm_spend_by_agent"]


@dataclass
class AgentRow:
    """One dashboard row."""

    agent: Agent
    store: StoreStatus
    pending: int
    last_pass: Pass | None
    next_run: datetime | None
    active_pass: Pass | None = None
    convergence: str = ""
    conflicts: int = 0
    """Conflicts of its pending proposals that no reviewer decided yet."""
    llm: LlmSpend | None = None
    """What its passes spent on the LLM (``None`` when none sent anything to a model)."""


@dataclass
class LlmSpend:
    """Tokens and USD an agent's passes spent on the LLM. ``cost_usd`` covers the passes whose
    model has a price in ``LLM_PRICES``; ``unpriced`` counts the others (their cost unknown)."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    unpriced: int = 0


def llm_spend_by_agent() -> dict[int, LlmSpend]:
    """``{agent id: LlmSpend}`` over every stored pass with model work, in one query (the
    totals and model name only, not the per-group logs)."""
    spend: dict[int, LlmSpend] = {}
    rows = Pass.objects.filter(**{f"{LLM_TOTALS_LOOKUP}__isnull": False}).values_list(
        "agent_id", LLM_MODEL_LOOKUP, LLM_TOTALS_LOOKUP
    )
    for agent_id, model, totals in rows:
        totals = totals if isinstance(totals, dict) else {}
        s = spend.setdefault(agent_id, LlmSpend())
        s.tokens_in += int(totals.get("tokens_in", 0))
        s.tokens_out += int(totals.get("tokens_out", 0))
        try:
            usd = llm_cost_usd(totals, model or "", settings.LLM_PRICES)
        except ValueError:
            usd = None
        if usd is None:
            s.unpriced += 1
        else:
            s.cost_usd = round((s.cost_usd or 0.0) + usd, 6)
    return spend


def dashboard_rows(
    *, tz: ZoneInfo, now: datetime | None = None, server_error: str | None = None
) -> list[AgentRow]:
    """One :class:`AgentRow` per agent, ordered by name, from the database in five queries.

    The memory count is the agent's latest :class:`StoreSample` (recorded by every pass when it
    plans and applies, and by imports), so the page never reads the stores; only an agent with
    no sample yet is counted live (one ``count``; "unavailable" when its store is down). One
    heartbeat of the Chroma server (:func:`~memoryadmin.core.stores.server_error`) comes
    first (``server_error``: its result when the caller already has it): while it does not
    answer, every row is "unavailable" with its last known count.
    """
    latest = StoreSample.objects.filter(agent=OuterRef("pk")).order_by("-taken_at", "-id")
    last = Pass.objects.filter(agent=OuterRef("pk")).order_by("-created_at", "-id")
    undecided = (
        Operation.objects.filter(
            run__agent=OuterRef("pk"),
            run__status=Pass.Status.PROPOSED,
            kind=Operation.Kind.CONFLICT,
        )
        .exclude(scores__has_key="decision")
        .order_by()
        .values("run__agent")
        .annotate(n=Count("id"))
        .values("n")[:1]
    )
    agents = list(
        Agent.objects.annotate(
            pending=Count("passes", filter=Q(passes__status=Pass.Status.PROPOSED)),
            conflicts=Subquery(undecided),
            sampled=Subquery(latest.values("count")[:1]),
            last_pk=Subquery(last.values("pk")[:1]),
            planned_pk=Subquery(last.filter(status__in=PLANNED).values("pk")[:1]),
        ).order_by("name")
    )
    passes = Pass.objects.in_bulk([pk for a in agents for pk in (a.last_pk, a.planned_pk) if pk])
    active: dict[int, Pass] = {}
    for run in Pass.objects.filter(status__in=Pass.ACTIVE).order_by("-pk"):
        active[run.agent_id] = run
    down = (stores.server_error() if agents else "") if server_error is None else server_error
    spend = llm_spend_by_agent()
    rows = []
    for agent in agents:
        nxt = None
        if agent.schedule_enabled:
            try:
                nxt = next(iter(next_runs(cron=agent.schedule_cron, tz=tz, count=1, now=now)), None)
            except ValueError:
                nxt = None
        if down:  # one heartbeat for all: no count is current while the server is down
            store = StoreStatus(None, down, last_known=agent.sampled)
        elif agent.sampled is not None:
            store = StoreStatus(agent.sampled)
        else:
            store = store_status(agent)
        rows.append(
            AgentRow(
                agent,
                store,
                agent.pending,
                passes.get(agent.last_pk),
                nxt,
                active.get(agent.pk),
                _convergence(passes.get(agent.last_pk), passes.get(agent.planned_pk)),
                agent.conflicts or 0,
                spend.get(agent.pk),
            )
        )
    return rows


def _convergence(last: Pass | None, planned: Pass | None) -> str:
    """:func:`convergence_words` of the latest planned pass, unless the latest pass failed: then
    whether the store converged is not known (an older plan's "converged" would mislead); while
    the latest pass is a proposal, what waits for a person ("pass #3 waits for review:
    12 operations"), since "converged" would read as finished. No query (``Pass.figures``)."""
    if last is not None and last.status == Pass.Status.FAILED:
        return "not known: the last pass failed"
    if last is not None and last.status == Pass.Status.PROPOSED:
        n = int((last.figures or {}).get("included_ops", 0) or 0)
        what = f": {n} operation{'s' if n != 1 else ''}" if n else ""
        waiting = f"pass #{last.pk} waits for review{what}"
        after = convergence_words(planned) if planned is not None and planned.pk == last.pk else ""
        return f"{waiting}; then {after}" if after and after != "converged" else waiting
    return convergence_words(planned)


def agent_chart_data(agent: Agent, *, limit: int = 500) -> dict[str, list[dict[str, Any]]]:
    """Chart series for one agent: store size samples and loss fraction per planned pass.

    Returns ``{"samples": [{"t": iso, "count": int}], "passes": [{"id", "t", "loss",
    "threshold", "status"}]}``, oldest first, at most ``limit`` points each.
    """
    samples = list(StoreSample.objects.filter(agent=agent).order_by("-taken_at")[:limit])
    passes = list(
        agent.passes.exclude(
            status__in=[Pass.Status.QUEUED, Pass.Status.RUNNING, Pass.Status.FAILED]
        ).order_by("-created_at")[:limit]
    )
    return {
        "samples": [{"t": s.taken_at.isoformat(), "count": s.count} for s in reversed(samples)],
        "passes": [
            {
                "id": p.pk,
                "t": p.created_at.isoformat(),
                "loss": round(p.loss_fraction, 4),
                "threshold": p.max_loss_fraction,
                "status": p.status,
            }
            for p in reversed(passes)
        ],
    }
