"""Forget views: the agent's Forget page (the form, a dry run's list, the requests), a request's
review page, approve and reject. Reads through :mod:`..selectors.forget`, writes through
:mod:`..services.forget`. Reviewers and admins request, approve and reject; viewers read."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.core.views import HtmxHttpRequest, can_review
from memoryadmin.memories.forms.forget import ForgetForm
from memoryadmin.memories.models import ForgetRequest
from memoryadmin.memories.selectors.forget import forget_plan, forget_request_items, forget_requests
from memoryadmin.memories.services import forget as forget_services
from memoryadmin.proposals.forms.review import NoteForm


def _page(request: HtmxHttpRequest, agent: Agent, form: ForgetForm, plan=None, status=200):
    ctx = {
        "nav": "agents",
        "agent": agent,
        "form": form,
        "plan": plan,
        "requests": forget_requests(agent=agent)[:50],
        "not_undoable": forget_services.NOT_UNDOABLE,
    }
    return render(request, "memories/forget_page.html", ctx, status=status)


@require_GET
def forget_page(request: HtmxHttpRequest, slug: str):
    """The agent's Forget page: the form and the agent's forget requests, newest first."""
    agent = get_object_or_404(Agent, slug=slug)
    return _page(request, agent, ForgetForm(agent=agent))


@can_review
@require_POST
def forget_create(request: HtmxHttpRequest, slug: str):
    """POST the form: ``action=preview`` shows what it would remove (dry run, nothing stored);
    otherwise the request is stored for a reviewer and its page shown."""
    agent = get_object_or_404(Agent, slug=slug)
    form = ForgetForm(request.POST, agent=agent)
    if not form.is_valid():
        return _page(request, agent, form, status=422)
    try:
        if request.POST.get("action") == "preview":
            plan = forget_plan(agent=agent, selection=form.selection())
            return _page(request, agent, form, plan=plan)
        req, _plan = forget_services.forget_request_create(
            agent=agent,
            selection=form.selection(),
            user=request.user,
            reason=form.cleaned_data.get("reason") or "",
        )
    except (ServiceError, StoreUnavailable, ValueError) as exc:
        form.add_error(None, str(exc))
        return _page(request, agent, form, status=409)
    messages.success(request, f"Forget request #{req.pk} waits for a reviewer.")
    return redirect(req)


@require_GET
def forget_detail(request: HtmxHttpRequest, pk: int):
    """A forget request: every memory it removes (live, archived), the merged memories holding
    their text, and approve / reject while it is proposed; its tombstone afterwards."""
    req = get_object_or_404(ForgetRequest.objects.select_related("agent"), pk=pk)
    store_error = ""
    try:
        items = forget_request_items(request=req)
    except StoreUnavailable as exc:
        items, store_error = {"live": [], "archived": [], "related": []}, str(exc)
    ctx = {
        "nav": "agents",
        "req": req,
        "agent": req.agent,
        "items": items,
        "store_error": store_error,
        "form": NoteForm(),
        "not_undoable": forget_services.NOT_UNDOABLE,
    }
    return render(request, "memories/forget_detail.html", ctx)


@can_review
@require_POST
def forget_approve(request: HtmxHttpRequest, pk: int):
    """Approve a forget request (reviewers; the worker purges it); refused with the reason
    otherwise."""
    req = get_object_or_404(ForgetRequest, pk=pk)
    form = NoteForm(request.POST)
    note = form.cleaned_data["note"] if form.is_valid() else ""
    try:
        req = forget_services.forget_approve(request=req, user=request.user, note=note)
    except (ServiceError, StoreUnavailable) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, forget_services.forget_outcome(req))
    return redirect(req)


@can_review
@require_POST
def forget_reject(request: HtmxHttpRequest, pk: int):
    """Reject a forget request (reviewers): nothing is removed."""
    req = get_object_or_404(ForgetRequest, pk=pk)
    form = NoteForm(request.POST)
    note = form.cleaned_data["note"] if form.is_valid() else ""
    try:
        forget_services.forget_reject(request=req, user=request.user, note=note)
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Forget request #{req.pk} rejected; nothing was removed.")
    return redirect(req)
