"""The worker's heartbeat: the sign of life ``/healthz`` reads
(:func:`memoryadmin.ops.selectors.health.worker_beat_age`)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from memoryadmin.core.leases import worker_id
from memoryadmin.ops.models import WorkerHeartbeat

__all__ = ["HEARTBEAT_SECONDS", "HEARTBEAT_STALE_AFTER", "worker_heartbeat_beat"]

HEARTBEAT_SECONDS = 15.0
"""How often ``manage.py run_worker`` beats; ``HEALTH_WORKER_MAX_AGE`` (120 s by default) is
several beats, so one slow database write does not fail the health check."""
HEARTBEAT_STALE_AFTER = timedelta(days=1)
"""A heartbeat row older than this belongs to a dead worker and is deleted by the next beat."""


def worker_heartbeat_beat(*, worker: str | None = None) -> WorkerHeartbeat:
    """Record that ``worker`` (default: this process, ``"host:pid"``) is alive now, and delete
    rows older than :data:`HEARTBEAT_STALE_AFTER`. Returns the row. Database errors propagate
    (the caller, the worker's loop, logs them and beats again later)."""
    now = timezone.now()
    beat, _ = WorkerHeartbeat.objects.update_or_create(
        worker=worker or worker_id(), defaults={"beat_at": now}
    )
    WorkerHeartbeat.objects.filter(beat_at__lt=now - HEARTBEAT_STALE_AFTER).delete()
    return beat
