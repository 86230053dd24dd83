"""The planner's embeddings: unit rows without a second ``(n, 384)`` matrix, and the exact
new × store search an incremental pass runs over them.

:class:`UnitRows` reads the records' own ``(384,) float32`` vectors (never written) and each
row's L2 norm, computed exactly as :func:`~.candidates.normalize_rows` does; a row read
through it is ``vector / norm``, the very float32 values the normalised matrix would hold (the
same IEEE division), so every similarity is bit for bit what a normalised copy gives (I-8).
A full search needs the matrix itself (:meth:`UnitRows.matrix`): the caller's own matrix when
the vectors are its rows in id order and normalising leaves them unchanged (settled unit
rows), else a normalised copy, as before. An incremental search (:func:`query_pairs`) streams
the store through one block buffer and never builds it.

Why: at 1M memories one ``(n, 384) float32`` matrix is 1.5 GB; the records' vectors, the
planner's normalised copy and the candidate index would not fit 4 GB together,
and copying 1M vectors (page faults included) was most of an incremental pass's ``prepare``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits

from .nearest import SLACK, TopK, dense
from .quantized import CachedCodes, block_rows, codes_of, floors, kept_at, quantize

__all__ = [
    "CHUNK",
    "CachedBounds",
    "UnitRows",
    "bound_head",
    "bounding_rows",
    "cpus",
    "query_pairs",
    "rest_norms",
    "subset_pairs",
]

CHUNK = 16384
"""Rows per step of the norm, copy and check passes: 24 MB of float32 temporaries at d = 384."""

_MARGIN = 1e-3
"""Slack of the prefilter (float32 rounding of a 384-term dot product is ~1e-6); every pair
that passes is recomputed exactly and compared with the threshold itself."""


def _one_matrix(embs: Sequence[np.ndarray]) -> np.ndarray | None:
    """The ``(n, d)`` block of one C-contiguous float32 matrix whose rows ``embs`` are, in
    order (how a caller that embeds a batch at once hands them over), else ``None``."""
    base = embs[0].base
    if not (
        isinstance(base, np.ndarray)
        and base.dtype == np.float32
        and base.ndim == 2
        and base.flags.c_contiguous
        and base.shape[1] == embs[0].shape[0]
        and all(e.base is base for e in embs)
    ):
        return None
    row = base.strides[0]
    start = base.__array_interface__["data"][0]
    first, rem = divmod(embs[0].__array_interface__["data"][0] - start, row)
    if rem or first + len(embs) > base.shape[0]:
        return None
    expect = start + first * row
    for e in embs:
        if e.__array_interface__["data"][0] != expect or not e.flags.c_contiguous:
            return None
        expect += row
    return base[first : first + len(embs)]


def _norms(raw: np.ndarray) -> np.ndarray:
    """``(k,) float32`` L2 norms of ``raw``'s rows as :func:`~.candidates.normalize_rows`
    computes them (zero → 1); each row's sum is independent of the rows beside it (same bits
    whether computed for one row, a block or the whole matrix)."""
    out = np.linalg.norm(raw, axis=1)
    out[out == 0] = 1.0
    return out.astype(np.float32, copy=False)


class UnitRows:
    """L2-normalised embedding rows read as ``rows[i]`` (``(d,)``) or ``rows[list]`` (``(k, d)``).

    Built from the records' ``(d,) float32`` vectors, which are never written. Norms are
    computed when a row is first read or a block streamed (:meth:`block`), so an incremental
    pass copies no vector for good; :meth:`matrix` builds the ``(n, d)`` normalised matrix a
    full search needs (the caller's own matrix when its rows are settled unit rows).
    """

    def __init__(self, embs: Sequence[np.ndarray], dim: int = 384) -> None:
        self._embs = list(embs)
        self.shape = (len(self._embs), self._embs[0].shape[0] if self._embs else dim)
        self.norms = np.full(len(self._embs), np.nan, np.float32)
        self._unit: np.ndarray | None = None

    def __len__(self) -> int:
        return self.shape[0]

    def _norm(self, i: int) -> np.float32:
        v = self.norms[i]
        if v != v:  # NaN: not computed yet
            v = self.norms[i] = _norms(self._embs[i][None, :])[0]
        return v

    def __getitem__(self, idx: int | Sequence[int] | np.ndarray) -> np.ndarray:
        if self._unit is not None:
            return self._unit[idx]
        if isinstance(idx, int | np.integer):
            return self._embs[idx] / self._norm(int(idx))
        idx = np.asarray(idx, dtype=np.int64)
        if not len(idx):
            return np.empty((0, self.shape[1]), np.float32)
        embs = self._embs
        raw = np.stack([embs[k] for k in idx.tolist()])
        norms = self.norms[idx]
        todo = np.flatnonzero(norms != norms)  # NaN: not computed yet
        if len(todo):  # each row's norm alone: the same bits as one row at a time (_norms)
            norms[todo] = _norms(raw[todo])
            self.norms[idx[todo]] = norms[todo]
        return raw / norms[:, None]

    def block(self, start: int, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``start : start + len(out)`` (fewer at the end) as ``(raw, norms)``: the
        vectors copied into ``out`` and their norms (recorded). Read from the normalised
        matrix instead (norms 1) once :meth:`matrix` has built it."""
        stop = min(start + len(out), self.shape[0])
        if self._unit is not None:
            return self._unit[start:stop], np.ones(stop - start, np.float32)
        raw = out[: stop - start]
        np.stack(self._embs[start:stop], out=raw)
        self.norms[start:stop] = norms = _norms(raw)
        return raw, norms

    def _unchanged(self, raw: np.ndarray) -> bool:
        """Whether normalising leaves every row of ``raw`` as it is (settled unit rows)."""
        for s in range(0, len(raw), CHUNK):
            block = raw[s : s + CHUNK]
            if not np.array_equal(block / self.norms[s : s + CHUNK, None], block):
                return False
        return True

    def matrix(self) -> np.ndarray:
        """The ``(n, d) float32`` normalised matrix (read-only): the caller's own rows when
        they are one matrix's rows in order and normalising changes none of them, else a
        normalised copy (made a chunk at a time: no temporaries of the whole size)."""
        if self._unit is None:
            shared = _one_matrix(self._embs) if self._embs else None
            if shared is not None:
                for s in range(0, len(shared), CHUNK):
                    self.norms[s : s + CHUNK] = _norms(shared[s : s + CHUNK])
                if self._unchanged(shared):
                    unit = shared.view()
                    unit.flags.writeable = False
                    self._unit = unit
                    return unit
            unit = np.empty(self.shape, np.float32)
            for s in range(0, len(unit), CHUNK):
                part = unit[s : s + CHUNK]
                if shared is None:
                    np.stack(self._embs[s : s + CHUNK], out=part)
                else:
                    part[:] = shared[s : s + CHUNK]
                self.norms[s : s + CHUNK] = _norms(part)
                part /= self.norms[s : s + CHUNK, None]
            unit.flags.writeable = False
            self._unit = unit
        return self._unit


def bound_head(threshold: float, d: int, spreads: float = 4.0) -> int:
    """Coordinates (of ``d``) in the bounding product of a two-stage search for pairs at
    cosine ≥ ``threshold`` (in [-1, 1]): each unit row's first ``head`` coordinates with the
    norm of the rest appended, whose product bounds every pair's cosine from above
    (Cauchy–Schwarz on the rest: ``x·y ≤ x₁·y₁ + ‖x₂‖‖y₂‖``), so only the pairs that reach the
    threshold on the bound are finished.

    The smallest share ``f`` of the coordinates for which the bound of two random unit rows
    (no direction favoured: ``‖x₂‖‖y₂‖ ≈ 1 − f``, ``x₁·y₁`` of spread ``√(f / d)``) stays 4
    spreads (``spreads``) under the threshold: ``f = 1 − threshold + 4 √(f / d)``. At d = 384:
    144 for 0.75, 234 for the update floor 0.55, 73 for 0.9; with 5 spreads 159 for 0.75 (for
    a search whose bound hits cost a gather of rows from the records, :mod:`.rowcache`).
    Measured share of the pairs of random unit 384-d rows whose bound reaches 0.749, by head
    (16M pairs): 96 → 52 %, 112 → 12 %, 128 → 1.0 %, 144 → 0.028 %, 160 → 0; with a ½ head
    and the block's largest rest norms instead of each pair's (the bound until 2026-12):
    0.11 %."""
    f = 1.0 - threshold
    for _ in range(8):  # fixed-point steps from f = 1 − threshold (settled by then at d = 384)
        f = min(1.0, 1.0 - threshold + spreads * math.sqrt(max(f, 0.0) / d))
    return max(1, min(d, math.ceil(f * d)))


def rest_norms(x: np.ndarray, head: int) -> np.ndarray:
    """``(n,) float32``: the norm of each row of ``x`` (``(n, d) float32``) after its first
    ``head`` coordinates (a chunk of rows at a time: no ``(n, d − head)`` temporary)."""
    out = np.empty(len(x), dtype=np.float32)
    for s in range(0, len(x), CHUNK):
        part = x[s : s + CHUNK, head:]
        out[s : s + CHUNK] = np.sqrt(np.einsum("ij,ij->i", part, part))
    return out


def bounding_rows(first: np.ndarray, rest: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``(k, head + 1) float32`` rows for the bounding product of :func:`bound_head`: ``first``
    (``(k, head)``, the rows' first coordinates) with ``rest`` (``(k,)``, their
    :func:`rest_norms`) appended, so the product of two such rows is ≥ the rows' own product
    (Cauchy–Schwarz on the rest: ``x·y ≤ x₁·y₁ + ‖x₂‖‖y₂‖``). Written into ``out`` when given."""
    k, head = first.shape
    if out is None:
        out = np.empty((k, head + 1), dtype=np.float32)
    out[:, :head] = first
    out[:, head] = rest
    return out


class CachedBounds:
    """Bounding rows of a pass's store rows, kept from an earlier pass (:mod:`.rowcache`).

    ``data``: ``(m, head + 1) float32`` :func:`bounding_rows` of *unit* rows, read-only;
    ``pos``: ``(n,) int64``, row ``i`` of the pass is ``data[pos[i]]``. :meth:`block` is a view
    when the block's rows lie in order in ``data`` (one slice), else a gathered copy."""

    def __init__(self, data: np.ndarray, pos: np.ndarray, head: int) -> None:
        if data.shape[1] != head + 1 or pos.ndim != 1:
            raise ValueError(f"bounding rows of shape {data.shape} do not fit head {head}")
        self.data, self.pos, self.head = data, pos, head

    def block(self, start: int, stop: int) -> np.ndarray:
        """``(stop − start, head + 1) float32``: the bounding rows of rows ``start : stop``."""
        return self.data[kept_at(self.pos, start, stop)]


def cpus() -> int:
    """The CPUs this process may run on (affinity is Linux-only)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def query_pairs(
    rows: UnitRows,
    threshold: float,
    query: np.ndarray,
    *,
    block: int = 4096,
    per_row: int | None = None,
    stats: dict[str, int] | None = None,
    bounds: CachedBounds | CachedCodes | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(i, j)``, ``i < j``, with an end in ``query`` and cosine ≥ ``threshold``: exactly
    the pairs and similarities of :func:`~.candidates.candidate_pairs` with ``query`` (every
    pair found, each similarity recomputed with ``einsum`` from the normalised rows), without
    the normalised ``(n, d)`` matrix.

    Store rows are read raw and each tile is compared with ``(threshold − margin) × norm``; the
    bounding product (:func:`bound_head`: the first 144 of 384 coordinates at 0.75, with each row's
    norm of the rest) is computed first, and a tile whose bound leaves few candidates skips the rest
    — an O(q × n) product at ≈ 145/384 of the cost. Returns ``(i, j, sim)``: ``int64``, ``int64``,
    ``float32``, sorted by ``(i, j)``. ``per_row``, ``stats``: as for
    :func:`~.candidates.candidate_pairs` (a dense tile keeps each row's nearest partners only).
    ``bounds``: the store rows' bounding rows kept from an earlier pass (:class:`CachedBounds`,
    its head used instead of :func:`bound_head`'s), or their int8 codes (:class:`~.quantized
    .CachedCodes`, bounded by an integer product, :mod:`.quantized`): a tile is then bounded
    without reading the rows, and only a tile whose bound is weak reads them; the same pairs.
    """
    n, d = rows.shape
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32))
    qrows = np.unique(np.asarray(query, dtype=np.int64))
    if n < 2 or not len(qrows):
        return empty
    cached = bounds if isinstance(bounds, CachedBounds) else None
    coded = bounds if isinstance(bounds, CachedCodes) else None
    k = cached.head if cached is not None else bound_head(threshold, d)
    qv = rows[qrows]
    q2 = np.ascontiguousarray(qv[:, k:])
    rq = rest_norms(qv, k)
    qa = bounding_rows(qv[:, :k], rq)
    if coded is not None:
        qcodes, qnorms = quantize(qv)
        right, block = codes_of(qcodes), block_rows(len(qrows), block)
    few = 4 * len(qrows)
    topk = TopK(n, per_row + SLACK) if per_row else None

    def scan(starts: range) -> tuple[list[np.ndarray], list[np.ndarray]]:
        los: list[np.ndarray] = []
        his: list[np.ndarray] = []
        buf = np.empty((min(block, n), d), np.float32)
        aug = np.empty((min(block, n), k + 1), np.float32)
        for b0 in starts:
            if coded is not None:  # the kept codes of unit rows: no row read (.quantized)
                got = _coded_hits(coded, right, qnorms, b0, min(b0 + block, n), threshold, few)
                if got is not None:
                    los.append(qrows[got[1]])
                    his.append(b0 + got[0])
                    continue  # else a weak bound: the rows are read and finished below
            elif cached is not None:  # the kept bounding rows of unit rows: no row read
                hit = qa @ cached.block(b0, min(b0 + block, n)).T >= threshold - _MARGIN
                if np.count_nonzero(hit) <= few:
                    r, c = np.divmod(np.flatnonzero(hit), hit.shape[1])
                    los.append(qrows[r])
                    his.append(b0 + c)
                    continue  # a weak bound here: the rows are read and finished below
            raw, norms = rows.block(b0, buf)
            floor = (threshold - _MARGIN) * norms
            ra = bounding_rows(raw[:, :k], rest_norms(raw, k), out=aug[: len(raw)])
            tile = qa @ ra.T  # ≥ each pair's product: only pairs reaching floor can be pairs
            hit = tile >= floor
            finished = np.count_nonzero(hit) > few
            if finished:  # a weak bound here: finish the product
                tile -= np.outer(rq, ra[:, k])
                tile += q2 @ raw[:, k:].T
                hit = tile >= floor
                if topk is not None and dense(hit, topk.k):
                    cols = np.arange(b0, b0 + hit.shape[1])
                    hit &= qrows[:, None] != cols[None, :]
                    sims = tile / norms[None, :]
                    topk.offer(qrows, cols, sims, hit)
                    topk.offer(cols, qrows, sims.T, hit.T)
                    continue
            flat = np.flatnonzero(hit)  # few hits: faster than a 2-D nonzero
            if len(flat):
                r, c = np.divmod(flat, hit.shape[1])
                if not finished:  # the bound's hits, each pair's product from the block in
                    # hand (most are far below: without this they were gathered again later)
                    ok = np.einsum("ij,ij->i", qv[r], raw[c]) >= floor[c]
                    r, c = r[ok], c[ok]
                los.append(qrows[r])
                his.append(b0 + c)
        return los, his

    # The blocks are shared out over the CPUs, each scanned with one BLAS thread: the tile's
    # comparisons run in parallel too, not only the products (1K into 1M: 4.3 s → 3.5 s on 2
    # CPUs). Disjoint blocks, results united below: the same pairs for any count.
    starts = range(0, n, block)
    threads = min(cpus(), len(starts))
    if threads > 1:
        step = -(-len(starts) // (4 * threads))
        spans = [starts[s : s + step] for s in range(0, len(starts), step)]
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
            parts = list(pool.map(scan, spans))
    else:
        parts = [scan(starts)]
    los = [x for part in parts for x in part[0]]
    his = [x for part in parts for x in part[1]]
    extra = np.empty(0, np.int64)
    if topk is not None:
        if stats is not None:
            stats["max_seen"] = max(stats.get("max_seen", 0), int(topk.seen.max(initial=0)))
            stats["over"] = stats.get("over", 0) + int((topk.seen > topk.k - SLACK).sum())
        if topk.seen.any():
            extra = topk.codes(n)
    if not los and not len(extra):
        return empty
    a = np.concatenate(los) if los else np.empty(0, np.int64)
    b = np.concatenate(his) if his else np.empty(0, np.int64)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = lo != hi
    code = np.unique(np.concatenate([lo[keep] * n + hi[keep], extra]))
    return _exact(rows, threshold, code, n)


def _coded_hits(
    coded: CachedCodes,
    right: np.ndarray,
    qnorms: np.ndarray,
    start: int,
    stop: int,
    threshold: float,
    few: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The pairs of stored rows ``start : stop`` (by their kept codes) × the new rows (``right``,
    their :func:`~.quantized.codes_of`; ``qnorms``, their norms) that the int8 bound lets reach
    ``threshold − _MARGIN``: ``(c, r)``, offsets in the block and positions among the new rows
    (``int64``), or ``None`` when more than ``few`` pass (a weak bound: the caller reads the
    rows)."""
    codes, norms = coded.block(start, stop)
    hit = coded.product(codes, right) >= floors(qnorms, norms, threshold - _MARGIN)
    if np.count_nonzero(hit) > few:
        return None
    c, r = np.divmod(np.flatnonzero(hit), hit.shape[1])  # stored × new rows
    return c, r


def _exact(
    rows: UnitRows, threshold: float, code: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of ``code`` (``lo * n + hi``, unique, ascending) whose cosine, recomputed with
    ``einsum`` from the normalised rows, is ≥ ``threshold``: ``(lo, hi, sim)``."""
    lo, hi = code // n, code % n
    sims = np.empty(len(lo), np.float32)
    for s in range(0, len(lo), 65536):
        sims[s : s + 65536] = np.einsum(
            "ij,ij->i", rows[lo[s : s + 65536]], rows[hi[s : s + 65536]]
        )
    ok = sims >= threshold
    return lo[ok], hi[ok], sims[ok]


def subset_pairs(
    rows: UnitRows, threshold: float, query: np.ndarray, cols: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(i, j)``, ``i < j``, of a row of ``query`` and a row of ``cols`` (indices into
    ``rows``, ``int64``) at cosine ≥ ``threshold``: exactly those pairs among
    :func:`query_pairs`' with ``query``, with the same similarities (recomputed with
    ``einsum``), for a product over ``cols`` only. Returns ``(i, j, sim)``: ``int64``,
    ``int64``, ``float32``, sorted by ``(i, j)``; empty when either side is."""
    n = rows.shape[0]
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32))
    q = np.unique(np.asarray(query, dtype=np.int64))
    c = np.unique(np.asarray(cols, dtype=np.int64))
    if not len(q) or not len(c):
        return empty
    qv = rows[q]
    step = max(1024, (1 << 24) // len(q))  # a tile of at most 64 MB of float32
    codes = [np.empty(0, np.int64)]
    for s in range(0, len(c), step):
        cb = c[s : s + step]
        r, k = np.nonzero(qv @ rows[cb].T >= threshold - _MARGIN)
        a, b = q[r], cb[k]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        keep = lo != hi
        codes.append(lo[keep] * n + hi[keep])
    return _exact(rows, threshold, np.unique(np.concatenate(codes)), n)
