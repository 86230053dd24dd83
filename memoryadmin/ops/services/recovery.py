"""Recovery: finish or re-queue the work a dead worker or a store outage left behind.

:func:`passes_recover` (``manage.py recover_passes``; run by ``run_worker`` at start and by the
worker itself every minute, the schedule
:data:`~memoryadmin.agents.services.schedules.RECOVERY_SCHEDULE`) handles, per pass:

- ``approved`` / ``applying`` / ``rolling_back``: apply or roll back again under the pass's
  lease (:mod:`.leases`), each operation from its journal step (I-3), nothing done twice. A
  pass leased by a live process is skipped. This is also how an apply cut short by a Chroma
  outage resumes once the store answers again, and how an approval whose apply was postponed
  (the store unreachable before anything was written: still ``approved``) is applied.
- ``running`` (planning): planning holds the lease too, so a pass whose planning process is
  dead on this host is planned again at once; one planned on another host when its lease
  expired (the task timeout: django-q2 has killed the task by then). A pass from before leases
  existed (no owner) is re-planned after the task timeout. Planning writes nothing to the
  store, so planning again is safe; the proposal rows of the dead attempt are dropped.
- at worker start only (``resend_queued``): ``queued`` passes and import jobs are sent to the
  queue again. A dead cluster's messages stay locked in the broker for ``Q_RETRY`` (an hour);
  a second delivery is a no-op (the task claims its pass or job by a conditional UPDATE).

And per import job ``validating`` / ``importing`` whose worker is gone (same rule), or
``interrupted`` (a store outage part-way whose undo failed too) once its store answers: queued
again while its saved file exists (an import is an upsert, so re-running it completes it),
else ``failed`` with the reason.

And per forget request ``applying`` (:func:`forget_requests_recover`): purged under its lease
from its journal (the ids already deleted are not asked again), unless a live process holds
the lease.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.core.leases import (
    holder_gone,
    lease_acquire,
    lease_holder,
    lease_release,
    lease_seconds,
)
from memoryadmin.core.services import TASK_RUN, enqueue, transition
from memoryadmin.memories.models import ForgetRequest, ImportJob
from memoryadmin.memories.services.forget import forget_run
from memoryadmin.memories.services.transfer_jobs import import_job_enqueue
from memoryadmin.proposals.models import Operation, Pass, PassSnapshot
from memoryadmin.proposals.services.apply import pass_apply
from memoryadmin.proposals.services.rollback import pass_rollback

__all__ = [
    "forget_requests_recover",
    "import_jobs_recover",
    "passes_recover",
    "resume_leased",
]

log = logging.getLogger(__name__)

S = Pass.Status
J = ImportJob.Status


def _resume(run: Pass) -> Pass:
    if run.status == S.APPROVED and run.error and not _store_answers(run):
        return run  # apply postponed: still unreachable, tried again at the next recovery
    if run.status in (S.APPROVED, S.APPLYING):
        return pass_apply(run=run)
    if run.status == S.ROLLING_BACK:
        return pass_rollback(run=run)
    return run


def _store_answers(run: Pass) -> bool:
    """True when the agent's store can be opened and counted (one cheap call), so an apply
    postponed by an outage is retried only once the store is back, not re-audited every
    minute meanwhile."""
    try:
        stores.get_store(run.agent).count()
    except StoreUnavailable:
        return False
    return True


def resume_leased(run: Pass) -> tuple[Pass, bool]:
    """Apply / roll back ``run`` under its lease; ``(pass, False)`` when another process holds
    it."""
    if not lease_acquire(run):
        return Pass.objects.get(pk=run.pk), False
    try:
        return _resume(run), True
    finally:
        lease_release(run)


def _planning_orphaned(run: Pass, now: datetime) -> bool:
    if run.lease_owner:
        return holder_gone(run.lease_owner, run.lease_expires_at, now=now)
    started = run.started_at or run.created_at
    return (now - started).total_seconds() >= lease_seconds()


def _replan(run: Pass) -> Pass | None:
    """``running`` → ``queued`` (dropping the dead attempt's rows) and send it to the queue;
    None when another recoverer or the worker moved it first."""
    who = run.lease_owner or "a worker"
    try:
        with transaction.atomic():
            Operation.objects.filter(run=run).delete()
            PassSnapshot.objects.filter(run=run).delete()
            run = transition(
                run,
                frm=(S.RUNNING,),
                to=S.QUEUED,
                actor="cli",
                verb="requeued",
                note=f"Interrupted while planning ({who} stopped); planned again.",
                lease_owner="",
                lease_expires_at=None,
                progress=0.0,
                progress_label="Queued again after an interrupted run",
            )
            enqueue(TASK_RUN, run.pk)
    except ServiceError:
        return None
    return Pass.objects.select_related("agent").get(pk=run.pk)


def passes_recover(
    *,
    stdout: Callable[[str], None] | None = None,
    now: datetime | None = None,
    resend_queued: bool = False,
) -> list[Pass]:
    """Resume, re-plan or re-send what dead work left behind (module docstring); also recovers
    import jobs (:func:`import_jobs_recover`). ``stdout`` receives one line per pass touched or
    skipped. Returns the passes it touched (applied, rolled back, planned again)."""
    now = now or timezone.now()
    say = stdout or (lambda _line: None)
    out: list[Pass] = []
    active = [S.APPROVED, S.APPLYING, S.ROLLING_BACK]
    for run in Pass.objects.filter(status__in=active).select_related("agent").order_by("pk"):
        run, mine = resume_leased(run)
        if not mine:
            holder = lease_holder(run) or "another process"
            say(f"pass #{run.pk} of {run.agent.slug}: being resumed by {holder}")
            continue
        out.append(run)
    for run in Pass.objects.filter(status=S.RUNNING).select_related("agent").order_by("pk"):
        if not _planning_orphaned(run, now):
            started = run.started_at or run.created_at
            by = f" by {run.lease_owner}" if run.lease_owner else ""
            say(f"pass #{run.pk} of {run.agent.slug}: still running{by} (started {started:%H:%M})")
            continue
        replanned = _replan(run)
        if replanned is not None:
            out.append(replanned)
    if resend_queued:
        for run in Pass.objects.filter(status=S.QUEUED).select_related("agent").order_by("pk"):
            enqueue(TASK_RUN, run.pk)
            say(f"pass #{run.pk} of {run.agent.slug}: queued, sent to the workers again")
    for run in out:
        say(f"pass #{run.pk} of {run.agent.slug}: {run.status}")
    import_jobs_recover(stdout=say, now=now, resend_queued=resend_queued)
    forget_requests_recover(stdout=say)
    return out


def _interrupted_imports_resume(say: Callable[[str], None], now: datetime) -> list[ImportJob]:
    """Import jobs a store outage left ``interrupted`` (part written, the undo failed too):
    queued again once the agent's store answers, while the saved file exists (an upsert:
    memories already written are skipped); ``failed`` with the reason when the file is gone."""
    changed: list[ImportJob] = []
    jobs = ImportJob.objects.filter(status=J.INTERRUPTED).select_related("agent").order_by("pk")
    for job in jobs:
        if Path(job.path).is_file():
            try:
                stores.get_store(job.agent).count()
            except StoreUnavailable as exc:
                say(f"import #{job.pk}: waits for the store ({exc})")
                continue
            outcome = {"status": J.QUEUED, "done": 0, "total": 0, "worker": ""}
            outcome["message"] = "Interrupted by a store outage; imported again."
        else:
            outcome = {"status": J.FAILED, "finished_at": now}
            outcome["message"] = (
                f"Interrupted by a store outage and the uploaded file is gone; {job.done} of "
                f"{job.total} memories were written. Upload the file again to finish."
            )
        with transaction.atomic():
            if not ImportJob.objects.filter(pk=job.pk, status=J.INTERRUPTED).update(
                **outcome, resumes=job.resumes + 1
            ):
                continue
            if outcome["status"] == J.QUEUED:
                import_job_enqueue(job.pk)
        log.warning("import #%s: %s", job.pk, outcome["message"])
        say(f"import #{job.pk}: {outcome['status']} ({outcome['message']})")
        job.refresh_from_db()
        changed.append(job)
    return changed


def forget_requests_recover(*, stdout: Callable[[str], None] | None = None) -> list[ForgetRequest]:
    """Purge every ``applying`` forget request no live process holds (a dead worker's, a web
    process's from before the worker purged them, or one whose task is still queued: the task
    then finds it done), once its agent's store answers (until then it stays ``applying``).
    Returns the requests it ran; each ends ``applied`` or ``failed``."""
    say = stdout or (lambda _line: None)
    out = []
    applying = ForgetRequest.objects.filter(status=ForgetRequest.Status.APPLYING)
    for req in applying.select_related("agent").order_by("pk"):
        if req.agent is not None:
            try:  # a store still down would fail it: it waits for the next recovery instead
                stores.get_store(req.agent).count()
            except StoreUnavailable as exc:
                say(f"forget request #{req.pk}: waits for the store ({exc})")
                continue
        req, mine = forget_run(request=req)
        if not mine:
            say(f"forget request #{req.pk}: being purged by {lease_holder(req) or 'a worker'}")
            continue
        log.warning("forget request #%s resumed: %s", req.pk, req.status)
        say(f"forget request #{req.pk}: {req.status}")
        out.append(req)
    return out


def import_jobs_recover(
    *,
    stdout: Callable[[str], None] | None = None,
    now: datetime | None = None,
    resend_queued: bool = False,
) -> list[ImportJob]:
    """Import jobs whose worker is gone (module docstring): queued again while the saved file
    exists, else ``failed`` with the reason. Returns the jobs it changed."""
    now = now or timezone.now()
    say = stdout or (lambda _line: None)
    changed: list[ImportJob] = []
    running = ImportJob.objects.filter(status__in=(J.VALIDATING, J.IMPORTING)).order_by("pk")
    for job in running:
        started = job.started_at or job.created_at
        expires = started + timedelta(seconds=lease_seconds())
        gone = holder_gone(job.worker, expires, now=now) if job.worker else expires < now
        if not gone:
            continue
        who = job.worker or "its worker"
        if Path(job.path).is_file():
            outcome = {"status": J.QUEUED, "done": 0, "total": 0, "worker": ""}
            outcome["message"] = f"Interrupted ({who} stopped); imported again from the start."
        else:
            outcome = {"status": J.FAILED, "finished_at": now}
            outcome["message"] = (
                f"Interrupted ({who} stopped) and the uploaded file is gone; {job.done} of "
                f"{job.total} memories were written. Upload the file again to finish (an import "
                "updates memories it already wrote, it never duplicates them)."
            )
        with transaction.atomic():
            if not ImportJob.objects.filter(pk=job.pk, status=job.status, worker=job.worker).update(
                **outcome
            ):
                continue  # its worker (or another recoverer) moved it first
            if outcome["status"] == J.QUEUED:
                import_job_enqueue(job.pk)
        log.warning("import #%s: %s", job.pk, outcome["message"])
        say(f"import #{job.pk}: {outcome['status']} ({outcome['message']})")
        job.refresh_from_db()
        changed.append(job)
    changed += _interrupted_imports_resume(say, now)
    if resend_queued:
        for pk in ImportJob.objects.filter(status=J.QUEUED).values_list("pk", flat=True):
            if all(pk != job.pk for job in changed):
                import_job_enqueue(pk)
    return changed
