"""Reads of the notifications: what a notice says (counts and links only, never memory text),
who receives it, what the periodic checks find, and the Notifications page.

A notice is ``(summary, data)``: ``summary`` one line ("Pass #12 of Support bot waits for
review: 7 operations (5 merge, 2 prune), loss 4.1 %"), ``data`` the JSON the webhook body and the
e-mail are made of (:func:`notice_payload`). Every value in them is a number, a status, a name an
admin gave (agent name and slug) or a console URL under ``settings.MEMORYADMIN_BASE_URL``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Q
from django.urls import reverse

from memoryadmin.agents.models import Agent
from memoryadmin.memories.models import ImportJob
from memoryadmin.notifications.models import (
    Delivery,
    Notification,
    NotificationChannel,
    NotificationDefaults,
    NotificationEvent,
    Subscription,
)
from memoryadmin.proposals.models import Operation, Pass

__all__ = [
    "DELIVERY_LOG_SIZE",
    "absolute_url",
    "event_label",
    "import_notice",
    "notice_payload",
    "notifications_page",
    "pass_notice",
    "recipients",
    "stuck_applies",
    "stuck_imports",
    "waiting_proposals",
]

DELIVERY_LOG_SIZE = 50
"""Deliveries the page lists (the newest)."""

S = Pass.Status
E = NotificationEvent


def absolute_url(path: str) -> str:
    """``path`` (from ``reverse``) under ``settings.MEMORYADMIN_BASE_URL``."""
    return f"{settings.MEMORYADMIN_BASE_URL}{path}"


def event_label(event: str) -> str:
    """The event's human label (its ``NotificationEvent`` label, else the value)."""
    try:
        return str(NotificationEvent(event).label)
    except ValueError:
        return event


def _operation_counts(run: Pass) -> dict[str, int]:
    rows = (
        Operation.objects.filter(run=run)
        .exclude(status=Operation.Status.EXCLUDED)
        .values("kind")
        .annotate(n=Count("id"))
        .order_by("kind")
    )
    return {row["kind"]: row["n"] for row in rows}


def _pass_phrase(run: Pass, event: str, hours: float | None) -> str:
    name = f"Pass #{run.pk} of {run.agent.name}"
    if event == E.PROPOSAL_WAITING:
        return f"{name} waits for review"
    if event == E.WAITING_LONG:
        return f"{name} has waited {hours:.0f} h for review"
    if event == E.GUARD_REJECTED:
        return f"{name} was rejected by a guard"
    if event == E.PASS_FAILED:
        return f"{name} failed"
    if event == E.STUCK:
        return f"The apply of pass #{run.pk} of {run.agent.name} is stuck ({run.status})"
    return f"{name}: {event_label(event)}"


def pass_notice(
    run: Pass, event: str, *, now: datetime | None = None
) -> tuple[str, dict[str, Any]]:
    """``(summary, data)`` of ``event`` about ``run`` (module docstring): the operations by kind
    still included, the store's size when planned, the loss fraction and its threshold, how long
    it has waited (``waiting_long``), the pass's and agent's URLs. Never an error text (it may
    quote a memory) and never a memory."""
    counts = _operation_counts(run)
    total = sum(counts.values())
    waited = None
    if now is not None and run.planned_at is not None:
        waited = (now - run.planned_at).total_seconds() / 3600
    line = _pass_phrase(run, event, waited)
    if total:
        kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items())
        line += f": {total} operation{'s' if total != 1 else ''} ({kinds})"
    if event != E.PASS_FAILED and run.entries_before:
        line += f", loss {run.loss_fraction:.1%} of {run.entries_before} memories"
        line += f" (limit {run.max_loss_fraction:.0%})"
    data = {
        "pass": {
            "id": run.pk,
            "status": run.status,
            "trigger": run.trigger,
            "url": absolute_url(reverse("pass_detail", args=[run.pk])),
            "operations": total,
            "operations_by_kind": counts,
            "entries_before": run.entries_before,
            "loss_fraction": round(float(run.loss_fraction), 6),
            "max_loss_fraction": float(run.max_loss_fraction),
            "waiting_hours": None if waited is None else round(waited, 2),
        },
        "agent": _agent_data(run.agent),
    }
    return line[:300], data


def import_notice(job: ImportJob, *, now: datetime) -> tuple[str, dict[str, Any]]:
    """``(summary, data)`` of a stuck import: its status, progress counts, minutes since it
    started and the agent's URLs (the file name is left out: an uploader chose it)."""
    started = job.started_at or job.created_at
    minutes = (now - started).total_seconds() / 60
    line = (
        f"Import #{job.pk} into {job.agent.name} is stuck ({job.status}, {job.done} of "
        f"{job.total} memories, {minutes:.0f} min)"
    )
    data = {
        "import": {
            "id": job.pk,
            "status": job.status,
            "done": job.done,
            "total": job.total,
            "minutes": round(minutes, 1),
            "url": absolute_url(reverse("memories_import_status", args=[job.agent.slug, job.pk])),
        },
        "agent": _agent_data(job.agent),
    }
    return line[:300], data


def _agent_data(agent: Agent) -> dict[str, Any]:
    return {
        "slug": agent.slug,
        "name": agent.name,
        "url": absolute_url(reverse("agent_detail", args=[agent.slug])),
    }


def notice_payload(notification: Notification, delivery: Delivery) -> dict[str, Any]:
    """The webhook body of ``delivery`` (and what its e-mail says): ``{"event", "summary",
    "test", "notification", "delivery", "attempt", "created_at", **notification.data}``."""
    return {
        "event": notification.event,
        "summary": notification.summary,
        "test": notification.test,
        "notification": notification.pk,
        "delivery": delivery.pk,
        "attempt": delivery.attempts + 1,
        "created_at": notification.created_at.isoformat(),
        **(notification.data or {}),
    }


def recipients(*, agent: Agent | None, event: str) -> list[NotificationChannel]:
    """The enabled channels of active users subscribed to ``event`` on ``agent`` (``None``:
    subscribed to no agent)."""
    users = [
        s.user_id
        for s in Subscription.objects.filter(agent=agent, user__is_active=True)
        if event in (s.events or [])
    ]
    return list(NotificationChannel.objects.filter(user_id__in=users, enabled=True).order_by("id"))


def waiting_proposals(*, now: datetime, hours: int) -> list[Pass]:
    """Proposals planned more than ``hours`` ago and still ``proposed``."""
    return list(
        Pass.objects.filter(status=S.PROPOSED, planned_at__lt=now - timedelta(hours=hours))
        .select_related("agent")
        .order_by("pk")
    )


def stuck_applies(*, now: datetime, minutes: int) -> list[Pass]:
    """Passes ``approved`` or ``applying`` since more than ``minutes`` (from the approval;
    from planning when no approval time is kept)."""
    cutoff = now - timedelta(minutes=minutes)
    return list(
        Pass.objects.filter(status__in=(S.APPROVED, S.APPLYING))
        .filter(Q(decided_at__lt=cutoff) | Q(decided_at__isnull=True, planned_at__lt=cutoff))
        .select_related("agent")
        .order_by("pk")
    )


def stuck_imports(*, now: datetime, minutes: int) -> list[ImportJob]:
    """Import jobs still queued, validating or importing more than ``minutes`` after they
    started (or were created)."""
    cutoff = now - timedelta(minutes=minutes)
    return list(
        ImportJob.objects.filter(status__in=ImportJob.ACTIVE)
        .filter(Q(started_at__lt=cutoff) | Q(started_at__isnull=True, created_at__lt=cutoff))
        .select_related("agent")
        .order_by("pk")
    )


def notifications_page(*, user: Any) -> dict[str, Any]:
    """The Notifications page of ``user``: ``channels``; ``rows`` (one per agent:
    ``{"agent", "subscription" or None, "events": set}``); ``defaults``; ``deliveries`` (the
    newest :data:`DELIVERY_LOG_SIZE` to the user's channels, with notification and channel);
    ``events`` (value, label) in order; ``email_configured``."""
    subs = {s.agent_id: s for s in Subscription.objects.filter(user=user)}
    rows = [
        {
            "agent": agent,
            "subscription": subs.get(agent.pk),
            "events": set(subs[agent.pk].events) if agent.pk in subs else set(),
        }
        for agent in Agent.objects.order_by("name", "pk")
    ]
    deliveries = (
        Delivery.objects.filter(channel__user=user)
        .select_related("notification", "channel")
        .order_by("-created_at", "-id")[:DELIVERY_LOG_SIZE]
    )
    return {
        "channels": list(NotificationChannel.objects.filter(user=user).order_by("kind", "id")),
        "rows": rows,
        "defaults": NotificationDefaults.current(),
        "deliveries": list(deliveries),
        "events": list(NotificationEvent.choices),
        "email_configured": bool(settings.EMAIL_HOST)
        or not settings.EMAIL_BACKEND.endswith("smtp.EmailBackend"),
    }
