"""Dry runs on the console: "Dry run" on the agent page queues one for the worker (any role:
nothing is written), its page shows it pending, then its figures (htmx polling)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import DryRunLimit, ServiceError
from memoryadmin.core.views import HtmxHttpRequest
from memoryadmin.proposals.models import DryRun
from memoryadmin.proposals.services.dry_runs import dry_run_request


@require_POST
def agent_dry_run(request: HtmxHttpRequest, slug: str):
    """Queue a dry run of the agent with its own policy (or get its active one back), then
    show its page; a limit refuses it with a message on the agent page."""
    agent = get_object_or_404(Agent, slug=slug)
    try:
        dry, created = dry_run_request(agent=agent, user=request.user, actor="web")
    except (DryRunLimit, ServiceError, ValueError) as exc:
        messages.error(request, str(exc))
        return redirect(agent)
    if not created:
        messages.info(request, f"Dry run #{dry.pk} of {agent.name} is already {dry.status}.")
    return redirect(dry)


@require_GET
@vary_on_headers("HX-Request")
def dry_run_detail(request: HtmxHttpRequest, pk: int):
    """The dry run's page; for htmx, its status fragment (polled every second; 286 once it has
    finished, which stops the polling)."""
    dry = get_object_or_404(DryRun.objects.select_related("agent", "created_by"), pk=pk)
    ctx = {"nav": "agents", "dry": dry, "agent": dry.agent, "figures": dry.result or {}}
    if not request.htmx:
        return render(request, "proposals/dry_run_detail.html", ctx)
    response = render(request, "proposals/dry_run_detail.html#dry-run-status", ctx)
    if not dry.is_active:
        response.status_code = HttpResponseStopPolling.status_code
    return response
