"""Approximate candidate search for large stores: an HNSW index (usearch) instead of the exact
blocked product, which is O(n²) (≈ 25 s at 100K, ≈ 45 min at 1M on this 2-core machine).

Why usearch (https://github.com/unum-cloud/usearch): one small wheel with no system libraries,
released monthly; multi-threaded batch ``add``/``search`` from numpy; and ``f16`` storage, which
halves the index of 1M × 384 vectors to 0.77 GB so a 1M plan fits the 4 GB budget beside the
planner's own float32 matrix. faiss-cpu's HNSW would do as well but is a 30 MB wheel with its
own OpenMP runtime beside numpy's OpenBLAS threads; hnswlib has had no release since 2023 and
ships no wheel for every platform (it compiles at install).

How the pairs are found (:func:`ann_candidate_pairs`):

1. Index every row (inner product on unit rows = cosine), ``connectivity`` 16,
   ``expansion_add`` 128.
2. Ask each row (or each query row) for its ``k`` nearest neighbours (``expansion_search``
   ≥ 2k). A row whose k-th neighbour is still above the threshold may have more partners than
   ``k`` (a large duplicate cluster): it is asked again with 4k, up to ``max_k``.
3. Every candidate's similarity is recomputed exactly from the rows, and only pairs ≥ the
   threshold are kept, so the result is a subset of the exact method's pairs (no false pair;
   a pair can only be missed). Recall of planted duplicates is measured against the exact
   method in ``bench/plan_bench.py``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ANN_MIN_ROWS", "ann_candidate_pairs"]

ANN_MIN_ROWS = 400_000
"""Full searches of at least this many rows use the index under ``method="auto"``.

Measured with ``bench/plan_bench.py --n 200000 --exact-n 50000`` (2 cores, load average 13.5
from other jobs, so wall seconds are inflated alike for both): exact 42.9 s vs index 226 s at
50K; index 1,288 s at 200K vs exact 686 s extrapolated (O(n²)): the index is ~n log n, so the
two cross near 400K. Below that the exact method is both faster and complete. At 200K the
index found 95.6 % of the planted duplicates (100 % at 50K): under the 0.99 target, so it is
kept above the switch only, where the exact product takes too long to run at all.
"""

_MARGIN = 2e-3
"""Slack on the index's f16 similarities when deciding that a row is saturated."""


def ann_candidate_pairs(
    emb: np.ndarray,
    threshold: float,
    *,
    query: np.ndarray | None = None,
    k: int = 16,
    max_k: int = 256,
    threads: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(i, j)``, ``i < j``, with cosine(emb[i], emb[j]) ≥ ``threshold``, approximately.

    - ``emb``: ``(n, d) float32``, rows L2-normalised.
    - ``query``: optional ``(q,) int`` rows; then only pairs with an end in ``query``.
    - ``k`` / ``max_k``: neighbours asked per row, and the most asked of a saturated row.
    - ``threads``: index threads (0 = all cores).

    Returns ``(i, j, sim)``: ``int64``, ``int64``, ``float32``, sorted by ``(i, j)``, every sim
    exact (recomputed from ``emb``). Raises ``ImportError`` naming the package when usearch is
    not installed.
    """
    try:
        from usearch.index import Index
    except ImportError as exc:  # pragma: no cover - a dependency in pyproject.toml
        raise ImportError("the approximate candidate search needs the 'usearch' package") from exc
    emb = np.ascontiguousarray(emb, dtype=np.float32)
    n, d = emb.shape
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32))
    if n < 2:
        return empty
    index = Index(
        ndim=d,
        metric="ip",
        dtype="f16",
        connectivity=16,
        expansion_add=128,
        expansion_search=max(64, 2 * k),
    )
    index.add(np.arange(n, dtype=np.uint64), emb, threads=threads)
    todo = np.arange(n, dtype=np.int64) if query is None else np.unique(np.asarray(query, np.int64))
    los: list[np.ndarray] = []
    his: list[np.ndarray] = []
    want = min(k, n - 1)
    while len(todo):
        index.expansion_search = max(64, 2 * want)
        found = index.search(emb[todo], want + 1, threads=threads)
        keys = np.asarray(found.keys, dtype=np.int64).reshape(len(todo), -1)
        sims = 1.0 - np.asarray(found.distances, dtype=np.float32).reshape(len(todo), -1)
        rows = np.repeat(todo, keys.shape[1])
        cols = keys.ravel()
        ok = (cols >= 0) & (cols != rows) & (sims.ravel() >= threshold - _MARGIN)
        los.append(np.minimum(rows[ok], cols[ok]))
        his.append(np.maximum(rows[ok], cols[ok]))
        if want >= min(max_k, n - 1):
            break
        saturated = sims[:, -1] >= threshold - _MARGIN
        todo = todo[saturated]
        want = min(want * 4, max_k, n - 1)
    lo, hi = np.concatenate(los), np.concatenate(his)
    if not len(lo):
        return empty
    code = np.unique(lo * n + hi)
    lo, hi = code // n, code % n
    out = np.empty(len(lo), dtype=np.float32)
    for s in range(0, len(lo), 65536):
        out[s : s + 65536] = np.einsum("ij,ij->i", emb[lo[s : s + 65536]], emb[hi[s : s + 65536]])
    keep = out >= threshold
    return lo[keep], hi[keep], out[keep]
