"""Reads of the memory browser: a page of an agent's memories, semantic search, one memory
with its history, and the browser's filters as Chroma filters (``where`` / ``where_document``),
so tier, pinned and text filters and paging run in Chroma instead of in Python over the whole
store.

The filters follow the agent's field map (:class:`consolidation.records.FieldMap`) exactly as
``get_tier`` / ``is_pinned`` read a record:

- tier ``T`` ≠ the default: ``{tier_key: T}``. The default tier (``"working"``) is also every
  record without the key or with ``""``; Chroma has no ``$exists``, but ``$nin`` matches absent
  keys, so it is ``{tier_key: {"$nin": <the other tiers present>}}``. The tiers present come
  from :func:`known_tiers` (one metadata-only scan per store size, cached per process).
- pinned: ``True``, ``1`` or the strings "true"/"1"/"yes" in the case variants in
  :data:`PINNED_STRINGS` (``is_pinned`` also strips spaces and accepts any non-zero int: those
  rare spellings are not matched here).
- text: ``{"$regex": "(?i)<escaped text>"}`` — case-insensitive substring (Unicode simple case
  folding in Chroma's Rust regex, close to Python's ``casefold``).
"""

from __future__ import annotations

import heapq
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.core.paginator import Page, Paginator

from consolidation import MemoryRecord
from consolidation.adapters.chroma_pages import FilteredRecords, distinct_values
from consolidation.pyramid import CHILDREN_KEY, summary_level
from consolidation.records import FieldMap
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.core.models import AuditEvent
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Operation, OperationSource

__all__ = [
    "MEMORY_PAGE_SIZE",
    "MemoryDetail",
    "MemoryQuery",
    "MemoryView",
    "filtered_records",
    "known_tiers",
    "memory_detail",
    "memory_page",
    "memory_search",
    "pinned_where",
]

DEFAULT_TIER = "working"
"""``FieldMap.get_tier``'s value for a record without a tier."""
PINNED_STRINGS = ["true", "True", "TRUE", "1", "yes", "Yes", "YES"]
"""String spellings of a pinned flag matched in Chroma (``FieldMap.is_pinned``'s, cased)."""

_tiers_cache: dict[tuple[str, str, int], set[str]] = {}
_tiers_lock = threading.Lock()


def known_tiers(collection: Any, fm: FieldMap) -> set[str]:
    """Tiers present in ``collection`` under ``fm`` (the default tier always included).

    One metadata-only scan (≈ 0.3 s per 50,000 records), cached per (collection, key, count):
    any write that changes the count reads it again; an edit that only changes a tier in place
    is seen after the next count change (the list feeds a datalist and the default-tier filter).
    """
    key = (str(collection.name), fm.tier, int(collection.count()))
    with _tiers_lock:
        if key in _tiers_cache:
            return set(_tiers_cache[key])
    found = {fm.get_tier({fm.tier: v}) for v in distinct_values(collection, fm.tier)}
    found.add(DEFAULT_TIER)
    with _tiers_lock:
        if len(_tiers_cache) > 256:
            _tiers_cache.clear()
        _tiers_cache[key] = found
    return set(found)


def _and(clauses: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def pinned_where(fm: FieldMap, pinned: str) -> dict[str, Any] | None:
    """The ``where`` clause of the pinned filter ("yes", "no" or "" for none)."""
    key = fm.pinned
    if pinned == "yes":
        return {"$or": [{key: True}, {key: 1}, {key: {"$in": PINNED_STRINGS}}]}
    if pinned == "no":
        return {"$and": [{key: {"$ne": True}}, {key: {"$ne": 1}}, {key: {"$nin": PINNED_STRINGS}}]}
    return None


def filtered_records(
    collection: Any, fm: FieldMap, *, tier: str = "", pinned: str = "", contains: str = ""
) -> FilteredRecords:
    """The records of ``collection`` matching the browser's filters, lazily (count + slices)."""
    clauses: list[dict[str, Any]] = []
    tier = tier.strip()
    if tier == DEFAULT_TIER:
        others = sorted(t for t in known_tiers(collection, fm) if t != DEFAULT_TIER)
        if others:
            clauses.append({fm.tier: {"$nin": others}})
    elif tier:
        clauses.append({fm.tier: tier})
    if (p := pinned_where(fm, pinned)) is not None:
        clauses.append(p)
    pattern = {"$regex": "(?i)" + re.escape(contains)} if contains else None
    if fm.document and pattern:
        # The text lives in a metadata key (mem0's ``data``); Chroma's regex applies to
        # documents only, so the text filter reads the matching metadata key's pages instead.
        return _MetadataTextFilter(collection, fm, _and(clauses), contains)
    return FilteredRecords(
        collection, where=_and(clauses), where_document=pattern, text_key=fm.document
    )


class _MetadataTextFilter(FilteredRecords):
    """Text filter for a collection whose text is in a metadata key: one metadata-only scan of
    the ``where`` matches (O(n), attached collections only), then pages by id."""

    def __init__(self, collection: Any, fm: FieldMap, where: Any, contains: str) -> None:
        super().__init__(collection, where=where, text_key=fm.document)
        needle = contains.casefold()
        self._ids: list[str] = []
        offset = 0
        while True:
            got = collection.get(limit=5000, offset=offset, include=["metadatas"], **self.filters)
            ids = got.get("ids") or []
            for rid, meta in zip(ids, got.get("metadatas") or [], strict=False):
                text = (meta or {}).get(fm.document)
                if isinstance(text, str) and needle in text.casefold():
                    self._ids.append(rid)
            if len(ids) < 5000:
                break
            offset += 5000

    def count(self) -> int:
        return len(self._ids)

    def __getitem__(self, item: slice) -> list[Any]:
        ids = self._ids[item]
        if not ids:
            return []
        got = self.collection.get(ids=ids, include=["documents", "metadatas"])
        by_id = dict(zip(got.get("ids") or [], got.get("metadatas") or [], strict=False))
        from consolidation.adapters.chroma_metadata import decode_metadata
        from consolidation.records import MemoryRecord

        out = []
        for rid in ids:
            meta = decode_metadata(by_id.get(rid))
            text = meta.get(self.text_key)
            out.append(
                MemoryRecord(
                    id=rid,
                    document=text if isinstance(text, str) else "",
                    embedding=None,
                    metadata=meta,
                )
            )
        return out


# ----- the browser ------------------------------------------------------------------------


MEMORY_PAGE_SIZE = 50
"""Memories per page in the browser."""


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
    yield from stores.get_store(agent).iter_records(include_embeddings=embeddings)


def memory_page(
    *, agent: Agent, query: MemoryQuery, page: int | str = 1
) -> tuple[Page[Any], list[str]]:
    """One page (50) of the agent's memories matching ``query``, in the store's insertion order,
    and the tiers present in the store.

    The filters and the paging run in Chroma (``where``, ``where_document``, ``limit`` /
    ``offset``, ``count``; see :func:`filtered_records`), so a page reads 50
    records whatever the store's size. Raises whatever the store raises (the view reports it).
    """
    collection = stores.get_store(agent).collection
    fm = agent.get_field_map()
    records = filtered_records(
        collection, fm, tier=query.tier, pinned=query.pinned, contains=query.contains
    )
    # FilteredRecords pages through Chroma (count() and slicing): a sequence to the Paginator
    got: Page[Any] = Paginator(records, MEMORY_PAGE_SIZE).get_page(page)  # type: ignore[arg-type]
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
    store = stores.get_store(agent)
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
    children: list[MemoryView] = field(default_factory=list)
    missing_children: list[str] = field(default_factory=list)

    @property
    def child_count(self) -> int:
        """Memories a pyramid summary covers (live or not); 0 for any other memory."""
        return len(self.children) + len(self.missing_children)


def memory_detail(*, agent: Agent, memory_id: str) -> MemoryDetail:
    """The memory from the store plus every pass that read, wrote or archived it; for a pyramid
    summary also its children as the store holds them now (``children``) and the ids of those
    no longer in the store (``missing_children``: the next pass rewrites the summary)."""
    recs = stores.get_store(agent).get([memory_id], include_embeddings=False)
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
    detail = MemoryDetail(memory_id, current, archived, ops, events)
    if recs and summary_level(recs[0].metadata) is not None:
        # a pyramid summary: the memories it covers, in the order it lists them
        ids = [str(c) for c in agent.get_field_map().get_list(recs[0].metadata, CHILDREN_KEY)]
        live = {r.id: r for r in stores.get_store(agent).get(ids, include_embeddings=False)}
        detail.children = [MemoryView.from_record(live[i], agent) for i in ids if i in live]
        detail.missing_children = [i for i in ids if i not in live]
    return detail
