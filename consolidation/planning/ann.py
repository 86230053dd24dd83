"""Approximate candidate search for large stores: a faiss inverted-file (IVF) partition instead
of the exact blocked product, which is O(n²) (≈ 25 s at 100K, ≈ 40 min at 1M on this 2-core
machine).

How the pairs are found (:func:`ann_candidate_pairs`):

1. ``cells`` centroids (default ``½ √(probes · n)``: :data:`CELL_SCALE`) by spherical
   k-means (``faiss.Kmeans``, fixed seed, 4 iterations on a seeded sample of 8 rows per cell).
2. The coarse quantizer (``faiss.IndexFlatIP`` over the centroids, a BLAS product) gives every
   row its ``probes`` most similar centroids: the first is the row's cell (its inverted list).
3. Each cell's members are compared with every row that probes the cell, by one dense product
   per cell (tiles of at most ``block × block``). A pair is found when either end probes the
   other's cell (a self-join sees both directions). A pair whose ends fall in cells neither
   probes is missed: that is the approximation.
4. Every candidate's similarity is recomputed exactly from the rows (``einsum``) and only pairs
   ≥ the threshold are kept, so the result is a subset of the exact method's pairs (no false
   pair; a pair can only be missed).

Why faiss (https://github.com/facebookresearch/faiss), and why it scans the lists with numpy:
faiss-cpu is Meta's maintained similarity-search library (wheels for every platform, releases
every few months); its IVF gives exactly the "all pairs ≥ threshold" query (``range_search``),
with a seeded, deterministic k-means. Measured on random unit 384-d vectors with 5 % planted
pairs at cosine 0.95 (the bench's data, HNSW's worst case), 2-core machine under a load
average of 9–13 from other jobs, CPU seconds:

- usearch HNSW (the previous index): 50K rows, f16 / expansion_add 128: 18 s add + 13 s search
  (wall); 200K: 1,288 s, planted recall 0.956. HNSW as faiss's coarse quantizer was also slower
  than the flat one on these vectors (100K: 9.4 vs 1.7–2.6 CPU s) and lost recall (0.974 vs
  0.984–0.990).
- faiss ``IndexIVFFlat.range_search_preassigned`` at 100K (1,562 cells, 16 probes, one
  thread): 9.1 CPU s for its list scan. The same kind of lists scanned here with one BLAS
  product per cell: 1.7 CPU s — faiss scans one query vector at a time (≈ 4–8 G
  multiply-adds per CPU second) where sgemm runs at ≈ 40. Both find the same pairs for the
  same cells (20K rows: the same 1,921 pairs; recall is set by the cells and probes, not by
  the scan). So faiss trains and assigns (steps 1–2) and numpy scans (step 3), one BLAS
  thread per worker (``threadpoolctl``, for the scan's duration, process-wide).

Cost: step 2 is ``n × cells × d`` and step 3 ``n × probes × (n / cells) × d`` multiply-adds,
so ``cells = c √(probes · n)`` makes both ≈ ``n^1.5``; ``c = ½`` (:data:`CELL_SCALE`) gives
the scan (the slower per multiply-add) bigger tiles. With 64 probes: at 200K, 1,789 cells of ≈
112 rows; at 1M, 4,000 cells of ≈ 250 rows, each row scanning 64 of them — 4× the scan of the
16 probes measured at 1M below (not measured again at 1M: the benches here stop at 200K).
Memory beyond the caller's matrix: the probe lists, ``int32`` (peak RSS + 90 MB at 200K, +
356 MB at 1M over the 1.46 GB matrix).

Measured at 1M with 16 probes on ``√(16n)`` cells (the index until 2026-12;
``bench/plan_bench.py --n 1000000 --exact-n 50000``, load average 10.9):
the search alone 118.8 CPU s (272.8 s wall), planted recall 0.998; the full plan 200 CPU s /
626 s wall (candidates 379 s wall), planted duplicates merged 99.78 %; at 50K the index
found 99.96 % of the exact pairs (5.1 s vs 41.7 s wall), no false pair. At 200K: full plan
29.6 CPU s / 145.9 s wall, planted recall 0.999.

Determinism (I-8): the sample and the k-means seed fix the cells and so the probes; a
candidate is kept by its similarity recomputed per pair (the tile only proposes it, with a
1e-3 margin), and the pairs come out sorted, so the same input gives the same pairs (tested on
two runs and on 1 vs several scan workers). faiss's k-means sums each centroid in one thread,
and OpenBLAS does not split a dot product's terms across threads: the centroids and pairs of
30K rows were bit-identical with 1, 2 and 3 OpenMP/BLAS threads. A CPU with other SIMD kernels
could round a centroid differently and move a near-tie row to another cell, hence change which
of the approximate pairs are found.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from .nearest import SLACK, TopK, dense

__all__ = ["ANN_MIN_ROWS", "ann_candidate_pairs"]

ANN_MIN_ROWS = 100_000
"""Full searches of at least this many rows use the index under ``method="auto"``.

Measured by :func:`~.candidates.candidate_pairs` on the bench's vectors with 5 % planted pairs,
half at cosine 0.95 and half at 0.78 (just above the 0.75 threshold), CPU seconds (the machine
ran at a load average of 9–17 from other jobs, so wall seconds were 3–7× these). "16 probes" is
the index until 2026-12 (on ``√(16n)`` cells), "64 probes" today's (``½√(64n)`` cells,
``bench/ann_bench.py``, load average 15–17):

==========  ===========  ==========  =========  ===========  ===========  ===========
rows        exact split  16 probes   64 probes  recall 0.95  0.78, 16 p.  0.78, 64 p.
==========  ===========  ==========  =========  ===========  ===========  ===========
20,000      3.2 (3.8)    0.8 (1.3)   (3.3)      1.000        0.942        (0.998)
50,000      15.6         2.1                    1.000        0.920
100,000     55.3         5.4 (10.9)  19.5       0.9988       0.900        0.990
200,000     ≈ 220 (n²)   13.7        45.5       0.9986       0.874        0.986
1,000,000   ≈ 5,500      118.8       ≈ 4× scan  0.998        0.811        (not measured)
==========  ===========  ==========  =========  ===========  ===========  ===========

In brackets: ``bench/ann_bench.py``'s own runs of that size, at a load average of 3–17 (the
64-probe 20K figures on ``√(64n)`` cells). "recall 0.95" is of the 16-probe index; with 64
probes it was 1.000 at 100K and 200K.

The index is cheaper from 20K rows on, but with 16 probes it missed pairs near the threshold
(and more of them as the store grew), where the exact product finds every pair; with 64 probes
it finds ≥ 98 % of them at 100K–200K for 2–3× the 16-probe CPU, still ≈ 3–5× under the exact
product. So the exact product is kept while it fits the planning budget (a full plan of 100K in
≤ 30 s: ≈ 25 s idle), and the index takes over from 100K rows.
"""

PROBES = 64
"""Cells each row is compared with (its own and the next 63 nearest centroids).

Measured with ``bench/ann_bench.py`` (planted pairs at cosine 0.78 among random unit rows, the
hardest case; CPU seconds at a load average of 11–17 from other jobs, so 1.5–2× an idle run):
recall of the 0.78 pairs depends mostly on the probes, a little on the cell size (bigger cells,
same probes: higher), and the scan runs faster on bigger cells (longer BLAS tiles):

==================  =================  ====================  ====================
probes, cells       100K: 0.78 / CPU   200K: 0.78 / CPU      note
==================  =================  ====================  ====================
16, √(16n)          0.904 / 10.7 s     0.874 (docs) / 13.7   until 2026-12
32, √(32n)          0.958 / 16.2 s
64, √(64n)          0.985 / 26.1 s
96, √(96n)          0.996 / 40.1 s
32, ½√(32n)         0.969 / 12.1 s
24, ¼√(24n)         0.979 / 10.5 s
48, ½√(48n)                            0.978 / 33.8 s
**64, ½√(64n)**     0.990 / 19.5 s     0.986 / 45.5 s        the default
128, 2√(128n)       0.998 / 101.2 s
==================  =================  ====================  ====================

HNSW (faiss ``IndexHNSWFlat``, M 32, efConstruction 80, 32 neighbours at efSearch 128, added
on one thread so the graph is deterministic) found every 0.78 pair of 20K rows but took 24.9
CPU s there, against 3.3 s for 64 probes (recall 0.998) and 3.8 s for the exact product: on
random 384-d rows a graph pays for every insertion, so it was not measured further. More
k-means iterations (10 instead of 4) changed nothing at 20K (0.956 either way)."""

CELL_SCALE = 0.5
"""Default cells = ``CELL_SCALE · √(probes · n)``: half the cost-balancing count (see the module
docstring), since the quantizer's one large product runs faster per multiply-add than the scan's
small tiles (table above: 32 probes on half the cells found more pairs for 25 % less CPU)."""

_MARGIN = 1e-3
"""Slack on the tile's BLAS similarities; candidates are then checked exactly."""

_SAMPLE_PER_CELL = 8
_KMEANS_ITER = 4


def _empty() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32)


def _centroids(emb: np.ndarray, cells: int, seed: int) -> np.ndarray:
    """``(cells, d) float32`` unit centroids: spherical k-means on a seeded sample of rows."""
    import faiss

    n, d = emb.shape
    take = min(n, cells * _SAMPLE_PER_CELL)
    sample = emb[np.sort(np.random.default_rng(seed).choice(n, take, replace=False))]
    km = faiss.Kmeans(
        d,
        cells,
        niter=_KMEANS_ITER,
        seed=seed,
        spherical=True,
        min_points_per_centroid=1,
        max_points_per_centroid=_SAMPLE_PER_CELL,
    )
    km.train(sample)
    return np.asarray(km.centroids, dtype=np.float32)


def _lists(cell_of: np.ndarray, rows: np.ndarray, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverted lists of ``cell_of`` (``(q, w) int32``: ``w`` cells per row of ``rows``): the
    ``(q·w,) int32`` rows sorted by cell (stable, so by row within a cell) and each cell's
    bounds in it (``(cells + 1,) int64``)."""
    order = np.argsort(cell_of.ravel(), kind="stable")
    bounds = np.zeros(cells + 1, dtype=np.int64)
    np.cumsum(np.bincount(cell_of.ravel(), minlength=cells), out=bounds[1:])
    order //= cell_of.shape[1]
    return rows[order], bounds


def _probe(quantizer: Any, emb: np.ndarray, rows: np.ndarray | None, k: int) -> np.ndarray:
    """``(q, k) int32``: the ``k`` nearest centroids of each of ``rows`` (all when ``None``),
    nearest first — searched in chunks so no ``(n, k)`` int64/float32 pair is ever held."""
    q = len(emb) if rows is None else len(rows)
    out = np.empty((q, k), dtype=np.int32)
    for s in range(0, q, 65536):
        part = emb[s : s + 65536] if rows is None else emb[rows[s : s + 65536]]
        out[s : s + 65536] = quantizer.search(part, k)[1]
    return out


def _scan(
    emb: np.ndarray,
    members: tuple[np.ndarray, np.ndarray],
    searchers: tuple[np.ndarray, np.ndarray],
    threshold: float,
    block: int,
    threads: int,
    topk: TopK | None = None,
    labels: np.ndarray | None = None,
    excluded: list[int] | None = None,
) -> np.ndarray:
    """``(m,) int64`` codes ``i * n + j`` (``i < j``, unique, sorted) of the pairs whose tile
    similarity is ≥ ``threshold − _MARGIN``: every cell's members × the rows probing it.

    The tiles are small (≈ 4,000 × 250 at 1M), so each runs on one BLAS thread and ``threads``
    workers share the cells: a 2-thread BLAS call per small tile waits for its second thread,
    which on the loaded machine made the scan of 100K rows take 20.2 s wall instead of 3.4 s.

    With ``topk``, a dense tile (a row or column of more than ``topk.k`` candidates) is offered
    to it instead (each row's nearest partners, :mod:`.nearest`); its pairs are not in the
    returned codes. ``labels``: a pair whose ends share a label ≥ 0 is skipped (counted into
    ``excluded[0]``)."""
    n = len(emb)
    mrows, mb = members
    srows, sb = searchers

    def cells(span: range) -> list[np.ndarray]:
        codes = []
        for c in span:
            mem, srch = mrows[mb[c] : mb[c + 1]], srows[sb[c] : sb[c + 1]]
            if labels is not None and len(mem) and len(srch):
                lm = labels[mem]
                if lm[0] >= 0 and (lm == lm[0]).all():
                    # every member is of one series: only its searchers of other labels
                    other = labels[srch] != lm[0]
                    if excluded is not None:
                        excluded[0] += int(len(srch) - other.sum()) * len(mem)
                    srch = srch[other]
            for m0 in range(0, len(mem) if len(srch) else 0, block):
                mm = mem[m0 : m0 + block]
                right = emb[mm].T
                for s0 in range(0, len(srch), block):
                    ss = srch[s0 : s0 + block]
                    tile = emb[ss] @ right
                    hit = tile >= threshold - _MARGIN
                    if labels is not None:
                        la, lb = labels[ss], labels[mm]
                        if (la >= 0).any() and (lb >= 0).any():
                            same = (la[:, None] == lb[None, :]) & (la >= 0)[:, None]
                            if excluded is not None:
                                excluded[0] += int(np.count_nonzero(hit & same))
                            hit &= ~same
                    if topk is not None and dense(hit, topk.k):
                        hit &= ss[:, None].astype(np.int64) != mm[None, :]
                        topk.offer(ss, mm, tile, hit)
                        topk.offer(mm, ss, tile.T, hit.T)
                        continue
                    r, k = np.nonzero(hit)
                    a, b = ss[r].astype(np.int64), mm[k].astype(np.int64)
                    keep = a != b
                    if keep.any():
                        a, b = a[keep], b[keep]
                        codes.append(np.minimum(a, b) * n + np.maximum(a, b))
        return codes

    total = len(mb) - 1
    step = max(1, -(-total // (8 * threads)))
    spans = [range(c0, min(c0 + step, total)) for c0 in range(0, total, step)]
    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
        found = [code for part in pool.map(cells, spans) for code in part]
    return np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)


def ann_candidate_pairs(
    emb: np.ndarray,
    threshold: float,
    *,
    query: np.ndarray | None = None,
    probes: int = PROBES,
    cells: int | None = None,
    seed: int = 0,
    block: int = 4096,
    threads: int = 0,
    per_row: int | None = None,
    stats: dict[str, int] | None = None,
    exclude: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(i, j)``, ``i < j``, with cosine(emb[i], emb[j]) ≥ ``threshold``, approximately.

    - ``emb``: ``(n, d) float32``, rows L2-normalised.
    - ``query``: optional ``(q,) int`` rows; then only pairs with an end in ``query`` (these rows
      probe ``2 × probes`` cells, since only they search).
    - ``probes``: cells each searching row is compared with.
    - ``cells``: inverted lists (default ``round(CELL_SCALE · √(probes · n))``, at most ``n``).
    - ``seed``: of the k-means sample and initialisation (same seed, same pairs).
    - ``block``: largest tile edge in rows (a tile is ``block² float32``).
    - ``threads``: workers scanning the cells (0 = the CPUs this process may use).
    - ``per_row``, ``stats``, ``exclude``: as for :func:`~.candidates.candidate_pairs` (a
      dense tile keeps each row's ``per_row`` nearest partners only; pairs of one label are
      skipped; ``excluded`` counts them, counted once per tile that met them).

    Returns ``(i, j, sim)``: ``int64``, ``int64``, ``float32``, sorted by ``(i, j)``, every sim
    exact (recomputed from ``emb``). Raises ``ImportError`` naming the package when faiss is not
    installed, ``ValueError`` for ``probes`` or ``cells`` under 1.
    """
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - a dependency in pyproject.toml
        raise ImportError("the approximate candidate search needs the 'faiss-cpu' package") from exc
    if probes < 1 or (cells is not None and cells < 1):
        raise ValueError(f"probes and cells must be ≥ 1, got {probes} and {cells}")
    emb = np.ascontiguousarray(emb, dtype=np.float32)
    n, d = emb.shape
    if n < 2:
        return _empty()
    cells = min(n, cells or max(1, round(CELL_SCALE * math.sqrt(probes * n))))
    quantizer = faiss.IndexFlatIP(d)
    quantizer.add(_centroids(emb, cells, seed))
    every = np.arange(n, dtype=np.int32)
    if query is None:
        srows = every
        probed = _probe(quantizer, emb, None, min(probes, cells))
        home = probed[:, :1].copy()
    else:
        srows = np.unique(np.asarray(query, dtype=np.int64)).astype(np.int32)
        home = _probe(quantizer, emb, None, 1)
        probed = _probe(quantizer, emb, srows, min(2 * probes, cells))
    members = _lists(home, every, cells)
    searchers = _lists(probed, srows, cells)
    del probed, home
    if not threads:  # the CPUs this process may run on (affinity is Linux-only)
        affinity = getattr(os, "sched_getaffinity", None)
        threads = len(affinity(0)) if affinity else os.cpu_count() or 1
    topk = TopK(n, per_row + SLACK) if per_row else None
    excluded = [0]
    code = _scan(emb, members, searchers, threshold, block, threads, topk, exclude, excluded)
    if stats is not None and excluded[0]:
        stats["excluded"] = stats.get("excluded", 0) + excluded[0]
    if topk is not None:
        if stats is not None:
            stats["max_seen"] = max(stats.get("max_seen", 0), int(topk.seen.max(initial=0)))
            stats["over"] = stats.get("over", 0) + int((topk.seen > topk.k - SLACK).sum())
        if topk.seen.any():
            code = np.union1d(code, topk.codes(n))
    if not len(code):
        return _empty()
    lo, hi = code // n, code % n
    sims = np.empty(len(lo), dtype=np.float32)
    for s in range(0, len(lo), 65536):
        sims[s : s + 65536] = np.einsum("ij,ij->i", emb[lo[s : s + 65536]], emb[hi[s : s + 65536]])
    keep = sims >= threshold
    return lo[keep], hi[keep], sims[keep]
