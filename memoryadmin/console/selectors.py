"""Selectors: the console's reads (HackSoft style: services write, selectors read).

Everything a page shows comes from here: our own models (never django-q2's tables) and, for
memories, the agent's store through :func:`memoryadmin.console.stores.get_store` (the one place
that opens a store). Store failures are reported as values (``StoreStatus``), never raised into a
page, so a Chroma outage shows "unavailable" instead of a 500.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db.models import Count, Q
from django.utils import timezone

from consolidation import MemoryRecord
from consolidation.shapes import ShapeReport

from . import stores

# The audit reads live in their own room; importable from here as before.
from .audit_selectors import (  # noqa: E402, F401
    AUDIT_FILTER_ALIASES,
    AUDIT_FILTERS,
    AUDIT_PAGE_SIZE,
    EVENT_PAGE_SIZE,
    AuditQuery,
    audit_events,
    audit_passes,
    audit_verbs,
    rolled_back_by,
)
from .convergence import PLANNED, convergence_words
from .models import Agent, ArchivedMemory, AuditEvent, Operation, OperationSource, Pass, StoreSample

# The proposal page's reads (operation pages, the stale check) have their own room too.
from .pass_selectors import (  # noqa: E402, F401
    KIND_ORDER,
    OPS_PER_PAGE,
    StaleOperation,
    operation_view,
    pass_operation_pages,
    pass_shown_pages,
    pass_stale_check,
    pass_stale_operations,
)
from .validation import validate_cron

logger = logging.getLogger(__name__)

MEMORY_PAGE_SIZE = 50
"""Memories per page in the browser (issue 3)."""
MAX_ZONE_NAME = 64
"""Longest zone name tried; the longest IANA key is 32 characters
("America/Argentina/ComodRivadavia")."""


def operator_zone(name: str | None) -> ZoneInfo:
    """The operator's time zone: ``name`` when it is a valid IANA zone, else ``settings.TIME_ZONE``.

    Anything else falls back, never raises: an unknown key, a path outside the zone database, a
    NUL byte, or a name longer than :data:`MAX_ZONE_NAME` (the OS refuses such file names).
    """
    if name and len(name) <= MAX_ZONE_NAME:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    return ZoneInfo(settings.TIME_ZONE)


def _store(agent: Agent) -> Any:
    from .stores import get_store  # imported late: the store module opens chromadb

    return get_store(agent)


@dataclass
class StoreStatus:
    """Memory count of a store, or why it could not be read (``count is None``)."""

    count: int | None
    error: str = ""


def store_status(agent: Agent) -> StoreStatus:
    """Count the agent's memories; a store error becomes ``StoreStatus(None, reason)``."""
    try:
        return StoreStatus(int(_store(agent).count()))
    except Exception as exc:  # a dashboard must render whatever Chroma does
        logger.warning("store of agent %s unavailable: %s", agent.slug, exc)
        return StoreStatus(None, str(exc) or exc.__class__.__name__)


def next_runs(
    *, cron: str, tz: ZoneInfo, count: int = 5, now: datetime | None = None
) -> list[datetime]:
    """The next ``count`` run times of a 5-field cron, aware datetimes in ``tz``.

    Raises ``ValueError`` for an invalid cron expression (from :func:`schedule_preview`).
    """
    return schedule_preview(cron=cron, tz=tz, count=count, now=now)


def _cron_zone() -> ZoneInfo:
    """The zone django-q2 evaluates cron in (``localtime()``, i.e. ``settings.TIME_ZONE``)."""
    return ZoneInfo(settings.TIME_ZONE)


def schedule_preview(
    *, cron: str, tz: str | tzinfo, count: int = 5, now: datetime | None = None
) -> list[datetime]:
    """The next ``count`` run times of ``cron``, as aware datetimes in the operator's ``tz``.

    The cron expression is evaluated in ``settings.TIME_ZONE``, exactly as django-q2's scheduler
    does, and the instants are shown in ``tz`` (an IANA name or ``tzinfo``). Raises
    ``ValueError`` for a bad cron or an unknown time zone.
    """
    from croniter import CroniterBadDateError, croniter

    cron = validate_cron(cron)
    if isinstance(tz, str):
        try:
            tz = ZoneInfo(tz)
        except Exception as exc:
            raise ValueError(f"Unknown time zone {tz!r}.") from exc
    zone = _cron_zone()
    start = (now or timezone.now()).astimezone(zone)
    it = croniter(cron, start)
    out: list[datetime] = []
    seen: set[datetime] = {start.replace(tzinfo=None)}
    while len(out) < max(0, int(count)):
        try:
            when = it.get_next(datetime)
        except CroniterBadDateError:  # "0 3 30 2 *": a day no month has
            if out:
                break
            raise ValueError(f"The schedule {cron!r} never runs (no such date).") from None
        wall = when.astimezone(zone).replace(tzinfo=None)
        if wall <= max(seen):
            # The autumn clock change repeats a local hour: croniter yields 02:30 CEST and 02:30
            # CET, but a schedule runs once per local slot (pass_request_scheduled skips the
            # repeat), so the preview lists what will really run.
            continue
        seen.add(wall)
        out.append(when.astimezone(tz))
    return out


def schedule_slot(*, cron: str, now: datetime) -> str:
    """The local calendar slot a scheduled run at ``now`` belongs to: the cron's latest
    wall-clock time at or before ``now`` in ``settings.TIME_ZONE``, as ``"YYYY-MM-DDTHH:MM"``.

    Both runs of a ``30 2 * * *`` cron in the night the clocks go back (02:30 CEST, 02:30 CET)
    get the same slot ``"2025-10-26T02:30"``. Raises ``ValueError`` for a bad cron.
    """
    from croniter import croniter

    wall = now.astimezone(_cron_zone()).replace(tzinfo=None, microsecond=0)
    if croniter.match(cron, wall.replace(second=0)):
        return wall.replace(second=0).isoformat(timespec="minutes")
    return croniter(cron, wall).get_prev(datetime).isoformat(timespec="minutes")


@dataclass
class AgentRow:
    """One dashboard row."""

    agent: Agent
    store: StoreStatus
    pending: int
    last_pass: Pass | None
    next_run: datetime | None
    active_pass: Pass | None = None
    convergence: str = ""
    conflicts: int = 0
    """Conflicts of its pending proposals that no reviewer decided yet."""


def dashboard_rows(*, tz: ZoneInfo, now: datetime | None = None) -> list[AgentRow]:
    """One :class:`AgentRow` per agent, ordered by name, from the database in four queries.

    The memory count is the agent's latest :class:`StoreSample` (recorded by every pass when it
    plans and applies, and by imports), so the page never reads the stores; only an agent with
    no sample yet is counted live (one ``count``; "unavailable" when its store is down).
    """
    from django.db.models import OuterRef, Subquery

    latest = StoreSample.objects.filter(agent=OuterRef("pk")).order_by("-taken_at", "-id")
    last = Pass.objects.filter(agent=OuterRef("pk")).order_by("-created_at", "-id")
    undecided = (
        Operation.objects.filter(
            run__agent=OuterRef("pk"),
            run__status=Pass.Status.PROPOSED,
            kind=Operation.Kind.CONFLICT,
        )
        .exclude(scores__has_key="decision")
        .order_by()
        .values("run__agent")
        .annotate(n=Count("id"))
        .values("n")[:1]
    )
    agents = list(
        Agent.objects.annotate(
            pending=Count("passes", filter=Q(passes__status=Pass.Status.PROPOSED)),
            conflicts=Subquery(undecided),
            sampled=Subquery(latest.values("count")[:1]),
            last_pk=Subquery(last.values("pk")[:1]),
            planned_pk=Subquery(last.filter(status__in=PLANNED).values("pk")[:1]),
        ).order_by("name")
    )
    passes = Pass.objects.in_bulk([pk for a in agents for pk in (a.last_pk, a.planned_pk) if pk])
    active: dict[int, Pass] = {}
    for run in Pass.objects.filter(status__in=Pass.ACTIVE).order_by("-pk"):
        active[run.agent_id] = run
    rows = []
    for agent in agents:
        nxt = None
        if agent.schedule_enabled:
            try:
                nxt = next(iter(next_runs(cron=agent.schedule_cron, tz=tz, count=1, now=now)), None)
            except ValueError:
                nxt = None
        store = StoreStatus(agent.sampled) if agent.sampled is not None else store_status(agent)
        rows.append(
            AgentRow(
                agent,
                store,
                agent.pending,
                passes.get(agent.last_pk),
                nxt,
                active.get(agent.pk),
                convergence_words(passes.get(agent.planned_pk)),
                agent.conflicts or 0,
            )
        )
    return rows


def agent_chart_data(agent: Agent, *, limit: int = 500) -> dict[str, list[dict[str, Any]]]:
    """Chart series for one agent: store size samples and loss fraction per planned pass.

    Returns ``{"samples": [{"t": iso, "count": int}], "passes": [{"id", "t", "loss",
    "threshold", "status"}]}``, oldest first, at most ``limit`` points each.
    """
    samples = list(StoreSample.objects.filter(agent=agent).order_by("-taken_at")[:limit])
    passes = list(
        agent.passes.exclude(
            status__in=[Pass.Status.QUEUED, Pass.Status.RUNNING, Pass.Status.FAILED]
        ).order_by("-created_at")[:limit]
    )
    return {
        "samples": [{"t": s.taken_at.isoformat(), "count": s.count} for s in reversed(samples)],
        "passes": [
            {
                "id": p.pk,
                "t": p.created_at.isoformat(),
                "loss": round(p.loss_fraction, 4),
                "threshold": p.max_loss_fraction,
                "status": p.status,
            }
            for p in reversed(passes)
        ],
    }


# ----- memories -----------------------------------------------------------------------------


@dataclass
class MemoryView:
    """A memory as the browser shows it: record fields plus the agent's field-map reading."""

    id: str
    document: str
    metadata: dict[str, Any]
    tier: str
    pinned: bool
    score: float | None = None

    @classmethod
    def from_record(
        cls, record: MemoryRecord, agent: Agent, score: float | None = None
    ) -> MemoryView:
        fm = agent.get_field_map()
        meta = dict(record.metadata)
        return cls(record.id, record.document, meta, fm.get_tier(meta), fm.is_pinned(meta), score)


@dataclass
class MemoryQuery:
    """Browser filters: tier (exact, "" = any), pinned ("yes"/"no"/""), text contains
    (case-insensitive)."""

    tier: str = ""
    pinned: str = ""
    contains: str = ""

    def matches(self, m: MemoryView) -> bool:
        if self.tier and m.tier != self.tier:
            return False
        if self.pinned == "yes" and not m.pinned:
            return False
        if self.pinned == "no" and m.pinned:
            return False
        return not (self.contains and self.contains.casefold() not in m.document.casefold())


def _iter_memories(agent: Agent, *, embeddings: bool = False) -> Iterable[MemoryRecord]:
    yield from _store(agent).iter_records(include_embeddings=embeddings)


def memory_page(*, agent: Agent, query: MemoryQuery, page: int | str = 1) -> tuple[Page, list[str]]:
    """One page (50) of the agent's memories matching ``query``, in the store's insertion order,
    and the tiers present in the store.

    The filters and the paging run in Chroma (``where``, ``where_document``, ``limit`` /
    ``offset``, ``count``; see :mod:`memoryadmin.console.memory_filters`), so a page reads 50
    records whatever the store's size. Raises whatever the store raises (the view reports it).
    """
    from .memory_filters import filtered_records, known_tiers

    collection = _store(agent).collection
    fm = agent.get_field_map()
    records = filtered_records(
        collection, fm, tier=query.tier, pinned=query.pinned, contains=query.contains
    )
    got = Paginator(records, MEMORY_PAGE_SIZE).get_page(page)
    got.object_list = [MemoryView.from_record(rec, agent) for rec in got.object_list]
    return got, sorted(known_tiers(collection, fm))


def memory_search(*, agent: Agent, text: str, k: int = 10) -> list[MemoryView]:
    """Top-``k`` memories by cosine similarity (in [-1, 1]) to ``text``, best first.

    Embeds ``text`` with the default embedder (all-MiniLM-L6-v2, the store's model) and asks the
    store's ``query`` (Chroma's HNSW index, approximate for large collections). A store without
    ``query`` is scanned page by page instead (``(n, 384) float32`` dot products of unit
    vectors; memories without an embedding are skipped).
    """
    from consolidation.adapters.embedder import get_default_embedder

    qvec = np.asarray(get_default_embedder().embed([text]), dtype=np.float32)[0]
    store = _store(agent)
    if hasattr(store, "query"):
        return [MemoryView.from_record(rec, agent, score) for rec, score in store.query(qvec, k=k)]
    best: list[tuple[float, str, MemoryRecord]] = []
    for rec in _iter_memories(agent, embeddings=True):
        if rec.embedding is None:
            continue
        item = (float(np.dot(rec.embedding, qvec)), rec.id, rec)
        if len(best) < k:
            heapq.heappush(best, item)
        elif item > best[0]:
            heapq.heapreplace(best, item)
    best.sort(key=lambda t: (-t[0], t[1]))
    return [MemoryView.from_record(rec, agent, score) for score, _, rec in best]


@dataclass
class MemoryDetail:
    """A memory (``current`` is ``None`` when it is no longer in the store) and its history."""

    memory_id: str
    current: MemoryView | None
    archived: list[ArchivedMemory] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=list)
    events: list[AuditEvent] = field(default_factory=list)


def memory_detail(*, agent: Agent, memory_id: str) -> MemoryDetail:
    """The memory from the store plus every pass that read, wrote or archived it."""
    recs = _store(agent).get([memory_id], include_embeddings=False)
    current = MemoryView.from_record(recs[0], agent) if recs else None
    op_ids = set(
        OperationSource.objects.filter(
            operation__run__agent=agent, memory_id=memory_id
        ).values_list("operation_id", flat=True)
    )
    op_ids |= set(
        Operation.objects.filter(run__agent=agent, result_id=memory_id).values_list("id", flat=True)
    )
    ops = list(
        Operation.objects.filter(id__in=op_ids)
        .select_related("run")
        .order_by("-run__created_at", "index")
    )
    archived = list(
        ArchivedMemory.objects.filter(agent=agent, memory_id=memory_id).select_related("run")
    )
    events = list(AuditEvent.objects.filter(agent=agent, data__memory_id=memory_id)[:50])
    return MemoryDetail(memory_id, current, archived, ops, events)


# ----- probe queries ------------------------------------------------------------------------

PROBE_PAGE_SIZE = 25
"""Probe queries per page on the probes page."""


def probe_page(*, agent: Agent, page: int | str = 1) -> Page:
    """One page of the agent's probe queries (:data:`PROBE_PAGE_SIZE`), oldest first; a page
    number out of range gives the nearest page, ``"last"`` the last one."""
    paginator = Paginator(agent.probes.order_by("id"), PROBE_PAGE_SIZE)
    return paginator.get_page(paginator.num_pages if page == "last" else page)


def agent_census(*, agent: Agent) -> dict[str, Any]:
    """The store's and the archive's count + SHA-256 (used by tests and ``manage.py census``).

    ``{"agent": slug, "store": {"count", "sha256"}, "archive": {"count", "sha256"}}``; the archive
    hash covers memory id, document, metadata, embedding and action of every archived row.
    """
    store = stores.get_store(agent)
    h = hashlib.sha256()
    rows = ArchivedMemory.objects.filter(agent=agent).order_by("memory_id", "archived_at", "id")
    count = 0
    for a in rows.iterator():
        count += 1
        meta = json.dumps(a.metadata, sort_keys=True, ensure_ascii=False, default=str)
        for part in (
            a.memory_id.encode(),
            a.document.encode(),
            meta.encode(),
            bytes(a.embedding or b""),
            a.action.encode(),
        ):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
    return {
        "agent": agent.slug,
        "store": stores.store_census(store),
        "archive": {"count": count, "sha256": h.hexdigest()},
    }


ARCHIVE_PAGE_SIZE = 50
"""Archived memories per page in the archive browser."""


def archive_page(*, agent: Agent, contains: str = "", page: int | str = 1) -> Page:
    """Read: the agent's archived memories, newest first, whose text or id contains ``contains``
    (case-insensitive, taken literally: ``%``, ``_`` and quotes are text), 50 per page."""
    qs = ArchivedMemory.objects.filter(agent=agent).select_related("run", "operation")
    contains = (contains or "").strip()
    if contains:
        qs = qs.filter(Q(document__icontains=contains) | Q(memory_id__icontains=contains))
    return Paginator(qs, ARCHIVE_PAGE_SIZE).get_page(page)


def collection_shape(*, collection_name: str, preset: str = "auto") -> ShapeReport:
    """How the existing collection was written and the field map to attach it with.

    Samples its first records (:func:`stores.collection_sample`) and runs
    :func:`consolidation.shapes.detect_shape` with our embedder, so the report says whether our
    all-MiniLM-L6-v2 produces the stored vectors. Raises ``ValueError`` for a missing
    collection, an unknown preset or one the records contradict; :class:`StoreUnavailable` when
    Chroma is down.
    """
    from consolidation.shapes import detect_shape

    sample = stores.collection_sample(collection_name)

    def embed(texts: list[str]) -> np.ndarray:
        from consolidation.adapters.embedder import get_default_embedder

        return np.asarray(get_default_embedder().embed(texts), dtype=np.float32)

    return detect_shape(sample, preset=preset, embed=embed)


def rollback_counts(run: Pass) -> dict[str, int]:
    """What rolling ``run`` back does, counted like the pass page counts: ``operations`` (applied
    operations undone), ``originals`` (removed originals restored: merged, pruned, superseded —
    the pass page's "originals removed"), ``promoted`` (promoted memories given their prior
    metadata back) and ``written`` (new memories the pass wrote, removed again)."""
    archived = ArchivedMemory.objects.filter(run=run, restored_at__isnull=True)
    applied = run.operations.filter(status=Operation.Status.APPLIED)
    return {
        "operations": applied.count(),
        "originals": archived.exclude(action=ArchivedMemory.Action.PROMOTE).count(),
        "promoted": archived.filter(action=ArchivedMemory.Action.PROMOTE).count(),
        "written": applied.filter(kind__in=[Operation.Kind.MERGE, Operation.Kind.DISTILL]).count(),
    }
