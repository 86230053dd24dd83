"""Forms of the Notifications page: a channel, a subscription's events, the admin's defaults."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from consolidation.adapters.endpoints import check_webhook_url
from memoryadmin.notifications.models import NotificationChannel, NotificationEvent

__all__ = ["ChannelForm", "DefaultsForm", "SubscriptionForm"]


class ChannelForm(forms.Form):
    """Add a channel: an e-mail address or a webhook URL (checked against
    ``WEBHOOK_HOSTS_ALLOWED``: consolidation/adapters/endpoints.py ``check_webhook_url``)."""

    kind = forms.ChoiceField(choices=NotificationChannel.Kind.choices, label="Channel")
    target = forms.CharField(
        max_length=2000,
        label="Address or URL",
        help_text="An e-mail address, or the https:// URL a JSON POST is sent to (signed with "
        "the secret shown once it is added).",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        kind, target = data.get("kind"), (data.get("target") or "").strip()
        if kind == NotificationChannel.Kind.EMAIL and target:
            try:
                forms.EmailField().clean(target)
            except forms.ValidationError:
                self.add_error("target", "Enter an e-mail address.")
        elif kind == NotificationChannel.Kind.WEBHOOK and target:
            try:
                data["target"] = check_webhook_url(target, settings.WEBHOOK_HOSTS_ALLOWED)
            except ValueError as exc:
                self.add_error("target", str(exc))
        return data


class SubscriptionForm(forms.Form):
    """The events one user hears about for one agent (none: unsubscribed)."""

    events = forms.MultipleChoiceField(
        choices=NotificationEvent.choices, required=False, widget=forms.CheckboxSelectMultiple
    )


class DefaultsForm(forms.Form):
    """The admin's defaults: events a new subscription starts with, subscribing reviewers to
    new agents, and when a waiting proposal counts as waiting too long."""

    events = forms.MultipleChoiceField(
        choices=NotificationEvent.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Default events",
    )
    waiting_hours = forms.IntegerField(
        min_value=1,
        max_value=720,
        label="Waiting longer than (hours)",
        help_text="A proposal still waiting for review this long is reported once.",
    )
    subscribe_new_agents = forms.BooleanField(
        required=False,
        label="Subscribe every reviewer with a channel to each new agent",
    )
