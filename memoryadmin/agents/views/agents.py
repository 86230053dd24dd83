"""Agents: list, detail, create, edit (policy + schedule), delete, "Run now"."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memoryadmin.agents.forms.agents import AgentCreateForm, AgentEditForm
from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.agents import agent_pyramid, store_status
from memoryadmin.agents.selectors.probes import recall_drift_shown
from memoryadmin.agents.services import agents as agent_services
from memoryadmin.agents.views.schedules import cron_preview
from memoryadmin.core.errors import PassAlreadyActive, ServiceError
from memoryadmin.core.views import HtmxHttpRequest, can_manage
from memoryadmin.memories.models import ImportJob
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.selectors.decisions import active_decisions
from memoryadmin.proposals.selectors.rollback import archive_summary
from memoryadmin.proposals.services.passes import pass_request


@require_GET
def agent_list(request: HtmxHttpRequest):
    """Every agent with its collection, policy threshold and schedule."""
    agents = Agent.objects.order_by("name")
    return render(request, "agents/agent_list.html", {"nav": "agents", "agents": agents})


@require_GET
def agent_detail(request: HtmxHttpRequest, slug: str):
    """One agent: store status, policy, schedule and its recent passes."""
    agent = get_object_or_404(Agent, slug=slug)
    ctx = {
        "nav": "agents",
        "agent": agent,
        "store": store_status(agent),
        "passes": agent.passes.select_related("decided_by")[:20],
        "active": agent.passes.filter(status__in=Pass.ACTIVE).first(),
        "policy": agent.policy,
        "field_map": agent.get_field_map().to_dict(),
        "import_job": agent.import_jobs.filter(status__in=ImportJob.ACTIVE).first(),
        "decision_count": active_decisions(agent).count(),
        "archive": archive_summary(agent=agent),
        "recall_drift": recall_drift_shown(agent),
    }
    if (agent.policy or {}).get("summarize"):  # the stored value: a page never validates
        ctx["pyramid"], ctx["pyramid_error"] = agent_pyramid(agent)
        ctx["pyramid_shown"] = True
    return render(request, "agents/agent_detail.html", ctx)


def _error_field(message: str, form) -> str | None:
    """The form field a service's ``ValueError`` is about (by its wording), else ``None``."""
    lowered = message.lower()
    for word, name in (
        ("key variable", "field_embedder_key_env"),
        ("embedder", "field_embedder_url"),
        ("collection", "collection_name"),
        ("slug", "slug"),
        ("cron", "schedule_cron"),
        ("schedule", "schedule_cron"),
        ("name", "name"),
    ):
        if word in lowered and name in form.fields:
            return name
    return None


def _form_page(request, form, agent=None, status=200):
    ctx = {
        "nav": "agents",
        "form": form,
        "agent": agent,
        **cron_preview(
            form["schedule_cron"].value(),
            request,
            enabled=bool(form["schedule_enabled"].value()),
        ),
    }
    return render(request, "agents/agent_form.html", ctx, status=status)


@can_manage
@require_http_methods(["GET", "POST"])
def agent_create(request: HtmxHttpRequest):
    """Create an agent on a new collection, or attach an existing one with a field mapping."""
    form = AgentCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            agent = agent_services.agent_create(**form.service_kwargs(), user=request.user)
        except (ServiceError, ValueError) as exc:
            form.add_error(_error_field(str(exc), form), str(exc))
        else:
            messages.success(request, f"Agent “{agent.name}” created.")
            for note in form.policy_notes():
                messages.warning(request, note)
            return redirect("agent_detail", agent.slug)
    return _form_page(request, form)


@can_manage
@require_http_methods(["GET", "POST"])
def agent_edit(request: HtmxHttpRequest, slug: str):
    """Edit name, description, policy, auto-apply and schedule (synced to django-q2)."""
    agent = get_object_or_404(Agent, slug=slug)
    form = AgentEditForm.for_agent(agent, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            agent_services.agent_update(agent=agent, user=request.user, **form.service_kwargs())
        except (ServiceError, ValueError) as exc:
            form.add_error(_error_field(str(exc), form), str(exc))
        else:
            messages.success(request, f"Agent “{agent.name}” saved.")
            for note in form.policy_notes():
                messages.warning(request, note)
            return redirect("agent_detail", agent.slug)
    return _form_page(request, form, agent)


@can_manage
@require_http_methods(["GET", "POST"])
def agent_delete(request: HtmxHttpRequest, slug: str):
    """Confirm, then delete the agent and its schedule (its Chroma collection is kept)."""
    agent = get_object_or_404(Agent, slug=slug)
    if request.method == "POST":
        try:
            agent_services.agent_delete(agent=agent, user=request.user)
        except ServiceError as exc:
            messages.error(request, str(exc))
            return redirect("agent_detail", agent.slug)
        messages.success(
            request, f"Agent “{agent.name}” deleted; collection {agent.collection_name} kept."
        )
        return redirect("agent_list")
    return render(request, "agents/agent_confirm_delete.html", {"nav": "agents", "agent": agent})


@can_manage
@require_POST
def agent_run(request: HtmxHttpRequest, slug: str):
    """ "Run now": queue a pass; refused with a message when one is already active (I-5).

    With a proposal waiting for review it first asks for confirmation (``confirm=1``): the new
    pass makes the waiting one stale and carries its exclusions and edits over.
    """
    agent = get_object_or_404(Agent, slug=slug)
    pending = agent.passes.filter(status=Pass.Status.PROPOSED).order_by("-created_at").first()
    if pending is not None and request.POST.get("confirm") != "1":
        ctx = {"nav": "agents", "agent": agent, "pending": pending}
        return render(request, "agents/agent_run_confirm.html", ctx)
    try:
        run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, user=request.user)
    except PassAlreadyActive as exc:
        messages.error(request, str(exc) or "A pass is already active for this agent.")
        return redirect("agent_detail", agent.slug)
    messages.success(request, f"Pass #{run.pk} queued.")
    return redirect("pass_detail", run.pk)
