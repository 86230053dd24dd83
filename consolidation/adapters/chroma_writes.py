"""One batch of prepared records written to a Chroma collection: each record is added,
upserted, or — when the collection already holds its document and its vector — updated in its
metadata alone (:func:`write_batch`). Used by
:meth:`~consolidation.adapters.chroma_store.ChromaMemoryStore.upsert`, which validates and
prepares the records first.

Chroma facts this relies on (chromadb 1.5.9, ``tests/consolidation/test_chroma_store.py``):
``upsert`` and ``update`` merge metadata into a stored record, so a key is removed only by
sending it as ``None``; ``update`` without documents or embeddings leaves both as they are and
does not re-index the vector; ``add`` of a stored id leaves it as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np

__all__ = ["Prepared", "write_batch"]

Prepared = tuple[str, str | None, np.ndarray | None, dict[str, Any]]
"""``(id, document or None, vector, encoded metadata)``: one record ready to write."""


def write_batch(collection: Any, batch: list[Prepared]) -> None:
    """Write ``batch`` (every vector set, at most the server's batch size) to ``collection``
    so that each record ends exactly as prepared: its document, its vector and its metadata
    and no other key. One read of the stored ids, then up to three calls:

    - ``add`` for an id absent at that read (1–9 % less server time a record than upsert,
      ``bench/chroma_batch_bench.py``); a writer that creates the id in between keeps its
      record, as if it wrote just after us;
    - ``update`` of the metadata alone for a stored record that already holds this document
      and this vector (compared as the float32 Chroma stores): the same record in the end,
      without re-indexing the vector — 3,000 took 0.18 s against 4.5–5.8 s to upsert over
      them (``bench/chroma_batch_bench.py``, 30K records). Only the keys whose value changes
      are sent: the server's time grows with the keys (1,000 records of 6 keys: 0.45–0.54 s,
      measured in ``bench/propose_bench.py --n 50000``). A merge that keeps one source's
      text, a promote and a rollback's restore of a rewritten source write such records;
    - ``upsert`` for any other stored id.

    Keys the stored metadata has and the new one lacks are sent as ``None`` (removed). Raises
    what chromadb raises; the caller translates connection errors.
    """
    ids = [p[0] for p in batch]
    existing = collection.get(ids=ids, include=["documents", "metadatas", "embeddings"])
    stored = {
        rid: m or {} for rid, m in zip(existing["ids"], existing["metadatas"] or [], strict=False)
    }
    same = _same_content(existing, batch)
    metadatas: list[dict[str, Any] | None] = []
    for rid, _, _, meta in batch:
        old = stored.get(rid, {})
        gone = {key: None for key in old if key not in meta}
        if rid in same:  # only what changes: a key costs the server time (≈ 0.1 ms a record)
            meta = {k: v for k, v in meta.items() if k not in old or not _same_value(old[k], v)}
        metadatas.append((meta | gone) or None)
    how = ["update" if p[0] in same else "upsert" if p[0] in stored else "add" for p in batch]
    for name in ("add", "upsert", "update"):
        part = [k for k, h in enumerate(how) if h == name]
        if not part:
            continue
        rows, metas = [batch[k] for k in part], [metadatas[k] for k in part]
        if name != "update":
            _write(getattr(collection, name), rows, metas)
        elif keep := [(r[0], m) for r, m in zip(rows, metas, strict=True) if m]:
            # a record already as written has nothing to update
            collection.update(ids=[k[0] for k in keep], metadatas=[k[1] for k in keep])


def _same_value(a: Any, b: Any) -> bool:
    """Equal and of the same type all the way down (``1``, ``1.0`` and ``True`` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _write(write: Any, batch: list[Prepared], metas: list[dict[str, Any] | None]) -> None:
    """One Chroma ``add`` or ``upsert`` call of prepared rows (every vector set by now: ours
    checked, foreign ones found)."""
    docs = [p[1] for p in batch]
    write(
        ids=[p[0] for p in batch],
        documents=None if all(d is None for d in docs) else docs,
        embeddings=np.stack(cast("list[np.ndarray]", [p[2] for p in batch])).astype(np.float32),
        metadatas=metas,
    )


def _same_content(existing: Mapping[str, Any], batch: list[Prepared]) -> set[str]:
    """Ids of ``batch`` whose stored record (``existing``: a Chroma ``get`` with documents and
    embeddings) already has the document and the vector about to be written."""
    docs, embs = existing.get("documents"), existing.get("embeddings")
    if embs is None:
        return set()
    stored = {
        rid: (docs[i] if docs is not None else None, embs[i])
        for i, rid in enumerate(existing.get("ids") or [])
    }
    out = set()
    for rid, document, vector, _ in batch:
        if rid in stored and vector is not None and stored[rid][0] == document:
            old = np.asarray(stored[rid][1], dtype=np.float32)
            if old.shape == vector.shape and np.array_equal(old, vector.astype(np.float32)):
                out.add(rid)
    return out
