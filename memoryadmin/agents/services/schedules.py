"""Schedule services: keep each agent's django-q2 ``Schedule`` in step with its cron.

The next run times an operator sees are a read:
:func:`memoryadmin.console.selectors.schedule_preview`.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.schedules import schedule_preview
from memoryadmin.core.services import (
    TASK_NOTIFY_CHECK,
    TASK_PURGE,
    TASK_RECOVER,
    TASK_SCHEDULED,
    audit,
)
from memoryadmin.proposals.models import Pass

__all__ = [
    "NOTIFY_SCHEDULE",
    "PURGE_SCHEDULE",
    "RECOVERY_SCHEDULE",
    "notify_schedule_ensure",
    "purge_schedule_ensure",
    "recovery_schedule_ensure",
    "schedule_skipped_unchanged",
    "schedule_skipped_waiting",
    "schedule_sync",
    "schedules_sync_all",
]


PURGE_SCHEDULE = "memoryadmin: purge archived copies past retention"
"""Name of the django-q2 ``Schedule`` (daily) that runs
:data:`~memoryadmin.core.services.TASK_PURGE`."""

RECOVERY_SCHEDULE = "memoryadmin: recover interrupted passes"
"""Name of the django-q2 ``Schedule`` (every minute) that runs
:data:`~memoryadmin.core.services.TASK_RECOVER`."""

NOTIFY_SCHEDULE = "memoryadmin: notification checks"
"""Name of the django-q2 ``Schedule`` (``settings.NOTIFY_CHECK_CRON``, every 5 minutes) that
runs :data:`~memoryadmin.core.services.TASK_NOTIFY_CHECK`."""


def schedule_sync(*, agent: Agent) -> None:
    """Create/update (idempotent) or remove the agent's django-q2 ``Schedule``.

    django-q2 1.11's ``Schedule`` has no enabled flag, so a paused agent has no schedule row; it
    is recreated on resume. ``next_run`` is the cron's next time after now (``settings.TIME_ZONE``).
    """
    from django_q.models import Schedule

    if not agent.schedule_enabled:
        Schedule.objects.filter(name=agent.schedule_name).delete()
        return
    next_run = schedule_preview(cron=agent.schedule_cron, tz=ZoneInfo("UTC"), count=1)[0]
    existing = Schedule.objects.filter(name=agent.schedule_name).first()
    if (
        existing is not None
        and existing.cron == agent.schedule_cron
        and existing.func == TASK_SCHEDULED
        and existing.args == repr(agent.pk)
        and existing.schedule_type == Schedule.CRON
    ):
        return  # unchanged: keep next_run as the scheduler left it
    Schedule.objects.update_or_create(
        name=agent.schedule_name,
        defaults={
            "func": TASK_SCHEDULED,
            "args": repr(agent.pk),
            "kwargs": None,
            "schedule_type": Schedule.CRON,
            "cron": agent.schedule_cron,
            "repeats": -1,
            "next_run": next_run,
        },
    )


def schedules_sync_all() -> int:
    """Sync every agent's schedule and delete schedules of agents that no longer exist.

    Returns the number of enabled agent schedules.
    """
    from django_q.models import Schedule

    names = set()
    for agent in Agent.objects.all():
        schedule_sync(agent=agent)
        if agent.schedule_enabled:
            names.add(agent.schedule_name)
    Schedule.objects.filter(name__startswith="consolidate:", func=TASK_SCHEDULED).exclude(
        name__in=names
    ).delete()
    return len(names)


def purge_schedule_ensure() -> bool:
    """Create (idempotent) the worker's daily django-q2 ``Schedule`` that runs
    ``tasks.purge_archives`` at ``settings.ARCHIVE_PURGE_CRON`` (:data:`PURGE_SCHEDULE`): the
    archived copies older than each agent's retention are deleted. Returns True when the row
    was created or corrected."""
    from django.conf import settings

    return _cron_schedule_ensure(PURGE_SCHEDULE, TASK_PURGE, settings.ARCHIVE_PURGE_CRON)


def recovery_schedule_ensure() -> bool:
    """Create (idempotent) the worker's own django-q2 ``Schedule`` that runs
    ``tasks.recover_passes`` every minute (``RECOVERY_SCHEDULE``): an apply cut short by a
    Chroma outage resumes once the store answers, and a pass or import whose worker died is
    planned or imported again, without an operator. A cron schedule, so a worker that was down
    for hours does not replay the missed runs (``Q_CLUSTER["catch_up"]`` replays only
    MINUTES/HOURLY… schedules). Returns True when the row was created or corrected.
    """
    return _cron_schedule_ensure(RECOVERY_SCHEDULE, TASK_RECOVER, "* * * * *")


def notify_schedule_ensure() -> bool:
    """Create (idempotent) the worker's django-q2 ``Schedule`` that runs
    ``tasks.notification_checks`` at ``settings.NOTIFY_CHECK_CRON`` (:data:`NOTIFY_SCHEDULE`):
    stuck applies and imports, proposals waiting longer than the set hours. Returns True when
    the row was created or corrected."""
    from django.conf import settings

    return _cron_schedule_ensure(NOTIFY_SCHEDULE, TASK_NOTIFY_CHECK, settings.NOTIFY_CHECK_CRON)


def _cron_schedule_ensure(name: str, func: str, cron: str) -> bool:
    """Create or correct the repeating django-q2 CRON ``Schedule`` called ``name`` that runs
    ``func`` at ``cron``; True when a row was written, False when it already matched."""
    from django_q.models import Schedule

    wanted = {"func": func, "schedule_type": Schedule.CRON, "cron": cron}
    existing = Schedule.objects.filter(name=name).first()
    if existing is not None and all(getattr(existing, k) == v for k, v in wanted.items()):
        return False
    Schedule.objects.update_or_create(
        name=name, defaults={**wanted, "args": None, "kwargs": None, "repeats": -1}
    )
    return True


def schedule_skipped_waiting(agent: Agent, pending: Pass, slot: str) -> None:
    """Audit a scheduled run skipped because ``pending`` waits for its reviewer: the first skip
    is a row, later ones while the same proposal waits update it (count, last slot), so a
    ``* * * * *`` schedule does not write one history row a minute."""
    _skipped_folded(
        agent,
        pending,
        slot,
        key="pending_pass",
        why=f"pass #{pending.pk} is waiting for its reviewer; nothing was planned.",
    )


def schedule_skipped_unchanged(agent: Agent, last: Pass, slot: str) -> None:
    """Audit a scheduled run skipped because nothing it plans from changed since ``last`` (the
    agent's latest planned pass: same store, policy, decisions, probes, checkpoint and day,
    ``selectors.passes.plan_inputs_digest``): it would plan ``last``'s plan again. Folded into
    one row per ``last`` like :func:`schedule_skipped_waiting`."""
    _skipped_folded(
        agent,
        last,
        slot,
        key="unchanged_since",
        why=f"nothing changed since pass #{last.pk} (store, policy, decisions, probes); "
        "it would plan the same again.",
    )


def _skipped_folded(agent: Agent, run: Pass, slot: str, *, key: str, why: str) -> None:
    """One ``skipped`` row (actor ``schedule``) per ``run`` and ``key``: written by the first
    skip, updated by the later ones (``data["count"]``, ``data["last_slot"]``)."""
    first = (
        agent.events.filter(verb="skipped", run=run, **{f"data__{key}": run.pk})
        .order_by("-created_at", "-id")
        .first()
    )
    if first is None:
        audit(
            actor="schedule",
            verb="skipped",
            agent=agent,
            run=run,
            note=f"Scheduled run skipped: {why}",
            data={"slot": slot, key: run.pk, "count": 1, "last_slot": slot},
        )
        return
    count = int((first.data or {}).get("count") or 1) + 1
    first.data = {**(first.data or {}), "count": count, "last_slot": slot}
    first.note = f"Scheduled run skipped {count} times (last at {slot}): {why}"
    first.save(update_fields=["data", "note"])
