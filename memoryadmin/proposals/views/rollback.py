"""Undo views: roll back an applied pass (confirm page + POST) and the per-agent archive browser
with single-memory restore. Writes go through :mod:`memoryadmin.proposals.services.rollback`."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import AlreadyDone, ServiceError, StoreUnavailable
from memoryadmin.core.views import HtmxHttpRequest, can_review
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.forms.review import NoteForm
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.selectors.decisions import decisions_of_pass
from memoryadmin.proposals.selectors.rollback import archive_page, rollback_counts
from memoryadmin.proposals.services import rollback as rollback_services


@can_review
@require_http_methods(["GET", "POST"])
def pass_rollback(request: HtmxHttpRequest, pk: int):
    """GET: what a rollback of pass ``pk`` would do, and whether it is blocked; POST: start it."""
    run = get_object_or_404(Pass.objects.select_related("agent"), pk=pk)
    form = NoteForm(request.POST or None)
    ctx = {"nav": "agents", "run": run, "form": form, "blockers": {}, "store_error": ""}
    if request.method == "POST" and form.is_valid():
        try:
            rollback_services.pass_rollback_request(
                run=run,
                user=request.user,
                note=form.cleaned_data["note"],
                revoke_decisions=request.POST.get("decisions") == "revoke",
            )
        except AlreadyDone as exc:
            messages.info(request, str(exc))
            return redirect(run)
        except rollback_services.RollbackBlocked as exc:
            form.add_error(None, str(exc))
        except (ServiceError, ValueError) as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Rolling back pass #{run.pk}.")
            return redirect(run)
    elif run.can_roll_back:
        try:
            ctx["blockers"] = rollback_services.rollback_blockers(run=run)
        except StoreUnavailable as exc:
            ctx["store_error"] = str(exc)
    ctx["counts"] = rollback_counts(run)
    ctx["decisions"] = list(decisions_of_pass(run))
    return render(request, "proposals/pass_rollback.html", ctx)


@require_GET
def archive_list(request: HtmxHttpRequest, slug: str):
    """The agent's archived memories (50 a page), searchable by text or id (``?q=``)."""
    agent = get_object_or_404(Agent, slug=slug)
    q = request.GET.get("q", "")[:500]
    page = archive_page(agent=agent, contains=q, page=request.GET.get("page", 1))
    return render(
        request,
        "proposals/archive_list.html",
        {"nav": "agents", "agent": agent, "q": q, "page": page},
    )


@can_review
@require_POST
def archive_restore(request: HtmxHttpRequest, slug: str, pk: int):
    """Restore one archived memory; refused with the reason when a different live one has its id."""
    agent = get_object_or_404(Agent, slug=slug)
    archived = get_object_or_404(ArchivedMemory, pk=pk, agent=agent)
    try:
        rollback_services.archive_restore(archived=archived, user=request.user)
    except (ServiceError, ValueError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Memory {archived.memory_id} restored.")
    return redirect(f"{reverse('archive_list', args=[agent.slug])}?{request.GET.urlencode()}")
