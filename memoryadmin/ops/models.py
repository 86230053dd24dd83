"""The worker's heartbeat (``/healthz`` reads it)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class WorkerHeartbeat(models.Model):
    """The last sign of life of one worker process (``manage.py run_worker`` writes it every
    few seconds; ``/healthz`` reads the newest). One row per ``host:pid``; rows of dead workers
    are deleted once older than a day."""

    worker = models.CharField(max_length=200, unique=True, help_text='"host:pid"')
    beat_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.worker} at {self.beat_at:%Y-%m-%d %H:%M:%S}"
