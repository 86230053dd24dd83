"""PraisonAI's memories as stores the engine can write: `FileMemoryStore`, `writable_store`.

praisonaiagents 1.7.17 gives an agent one of two memories (``Agent._init_memory``):

- ``memory=True`` (the seed's quick start): a ``FileMemory``, JSON files per user under
  ``.praisonai/memory/<user_id>/`` — ``short_term.json`` and ``long_term.json``, each a list of
  ``MemoryItem`` dicts ``{id, content, metadata, created_at, updated_at, access_count,
  importance}`` (epoch seconds). Every turn is written twice, once to each file
  (``memory_mixin._persist_memory_turn``), so an agent's store holds an exact duplicate of each
  turn. :class:`FileMemoryStore` reads and writes those files, and lists those pairs
  (:meth:`FileMemoryStore.library_copies`) so the loss guard counts each turn once.
- ``memory={"backend": "chroma", …}``: a ``Memory`` whose adapter keeps every memory in one
  Chroma collection (``memory_adapter.collection``, cosine space, the library's OpenAI
  vectors, text in the document, write time in metadata ``timestamp``): written through
  :class:`~consolidation.adapters.ChromaMemoryStore` with the ``praisonai`` field map, keeping
  the collection's own vectors (a merge whose text is new and has no such vector is left out,
  as for any attached collection).

Anything else with ``get_all_memories()`` is planned read-only (the ``Consolidator`` never
writes to it). :func:`writable_store` is the store adapter ``pyproject.toml`` declares for
both memory types (entry-point group ``consolidation.stores``), so the seed's
``Consolidator().consolidate(agent._memory_instance)`` writes through it too.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

from praisonaiagents.memory.file_memory import FileMemory

from consolidation.protocols import MemoryStore
from consolidation.records import FieldMap, MemoryRecord
from consolidation.shapes import preset_field_map

__all__ = [
    "COPY_SECONDS",
    "ITEM_FIELDS",
    "TIER_KEY",
    "TIERS",
    "FileMemoryStore",
    "collection_name",
    "writable_store",
]

TIERS = ("short_term", "long_term")
"""FileMemory's two files, by the names its ``get_all_memories()`` gives as ``type``."""

TIER_KEY = "memory_type"
"""Metadata key a record carries its FileMemory file in (praisonaiagents' SQLite adapter calls
the same field ``memory_type``). A merged memory whose sources came from both files lists both;
it is written to ``long_term`` (the durable file)."""

COPY_SECONDS = 5.0
"""Most seconds between the two copies of one turn (:meth:`FileMemoryStore.library_copies`):
praisonaiagents writes them one after the other in one call (two small JSON file writes,
milliseconds apart here); 5 s leaves room for a slow disk, while a user repeating a sentence
takes at least a turn of the model."""

ITEM_FIELDS = ("created_at", "updated_at", "access_count", "importance")
"""``MemoryItem`` fields the engine reads as metadata under the same keys (the default
:class:`~consolidation.records.FieldMap`'s): creation and rewrite time, accesses, importance."""


class FileMemoryStore:
    """A praisonaiagents ``FileMemory`` as a :class:`~consolidation.protocols.WritableMemoryStore`.

    Reads the two JSON files from disk (what every FileMemory writer re-reads before writing)
    and writes through ``FileMemory.import_data`` (the library's own atomic temp-file-and-rename
    write, which also refreshes the instance's in-memory lists); entities, summaries and
    episodic files are never touched. Each write holds the FileMemory's own store lock, the one
    its ``add_*``/``delete_*`` methods hold, so a turn the agent writes meanwhile in this
    process is not lost; other processes writing the same files are not coordinated.

    Records have no embedding (FileMemory stores none: the ``Consolidator`` embeds them) and
    carry the item's fields as metadata (:data:`ITEM_FIELDS`, :data:`TIER_KEY`). Raises
    ``ValueError`` for a file that is not a JSON list of items, or an item whose metadata
    already uses one of those keys — before anything is written.
    """

    def __init__(self, memory: FileMemory) -> None:
        if not isinstance(memory, FileMemory):
            raise TypeError(f"FileMemoryStore needs a FileMemory, got {type(memory).__name__}")
        self.memory = memory

    # ----- reads ----------------------------------------------------------------------------

    def _files(self) -> dict[str, Any]:
        return {"short_term": self.memory.short_term_file, "long_term": self.memory.long_term_file}

    def _read(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for tier, path in self._files().items():
            try:
                data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
            except (OSError, ValueError) as exc:
                raise ValueError(f"cannot read FileMemory file {path}: {exc}") from None
            if not isinstance(data, list) or not all(isinstance(i, dict) for i in data):
                raise ValueError(f"FileMemory file {path} is not a JSON list of memory items")
            out[tier] = data
        return out

    def _records(self) -> list[MemoryRecord]:
        data = self._read()
        records = [record_from_item(item, tier) for tier in TIERS for item in data[tier]]
        return sorted(records, key=lambda r: r.id)

    def count(self) -> int:
        """Number of memories in both files."""
        return sum(len(items) for items in self._read().values())

    def iter_pages(
        self, *, page_size: int = 5000, include_embeddings: bool = True
    ) -> Iterator[list[MemoryRecord]]:
        """Every memory, sorted by id, in pages of at most ``page_size`` (no embeddings)."""
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be a positive int, got {page_size!r}")
        records = self._records()
        for start in range(0, len(records), page_size):
            yield records[start : start + page_size]

    def get(self, ids: Sequence[str], *, include_embeddings: bool = True) -> list[MemoryRecord]:
        """The memories with these ids, in the order asked (missing ids are left out)."""
        by_id = {r.id: r for r in self._records()}
        return [by_id[i] for i in ids if i in by_id]

    def library_copies(self) -> dict[str, str]:
        """The turns praisonaiagents stored twice: ``{short-term copy id: long-term item id}``.

        ``Agent._persist_memory_turn`` writes each turn to ``long_term.json`` and then the
        same text with the same metadata to ``short_term.json``; a pair is a short-term item
        and a long-term item with equal ``content`` and ``metadata`` (but for the ``tier`` a
        pass may have promoted one of them to) created at most :data:`COPY_SECONDS` apart
        (each item in at most one pair, nearest times first). The
        ``Consolidator`` counts each pair as one original for the loss guard
        (:func:`consolidation.plans.count_copies`)."""
        data = self._read()
        longs: dict[str, list[tuple[float, str]]] = {}
        for item in data["long_term"]:
            longs.setdefault(_copy_key(item), []).append((_created(item), str(item.get("id"))))
        pairs: dict[str, str] = {}
        for item in data["short_term"]:
            candidates = longs.get(_copy_key(item)) or []
            at = _created(item)
            best = min(candidates, key=lambda c: abs(c[0] - at), default=None)
            if best is not None and abs(best[0] - at) <= COPY_SECONDS:
                candidates.remove(best)
                pairs[str(item.get("id"))] = best[1]
        return pairs

    # ----- writes ---------------------------------------------------------------------------

    def _lock(self) -> Any:
        # FileMemory's per-store RLock (shared by every instance on the same directory in this
        # process), the one its own writers hold: holding it across read-modify-write keeps a
        # turn written meanwhile. A private attribute of the library, hence the fallback.
        return getattr(self.memory, "_lock", None) or contextlib.nullcontext()

    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace ``records`` by id, each in the file its :data:`TIER_KEY` names."""
        items = [item_from_record(r) for r in records]  # every error before any write
        with self._lock():
            data = self._read()
            ids = {item["id"] for _tier, item in items}
            for tier in TIERS:
                data[tier] = [i for i in data[tier] if str(i.get("id")) not in ids]
            for tier, item in items:
                data[tier].append(item)
            self.memory.import_data(data)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete memories by id from both files; missing ids are ignored."""
        gone = {str(i) for i in ids}
        with self._lock():
            data = self._read()
            if not any(str(i.get("id")) in gone for tier in TIERS for i in data[tier]):
                return
            self.memory.import_data(
                {t: [i for i in data[t] if str(i.get("id")) not in gone] for t in TIERS}
            )


def _copy_key(item: dict[str, Any]) -> str:
    # the tier is left out: a pass that promotes one copy must still find it a copy
    meta = {k: v for k, v in (item.get("metadata") or {}).items() if k != FieldMap().tier}
    return json.dumps([item.get("content"), meta], sort_keys=True, default=str)


def _created(item: dict[str, Any]) -> float:
    value = item.get("created_at")
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return math.inf


def record_from_item(item: dict[str, Any], tier: str) -> MemoryRecord:
    """The record of one ``MemoryItem`` dict of file ``tier`` (module docstring)."""
    mid = str(item.get("id") or "")
    meta = item.get("metadata") or {}
    if not isinstance(meta, dict):
        raise ValueError(f"FileMemory item {mid!r}: metadata must be a dict")
    clash = sorted(k for k in (*ITEM_FIELDS, TIER_KEY) if k in meta)
    if clash:
        raise ValueError(
            f"FileMemory item {mid!r}: metadata key(s) {', '.join(clash)} clash with the "
            "item's own fields; rename them before consolidating"
        )
    meta = {**meta, **{k: item[k] for k in ITEM_FIELDS if item.get(k) is not None}}
    meta[TIER_KEY] = tier
    content = item.get("content")
    if not isinstance(content, str):
        raise ValueError(f"FileMemory item {mid!r} has no content string")
    return MemoryRecord(mid, content, None, meta)


def _number(meta: dict[str, Any], key: str, default: float) -> float:
    value = meta.pop(key, None)
    if isinstance(value, list | tuple):  # a merge of sources that disagreed: the largest
        value = max((v for v in value if isinstance(v, int | float)), default=None)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{key} must be a finite number, got {value!r}")
    return float(value)


def item_from_record(record: MemoryRecord) -> tuple[str, dict[str, Any]]:
    """``(file, MemoryItem dict)`` to write for ``record``; ``ValueError`` for a bad field."""
    meta = dict(record.metadata)
    tiers = meta.pop(TIER_KEY, "long_term")
    tiers = list(tiers) if isinstance(tiers, list | tuple) else [tiers]
    tier = "short_term" if set(tiers) == {"short_term"} else "long_term"
    now = time.time()
    try:
        item = {
            "id": record.id,
            "content": record.document,
            "created_at": _number(meta, "created_at", now),
            "updated_at": _number(meta, "updated_at", now),
            "access_count": int(_number(meta, "access_count", 0)),
            "importance": _number(meta, "importance", 0.8 if tier == "long_term" else 0.5),
        }
    except ValueError as exc:
        raise ValueError(f"memory {record.id!r}: {exc}") from None
    item["metadata"] = meta
    return tier, item


def _collection(memory: Any) -> Any:
    adapter = getattr(memory, "memory_adapter", None)
    for candidate in (getattr(adapter, "collection", None), getattr(memory, "chroma_col", None)):
        if candidate is not None and callable(getattr(candidate, "upsert", None)):
            return candidate
    return None


def collection_name(memory: Any) -> str | None:
    """The name of the Chroma collection that holds ``memory``, or ``None`` when it is not one:
    a chroma-backed praisonaiagents ``Memory``, a ``ChromaMemoryStore`` or a chromadb
    collection."""
    store_collection = getattr(memory, "collection", None)
    for candidate in (_collection(memory), store_collection, memory):
        name = getattr(candidate, "name", None)
        if isinstance(name, str) and name and callable(getattr(candidate, "upsert", None)):
            return name
    return None


def writable_store(memory: Any) -> tuple[Any, FieldMap | None]:
    """``(store, field_map)`` the ``Consolidator`` should write ``memory`` through.

    A ``FileMemory`` → :class:`FileMemoryStore` (default field map); a chroma-backed
    praisonaiagents ``Memory`` → a ``ChromaMemoryStore`` over its collection with the
    ``praisonai`` field map; one of our :class:`~consolidation.protocols.MemoryStore` as it is;
    anything else as it is, with ``None`` (read-only if it has only ``get_all_memories()``).
    """
    if isinstance(memory, FileMemory):
        return FileMemoryStore(memory), FieldMap()
    if isinstance(memory, MemoryStore):
        return memory, None
    collection = _collection(memory)
    if collection is not None:
        from consolidation.adapters.chroma_layout import Layout
        from consolidation.adapters.chroma_store import ChromaMemoryStore
        from consolidation.default_embedder import DefaultEmbedder

        fieldmap = preset_field_map("praisonai")
        layout = Layout(str(collection.name), field_map=fieldmap, embed=DefaultEmbedder().embed)
        return ChromaMemoryStore(collection, layout=layout), fieldmap
    return memory, None
