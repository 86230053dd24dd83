"""Filtered, paged reads of a Chroma collection, done by Chroma (``where``, ``where_document``,
``limit``/``offset``), so a page of a large store costs one page, not a scan in Python.

- :class:`FilteredRecords`: a lazy sequence of the records matching a filter, in Chroma's
  insertion order, with ``count()`` and slicing — what Django's ``Paginator`` needs, so a page
  is one ``count`` (or one ids-only ``get``) plus one ``get(limit, offset)``.
- :func:`distinct_values`: the distinct values of one metadata key (metadata-only pages).

Measured with ``bench/console_bench.py`` (50,000 memories, in-process Chroma 1.5): a page of
50 with ``limit``/``offset`` ≈ 5–15 ms wherever it starts; an ids-only ``get`` of 50,000
matches ≈ 60 ms.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from consolidation.records import MemoryRecord

from .chroma_store import MAX_PAGE_SIZE, decode_metadata

__all__ = ["FilteredRecords", "distinct_values"]


class FilteredRecords:
    """Records of ``collection`` matching ``where`` / ``where_document`` (Chroma filter dicts,
    ``None`` for none), without embeddings, in insertion order.

    ``len()``/``count()``: the number of matches (``collection.count()`` when unfiltered, else
    one ids-only ``get`` whose ids are kept), computed once. ``records[a:b]`` (at most 5,000
    rows): unfiltered, one ``get(limit=b-a, offset=a)``; filtered, one ``get(ids=…)`` of the
    kept ids, so the filter is evaluated once per request. Errors are Chroma's.
    """

    def __init__(
        self,
        collection: Any,
        *,
        where: Mapping[str, Any] | None = None,
        where_document: Mapping[str, Any] | None = None,
        text_key: str = "",
    ) -> None:
        self.collection = collection
        self.text_key = text_key  # FieldMap.document: the text lives in this metadata key
        self.filters: dict[str, Any] = {}
        if where:
            self.filters["where"] = dict(where)
        if where_document:
            self.filters["where_document"] = dict(where_document)
        self._count: int | None = None
        self._ids: list[str] | None = None

    def count(self) -> int:
        """Number of matching records."""
        if self._count is None:
            if self.filters:
                self._ids = list(self.collection.get(include=[], **self.filters)["ids"] or [])
                self._count = len(self._ids)
            else:
                self._count = int(self.collection.count())
        return self._count

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, item: slice) -> list[MemoryRecord]:
        if not isinstance(item, slice) or item.step not in (None, 1):
            raise TypeError("FilteredRecords supports contiguous slices only")
        start = max(0, item.start or 0)
        stop = self.count() if item.stop is None else item.stop
        limit = min(max(0, stop - start), MAX_PAGE_SIZE)
        if limit == 0:
            return []
        include = ["documents", "metadatas"]
        if self._ids is not None:
            wanted = self._ids[start : start + limit]
            got = self.collection.get(ids=wanted, include=include) if wanted else {"ids": []}
        else:
            got = self.collection.get(limit=limit, offset=start, include=include, **self.filters)
        docs, metas = got.get("documents") or [], got.get("metadatas") or []
        found: dict[str, MemoryRecord] = {}
        for i, rid in enumerate(got.get("ids") or []):
            meta = decode_metadata(metas[i] if i < len(metas) else None)
            text = meta.get(self.text_key) if self.text_key else (docs[i] if i < len(docs) else "")
            found[rid] = MemoryRecord(
                id=rid,
                document=text if isinstance(text, str) else "",
                embedding=None,
                metadata=meta,
            )
        order = self._ids[start : start + limit] if self._ids is not None else list(found)
        return [found[rid] for rid in order if rid in found]


def distinct_values(collection: Any, key: str) -> set[Any]:
    """The distinct values of metadata ``key`` over the whole collection (absent keys left out),
    read in metadata-only pages of 5,000 rows. O(n): callers cache it (see the console's
    ``memory_filters``)."""
    seen: set[Any] = set()
    offset = 0
    while True:
        got = collection.get(limit=MAX_PAGE_SIZE, offset=offset, include=["metadatas"])
        metas = got.get("metadatas") or []
        for meta in metas:
            if meta and key in meta and not isinstance(meta[key], list):
                seen.add(meta[key])
        if len(got.get("ids") or []) < MAX_PAGE_SIZE:
            return seen
        offset += MAX_PAGE_SIZE
