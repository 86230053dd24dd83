"""Dashboard: one row per agent and the charts of one selected agent."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.core.selectors import request_zone
from memoryadmin.core.views import HtmxHttpRequest
from memoryadmin.ops.selectors.dashboard import agent_chart_data, dashboard_rows


@require_GET
@vary_on_headers("HX-Request", "HX-Target")
def dashboard(request: HtmxHttpRequest):
    """Agents with memory count, pending proposals, last pass, next run; charts of one agent.

    ``?agent=<slug>`` selects the charted agent (default: the first); the htmx fragment
    ``#agent-chart`` is returned when only the chart is requested.
    """
    agent = (
        Agent.objects.filter(slug=request.GET.get("agent") or "").first() or Agent.objects.first()
    )
    chart = agent_chart_data(agent) if agent else None
    ctx = {"nav": "dashboard", "chart_agent": agent, "chart": chart, "tz": request_zone(request)}
    if request.htmx and request.htmx.target == "agent-chart":
        return render(request, "ops/dashboard.html#agent-chart", ctx)
    ctx["store_down"] = stores.server_error() if Agent.objects.exists() else ""
    ctx["rows"] = dashboard_rows(tz=ctx["tz"], server_error=ctx["store_down"])
    return render(request, "ops/dashboard.html", ctx)
