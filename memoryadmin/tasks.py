"""django-q2 task entry points: thin, primitive ids, safe to run twice, never raise.

Each loads its object, calls one service and records failures on the pass; the return value is
a short sentence stored in django-q2's result (the UI reads our own models, never these).
"""

from __future__ import annotations

import logging

from django.utils.translation import ngettext
from django_q.exceptions import TimeoutException

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.core.errors import PassAlreadyActive
from memoryadmin.core.leases import lease_holder
from memoryadmin.memories.models import ForgetRequest, ImportJob
from memoryadmin.memories.services.forget import forget_run
from memoryadmin.memories.services.transfer_jobs import import_job_run
from memoryadmin.notifications.services.delivery import delivery_send
from memoryadmin.notifications.services.notifications import notifications_check
from memoryadmin.notifications.services.notifications import notify_pass as notify_pass_service
from memoryadmin.ops.services.recovery import passes_recover, resume_leased
from memoryadmin.proposals.models import DryRun, Pass
from memoryadmin.proposals.services.dry_runs import dry_run_run, dry_run_stop, dry_runs_sweep
from memoryadmin.proposals.services.passes import pass_fail, pass_request_scheduled, pass_run
from memoryadmin.proposals.services.rollback import archive_purge

__all__ = [
    "purge_archives",
    "apply_forget",
    "apply_pass",
    "deliver_notification",
    "notification_checks",
    "notify_pass",
    "import_memories",
    "recover_passes",
    "rollback_pass",
    "run_dry_run",
    "run_pass",
    "scheduled_pass",
]

log = logging.getLogger(__name__)


def run_pass(pass_id: int) -> str:
    """Plan pass ``pass_id`` (a no-op unless it is queued); failures mark it ``failed``."""
    try:
        run = Pass.objects.get(pk=pass_id)
    except Pass.DoesNotExist:
        return f"pass #{pass_id} does not exist"
    try:
        run = pass_run(run=run)
    except Exception as exc:  # pass_run records its own failures; this is the last resort
        log.exception("run_pass(%s) crashed", pass_id)
        run = pass_fail(run=run, error=f"{type(exc).__name__}: {exc}")
    return f"pass #{pass_id}: {run.status}"


def run_dry_run(dry_run_id: int) -> str:
    """Plan dry run ``dry_run_id`` (a no-op unless it is queued) and store its figures.

    When django-q2 stops the task at its timeout (the dry run's time budget plus a grace), the
    dry run is marked ``failed`` before the worker process is replaced.
    """
    dry = DryRun.objects.select_related("agent").filter(pk=dry_run_id).first()
    if dry is None:
        return f"dry run #{dry_run_id} does not exist"
    try:
        dry = dry_run_run(dry_run=dry)
    except TimeoutException:
        dry_run_stop(dry_run_id=dry_run_id, reason="The worker stopped it at its time budget.")
        raise
    return f"dry run #{dry_run_id}: {dry.status}"


def _resume(pass_id: int, what: str) -> str:
    """Resume pass ``pass_id`` (apply or rollback, by its status) under its lease."""
    try:
        run = Pass.objects.get(pk=pass_id)
    except Pass.DoesNotExist:
        return f"pass #{pass_id} does not exist"
    try:
        # Under the pass's lease: a recoverer resuming the same pass makes this a no-op.
        run, mine = resume_leased(run)
    except Exception as exc:
        log.exception("%s(%s) crashed", what, pass_id)
        Pass.objects.filter(pk=pass_id).update(error=f"{type(exc).__name__}: {exc}")
        return f"pass #{pass_id}: {what} interrupted ({exc})"
    if not mine:
        return f"pass #{pass_id}: being worked on by {lease_holder(run)}"
    return f"pass #{pass_id}: {run.status}"


def apply_pass(pass_id: int) -> str:
    """Apply (or resume applying) pass ``pass_id``; a no-op unless approved or applying."""
    return _resume(pass_id, "apply")


def rollback_pass(pass_id: int) -> str:
    """Roll back (or resume rolling back) pass ``pass_id``; a no-op unless ``rolling_back``."""
    return _resume(pass_id, "rollback")


def apply_forget(request_id: int) -> str:
    """Purge approved forget request ``request_id`` under its lease (a no-op unless
    ``applying``; resumed from its journal); a failure leaves it ``failed`` with the reason."""
    req = ForgetRequest.objects.select_related("agent").filter(pk=request_id).first()
    if req is None:
        return f"forget request #{request_id} does not exist"
    try:
        req, mine = forget_run(request=req)
    except Exception as exc:
        log.exception("apply_forget(%s) crashed", request_id)
        ForgetRequest.objects.filter(pk=request_id).update(
            status=ForgetRequest.Status.FAILED, error=f"{type(exc).__name__}: {exc}"
        )
        return f"forget request #{request_id}: failed ({exc})"
    if not mine:
        return f"forget request #{request_id}: being purged by {lease_holder(req)}"
    return f"forget request #{request_id}: {req.status}"


def scheduled_pass(agent_id: int) -> str:
    """The agent's django-q2 ``Schedule`` target: request a pass with trigger ``schedule``.

    Skipped (audited ``skipped``) while a proposal waits for its reviewer or when this local
    calendar slot already ran (daylight saving); refused (audited ``refused``) while a pass is
    active. A deleted or paused agent is skipped.
    """
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return f"agent #{agent_id} does not exist"
    if not agent.schedule_enabled:
        return f"agent {agent.slug}: schedule paused"
    try:
        run = pass_request_scheduled(agent=agent)
    except PassAlreadyActive as exc:
        return f"agent {agent.slug}: refused ({exc})"
    except Exception as exc:
        log.exception("scheduled_pass(%s) crashed", agent_id)
        return f"agent {agent.slug}: {type(exc).__name__}: {exc}"
    if run is None:
        return f"agent {agent.slug}: skipped (see the audit)"
    return f"agent {agent.slug}: pass #{run.pk} queued"


def import_memories(job_id: int) -> str:
    """Import the JSONL upload of job ``job_id`` (a no-op unless it is queued)."""
    job = ImportJob.objects.select_related("agent", "user").filter(pk=job_id).first()
    if job is None:
        return f"import #{job_id} does not exist"
    job = import_job_run(job=job)
    return f"import #{job_id}: {job.status}"


def purge_archives() -> str:
    """The worker's daily archive purge (django-q2 ``Schedule`` ``PURGE_SCHEDULE``, created by
    ``run_worker``): :func:`~.services.rollback.archive_purge`. Never raises."""
    try:
        purged = archive_purge()
    except Exception as exc:
        log.exception("purge_archives crashed")
        return f"archive purge crashed: {type(exc).__name__}: {exc}"
    if not purged:
        return "nothing to purge"
    return "purged " + ", ".join(f"{slug}: {n}" for slug, n in purged.items())


def recover_passes() -> str:
    """The worker's every-minute recovery (django-q2 ``Schedule`` ``RECOVERY_SCHEDULE``, created
    by ``run_worker``): :func:`passes_recover`, once the store answers.

    While Chroma does not answer nothing is tried: each waiting pass is logged at WARNING, and
    the next minute tries again. Never raises.
    """
    try:
        dry_runs_sweep()  # database only: done even while the store is down
    except Exception:
        log.exception("dry_runs_sweep crashed")
    waiting = list(
        Pass.objects.filter(
            status__in=(Pass.Status.APPROVED, Pass.Status.APPLYING, Pass.Status.ROLLING_BACK)
        ).values_list("pk", "status")
    )
    try:
        stores.get_client().heartbeat()
    except Exception as exc:
        stores.reset_client_cache()  # a restarted server gets a fresh client next minute
        for pk, status in waiting:
            log.warning("pass #%s (%s) waits for the store: %s", pk, status, exc)
        forgets = ForgetRequest.objects.filter(status=ForgetRequest.Status.APPLYING)
        for pk in forgets.values_list("pk", flat=True):
            log.warning("forget request #%s (applying) waits for the store: %s", pk, exc)
        return f"store unavailable, {len(waiting)} pass(es) waiting: {exc}"
    lines: list[str] = []
    try:
        runs = passes_recover(stdout=lines.append)
    except Exception as exc:
        log.exception("recover_passes crashed")
        return f"recovery crashed: {type(exc).__name__}: {exc}"
    for line in lines:  # "still running …" every minute: only when debugging
        log.debug("recovery: %s", line)
    for run in runs:
        log.info("recovered pass #%s of agent #%s: %s", run.pk, run.agent_id, run.status)
    return f"recovered {len(runs)} pass(es)"


def notify_pass(pass_id: int, event: str) -> str:
    """Tell the subscribers of pass ``pass_id``'s agent about ``event`` (enqueued after the
    pass's transition commits). Never raises."""
    try:
        notification = notify_pass_service(pass_id=pass_id, event=event)
    except Exception as exc:
        log.exception("notify_pass(%s, %s) crashed", pass_id, event)
        return f"notify pass #{pass_id} {event}: {type(exc).__name__}: {exc}"
    if notification is None:
        return f"pass #{pass_id} {event}: nothing to tell"
    return f"pass #{pass_id} {event}: notification #{notification.pk}"


def deliver_notification(delivery_id: int) -> str:
    """Make the next attempt of delivery ``delivery_id`` (a failure schedules the retry).
    Never raises."""
    try:
        delivery = delivery_send(delivery_id=delivery_id)
    except Exception as exc:
        log.exception("deliver_notification(%s) crashed", delivery_id)
        return f"delivery #{delivery_id}: {type(exc).__name__}: {exc}"
    if delivery is None:
        return f"delivery #{delivery_id} does not exist"
    attempts = ngettext("attempt", "attempts", delivery.attempts)
    return f"delivery #{delivery_id}: {delivery.status} after {delivery.attempts} {attempts}"


def notification_checks() -> str:
    """The periodic checks (django-q2 ``Schedule`` ``NOTIFY_SCHEDULE``): stuck applies and
    imports, proposals waiting too long. Never raises."""
    try:
        emitted = notifications_check()
    except Exception as exc:
        log.exception("notification_checks crashed")
        return f"notification checks crashed: {type(exc).__name__}: {exc}"
    return f"{len(emitted)} {ngettext('notification', 'notifications', len(emitted))}"
