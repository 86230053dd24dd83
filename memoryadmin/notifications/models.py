"""Notifications: who wants to hear about what (channels, subscriptions, the admin's defaults),
and what was sent (notifications and their deliveries, each attempt kept).

A notification never carries memory text: its ``summary`` and ``data`` hold counts, statuses and
links only (``selectors.notifications`` builds them; the tests store distinctive text and assert
that no payload holds it).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class NotificationEvent(models.TextChoices):
    """What a reviewer can subscribe to, per agent."""

    PROPOSAL_WAITING = "proposal_waiting", "A proposal waits for review"
    GUARD_REJECTED = "guard_rejected", "A pass was rejected by a guard"
    PASS_FAILED = "pass_failed", "A pass failed"
    STUCK = "stuck", "An apply or import is stuck"
    WAITING_LONG = "waiting_long", "A proposal has waited longer than the set hours"


ALL_EVENTS: list[str] = [e.value for e in NotificationEvent]


def all_events() -> list[str]:
    """Every event (a callable default: each row gets its own list)."""
    return list(ALL_EVENTS)


class NotificationChannel(models.Model):
    """One way to reach a user: an e-mail address or a webhook URL (JSON POST, signed with
    ``secret``: header ``X-Memoryadmin-Signature: sha256=<hex HMAC-SHA256 of the body>``)."""

    class Kind(models.TextChoices):
        EMAIL = "email", "E-mail"
        WEBHOOK = "webhook", "Webhook"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_channels"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices)
    target = models.CharField(max_length=2000, help_text="The e-mail address or the webhook URL")
    secret = models.CharField(max_length=128, blank=True, help_text="The webhook's HMAC key")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["user_id", "kind", "id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.target} of user #{self.user_id}"


class Subscription(models.Model):
    """A user's choice of events for one agent (``events``: values of
    :class:`NotificationEvent`)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="notification_subscriptions",
    )
    agent = models.ForeignKey(
        "console.Agent", on_delete=models.CASCADE, related_name="subscriptions"
    )
    events = models.JSONField(default=all_events)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "agent"], name="one_subscription_per_agent")
        ]

    def __str__(self) -> str:
        return f"user #{self.user_id} on {self.agent_id}: {', '.join(self.events)}"


class NotificationDefaults(models.Model):
    """The admin's defaults (one row, ``pk=1``): the events a new subscription starts with,
    whether every reviewer with a channel is subscribed to a new agent, and the hours after
    which a waiting proposal is reported (``waiting_long``)."""

    events = models.JSONField(default=all_events)
    subscribe_new_agents = models.BooleanField(default=False)
    waiting_hours = models.PositiveIntegerField(default=24)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "notification defaults"

    def __str__(self) -> str:
        return f"defaults: {', '.join(self.events)}; after {self.waiting_hours} h"

    @classmethod
    def current(cls) -> NotificationDefaults:
        """The one row (created with the defaults on first use)."""
        row, _ = cls.objects.get_or_create(pk=1)
        return row


class Notification(models.Model):
    """One event worth telling (``key`` makes emitting it idempotent: ``"proposal_waiting:
    pass:12"``), with its one-line ``summary`` and ``data`` (counts and links, no memory
    text)."""

    key = models.CharField(max_length=200, unique=True)
    event = models.CharField(max_length=20, choices=NotificationEvent.choices)
    agent = models.ForeignKey(
        "console.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notifications",
    )
    run = models.ForeignKey(
        "console.Pass",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="notifications",
    )
    summary = models.CharField(max_length=300)
    data = models.JSONField(default=dict, blank=True)
    test = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event}: {self.summary}"


class Delivery(models.Model):
    """One notification to one channel; ``attempts_log`` keeps every attempt
    (``{"at", "ok", "status_code", "error", "ms"}``), ``next_attempt_at`` the retry django-q2
    will run (a ``Schedule`` of type ONCE)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"  # an attempt is under way (claimed by a conditional UPDATE)
        RETRYING = "retrying"
        SENT = "sent"
        FAILED = "failed"

    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="deliveries"
    )
    channel = models.ForeignKey(
        NotificationChannel, on_delete=models.CASCADE, related_name="deliveries"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    attempts_log = models.JSONField(default=list, blank=True)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["notification", "channel"], name="one_delivery_per_channel"
            )
        ]

    def __str__(self) -> str:
        return f"delivery #{self.pk} ({self.status}, {self.attempts} attempts)"
