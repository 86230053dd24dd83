"""Leases: which process works on a pass (plan, apply, rollback) or purges a forget request, and
whether it still lives.

A lease is ``Pass.lease_owner`` ("host:pid") and ``Pass.lease_expires_at`` (the task timeout
after it was taken: django-q2 kills a task by then, so a lease never needs to outlive it). It is
taken by a conditional UPDATE, so two processes never work on the same pass at once. A
:class:`~memoryadmin.memories.models.ForgetRequest` has the same two fields and rules. Recovery
(:mod:`.recovery`) asks :func:`holder_gone` whether the work a pass or an import job is marked
with was orphaned: its process is dead on this host, or its lease expired.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from memoryadmin.memories.models import ForgetRequest
from memoryadmin.proposals.models import Pass

Leased = Pass | ForgetRequest

__all__ = [
    "holder_gone",
    "lease_acquire",
    "lease_holder",
    "lease_release",
    "lease_seconds",
    "worker_id",
]


def worker_id() -> str:
    """``"host:pid"`` of this process: the value of a lease it holds."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lease_seconds() -> float:
    """Length of a lease in seconds: django-q2's task timeout (``Q_CLUSTER["timeout"]``)."""
    return float(settings.Q_CLUSTER.get("timeout") or 1800)


def _holder_dead(owner: str, since: datetime | None = None) -> bool:
    """True when ``owner`` ("host:pid") is a process on this host that no longer runs — or
    whose pid now belongs to a process started after ``since`` (when the work was taken): pids
    are reused, soon in a container where a restarted worker gets the same small pids."""
    import psutil

    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        started = psutil.Process(int(pid)).create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # exists, but not ours to inspect: assume it is the holder
        return False
    return since is not None and started > since.timestamp() + 1.0  # 1 s: clock granularity


def holder_gone(owner: str, expires_at: datetime | None, *, now: datetime | None = None) -> bool:
    """True when the work held by ``owner`` ("host:pid") was orphaned: that process is dead on
    this host (known at once), or the lease expired at ``expires_at`` (another host: the task
    timeout has passed, so django-q2 has killed the task). False for ``owner == ""``."""
    if not owner:
        return False
    taken = expires_at - timedelta(seconds=lease_seconds()) if expires_at else None
    if _holder_dead(owner, taken):
        return True
    return expires_at is not None and expires_at < (now or timezone.now())


def _rows(run: Leased | int) -> tuple[Any, int]:
    """The manager and pk of ``run``: a pass (an int is a pass's pk) or a forget request."""
    if isinstance(run, int):
        return Pass.objects, run
    return type(run).objects, run.pk


def lease_acquire(run: Leased | int, *, now: datetime | None = None) -> bool:
    """Take the lease of ``run`` (a pass, its pk, or a forget request) for this process
    (``"host:pid"``) for the task timeout.

    A conditional ``UPDATE … WHERE lease is free, expired, ours`` (atomic on SQLite and
    PostgreSQL); a lease held by a dead process of this host is taken over (compare-and-swap on
    its owner). Returns False when another live process holds it.
    """
    rows, pk = _rows(run)
    now = now or timezone.now()
    me, until = worker_id(), now + timedelta(seconds=lease_seconds())
    free = (
        Q(lease_owner="")
        | Q(lease_owner=me)
        | Q(lease_expires_at__lt=now)
        | Q(lease_expires_at__isnull=True)
    )
    if rows.filter(free, pk=pk).update(lease_owner=me, lease_expires_at=until):
        return True
    owner, expires = rows.filter(pk=pk).values_list("lease_owner", "lease_expires_at").first() or (
        "",
        None,
    )
    taken = expires - timedelta(seconds=lease_seconds()) if expires else None
    if owner and _holder_dead(owner, taken):
        return bool(
            rows.filter(pk=pk, lease_owner=owner).update(lease_owner=me, lease_expires_at=until)
        )
    return False


def lease_release(run: Leased | int) -> None:
    """Give up this process's lease of ``run`` (a no-op when another process holds it)."""
    rows, pk = _rows(run)
    rows.filter(pk=pk, lease_owner=worker_id()).update(lease_owner="", lease_expires_at=None)


def lease_holder(run: Leased | int) -> str:
    """``"host:pid"`` of the process holding the lease of ``run``, or ``""``."""
    rows, pk = _rows(run)
    return rows.filter(pk=pk).values_list("lease_owner", flat=True).first() or ""
