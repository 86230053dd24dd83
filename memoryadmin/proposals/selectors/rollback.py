"""Reads of undoing: the archive browser's page of archived memories, and what rolling a pass
back would do (counted as the pass page counts)."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Min, Q

from memoryadmin.agents.models import Agent
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Operation, Pass

__all__ = ["ARCHIVE_PAGE_SIZE", "archive_page", "archive_summary", "rollback_counts"]

ARCHIVE_PAGE_SIZE = 50
"""Archived memories per page in the archive browser."""


def archive_page(*, agent: Agent, contains: str = "", page: int | str = 1) -> Page[Any]:
    """Read: the agent's archived memories, newest first, whose text or id contains ``contains``
    (case-insensitive, taken literally: ``%``, ``_`` and quotes are text), 50 per page."""
    qs = ArchivedMemory.objects.filter(agent=agent).select_related("run", "operation")
    contains = (contains or "").strip()
    if contains:
        qs = qs.filter(Q(document__icontains=contains) | Q(memory_id__icontains=contains))
    return Paginator(qs, ARCHIVE_PAGE_SIZE).get_page(page)


def archive_summary(*, agent: Agent) -> dict[str, Any]:
    """The agent's archive at a glance (one aggregate query): ``count`` (archived copies),
    ``oldest`` (``archived_at`` of the oldest copy, or ``None``), ``retention_days`` (0:
    forever) and ``cutoff`` (copies archived before it are purged by the next daily purge, or
    ``None``)."""
    agg = ArchivedMemory.objects.filter(agent=agent).aggregate(
        n=Count("id"), oldest=Min("archived_at")
    )
    return {
        "count": agg["n"],
        "oldest": agg["oldest"],
        "retention_days": agent.archive_retention_days,
        "cutoff": agent.archive_cutoff(),
    }


def rollback_counts(run: Pass) -> dict[str, int]:
    """What rolling ``run`` back does, counted like the pass page counts: ``operations`` (applied
    operations undone), ``originals`` (removed originals restored: merged, pruned, superseded —
    the pass page's "originals removed"), ``promoted`` (promoted memories given their prior
    metadata back), ``written`` (new memories the pass wrote, removed again) and ``kept``
    (merged memories the pass wrote in one source's record: among ``originals``, that original
    is restored in its place, so nothing is removed)."""
    archived = ArchivedMemory.objects.filter(run=run, restored_at__isnull=True)
    applied = run.operations.filter(status=Operation.Status.APPLIED)
    results = list(
        applied.filter(kind__in=[Operation.Kind.MERGE, Operation.Kind.DISTILL]).values_list(
            "result_id", "source_ids"
        )
    )
    return {
        "operations": applied.count(),
        "originals": archived.exclude(action=ArchivedMemory.Action.PROMOTE).count(),
        "promoted": archived.filter(action=ArchivedMemory.Action.PROMOTE).count(),
        "written": sum(rid not in ids for rid, ids in results),
        "kept": sum(rid in ids for rid, ids in results),
    }
