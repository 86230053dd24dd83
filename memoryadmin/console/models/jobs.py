"""Background work the console tracks: JSONL imports, dry runs and the worker's heartbeat."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from memoryadmin.console.models.core import Agent


class ImportJob(models.Model):
    """A JSONL upload imported by the worker (``tasks.import_memories``), with its progress.

    The file is saved under ``var/imports/`` until the job ends. ``done`` of ``total`` valid
    memories have been handled; ``report`` is ``ImportReport.to_dict()`` once done; ``errors``
    holds the first :data:`memoryadmin.console.services.transfer_jobs.MAX_JOB_ERRORS` invalid lines
    as ``[line, message]`` pairs and ``error_count`` all of them.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        VALIDATING = "validating"
        IMPORTING = "importing"
        DONE = "done"
        REFUSED = "refused"
        FAILED = "failed"

    ACTIVE = (Status.QUEUED, Status.VALIDATING, Status.IMPORTING)

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="import_jobs")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor = models.CharField(max_length=150, default="web")
    file_name = models.CharField(max_length=255)
    path = models.CharField(max_length=1024)
    size = models.BigIntegerField(default=0)
    skip_invalid = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    report = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    error_count = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # "host:pid" of the worker process importing the file, and when it claimed the job:
    # recovery re-queues a job whose worker died (services.recovery).
    worker = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import #{self.pk} of {self.file_name} into {self.agent_id}: {self.status}"

    @property
    def is_active(self) -> bool:
        """True while queued, validating or importing."""
        return self.status in self.ACTIVE

    @property
    def progress(self) -> float:
        """Fraction in [0, 1] of the valid memories handled so far (0 while validating)."""
        return min(1.0, self.done / self.total) if self.total else 0.0


class DryRun(models.Model):
    """A dry run planned by the worker (``tasks.run_dry_run``), its result kept for polling.

    ``queued → running → done | failed``. ``result`` is the dict
    :func:`memoryadmin.console.services.passes.pass_dry_run` returns (the figures of the pass
    that would be stored; nothing is written to the store). ``policy`` is the policy dict
    planned with (``policy_name`` the named policy asked for, ``""`` = the agent's own).
    At most one queued or running dry run per agent, enforced by the database
    (``dry_run_active_per_agent``); results are deleted ``MEMORYADMIN_DRY_RUN_KEEP_HOURS`` after
    they finish (:func:`memoryadmin.console.services.dry_runs.dry_runs_purge`).
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="dry_runs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor = models.CharField(max_length=150, default="web")
    policy = models.JSONField(default=dict, blank=True)
    policy_name = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    progress_label = models.CharField(max_length=200, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # "host:pid" of the worker process planning it.
    worker = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Peak resident memory of the planning process while it ran (bytes; 0 = unknown).
    peak_rss = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent"],
                condition=Q(status__in=["queued", "running"]),
                name="dry_run_active_per_agent",
            )
        ]
        indexes = [models.Index(fields=["created_by", "status"], name="dry_run_user_status")]

    def __str__(self) -> str:
        return f"dry run #{self.pk} of {self.agent_id}: {self.status}"

    def get_absolute_url(self) -> str:
        return reverse("dry_run_detail", args=[self.pk])

    @property
    def is_active(self) -> bool:
        """True while queued or running."""
        return self.status in self.ACTIVE

    @property
    def seconds(self) -> float | None:
        """Seconds from start to finish (or to now while running); ``None`` before it starts."""
        if self.started_at is None:
            return None
        end = self.finished_at or timezone.now()
        return max(0.0, (end - self.started_at).total_seconds())


class WorkerHeartbeat(models.Model):
    """The last sign of life of one worker process (``manage.py run_worker`` writes it every
    few seconds; ``/healthz`` reads the newest). One row per ``host:pid``; rows of dead workers
    are deleted once older than a day."""

    worker = models.CharField(max_length=200, unique=True, help_text='"host:pid"')
    beat_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.worker} at {self.beat_at:%Y-%m-%d %H:%M:%S}"
