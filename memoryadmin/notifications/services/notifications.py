"""Notification services: channels, subscriptions and the admin's defaults; emitting a
notification for an event; the periodic checks (stuck work, proposals waiting too long).

Where events come from:

- a pass's transition to ``proposed``, ``rejected_by_guard`` or ``failed``
  (``services.common.transition``, and the waiting part auto-apply splits off) enqueues
  ``tasks.notify_pass`` after commit → :func:`notify_pass`;
- the django-q2 ``Schedule`` :data:`~.schedules.NOTIFY_SCHEDULE` (``NOTIFY_CHECK_CRON``, every
  5 minutes) runs ``tasks.notification_checks`` → :func:`notifications_check`: applies and
  imports stuck longer than ``NOTIFY_STUCK_MINUTES``, proposals waiting longer than the
  defaults' ``waiting_hours``;
- the page's "Send a test" → :func:`notification_test`.

Each event is one :class:`Notification` (its ``key`` makes emitting idempotent: a task run twice,
or a check every 5 minutes, tells once) and one :class:`Delivery` per recipient channel, each
sent by ``tasks.deliver_notification`` (:mod:`.notifications_delivery`) after commit: never on
the request path.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import ngettext

from consolidation.adapters.endpoints import check_webhook_url
from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.roles import can_review
from memoryadmin.core.services import TASK_DELIVER, audit, enqueue
from memoryadmin.notifications.models import (
    ALL_EVENTS,
    Delivery,
    Notification,
    NotificationChannel,
    NotificationDefaults,
    NotificationEvent,
    Subscription,
)
from memoryadmin.notifications.selectors import (
    import_notice,
    pass_notice,
    recipients,
    stuck_applies,
    stuck_imports,
    waiting_proposals,
)
from memoryadmin.proposals.models import Pass

__all__ = [
    "channel_create",
    "channel_delete",
    "notification_emit",
    "notification_test",
    "notifications_check",
    "notification_defaults_save",
    "notify_pass",
    "subscription_save",
    "subscriptions_for_new_agent",
]

S = Pass.Status
E = NotificationEvent

STILL_TRUE: dict[str, tuple[str, ...]] = {
    E.PROPOSAL_WAITING: (S.PROPOSED,),
    E.GUARD_REJECTED: (S.REJECTED_BY_GUARD,),
    E.PASS_FAILED: (S.FAILED,),
}
"""An event about a pass is told only while the pass is still in one of these statuses when
the task runs (a proposal auto-applied in the same pass is not "waiting")."""


def _events(events: Iterable[str]) -> list[str]:
    chosen = {str(e) for e in events}
    unknown = chosen - set(ALL_EVENTS)
    if unknown:
        raise ValueError(
            f"Unknown notification {ngettext('event', 'events', len(unknown))}: "
            f"{', '.join(sorted(unknown))}."
        )
    return [e for e in ALL_EVENTS if e in chosen]


def webhook_url_check(url: str) -> str:
    """The webhook URL when this deployment lets the worker POST to it
    (``settings.WEBHOOK_HOSTS_ALLOWED``; :func:`check_webhook_url`). Raises ``ValueError``."""
    return check_webhook_url(url, settings.WEBHOOK_HOSTS_ALLOWED)


@transaction.atomic
def channel_create(*, user: Any, kind: str, target: str) -> NotificationChannel:
    """Add an e-mail address or a webhook URL to ``user``'s channels (a webhook gets a fresh
    32-byte secret). Raises ``ValueError`` for an invalid address, a webhook URL this deployment
    does not allow, an unknown kind or a channel the user already has."""
    target = (target or "").strip()
    if kind == NotificationChannel.Kind.EMAIL:
        try:
            validate_email(target)
        except Exception as exc:
            raise ValueError(f"{target[:200]!r} is not an e-mail address.") from exc
        secret = ""
    elif kind == NotificationChannel.Kind.WEBHOOK:
        target = webhook_url_check(target)
        secret = secrets.token_urlsafe(32)
    else:
        raise ValueError(f"Unknown channel kind {kind!r}.")
    if NotificationChannel.objects.filter(user=user, kind=kind, target=target).exists():
        raise ValueError("You already have this channel.")
    channel = NotificationChannel.objects.create(user=user, kind=kind, target=target, secret=secret)
    audit(
        actor=user.get_username(),
        verb="notification_channel_added",
        user=user,
        note=f"{channel.get_kind_display()} channel #{channel.pk} added.",
        data={"channel": channel.pk, "kind": kind},
    )
    return channel


@transaction.atomic
def channel_delete(*, user: Any, channel_id: int) -> None:
    """Remove one of ``user``'s channels (its deliveries with it). Raises
    :class:`ServiceError` when it is not theirs."""
    deleted, _ = NotificationChannel.objects.filter(user=user, pk=channel_id).delete()
    if not deleted:
        raise ServiceError(f"You have no channel #{channel_id}.")
    audit(
        actor=user.get_username(),
        verb="notification_channel_removed",
        user=user,
        note=f"Channel #{channel_id} removed.",
        data={"channel": channel_id},
    )


@transaction.atomic
def subscription_save(*, user: Any, agent: Agent, events: Iterable[str]) -> Subscription | None:
    """Set ``user``'s events for ``agent``; no event removes the subscription (returns None).
    Raises ``ValueError`` for an unknown event."""
    chosen = _events(events)
    if not chosen:
        Subscription.objects.filter(user=user, agent=agent).delete()
        return None
    sub, _ = Subscription.objects.update_or_create(
        user=user, agent=agent, defaults={"events": chosen, "updated_at": timezone.now()}
    )
    return sub


@transaction.atomic
def notification_defaults_save(
    *, user: Any, events: Iterable[str], waiting_hours: int, subscribe_new_agents: bool
) -> NotificationDefaults:
    """Save the admin's defaults (audited). Raises ``ValueError`` for an unknown event or
    ``waiting_hours`` outside 1–720."""
    if not 1 <= int(waiting_hours) <= 720:
        raise ValueError("Waiting hours must be between 1 and 720.")
    row = NotificationDefaults.current()
    row.events = _events(events)
    row.waiting_hours = int(waiting_hours)
    row.subscribe_new_agents = bool(subscribe_new_agents)
    row.updated_by = user
    row.updated_at = timezone.now()
    row.save()
    audit(
        actor=user.get_username(),
        verb="notification_defaults_saved",
        user=user,
        note="Notification defaults saved.",
        data={
            "events": row.events,
            "waiting_hours": row.waiting_hours,
            "subscribe_new_agents": row.subscribe_new_agents,
        },
    )
    return row


def subscriptions_for_new_agent(*, agent: Agent) -> int:
    """When the defaults say so, subscribe every reviewer with an enabled channel to ``agent``
    with the default events. Returns how many subscriptions were made."""
    defaults = NotificationDefaults.current()
    if not defaults.subscribe_new_agents or not defaults.events:
        return 0
    made = 0
    channels = NotificationChannel.objects.filter(enabled=True).select_related("user")
    users = {c.user for c in channels}
    for user in sorted(users, key=lambda u: u.pk):
        if user.is_active and can_review(user):
            _, created = Subscription.objects.get_or_create(
                user=user, agent=agent, defaults={"events": list(defaults.events)}
            )
            made += int(created)
    return made


def notification_emit(
    *,
    event: str,
    key: str,
    summary: str,
    data: dict[str, Any],
    agent: Agent | None = None,
    run: Pass | None = None,
    channels: Iterable[NotificationChannel] | None = None,
    test: bool = False,
) -> Notification | None:
    """Record one notification (idempotent by ``key``: None when it was already emitted or
    nobody is to receive it) and one delivery per channel (default: :func:`recipients` of
    ``agent`` for ``event``), each sent by ``tasks.deliver_notification`` after commit."""
    targets = list(channels) if channels is not None else recipients(agent=agent, event=event)
    if not targets or Notification.objects.filter(key=key).exists():
        return None
    try:
        with transaction.atomic():
            notification = Notification.objects.create(
                key=key[:200],
                event=event,
                agent=agent,
                run=run,
                summary=summary[:300],
                data=data,
                test=test,
            )
            for channel in targets:
                delivery = Delivery.objects.create(notification=notification, channel=channel)
                enqueue(TASK_DELIVER, delivery.pk)
    except IntegrityError:  # another task emitted the same key first
        return None
    return notification


def notify_pass(*, pass_id: int, event: str, now: datetime | None = None) -> Notification | None:
    """Tell the subscribers of the pass's agent about ``event`` (``proposal_waiting``,
    ``guard_rejected``, ``pass_failed``) while it still holds (:data:`STILL_TRUE`)."""
    run = Pass.objects.select_related("agent").filter(pk=pass_id).first()
    if run is None or run.status not in STILL_TRUE.get(event, ()):
        return None
    summary, data = pass_notice(run, event, now=now)
    return notification_emit(
        event=event, key=f"{event}:pass:{run.pk}", summary=summary, data=data,
        agent=run.agent, run=run,
    )  # fmt: skip


def notifications_check(*, now: datetime | None = None) -> list[Notification]:
    """The periodic checks (module docstring): each stuck apply and import, and each proposal
    waiting longer than the defaults' hours, told once; a delivery whose worker died while
    sending it is sent again. Returns what was emitted."""
    now = now or timezone.now()
    out: list[Notification | None] = []

    def tell_pass(run: Pass, event: str, key: str) -> None:
        summary, data = pass_notice(run, event, now=now)
        out.append(
            notification_emit(
                event=event, key=key, summary=summary, data=data, agent=run.agent, run=run
            )
        )

    minutes = settings.NOTIFY_STUCK_MINUTES
    for run in stuck_applies(now=now, minutes=minutes):
        tell_pass(run, E.STUCK, f"stuck:pass:{run.pk}:{run.status}")
    for job in stuck_imports(now=now, minutes=minutes):
        summary, data = import_notice(job, now=now)
        out.append(
            notification_emit(
                event=E.STUCK,
                key=f"stuck:import:{job.pk}",
                summary=summary,
                data=data,
                agent=job.agent,
            )
        )
    abandoned = Delivery.objects.filter(status=Delivery.Status.SENDING, next_attempt_at__lt=now)
    for pk in abandoned.values_list("pk", flat=True):  # its worker died mid-attempt
        if Delivery.objects.filter(pk=pk, status=Delivery.Status.SENDING).update(
            status=Delivery.Status.RETRYING, next_attempt_at=None
        ):
            enqueue(TASK_DELIVER, pk)
    hours = NotificationDefaults.current().waiting_hours
    for run in waiting_proposals(now=now, hours=hours):
        tell_pass(run, E.WAITING_LONG, f"waiting_long:pass:{run.pk}")
    return [n for n in out if n is not None]


def notification_test(*, user: Any, channel_id: int) -> Notification:
    """Send a test notification to one of ``user``'s channels (delivered by the worker like
    any other). Raises :class:`ServiceError` when the channel is not theirs."""
    channel = NotificationChannel.objects.filter(user=user, pk=channel_id).first()
    if channel is None:
        raise ServiceError(f"You have no channel #{channel_id}.")
    notification = notification_emit(
        event=E.PROPOSAL_WAITING,
        key=f"test:{channel.pk}:{uuid.uuid4().hex}",
        summary=f"Test notification from memoryadmin to {channel.get_kind_display()} "
        f"channel #{channel.pk}",
        data={"agent": None, "pass": None},
        channels=[channel],
        test=True,
    )
    if notification is None:  # cannot happen: a fresh key and one channel
        raise ServiceError("The test notification was not recorded.")
    return notification
