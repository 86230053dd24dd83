"""The memory browser's filters as Chroma filters (``where`` / ``where_document``), so tier,
pinned and text filters and paging run in Chroma instead of in Python over the whole store.

They follow the agent's field map (:class:`consolidation.records.FieldMap`) exactly as
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

import re
import threading
from typing import Any

from consolidation.adapters.chroma_pages import FilteredRecords, distinct_values
from consolidation.records import FieldMap

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
