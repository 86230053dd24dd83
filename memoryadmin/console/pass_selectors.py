"""Reads of the proposal page: one page of operations per kind, and the stale check (I-4).

Nothing here reads every operation of a pass with its sources: the pages read 20 operations per
kind, and the stale check reads only ids and content hashes (the store is read for the sources'
current hashes, which is the check). Re-exported by :mod:`memoryadmin.console.selectors`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count

from . import stores
from .models import Operation, OperationSource, Pass
from .triage import conflict_view

__all__ = [
    "KIND_ORDER",
    "OPS_PER_PAGE",
    "StaleOperation",
    "operation_view",
    "pass_operation_pages",
    "pass_shown_pages",
    "pass_stale_check",
    "pass_stale_operations",
]

OPS_PER_PAGE = 20
"""Operations per kind per page on the proposal page."""

KIND_ORDER = [k.value for k in Operation.Kind]


def pass_operation_pages(
    *, run: Pass, pages: dict[str, Any] | None = None
) -> list[tuple[str, int, Page]]:
    """Operations of ``run`` grouped by kind: ``[(kind, total, page)]`` in a fixed kind order.

    ``pages`` maps kind → requested page number (default 1); ``OPS_PER_PAGE`` per page. Each
    operation comes with its sources prefetched, ordered by position.
    """
    pages = pages or {}
    counts = dict(run.operations.values_list("kind").annotate(n=Count("id")).order_by())
    out = []
    for kind in KIND_ORDER:
        total = counts.get(kind, 0)
        if not total:
            continue
        qs = run.operations.filter(kind=kind).prefetch_related("sources").order_by("index")
        out.append((kind, total, Paginator(qs, OPS_PER_PAGE).get_page(pages.get(kind, 1))))
    return out


def pass_shown_pages(*, run: Pass, params: Any) -> dict[str, tuple[int, int]]:
    """For each kind ``run`` has: ``(operations, page)``, the page of its group that ``params``
    (``<kind>_page``) asks for, as :func:`pass_operation_pages` resolves it (not a number: 1;
    past the end: the last page). One count query."""
    counts = run.operations.values_list("kind").annotate(n=Count("id")).order_by()
    return {
        kind: (n, Paginator(range(n), OPS_PER_PAGE).get_page(params.get(f"{kind}_page", 1)).number)
        for kind, n in counts
    }


def operation_view(op: Operation) -> dict[str, Any]:
    """Display data for one operation: sources (ordered) and pairwise rows for a merge.

    ``pairwise`` is ``[(source, [cosine or None, ...])]`` from ``scores["pairwise"]`` (cosine in
    [-1, 1]); it is empty when the engine gave no matrix or its shape does not match the sources.
    """
    sources = sorted(op.sources.all(), key=lambda s: s.position)
    matrix = (op.scores or {}).get("pairwise") or []
    pairwise: list[tuple[OperationSource, list[float | None]]] = []
    if (
        isinstance(matrix, list)
        and len(matrix) == len(sources)
        and all(isinstance(r, list) and len(r) == len(sources) for r in matrix)
    ):
        pairwise = [(s, list(row)) for s, row in zip(sources, matrix, strict=True)]
    other_scores = {k: v for k, v in (op.scores or {}).items() if k != "pairwise"}
    return {
        "op": op,
        "sources": sources,
        "pairwise": pairwise,
        "scores": other_scores,
        "conflict": conflict_view(op),
    }


@dataclass(frozen=True)
class StaleOperation:
    """An operation the store has overtaken: its ``pk``, ``kind`` and ``index``, the ``page``
    of its kind's group it is on (:data:`OPS_PER_PAGE` per page, in index order, as
    :func:`pass_operation_pages` pages them) and the ``reason`` in words."""

    pk: int
    kind: str
    index: int
    page: int
    reason: str


@dataclass(frozen=True)
class _Source:
    memory_id: str
    content_hash: str


def pass_stale_check(
    *, run: Pass, operation_ids: Iterable[int] | None = None
) -> list[StaleOperation]:
    """Operations of a proposed (or approved) pass whose sources changed or vanished since it was
    planned, in kind order then index order (empty when none); ``operation_ids`` restricts the
    check to those operations (one page of rows). Operations in conflict or applied are not
    checked. Reads the operations' ids and their sources' ids and planned content hashes (no
    documents, no embeddings) and the store's current records of those sources, in pages of
    1,000 ids. Read-only; the proposal page shows these before anyone approves (I-4), and apply
    checks again. Raises :class:`StoreUnavailable` when Chroma is down."""
    from .services.journal import stale_reason  # late: services import selectors

    OS = Operation.Status
    wanted = None if operation_ids is None else {int(i) for i in operation_ids}
    rows = run.operations.order_by("index").values_list("pk", "kind", "index", "status")
    place: dict[int, tuple[str, int, int]] = {}
    seen: dict[str, int] = defaultdict(int)
    checked = []
    for pk, kind, index, status in rows:
        place[pk] = (kind, index, seen[kind] // OPS_PER_PAGE + 1)
        seen[kind] += 1
        if status not in (OS.CONFLICT, OS.APPLIED) and (wanted is None or pk in wanted):
            checked.append(pk)
    if not checked:
        return []
    sources = OperationSource.objects.filter(operation__run=run)
    if wanted is not None:
        sources = sources.filter(operation_id__in=checked)
    by_op: dict[int, list[_Source]] = defaultdict(list)
    for op_id, mid, planned in sources.order_by("operation_id", "position").values_list(
        "operation_id", "memory_id", "content_hash"
    ):
        by_op[op_id].append(_Source(mid, planned))
    ids = sorted({s.memory_id for pk in checked for s in by_op[pk]})
    live = stores.get_live(stores.get_store(run.agent), ids, include_embeddings=False)
    out = []
    for pk in checked:
        reason = stale_reason(None, by_op[pk], live, {})
        if reason:
            out.append(StaleOperation(pk, *place[pk], reason))
    out.sort(key=lambda s: (KIND_ORDER.index(s.kind), s.index))
    return out


def pass_stale_operations(*, run: Pass) -> dict[int, str]:
    """:func:`pass_stale_check` as ``{Operation.pk: reason}`` (empty when none). Raises
    :class:`StoreUnavailable` when Chroma is down."""
    return {s.pk: s.reason for s in pass_stale_check(run=run)}
