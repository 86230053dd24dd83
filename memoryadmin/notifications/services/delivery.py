"""Sending one delivery of a notification: an e-mail or a signed webhook POST, each attempt
recorded, a failed one retried with back-off by django-q2.

- **E-mail**: ``django.core.mail.send_mail`` through the backend of the ``EMAIL_*`` settings;
  subject the notification's one-line summary, body the summary, the links and the counts.
- **Webhook**: ``POST`` of :func:`~..selectors.notifications.notice_payload` as compact JSON
  (UTF-8), headers ``Content-Type: application/json``, ``X-Memoryadmin-Event``,
  ``X-Memoryadmin-Delivery`` (the delivery id: a receiver drops a repeat) and
  ``X-Memoryadmin-Signature: sha256=<hex>`` — HMAC-SHA256 of the exact body bytes with the
  channel's secret (:func:`signature`). Redirects are not followed; any 2xx is success; the URL
  is checked again before each attempt (``WEBHOOK_HOSTS_ALLOWED``). Timeout ``NOTIFY_TIMEOUT``.
- **Retries**: a failed attempt before the ``NOTIFY_ATTEMPTS``-th schedules the next one as a
  django-q2 ``Schedule`` of type ONCE (deleted by django-q2 once it has run) at
  ``NOTIFY_RETRY_SECONDS × 4^(attempt-1)`` from now; the delivery is ``retrying`` with
  ``next_attempt_at``. After the last it is ``failed``. Every attempt is in
  ``Delivery.attempts_log``; the first and the final outcome are audited.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import timedelta
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone
from django.utils.translation import ngettext

from memoryadmin.core.services import TASK_DELIVER, audit
from memoryadmin.notifications.models import Delivery, NotificationChannel
from memoryadmin.notifications.selectors import notice_payload
from memoryadmin.notifications.services.notifications import webhook_url_check

__all__ = [
    "SIGNATURE_HEADER",
    "DeliveryError",
    "delivery_send",
    "retry_delay",
    "sending_deadline",
    "signature",
]

SIGNATURE_HEADER = "X-Memoryadmin-Signature"
D = Delivery.Status


class DeliveryError(Exception):
    """An attempt that failed in a way we name ourselves (a non-2xx answer, no e-mail set-up)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def signature(secret: str, body: bytes) -> str:
    """``"sha256=" + hex(HMAC-SHA256(secret, body))``: the value of :data:`SIGNATURE_HEADER`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def sending_deadline() -> timedelta:
    """How long a claimed attempt may take before it counts as abandoned: twice the timeout
    plus a minute."""
    return timedelta(seconds=2 * settings.NOTIFY_TIMEOUT + 60)


def retry_delay(attempt: int) -> timedelta:
    """How long after failed attempt ``attempt`` (1-based) the next one runs."""
    return timedelta(seconds=settings.NOTIFY_RETRY_SECONDS * 4 ** max(0, attempt - 1))


def _email(channel: NotificationChannel, payload: dict[str, Any]) -> int | None:
    if not settings.EMAIL_HOST and settings.EMAIL_BACKEND.endswith("smtp.EmailBackend"):
        raise DeliveryError("e-mail is not configured on this console (EMAIL_HOST is empty)")
    lines = [payload["summary"], ""]
    for what in ("pass", "import", "agent"):
        item = payload.get(what)
        if item and item.get("url"):
            lines.append(f"{what.capitalize()}: {item['url']}")
    run = payload.get("pass") or {}
    if run.get("operations_by_kind"):
        lines.append("")
        lines += [f"  {kind}: {n}" for kind, n in run["operations_by_kind"].items()]
    lines += ["", "Your subscriptions: " + settings.MEMORYADMIN_BASE_URL + "/notifications/"]
    send_mail(
        subject=f"[memoryadmin] {payload['summary']}"[:200],
        message="\n".join(lines),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[channel.target],
        fail_silently=False,
    )
    return None


def _webhook(channel: NotificationChannel, payload: dict[str, Any]) -> int | None:
    url = webhook_url_check(channel.target)
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "memoryadmin-notifications/1",
        "X-Memoryadmin-Event": payload["event"],
        "X-Memoryadmin-Delivery": str(payload["delivery"]),
        SIGNATURE_HEADER: signature(channel.secret, body),
    }
    response = httpx.post(
        url, content=body, headers=headers, timeout=settings.NOTIFY_TIMEOUT, follow_redirects=False
    )
    if not 200 <= response.status_code < 300:
        raise DeliveryError(f"HTTP {response.status_code} from the webhook", response.status_code)
    return response.status_code


def _schedule_retry(delivery: Delivery, when: Any) -> None:
    from django_q.models import Schedule

    Schedule.objects.create(
        name=f"notify-retry:{delivery.pk}:{delivery.attempts}",
        func=TASK_DELIVER,
        args=repr(delivery.pk),
        schedule_type=Schedule.ONCE,
        repeats=-1,
        next_run=when,
    )


def _attempt(channel: NotificationChannel, payload: dict[str, Any]) -> tuple[int | None, str]:
    """Send once: ``(HTTP status or None, "")`` on success, ``(status, error)`` otherwise."""
    try:
        if not channel.enabled:
            raise DeliveryError("the channel is disabled")
        send = _email if channel.kind == NotificationChannel.Kind.EMAIL else _webhook
        return send(channel, payload), ""
    except DeliveryError as exc:
        return exc.status_code, str(exc)
    except Exception as exc:  # SMTP, DNS, connection, timeout …: recorded, retried
        return None, f"{type(exc).__name__}: {exc}"


def delivery_send(*, delivery_id: int) -> Delivery | None:
    """Make the next attempt of delivery ``delivery_id`` (module docstring); a no-op unless it
    is ``pending`` or ``retrying`` (claimed by a conditional UPDATE to ``sending``, so a repeated
    task sends nothing twice). The attempt runs outside any transaction. Never raises for a
    failed attempt: it is recorded (and retried). Returns the delivery, None when it is gone."""
    # While sending, next_attempt_at is the claim's deadline: a worker that died mid-attempt
    # leaves it past, and notifications_check sends the delivery again.
    claimed = Delivery.objects.filter(pk=delivery_id, status__in=(D.PENDING, D.RETRYING)).update(
        status=D.SENDING, next_attempt_at=timezone.now() + sending_deadline()
    )
    delivery = (
        Delivery.objects.select_related("notification", "channel").filter(pk=delivery_id).first()
    )
    if not claimed or delivery is None:
        return delivery
    channel, notification = delivery.channel, delivery.notification
    started = time.monotonic()
    status_code, error = _attempt(channel, notice_payload(notification, delivery))
    now = timezone.now()
    delivery.attempts += 1
    delivery.attempts_log = [
        *delivery.attempts_log,
        {
            "at": now.isoformat(),
            "ok": not error,
            "status_code": status_code,
            "error": error[:500],
            "ms": round((time.monotonic() - started) * 1000),
        },
    ]
    delivery.last_error = error[:2000]
    with transaction.atomic():
        if not error:
            delivery.status, delivery.sent_at, delivery.next_attempt_at = D.SENT, now, None
        elif delivery.attempts >= settings.NOTIFY_ATTEMPTS or not channel.enabled:
            delivery.status, delivery.next_attempt_at = D.FAILED, None
        else:
            delivery.status = D.RETRYING
            delivery.next_attempt_at = now + retry_delay(delivery.attempts)
            _schedule_retry(delivery, delivery.next_attempt_at)
        delivery.save()
        if delivery.status in (D.SENT, D.FAILED) or delivery.attempts == 1:
            audit(
                actor="system",
                verb=f"notification_{delivery.status}",
                agent=notification.agent,
                run=notification.run,
                note=f"Delivery #{delivery.pk} of {notification.event} to channel #{channel.pk}: "
                f"{delivery.status} after {delivery.attempts} "
                f"{ngettext('attempt', 'attempts', delivery.attempts)}"
                + (f" ({error[:300]})" if error else ""),
                data={"delivery": delivery.pk, "attempts": delivery.attempts},
            )
    return delivery
