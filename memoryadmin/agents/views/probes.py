"""Probe queries of an agent: paged list, add / edit / delete (admin), and the live recall check."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from memoryadmin.agents.forms.probes import ProbeForm
from memoryadmin.agents.models import Agent, ProbeQuery
from memoryadmin.agents.selectors.probes import probe_page, recall_evaluate
from memoryadmin.agents.services import probes as probe_services
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.core.views import HtmxHttpRequest, can_manage

PAGE = "agents/probe_list.html"


def _ctx(request: HtmxHttpRequest, agent: Agent, page: Any = None, **extra: Any) -> dict[str, Any]:
    page = page or request.GET.get("page") or request.POST.get("page") or 1
    return {
        "nav": "agents",
        "agent": agent,
        "page": probe_page(agent=agent, page=page),
        "form": ProbeForm(),
        **extra,
    }


@require_GET
@vary_on_headers("HX-Request")
def probe_list(request: HtmxHttpRequest, slug: str):
    """Probe queries, 25 per page (htmx ``?page=N``: the list only), with the add form for
    admins."""
    agent = get_object_or_404(Agent, slug=slug)
    return render(request, f"{PAGE}#probe-list" if request.htmx else PAGE, _ctx(request, agent))


@can_manage
@require_POST
@vary_on_headers("HX-Request")
def probe_create(request: HtmxHttpRequest, slug: str):
    """Add a probe (audited). Errors re-render the form at 200; htmx success returns a fresh form
    and the list's last page out of band."""
    agent = get_object_or_404(Agent, slug=slug)
    form = ProbeForm(request.POST)
    if form.is_valid():
        try:
            probe = probe_services.probe_create(
                agent=agent, user=request.user, **form.service_kwargs()
            )
        except probe_services.UnknownEvidence as exc:
            form.add_error("evidence_ids", str(exc))
        except (ServiceError, ValueError) as exc:
            form.add_error(None, str(exc))
        else:
            if not request.htmx:
                messages.success(request, f"Probe #{probe.number} added.")
                return redirect("probe_list", agent.slug)
            ctx = _ctx(request, agent, page="last", oob_list=True, added=probe)
            return render(request, f"{PAGE}#probe-form", ctx)
    ctx = {**_ctx(request, agent), "form": form}
    return render(request, f"{PAGE}#probe-form" if request.htmx else PAGE, ctx)


@can_manage
@require_http_methods(["GET", "POST"])
def probe_edit(request: HtmxHttpRequest, slug: str, pk: int):
    """Edit a probe's question, answer, evidence ids and category (audited with before/after)."""
    agent = get_object_or_404(Agent, slug=slug)
    probe = get_object_or_404(ProbeQuery, agent=agent, pk=pk)
    form = ProbeForm.for_probe(probe, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            probe_services.probe_update(
                agent=agent, probe=probe, user=request.user, **form.service_kwargs()
            )
        except probe_services.UnknownEvidence as exc:
            form.add_error("evidence_ids", str(exc))
        except (ServiceError, ValueError) as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Probe #{probe.number} saved.")
            return redirect("probe_list", agent.slug)
    return render(
        request,
        "agents/probe_edit.html",
        {"nav": "agents", "agent": agent, "probe": probe, "form": form},
    )


@can_manage
@require_POST
@vary_on_headers("HX-Request")
def probe_delete(request: HtmxHttpRequest, slug: str, pk: int):
    """Delete a probe (audited with its content). htmx: the refreshed list."""
    agent = get_object_or_404(Agent, slug=slug)
    probe = get_object_or_404(ProbeQuery, agent=agent, pk=pk)
    probe_services.probe_delete(agent=agent, probe=probe, user=request.user)
    if request.htmx:
        return render(request, f"{PAGE}#probe-list", _ctx(request, agent))
    messages.success(request, f"Probe #{pk} deleted.")
    return redirect("probe_list", agent.slug)


@require_GET
@vary_on_headers("HX-Request")
def probe_recall(request: HtmxHttpRequest, slug: str):
    """ "Check recall": answer recall@k, context size and evidence recall of the live store on the
    agent's probes (k from its policy). A store outage is shown as a message, never a 500."""
    agent = get_object_or_404(Agent, slug=slug)
    extra: dict[str, Any] = {"checked": True}
    try:
        extra["recall"] = recall_evaluate(agent=agent)
    except StoreUnavailable as exc:
        extra["recall_error"] = f"The store is unavailable, recall was not measured: {exc}"
    if request.htmx:
        return render(request, f"{PAGE}#recall-result", {"agent": agent, **extra})
    return render(request, PAGE, _ctx(request, agent, **extra))
