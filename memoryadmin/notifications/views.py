"""The Notifications page: the user's channels (add, remove, send a test), their subscriptions
per agent, the admin's defaults, and the delivery log."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.views import HtmxHttpRequest, can_manage, can_review
from memoryadmin.notifications.forms import ChannelForm, DefaultsForm, SubscriptionForm
from memoryadmin.notifications.selectors import notifications_page
from memoryadmin.notifications.services import notifications as services

PAGE = "notifications/notifications.html"


def _render(request: HtmxHttpRequest, **forms: Any):
    ctx = notifications_page(user=request.user)
    defaults = ctx["defaults"]
    ctx.update(
        nav="notifications",
        channel_form=forms.get("channel_form") or ChannelForm(),
        defaults_form=forms.get("defaults_form")
        or DefaultsForm(
            initial={
                "events": defaults.events,
                "waiting_hours": defaults.waiting_hours,
                "subscribe_new_agents": defaults.subscribe_new_agents,
            }
        ),
        subscription_errors=forms.get("subscription_errors"),
    )
    return render(request, PAGE, ctx)


@require_GET
def notifications(request: HtmxHttpRequest):
    """The page (every user sees their own; reviewers change it, admins the defaults)."""
    return _render(request)


@can_review
@require_POST
def channel_add(request: HtmxHttpRequest):
    """Add an e-mail or webhook channel; errors re-render the page at 200."""
    form = ChannelForm(request.POST)
    if form.is_valid():
        try:
            channel = services.channel_create(user=request.user, **form.cleaned_data)
        except ValueError as exc:
            form.add_error("target", str(exc))
        else:
            messages.success(request, f"{channel.get_kind_display()} channel added.")
            return redirect("notifications")
    return _render(request, channel_form=form)


@can_review
@require_POST
def channel_delete(request: HtmxHttpRequest, pk: int):
    """Remove one of the user's channels."""
    try:
        services.channel_delete(user=request.user, channel_id=pk)
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Channel removed.")
    return redirect("notifications")


@can_review
@require_POST
def channel_test(request: HtmxHttpRequest, pk: int):
    """Queue a test notification to one of the user's channels (the worker sends it)."""
    try:
        services.notification_test(user=request.user, channel_id=pk)
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Test notification queued: see the delivery log below.")
    return redirect("notifications")


@can_review
@require_POST
def subscription_save(request: HtmxHttpRequest, slug: str):
    """Set the user's events for one agent (none unsubscribes)."""
    agent = get_object_or_404(Agent, slug=slug)
    form = SubscriptionForm(request.POST)
    if not form.is_valid():
        return _render(request, subscription_errors={"slug": slug, "errors": form.errors})
    services.subscription_save(user=request.user, agent=agent, events=form.cleaned_data["events"])
    messages.success(request, f"Subscription to {agent.name} saved.")
    return redirect("notifications")


@can_manage
@require_POST
def defaults_save(request: HtmxHttpRequest):
    """Save the admin's notification defaults; errors re-render the page at 200."""
    form = DefaultsForm(request.POST)
    if form.is_valid():
        try:
            services.notification_defaults_save(user=request.user, **form.cleaned_data)
        except ValueError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "Notification defaults saved.")
            return redirect("notifications")
    return _render(request, defaults_form=form)
