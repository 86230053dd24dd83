"""Reads of dry runs: one by id (optionally waiting, bounded, for it to finish) and the dry runs
a page lists.

Waiting polls our own table (never django-q2's), a quarter of a second apart, and never longer
than ``MEMORYADMIN_DRY_RUN_MAX_WAIT`` seconds: the web process holds a connection, not a plan.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db.models import QuerySet

from memoryadmin.agents.models import Agent
from memoryadmin.proposals.models import DryRun

__all__ = ["POLL_SECONDS", "dry_run_get", "dry_run_wait", "dry_runs_of_agent", "max_wait"]

POLL_SECONDS = 0.25
"""How often :func:`dry_run_wait` reads the dry run's row again."""


def max_wait() -> float:
    """The longest wait a caller may ask for (seconds, ``MEMORYADMIN_DRY_RUN_MAX_WAIT``)."""
    return float(settings.MEMORYADMIN_DRY_RUN_MAX_WAIT)


def dry_run_get(pk: int) -> DryRun | None:
    """Dry run ``pk`` with its agent and creator, or ``None``."""
    return DryRun.objects.select_related("agent", "created_by").filter(pk=pk).first()


def dry_run_wait(dry_run: DryRun, seconds: float) -> DryRun:
    """``dry_run`` read again until it is done or failed, or ``seconds`` (clamped to
    [0, :func:`max_wait`]) have passed; returns the latest row (still active on a timeout)."""
    deadline = time.monotonic() + max(0.0, min(float(seconds), max_wait()))
    while dry_run.is_active and time.monotonic() < deadline:
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        dry_run.refresh_from_db()
    return dry_run


def dry_runs_of_agent(agent: Agent, *, limit: int = 5) -> QuerySet[DryRun]:
    """The agent's latest ``limit`` dry runs, newest first."""
    return agent.dry_runs.select_related("created_by").order_by("-created_at", "-id")[:limit]
