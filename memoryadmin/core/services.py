"""What every service shares: the audited status transition of a pass, audit events, progress,
task names and enqueueing after commit, the pass events notifications are sent for, and the
crash tests' failpoints.

Nothing here is a service an operator calls, and nothing here imports a service: the domain
modules build on it. Transitions are a conditional ``UPDATE … WHERE status IN (…)`` plus an
:class:`AuditEvent` in one transaction, so two workers can never both move the same pass (see
:func:`transition`).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from memoryadmin.agents.models import Agent, StoreSample
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.models import AuditEvent
from memoryadmin.notifications.models import NotificationChannel, NotificationEvent
from memoryadmin.proposals.models import Pass

__all__ = [
    "PASS_EVENTS",
    "TASK_APPLY",
    "TASK_DELIVER",
    "TASK_DRY_RUN",
    "TASK_FORGET",
    "TASK_IMPORT",
    "TASK_NOTIFY",
    "TASK_NOTIFY_CHECK",
    "TASK_PURGE",
    "TASK_RECOVER",
    "TASK_ROLLBACK",
    "TASK_RUN",
    "TASK_SCHEDULED",
    "actor_name",
    "audit",
    "enqueue",
    "failpoint",
    "jsonable",
    "notify_after_commit",
    "SYSTEM_ACTOR",
    "set_progress",
    "store_sampled",
    "transition",
    "user_or_none",
]


# django-q2 task names (stored in queued tasks and schedules: never rename).
TASK_RUN = "memoryadmin.tasks.run_pass"
TASK_APPLY = "memoryadmin.tasks.apply_pass"
TASK_SCHEDULED = "memoryadmin.tasks.scheduled_pass"
TASK_ROLLBACK = "memoryadmin.tasks.rollback_pass"
TASK_IMPORT = "memoryadmin.tasks.import_memories"
TASK_RECOVER = "memoryadmin.tasks.recover_passes"
TASK_PURGE = "memoryadmin.tasks.purge_archives"
TASK_DRY_RUN = "memoryadmin.tasks.run_dry_run"
TASK_NOTIFY = "memoryadmin.tasks.notify_pass"
TASK_DELIVER = "memoryadmin.tasks.deliver_notification"
TASK_NOTIFY_CHECK = "memoryadmin.tasks.notification_checks"
TASK_FORGET = "memoryadmin.tasks.apply_forget"

PASS_EVENTS: dict[str, str] = {
    Pass.Status.PROPOSED: NotificationEvent.PROPOSAL_WAITING,
    Pass.Status.REJECTED_BY_GUARD: NotificationEvent.GUARD_REJECTED,
    Pass.Status.FAILED: NotificationEvent.PASS_FAILED,
}
"""The pass statuses a notification is sent for, and its event."""


def actor_name(user: Any, default: str) -> str:
    if user is not None and getattr(user, "is_authenticated", False):
        return user.get_username()
    return default


def user_or_none(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


SYSTEM_ACTOR = "system"
"""Actor of the steps a pass takes by itself (started, proposed, stale, failed, applying …)."""


def audit(
    *,
    actor: str,
    verb: str,
    agent: Agent | None = None,
    run: Pass | None = None,
    user: Any = None,
    from_status: str = "",
    to_status: str = "",
    note: str = "",
    data: Mapping[str, Any] | None = None,
) -> AuditEvent:
    if agent is None and run is not None:
        agent = run.agent
    return AuditEvent.objects.create(
        agent=agent,
        run=run,
        user=user_or_none(user),
        actor=actor,
        verb=verb,
        from_status=from_status,
        to_status=to_status,
        note=note,
        data=jsonable(data or {}),
    )


def jsonable(value: Any) -> Any:
    """``value`` round-tripped through JSON (numpy scalars/arrays, sets, datetimes made plain)."""

    def default(o: Any) -> Any:
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, set | frozenset | tuple):
            return list(o)
        if isinstance(o, datetime):
            return o.isoformat()
        return str(o)

    return json.loads(
        json.dumps(value, default=default, allow_nan=False) if value is not None else "null"
    )


def transition(
    run: Pass,
    *,
    frm: Iterable[str],
    to: str,
    actor: str,
    verb: str,
    user: Any = None,
    note: str = "",
    data: Mapping[str, Any] | None = None,
    pass_note: str | None = None,
    **fields: Any,
) -> Pass:
    """Move ``run`` from one of ``frm`` to ``to`` (conditional UPDATE) and audit it, atomically.

    Raises :class:`ServiceError` when the pass is no longer in one of ``frm`` (someone else moved
    it first) and lets ``IntegrityError`` through when ``to`` is active and another pass of the
    agent is (I-5). ``note`` goes to the audit event; ``pass_note`` (when given) is also saved
    as the pass's own note (the reviewer's note). Returns the refreshed pass.
    """
    frm = tuple(frm)
    if pass_note is not None:
        fields["note"] = pass_note
    with transaction.atomic():
        current = Pass.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        updated = Pass.objects.filter(pk=run.pk, status__in=frm).update(status=to, **fields)
        if not updated:
            raise ServiceError(
                f"Pass #{run.pk} is {current or 'gone'}; it can only be {verb.replace('_', ' ')} "
                f"when {' or '.join(frm)}."
            )
        audit(
            actor=actor,
            verb=verb,
            run=run,
            agent=run.agent,
            user=user,
            from_status=current or "",
            to_status=to,
            note=note,
            data=data,
        )
        if to in PASS_EVENTS:
            notify_after_commit(run, PASS_EVENTS[to])
    run.refresh_from_db()
    return run


def notify_after_commit(run: Pass, event: str) -> None:
    """Send ``tasks.notify_pass(run.pk, event)`` to the queue once the transaction commits —
    only when some channel exists (a console nobody listens to enqueues nothing). The task
    decides who hears of it, and skips a proposal no longer waiting by then (auto-applied)."""
    if NotificationChannel.objects.filter(enabled=True).exists():
        enqueue(TASK_NOTIFY, run.pk, str(event))


def set_progress(run: Pass, fraction: float, label: str) -> None:
    """Save progress (0..1) and a label at once, so a polling page sees it (own statement)."""
    fraction = max(0.0, min(1.0, float(fraction)))
    Pass.objects.filter(pk=run.pk).update(progress=fraction, progress_label=label[:200])
    run.progress, run.progress_label = fraction, label[:200]


def enqueue(
    func: str,
    pk: int,
    *args: Any,
    run_here: Callable[[int], Any] | None = None,
    timeout: int | None = None,
) -> None:
    """Run ``func(pk, *args)`` after the surrounding transaction commits: a django-q2 task, or —
    with ``run_here`` (CLI, demo seeding: the service the task would call) — ``run_here(pk)`` in
    this process. ``timeout`` (seconds) replaces the cluster's task timeout for this task:
    django-q2 stops the task there and replaces its worker process."""
    if run_here is not None:
        transaction.on_commit(lambda: run_here(pk))
        return

    def send() -> None:
        from django_q.tasks import async_task

        options = {"timeout": timeout} if timeout is not None else {}
        async_task(func, pk, *args, task_name=f"{func.rsplit('.', 1)[-1]}:{pk}", **options)

    transaction.on_commit(send)


def failpoint(name: str) -> None:
    """Fault injection for the crash tests: when ``settings.MEMORYADMIN_FAILPOINT`` (from
    ``$MEMORYADMIN_FAILPOINT``) equals ``name`` the process kills itself with SIGKILL right
    here, as a worker dying mid-apply would. Points:
    ``apply:archived``, ``apply:written``, ``apply:verified``, ``apply:deleted`` (sources deleted,
    journal not yet updated), ``apply:applied`` (journal updated, pass not yet finished) and
    ``plan:started`` (the pass is ``running`` under its lease, nothing planned yet) and
    ``forget:deleted`` (a forget request's first chunk of live memories deleted and journaled)."""
    if name == settings.MEMORYADMIN_FAILPOINT:
        os.kill(os.getpid(), signal.SIGKILL)


def store_sampled(agent: Agent, store: Any) -> int:
    """Record ``store``'s size now as ``agent``'s newest :class:`StoreSample` — the memory count
    the dashboard, the agent list and ``/metrics`` show — and return it. Every path that changes
    how many memories a store holds calls this after the change (apply, rollback, restore,
    delete, import, demo seeding), so the figure is never one change behind. Raises what
    ``store.count()`` raises (Chroma down)."""
    count = store.count()
    StoreSample.objects.create(agent=agent, count=count)
    return count
