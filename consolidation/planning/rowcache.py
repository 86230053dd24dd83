"""The stored rows' bounding rows, kept between the incremental passes over one store.

An incremental pass compares its new rows with every stored row (:func:`~.vectors.query_pairs`):
a product over the first coordinates of each unit row with the norm of the rest appended
(:func:`~.vectors.bounding_rows`), whose hits are then finished. Without this cache each pass
builds those rows again from the records: at 1M memories reading the vectors (0.5 s), their
norms (0.3 s) and the rest norms, about as long as the product itself (1.3 s for 1K new rows
here). A stored row's bounding row depends only on its vector, so :class:`RowCache` keeps it
between passes, as :class:`~consolidation.adapters.vector_cache.VectorCache` keeps embeddings
and :class:`~.features.FeatureCache` the per-memory features of the texts.

Given an 8-bit product (``product``: :class:`~.quantized.Int8Product`, the console's is
onnxruntime's, :mod:`consolidation.adapters.int8_product`), the cache keeps each stored row's
int8 codes and their two norms instead (:mod:`.quantized`), and the search bounds its tiles by
an integer product: 1K new rows into 1M stored took 0.62–0.64 s instead of 1.40–1.54 s
(``query_pairs`` alone, 2 cores, measured), the pass's ``candidates`` stage most of that.

Keyed by the memory's id and content hash (:attr:`~consolidation.records.MemoryRecord
.content_hash`: its text and metadata), as the checkpoint is: a row the checkpoint calls
unchanged is read from the cache, a changed one is computed again (two memories of one content
keep a row each: their vectors need not be the same). A store whose vectors change while their
content does not (re-embedded by another model) must be given a new cache
(:meth:`RowCache.clear`), as it must be planned in full: the checkpoint would not see that
change either.

The pairs are the same with or without the cache, of either kind (a test compares them); what
changes is the time and the memory held: ``(head + 1) × 4`` bytes a stored row (640 bytes at
0.75: 640 MB at 1M memories), or 401 with codes (``d`` bytes, two float64 norms, a flag).
A forget of any memory of the store must :meth:`RowCache.clear` it (the rows are a part of
each embedding).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from itertools import repeat

import numpy as np

from .quantized import CachedCodes, Int8Product, quantize
from .vectors import CachedBounds, UnitRows, bound_head, bounding_rows, rest_norms

__all__ = ["SPREADS", "KeptCodes", "KeptRows", "RowCache"]

SPREADS = 5.0
"""Spreads of :func:`~.vectors.bound_head` for the kept rows: 159 of 384 coordinates at 0.75
instead of 144. A hit of the bound is finished from the records' rows, a gather per pair, so a
tighter bound pays: of 1K new × 1M random stored rows 271,458 pairs passed at 144 (their
finishing 1.0 s), none of 16M pairs at 160; the product grows by a tenth (0.13 s)."""


CODED = -1
"""The slab key of the int8 codes (:mod:`.quantized`); a float32 slab's key is its head."""


class _Slab:
    """Rows of one kind: float32 bounding rows of one head (``data``) or, for :data:`CODED`,
    int8 codes and their norms (``data`` ``uint8``, ``norms``; a float32 slab keeps no norms:
    ``(0, 2)``); ``[:used]`` filled, ``slot``
    from ``hash((id, content hash))``; ``flags[s]``: whether slot ``s``'s text is
    :func:`~.features.marked` (1, 0; −1 unknown)."""

    def __init__(self, head: int, d: int) -> None:
        self.head = head
        coded = head == CODED
        self.data = np.empty((0, d if coded else head + 1), np.uint8 if coded else np.float32)
        self.norms = np.empty((0, 2), np.float64)
        self.flags = np.empty(0, np.int8)
        self.used = 0
        self.slot: dict[int, int] = {}


class _Flagged:
    """The texts' update-channel flags of a slab (``_flags``), read for a pass's rows
    (``pos``, as in the kept rows it is mixed into)."""

    _flags: np.ndarray
    pos: np.ndarray

    def marked_rows(self, docs: Sequence[str], marked: Callable[[str], bool]) -> np.ndarray:
        """Indices (ascending, ``int64``) of the rows whose text ``docs[i]`` is marked: kept
        flags read, the others computed with ``marked`` (a
        :meth:`~.features.FeatureCache.marked`) and kept for the next pass."""
        flags = self._flags[self.pos]
        for i in np.flatnonzero(flags < 0).tolist():
            flags[i] = self._flags[self.pos[i]] = bool(marked(docs[i]))
        return np.flatnonzero(flags > 0)


class KeptRows(_Flagged, CachedBounds):
    """:class:`~.vectors.CachedBounds` of a pass from a :class:`RowCache`, with the texts'
    update-channel flags kept beside them (:meth:`marked_rows`)."""

    def __init__(self, data: np.ndarray, pos: np.ndarray, head: int, flags: np.ndarray) -> None:
        super().__init__(data, pos, head)
        self._flags = flags


class KeptCodes(_Flagged, CachedCodes):
    """:class:`~.quantized.CachedCodes` of a pass from a :class:`RowCache` given a product,
    with the texts' update-channel flags kept beside them (:meth:`marked_rows`)."""

    def __init__(
        self,
        codes: np.ndarray,
        norms: np.ndarray,
        pos: np.ndarray,
        product: Int8Product,
        flags: np.ndarray,
    ) -> None:
        super().__init__(codes, norms, pos, product)
        self._flags = flags


class RowCache:
    """Bounding rows of the stored memories of one store, kept between passes (module
    docstring). Safe to share between threads: :meth:`bounds` holds a lock while it reads and
    extends the slab, and a slab's filled rows are never written again (a compaction or a
    growth makes a new array), so the rows handed out stay as they were.

    ``max_rows``: a pass of more memories than this is not cached (:meth:`bounds` returns
    ``None``); a slab holding more than twice the rows of the pass in hand is compacted to
    them. ``product``: an :class:`~.quantized.Int8Product`; with one, the cache keeps each
    row's int8 codes instead (:mod:`.quantized`: 384 bytes a row, and a product ≈ 4× faster
    where the CPU has 8-bit dot-product instructions; :meth:`bounds` returns
    :class:`KeptCodes`). Raises ``ValueError`` for ``max_rows < 1``."""

    def __init__(self, max_rows: int = 2_000_000, *, product: Int8Product | None = None) -> None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        self.max_rows = max_rows
        self.product = product
        self._lock = threading.Lock()
        self._slabs: dict[int, _Slab] = {}

    def __len__(self) -> int:
        """Rows held, over every head."""
        return sum(s.used for s in self._slabs.values())

    def clear(self) -> int:
        """Drop every row held (a forget, a re-embedded store): how many were held."""
        with self._lock:
            held = len(self)
            self._slabs = {}
        return held

    def bounds(
        self, rows: UnitRows, ids: Sequence[str], hashes: Sequence[str], threshold: float
    ) -> KeptRows | KeptCodes | None:
        """The bounding rows of ``rows`` (``(n, d)``, a pass's embeddings) for a search at
        cosine ≥ ``threshold`` (head :func:`~.vectors.bound_head` with :data:`SPREADS`), or
        their int8 codes when the cache has a ``product`` (any threshold): rows of an id and
        content hash (``ids[i]``, ``hashes[i]``: row ``i``'s) seen before are read from the
        cache, the others computed from ``rows`` and kept. ``None`` when ``n``
        exceeds ``max_rows``. Raises ``ValueError`` when ``ids``, ``hashes`` and ``rows``
        differ in length."""
        n, d = rows.shape
        if len(hashes) != n or len(ids) != n:
            raise ValueError(f"{len(ids)} ids and {len(hashes)} content hashes for {n} rows")
        if not n or n > self.max_rows:
            return None
        head = CODED if self.product is not None else bound_head(threshold, d, SPREADS)
        keys = list(map(hash, zip(ids, hashes, strict=True)))
        with self._lock:
            slab = self._slabs.get(head)
            if slab is None:
                slab = self._slabs[head] = _Slab(head, d)
            pos = np.array(list(map(slab.slot.get, keys, repeat(-1))), np.int64)
            todo = np.flatnonzero(pos < 0)
            if slab.used + len(todo) > 2 * n:  # mostly rows of memories gone: keep this pass's
                slab = self._slabs[head] = self._compact(slab, pos, keys)
                pos = np.array(list(map(slab.slot.get, keys, repeat(-1))), np.int64)
            if len(todo):
                pos[todo] = np.arange(slab.used, slab.used + len(todo))
                self._add(slab, rows, todo, [keys[i] for i in todo.tolist()])
            data, norms, flags = slab.data[: slab.used], slab.norms[: slab.used], slab.flags
        data.flags.writeable = norms.flags.writeable = False
        if self.product is not None:
            return KeptCodes(data, norms, pos, self.product, flags)
        return KeptRows(data, pos, head, flags)

    @staticmethod
    def _compact(slab: _Slab, pos: np.ndarray, keys: list[int]) -> _Slab:
        """A new slab of the rows of ``pos`` held (``≥ 0``), in the pass's order."""
        held = np.flatnonzero(pos >= 0)
        out = _Slab(slab.head, slab.data.shape[1])
        out.data = np.ascontiguousarray(slab.data[pos[held]])
        if slab.head == CODED:
            out.norms = np.ascontiguousarray(slab.norms[pos[held]])
        out.flags = slab.flags[pos[held]]
        out.used = len(held)
        out.slot = {keys[i]: s for s, i in enumerate(held.tolist())}
        return out

    @staticmethod
    def _add(slab: _Slab, rows: UnitRows, idx: np.ndarray, keys: list[int]) -> None:
        """Compute the bounding rows (or codes) of ``rows[idx]`` into new slots, one per key of
        ``keys``."""
        need = slab.used + len(idx)
        if need > len(slab.data):  # grow by half again (amortised O(1) a row), with room for
            # an eighth more, so the passes after the first add their new rows without a copy
            size = max(need + need // 8, len(slab.data) * 3 // 2)
            grown = np.empty((size, slab.data.shape[1]), slab.data.dtype)
            grown[: slab.used] = slab.data[: slab.used]
            norms = np.empty((size if slab.head == CODED else 0, 2), np.float64)
            norms[: len(slab.norms)] = slab.norms
            flags = np.full(size, -1, np.int8)
            flags[: slab.used] = slab.flags[: slab.used]
            slab.data, slab.norms, slab.flags = grown, norms, flags
        start = slab.used
        step = 16384
        for s in range(0, len(idx), step):
            unit = rows[idx[s : s + step]]
            at = slice(start + s, start + s + len(unit))
            if slab.head == CODED:
                slab.norms[at] = quantize(unit, out=slab.data[at])[1]
            else:
                bounding_rows(unit[:, : slab.head], rest_norms(unit, slab.head), out=slab.data[at])
        slab.used = need
        slab.slot.update(zip(keys, range(start, need), strict=True))
