"""Dry-run services: request a dry run (queued for the worker), run it there within its time and
memory budget, sweep stopped and old ones.

The web process never plans a dry run (a security run saw six concurrent synchronous dry runs
grow the web process to 19.9 GB and keep planning after their clients left). A request stores a
queued :class:`DryRun` and enqueues ``tasks.run_dry_run``; the worker runs
:func:`~.passes.pass_dry_run` (the one dry-run path, the same figures ``consolidate --dry-run``
prints) and stores its figures as ``DryRun.result``; clients poll (or wait, bounded) for it.

Limits (settings, docs/API.md, "Dry runs"): one queued or running dry run per agent, enforced by the
database (``dry_run_active_per_agent``) — a second request with the same policy gets the active
one back, one with another policy is refused; ``MEMORYADMIN_DRY_RUNS_PER_USER`` queued or running
per user; ``MEMORYADMIN_DRY_RUN_SECONDS`` of planning; ``MEMORYADMIN_DRY_RUN_MAX_MB`` of memory.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import resource
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import ngettext

from consolidation import Policy
from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import DryRunLimit
from memoryadmin.core.leases import worker_id
from memoryadmin.core.services import TASK_DRY_RUN, actor_name, enqueue, jsonable, user_or_none
from memoryadmin.proposals.models import DryRun
from memoryadmin.proposals.services.passes import pass_dry_run

__all__ = [
    "DryRunBudgetExceeded",
    "KILL_GRACE_SECONDS",
    "dry_run_request",
    "dry_run_run",
    "dry_run_stop",
    "dry_runs_sweep",
    "memory_budget",
]

log = logging.getLogger(__name__)

D = DryRun.Status

KILL_GRACE_SECONDS = 30
"""django-q2 stops a dry-run task this many seconds after its time budget (the planner's own
check may be between two progress reports when the budget runs out)."""


class DryRunBudgetExceeded(Exception):
    """Planning went over the dry run's time budget (raised from its progress callback)."""


def dry_run_request(
    *,
    agent: Agent,
    user: Any,
    policy: Policy | None = None,
    policy_name: str = "",
    actor: str | None = None,
) -> tuple[DryRun, bool]:
    """Queue a dry run of ``agent`` for the worker; ``(dry_run, created)``.

    ``policy`` (``None`` = the agent's own, read now) is planned with; ``policy_name`` is the
    named policy asked for (``""`` = the agent's). When the agent already has a queued or running
    dry run with the same policy, that one is returned (``created`` False): retried and concurrent
    identical requests share one planning. Raises :class:`DryRunLimit` when the agent's active dry
    run has another policy, or ``user`` already has ``MEMORYADMIN_DRY_RUNS_PER_USER`` queued or
    running; ``ValueError`` for an invalid agent policy. Stopped and expired dry runs are swept
    first (:func:`dry_runs_sweep`), so a killed worker never blocks an agent for long.
    """
    chosen = policy if policy is not None else agent.get_policy()
    wanted = jsonable(chosen.to_dict())
    dry_runs_sweep()
    owner = user_or_none(user)
    for _attempt in range(2):
        existing = DryRun.objects.filter(agent=agent, status__in=DryRun.ACTIVE).first()
        if existing is not None:
            return _reuse(existing, wanted, policy_name), False
        _check_user_limit(owner)
        try:
            with transaction.atomic():
                dry = DryRun.objects.create(
                    agent=agent,
                    created_by=owner,
                    actor=actor or actor_name(user, "api"),
                    policy=wanted,
                    policy_name=policy_name,
                )
                enqueue(TASK_DRY_RUN, dry.pk, timeout=_task_timeout())
            return dry, True
        except IntegrityError:  # another request created the agent's dry run just now
            continue
    raise DryRunLimit(f"{agent.slug} has a dry run starting; poll again in a moment.")


def _reuse(existing: DryRun, wanted: dict[str, Any], policy_name: str) -> DryRun:
    """``existing`` when it plans what was asked, else :class:`DryRunLimit` naming it."""
    if existing.policy == wanted and existing.policy_name == policy_name:
        return existing
    asked = existing.policy_name or "the agent's own"
    raise DryRunLimit(
        f"Dry run #{existing.pk} of {existing.agent.slug} (policy {asked}) is {existing.status}; "
        "one dry run per agent at a time: poll it, then ask again.",
        active=existing,
        retry_after=10,
    )


def _check_user_limit(owner: Any) -> None:
    """:class:`DryRunLimit` when ``owner`` has reached ``MEMORYADMIN_DRY_RUNS_PER_USER``."""
    if owner is None:
        return
    limit = int(settings.MEMORYADMIN_DRY_RUNS_PER_USER)
    active = list(DryRun.objects.filter(created_by=owner, status__in=DryRun.ACTIVE)[: limit + 1])
    if len(active) >= limit:
        ids = ", ".join(f"#{d.pk}" for d in active)
        raise DryRunLimit(
            f"{owner.get_username()} has {len(active)} "
            f"{ngettext('dry run', 'dry runs', len(active))} queued or running ({ids}); "
            f"at most {limit} at a time: wait for one to finish.",
            active=active[0],
            retry_after=10,
        )


def _task_timeout() -> int:
    """django-q2's timeout for a dry-run task: the time budget plus :data:`KILL_GRACE_SECONDS`."""
    return int(settings.MEMORYADMIN_DRY_RUN_SECONDS) + KILL_GRACE_SECONDS


def dry_run_run(*, dry_run: DryRun) -> DryRun:
    """Plan ``dry_run`` here (the worker) and store its figures: ``queued → running → done``.

    A no-op unless it is queued (safe to run twice: the claim is a conditional ``UPDATE``).
    Planning is :func:`~.passes.pass_dry_run` with the stored policy, within
    ``MEMORYADMIN_DRY_RUN_SECONDS`` (checked at each progress report) and
    ``MEMORYADMIN_DRY_RUN_MAX_MB`` (:func:`memory_budget`). Any failure — over a budget, the
    store unreachable, an invalid policy — ends it ``failed`` with the reason in ``error``;
    nothing is written to the store either way. Never raises.
    """
    now = timezone.now()
    claimed = DryRun.objects.filter(pk=dry_run.pk, status=D.QUEUED).update(
        status=D.RUNNING, started_at=now, worker=worker_id(), progress_label="Planning"
    )
    dry_run.refresh_from_db()
    if not claimed:
        return dry_run
    budget = float(settings.MEMORYADMIN_DRY_RUN_SECONDS)
    limit_mb = int(settings.MEMORYADMIN_DRY_RUN_MAX_MB)
    started = time.monotonic()
    last = [0.0]

    def progress(fraction: float, label: str) -> None:
        elapsed = time.monotonic() - started
        if elapsed > budget:
            raise DryRunBudgetExceeded(label)
        if elapsed - last[0] >= 1.0:  # one UPDATE a second at most
            last[0] = elapsed
            DryRun.objects.filter(pk=dry_run.pk).update(
                progress=max(0.0, min(1.0, float(fraction))), progress_label=label[:200]
            )

    fields: dict[str, Any]
    peak: dict[str, int] = {}
    try:
        with memory_budget(limit_mb * 1024 * 1024, peak):
            figures = pass_dry_run(
                agent=dry_run.agent,
                policy=Policy.from_dict(dry_run.policy),
                now=now,
                progress=progress,
            )
        fields = {"status": D.DONE, "result": jsonable(figures), "progress": 1.0}
        fields["progress_label"] = "Planned"
    except DryRunBudgetExceeded as exc:
        fields = _failed(
            f"Stopped at its time budget of {budget:g} s (MEMORYADMIN_DRY_RUN_SECONDS) "
            f"while: {exc}."
        )
    except Exception as exc:
        log.info("dry run #%s failed", dry_run.pk, exc_info=True)
        fields = _failed(f"{type(exc).__name__}: {exc}")
        if limit_mb > 0 and (_out_of_memory(exc) or _at_limit(peak, limit_mb)):
            fields = _failed(
                f"Stopped at its memory budget of {limit_mb} MB (MEMORYADMIN_DRY_RUN_MAX_MB): "
                f"{type(exc).__name__}: {exc}"
            )
    fields.update(finished_at=timezone.now(), peak_rss=peak.get("bytes", 0))
    DryRun.objects.filter(pk=dry_run.pk, status=D.RUNNING).update(**fields)
    dry_run.refresh_from_db()
    return dry_run


def _out_of_memory(exc: BaseException) -> bool:
    """True when ``exc`` is an allocation refused by the memory budget: :class:`MemoryError`,
    ``ENOMEM``, or a thread whose stack could not be mapped (``can't start new thread``)."""
    if isinstance(exc, MemoryError) or getattr(exc, "errno", None) == errno.ENOMEM:
        return True
    text = str(exc).lower()
    return "can't start new thread" in text or "cannot allocate memory" in text


def _at_limit(peak: dict[str, int], limit_mb: int) -> bool:
    """True when the block failed with its data segment within 8 MB (or 5 % of the budget) of
    the limit: a C extension refused an allocation and reported it as something else (seen:
    ``SystemError: error return without exception set``)."""
    headroom = peak.get("headroom")
    return headroom is not None and headroom < max(8 * 1024 * 1024, limit_mb * 1024 * 1024 // 20)


def _failed(message: str) -> dict[str, Any]:
    return {"status": D.FAILED, "error": message[:2000], "progress_label": "Failed"}


def dry_run_stop(*, dry_run_id: int, reason: str) -> None:
    """Mark a dry run that is still queued or running ``failed`` with ``reason`` (the task's
    last resort: django-q2 stopped it at its timeout)."""
    DryRun.objects.filter(pk=dry_run_id, status__in=DryRun.ACTIVE).update(
        status=D.FAILED, error=reason[:2000], progress_label="Failed", finished_at=timezone.now()
    )


def dry_runs_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Fail what a stopped worker left running; delete old results. ``{"stopped", "deleted"}``.

    A dry run running longer than its budget plus :data:`KILL_GRACE_SECONDS` (and a minute more
    for the worker to record it) was stopped with its worker process; a dry run still queued
    after ``MEMORYADMIN_DRY_RUN_KEEP_HOURS`` never found a worker. Finished dry runs older than
    ``MEMORYADMIN_DRY_RUN_KEEP_HOURS`` are deleted. Called by each request and every minute by
    the worker's recovery schedule.
    """
    now = now or timezone.now()
    keep = timedelta(hours=int(settings.MEMORYADMIN_DRY_RUN_KEEP_HOURS))
    late = now - timedelta(seconds=_task_timeout() + 60)
    stopped = DryRun.objects.filter(status=D.RUNNING, started_at__lt=late).update(
        status=D.FAILED,
        error="The worker stopped it at its time budget (or the worker died).",
        progress_label="Failed",
        finished_at=now,
    )
    stopped += DryRun.objects.filter(status=D.QUEUED, created_at__lt=now - keep).update(
        status=D.FAILED,
        error="No worker picked it up (is `manage.py run_worker` running?).",
        progress_label="Failed",
        finished_at=now,
    )
    deleted, _ = DryRun.objects.filter(
        status__in=(D.DONE, D.FAILED), finished_at__lt=now - keep
    ).delete()
    return {"stopped": stopped, "deleted": deleted}


def _vm_kb(key: str) -> int:
    """``VmData`` / ``VmHWM`` … of this process from ``/proc/self/status`` (kB; 0 if unknown)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


@contextlib.contextmanager
def memory_budget(limit_bytes: int, peak: dict[str, int]) -> Iterator[None]:
    """Let this process's data segment grow by at most ``limit_bytes`` inside the block.

    Sets the soft ``RLIMIT_DATA`` (Linux counts the heap and every private writable mapping:
    numpy arrays, Python objects) to the current ``VmData`` plus ``limit_bytes``, so an
    allocation past it raises :class:`MemoryError`; the previous soft limit is restored on exit
    (the hard limit is never touched, so it can be). ``limit_bytes <= 0``: no limit. On exit
    ``peak["bytes"]`` is the peak resident set of the block (``VmHWM`` after resetting it
    through ``/proc/self/clear_refs``; the process's peak where that is not allowed) and, when
    the block raised under a limit, ``peak["headroom"]`` the bytes it had left then. A
    django-q2 worker process runs one task at a time, so the limit is the task's.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")  # reset VmHWM to the current RSS
    new = resource.RLIM_INFINITY
    if limit_bytes > 0:
        new = _vm_kb("VmData") * 1024 + int(limit_bytes)
        for cap in (soft, hard):
            if cap != resource.RLIM_INFINITY:
                new = min(new, cap)
        resource.setrlimit(resource.RLIMIT_DATA, (new, hard))
    try:
        yield
    except BaseException:
        if limit_bytes > 0:
            peak["headroom"] = new - _vm_kb("VmData") * 1024
        raise
    finally:
        if limit_bytes > 0:
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        peak["bytes"] = _vm_kb("VmHWM") * 1024
