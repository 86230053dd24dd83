"""A bound on each memory's candidate partners: its ``k`` most similar memories above the threshold.

Why: the candidate search (:mod:`.candidates`, :mod:`.ann`, :func:`~.vectors.query_pairs`)
returns *every* pair at cosine ≥ the threshold. On a varied store that is a few pairs per
memory, but a store of memories that differ only in numbers (import logs, tickets, steps:
"imported memory 17: the user likes topic 17 and colour 4") is one dense cluster per
template, so the pairs grow as n²: 1,000 such memories gave 51,499 pairs in
``bench/plan_bench.py --templated``, each judged, and 6,000 passed 6.8 GB. With the bound a
memory takes part in at most its ``k`` nearest pairs plus the pairs of memories that have it
among theirs, so every later stage sees O(n × k) pairs.

How: a tile of the search whose rows or columns have at most ``k`` candidates each is kept as
before (so a varied store gets exactly the pairs it got before). A *dense* tile, one with a row
or column of more than ``k`` candidates, is offered to a :class:`TopK`: running arrays of each
row's ``k + SLACK`` best partners (``(n, k + 4)`` float32 + int32: 54 MB at 100K, k = 64),
allocated only when a search meets a dense tile. At the end (:func:`bound_pairs`) the pairs
are the union of every row's kept partners, each similarity recomputed exactly, and a pair is
kept when it is among the ``k`` most similar partners (ties by the partner's index) of at
least one of its ends.

What the bound leaves out is never decided: a pair not searched is not linked (complete
linkage needs every pair of a group linked), not reconciled and not offered as a conflict, and
the number of memories that had more candidates than ``k`` is reported in
``plan.context["bounds_hit"]["candidates_per_memory"]``.

:data:`PER_MEMORY` (64) is measured on real conversations: LoCoMo's seven (all-MiniLM-L6-v2,
cosine ≥ 0.75) have memories with up to 78 partners (conv-42; 99th percentile 49), and a bound
of 32 would have left out 48 of its 2,129 pairs, 40 four, 48 and above none (a pair is only
left out when *both* ends have that many nearer partners); the bench's varied store has at
most one. The numbered series and settled groups of :mod:`.templates` never reach the search,
so the bound is a safety net for the dense clusters nothing else explains.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["PER_MEMORY", "TopK", "bound_pairs"]

PER_MEMORY = 64
"""Candidate partners kept per memory (see the module docstring for the measurement)."""

SLACK = 4
"""A dense tile's rows keep ``k + SLACK`` partners by the tile's product; :func:`bound_pairs`
then cuts each row to ``k`` by the exact similarities, so a near-tie the tile's rounding
orders differently still ends as the exact search would (tested against it)."""


class TopK:
    """Each row's ``k`` most similar partners seen so far: ``s`` (``(n, k) float32``, −inf when
    empty) and ``j`` (``(n, k) int32``, −1 when empty), ordered by descending similarity, ties
    by the partner's index; ``seen[i]`` counts the candidates offered to row ``i``.

    The arrays are allocated at the first :meth:`offer` (a search that meets no dense tile
    costs nothing: 8·k + 8 bytes a row otherwise). :meth:`offer` is thread-safe (one lock:
    the merge is a few small numpy calls)."""

    def __init__(self, n: int, k: int) -> None:
        if k < 1:
            raise ValueError(f"k must be ≥ 1, got {k}")
        self.n, self.k = n, k
        self.s = np.empty((0, k), np.float32)
        self.j = np.empty((0, k), np.int32)
        self.seen = np.zeros(0, np.int64)
        self._lock = threading.Lock()

    def _allocate(self) -> None:
        if not len(self.seen) and self.n:
            self.s = np.full((self.n, self.k), -np.inf, np.float32)
            self.j = np.full((self.n, self.k), -1, np.int32)
            self.seen = np.zeros(self.n, np.int64)

    def offer(self, rows: np.ndarray, cols: np.ndarray, tile: np.ndarray, mask: np.ndarray) -> None:
        """Offer the candidates ``mask`` marks in ``tile`` (``(r, c)`` similarities of the
        unique ``rows`` against ``cols``, original row numbers) to each row of ``rows``."""
        k = self.k
        cnt = mask.sum(axis=1)
        sel = np.flatnonzero(cnt)
        if not len(sel):
            return
        cs = np.flatnonzero(mask.any(axis=0))
        if len(cs) < mask.shape[1]:  # only the columns with a candidate
            tile, mask, cols = tile[:, cs], mask[:, cs], np.asarray(cols)[cs]
        rows, tile, mask = rows[sel], tile[sel], mask[sel]
        vals = np.where(mask, tile, -np.inf).astype(np.float32, copy=False)
        if vals.shape[1] > k:
            part = np.argpartition(-vals, k - 1, axis=1)[:, :k]
            vals = np.take_along_axis(vals, part, axis=1)
            ids = np.asarray(cols, dtype=np.int64)[part]
        else:
            ids = np.broadcast_to(np.asarray(cols, dtype=np.int64), vals.shape)
        ids = np.where(np.isfinite(vals), ids, -1).astype(np.int32)
        with self._lock:
            self._allocate()
            self.seen[rows] += cnt[sel]
            allv = np.concatenate([self.s[rows], vals], axis=1)
            alli = np.concatenate([self.j[rows], ids], axis=1)
            # by partner first (stable), drop a partner offered twice, then by similarity
            o = np.argsort(alli, axis=1, kind="stable")
            alli = np.take_along_axis(alli, o, axis=1)
            allv = np.take_along_axis(allv, o, axis=1)
            dup = np.zeros(alli.shape, bool)
            dup[:, 1:] = (alli[:, 1:] == alli[:, :-1]) & (alli[:, 1:] >= 0)
            allv[dup] = -np.inf
            alli[dup] = -1
            o = np.argsort(-allv, axis=1, kind="stable")[:, :k]
            self.s[rows] = np.take_along_axis(allv, o, axis=1)
            self.j[rows] = np.take_along_axis(alli, o, axis=1)

    def codes(self, n: int) -> np.ndarray:
        """``(m,) int64`` codes ``lo * n + hi`` of every kept pair (unique, sorted)."""
        r, c = np.nonzero(self.j >= 0)
        a, b = r.astype(np.int64), self.j[r, c].astype(np.int64)
        keep = a != b
        a, b = a[keep], b[keep]
        return np.unique(np.minimum(a, b) * n + np.maximum(a, b))


def dense(mask: np.ndarray, k: int) -> bool:
    """Whether a tile's candidate ``mask`` has a row or a column of more than ``k``."""
    return bool(mask.sum(axis=1).max(initial=0) > k or mask.sum(axis=0).max(initial=0) > k)


def bound_pairs(
    lo: np.ndarray, hi: np.ndarray, sims: np.ndarray, n: int, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """Keep the pairs ``(lo, hi, sims)`` (exact similarities, ``lo < hi``) that are among the
    ``k`` most similar partners of at least one end (descending similarity, ties by the
    partner's index: deterministic).

    Returns the kept ``(lo, hi, sims)`` in their input order and ``{"memories": rows with more
    than k partners, "max_partners": the largest count, "dropped": pairs left out}``.
    """
    m = len(lo)
    if m == 0:
        return lo, hi, sims, {"memories": 0, "max_partners": 0, "dropped": 0}
    counts = np.bincount(lo, minlength=n) + np.bincount(hi, minlength=n)
    most = int(counts.max())
    if most <= k:
        return lo, hi, sims, {"memories": 0, "max_partners": most, "dropped": 0}
    row = np.concatenate([lo, hi])
    partner = np.concatenate([hi, lo])
    sim = np.concatenate([sims, sims])
    pid = np.concatenate([np.arange(m), np.arange(m)])
    order = np.lexsort((partner, -sim, row))
    row_sorted = row[order]
    first = np.searchsorted(row_sorted, row_sorted, side="left")
    rank = np.arange(len(order)) - first
    keep = np.zeros(m, bool)
    keep[pid[order[rank < k]]] = True
    stats = {
        "memories": int((counts > k).sum()),
        "max_partners": most,
        "dropped": int(m - keep.sum()),
    }
    return lo[keep], hi[keep], sims[keep], stats
