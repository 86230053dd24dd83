"""JSONL uploads imported on the worker: a 100,000-line file takes minutes to embed,
far beyond a web request's timeout, so the request only saves the file and queues a job.

- :func:`import_job_create` — save the upload under ``var/imports/``, create the
  :class:`~memoryadmin.memories.models.ImportJob`, and queue ``tasks.import_memories`` after commit.
- :func:`import_job_run` — the task's body: validate the whole file, then write it all or nothing
  (:func:`~memoryadmin.memories.services.transfer.memories_import_jsonl`), recording progress on the
  job.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.leases import worker_id
from memoryadmin.memories.models import ImportJob
from memoryadmin.memories.services.transfer import (
    ImportInterrupted,
    ImportRefused,
    memories_import_jsonl,
)

__all__ = [
    "MAX_JOB_ERRORS",
    "TASK_IMPORT",
    "import_dir",
    "import_job_create",
    "import_job_enqueue",
    "import_job_run",
]

log = logging.getLogger(__name__)

TASK_IMPORT = "memoryadmin.tasks.import_memories"
MAX_JOB_ERRORS = 100
"""Invalid lines kept on a job for the page (every one is counted in ``error_count``)."""


def import_dir() -> Path:
    """``var/imports/``: uploads waiting for (or being imported by) the worker."""
    path = Path(settings.VAR_DIR) / "imports"
    path.mkdir(parents=True, exist_ok=True)
    return path


@transaction.atomic
def import_job_create(*, agent: Agent, upload: Any, skip_invalid: bool, user: Any) -> ImportJob:
    """Save ``upload`` (a Django ``UploadedFile``, streamed in chunks) and queue its import.

    Returns the job (status ``queued``); the django-q2 task starts after the transaction
    commits. The caller enforces the size cap (``settings.MEMORYADMIN_MAX_UPLOAD_BYTES``).
    """
    path = import_dir() / f"{uuid.uuid4().hex}.jsonl"
    with open(path, "wb") as fh:
        for chunk in upload.chunks():
            fh.write(chunk)
    job = ImportJob.objects.create(
        agent=agent,
        user=user if getattr(user, "pk", None) else None,
        actor=getattr(user, "username", "") or "web",
        file_name=Path(upload.name).name[:255],
        path=str(path),
        size=path.stat().st_size,
        skip_invalid=skip_invalid,
    )

    import_job_enqueue(job.pk)
    return job


def import_job_enqueue(pk: int) -> None:
    """Queue ``tasks.import_memories(pk)`` once the surrounding transaction commits (a job that
    is no longer ``queued`` makes it a no-op, so sending it twice is safe)."""

    def send() -> None:
        from django_q.tasks import async_task

        async_task(TASK_IMPORT, pk, task_name=f"import_memories:{pk}")

    transaction.on_commit(send)


def import_job_run(*, job: ImportJob) -> ImportJob:
    """Import the job's file (a no-op unless it is ``queued``); returns the finished job.

    Statuses: ``validating`` → ``importing`` (``done`` of ``total`` updated every batch) →
    ``done`` (``report``), ``refused`` (``errors``; nothing written) or ``failed`` (``message``;
    a part-way store failure is undone, see ``memories_import_jsonl``); the saved file is then
    deleted. When the undo fails too (the store is gone), the job is ``interrupted``: the file
    is kept and recovery (``import_jobs_recover``) imports it again once the store answers —
    so a failed import is either undone or finished, never left half-done. Never raises for bad
    input or a store failure.
    """
    claimed = ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.QUEUED).update(
        status=ImportJob.Status.VALIDATING, worker=worker_id(), started_at=timezone.now()
    )
    job.refresh_from_db()
    if not claimed:
        return job

    def on_valid(total: int) -> None:
        ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.IMPORTING, total=total)

    def progress(n: int, _label: str) -> None:
        ImportJob.objects.filter(pk=job.pk).update(done=F("done") + n)

    outcome: dict[str, Any] = {}
    try:
        report = memories_import_jsonl(
            agent=job.agent,
            fileobj=Path(job.path),
            skip_invalid=job.skip_invalid,
            user=job.user,
            actor=job.actor,
            progress=progress,
            name=job.file_name,
            on_valid=on_valid,
        )
        outcome = {
            "status": ImportJob.Status.DONE,
            "report": report.to_dict(),
            "errors": [[e.line, e.message] for e in report.errors[:MAX_JOB_ERRORS]],
            "error_count": report.error_count,
        }
    except ImportRefused as exc:
        outcome = {
            "status": ImportJob.Status.REFUSED,
            "message": str(exc),
            "errors": [[e.line, e.message] for e in exc.errors[:MAX_JOB_ERRORS]],
            "error_count": exc.error_count,
        }
    except ImportInterrupted as exc:
        if exc.undone:
            outcome = {"status": ImportJob.Status.FAILED, "message": str(exc)}
        else:  # part of it is live: keep the file, recovery imports it again (an upsert)
            outcome = {
                "status": ImportJob.Status.INTERRUPTED,
                "message": f"The store failed after {exc.written:,} memories were written and "
                "they could not be taken back; the import resumes by itself once the store "
                "answers (memories already written are skipped).",
            }
    except ServiceError as exc:  # StoreUnavailable before this attempt's first write
        if job.resumes:  # an earlier attempt left memories written: still to finish
            outcome = {
                "status": ImportJob.Status.INTERRUPTED,
                "message": f"The store is unavailable again ({exc}); the import resumes by "
                "itself once it answers.",
            }
        else:
            outcome = {
                "status": ImportJob.Status.FAILED,
                "message": f"The store is unavailable, nothing was written: {exc}",
            }
    except Exception as exc:  # the last resort: the job must end, never stay "importing"
        log.exception("import job %s crashed", job.pk)
        outcome = {"status": ImportJob.Status.FAILED, "message": f"{type(exc).__name__}: {exc}"}
    if outcome["status"] == ImportJob.Status.INTERRUPTED:
        ImportJob.objects.filter(pk=job.pk).update(worker="", **outcome)
    else:
        Path(job.path).unlink(missing_ok=True)
        ImportJob.objects.filter(pk=job.pk).update(finished_at=timezone.now(), **outcome)
    job.refresh_from_db()
    return job
