"""Decisions views: the agent's standing decisions (the Decisions page) and revoking one.
Writes go through :mod:`memoryadmin.proposals.services.decisions`."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.views import HtmxHttpRequest, can_review
from memoryadmin.proposals.forms.decisions import DecisionFilterForm, DecisionRevokeForm
from memoryadmin.proposals.models import Decision
from memoryadmin.proposals.selectors.decisions import decision_label, decision_page
from memoryadmin.proposals.services import decisions as decision_services


@require_GET
def decision_list(request: HtmxHttpRequest, slug: str):
    """The agent's decisions, newest first (``?state=active|revoked|all``, 50 a page): who,
    when, why, from which pass, the memories and hashes, how many operations each held back,
    and a Revoke button for reviewers."""
    agent = get_object_or_404(Agent, slug=slug)
    state = DecisionFilterForm(request.GET).chosen()
    ctx = {
        "nav": "agents",
        "agent": agent,
        "state": state,
        "page": decision_page(agent=agent, state=state, page=request.GET.get("page", 1)),
    }
    return render(request, "proposals/decision_list.html", ctx)


@can_review
@require_POST
def decision_revoke(request: HtmxHttpRequest, slug: str, pk: int):
    """Revoke decision ``pk`` of the agent (reviewers, audited); back to the Decisions page."""
    d = get_object_or_404(Decision, pk=pk, agent__slug=slug)
    form = DecisionRevokeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(e for errs in form.errors.values() for e in errs))
    else:
        try:
            decision_services.decision_revoke(
                decision=d, user=request.user, note=form.cleaned_data["note"]
            )
        except ServiceError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request,
                f"Revoked {decision_label(d)}: the next pass judges its memories again.",
            )
    return redirect(reverse("decision_list", args=[slug]))
