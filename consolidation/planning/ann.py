"""Approximate candidate search for large stores: a faiss inverted-file (IVF) partition instead
of the exact blocked product, which is O(n²) (≈ 25 s at 100K, ≈ 40 min at 1M on this 2-core
machine).

How the pairs are found (:func:`ann_candidate_pairs`):

1. ``cells`` centroids (default ``½ √(probes · n)``: :data:`CELL_SCALE`) by spherical
   k-means (``faiss.Kmeans``, fixed seed, 2 iterations on a seeded sample of 8 rows per cell).
2. Every row's ``probes`` most similar centroids by one BLAS product per chunk of rows and a
   selection of each row's largest (:func:`_probe`, :func:`~.ranking.top_columns`: a sample's
   cut first, then only the columns that reach it); the most similar is the row's cell (its
   inverted list).
3. Each cell's members are compared with every row that probes the cell, by tiles of at most
   ``block × block`` (:func:`_tile`): a product of the first coordinates (144 of 384 at 0.75:
   :func:`~.vectors.bound_head`), with each row's norm of the rest appended, bounds every pair
   (Cauchy–Schwarz), and only the pairs that pass get the rest added. A pair is found when either
   end probes the other's cell (a self-join sees both directions). A pair whose ends fall in cells
   neither probes is missed: that is the approximation.
4. Every candidate's similarity is recomputed exactly from the rows (``einsum``) and only pairs
   ≥ the threshold are kept, so the result is a subset of the exact method's pairs (no false
   pair; a pair can only be missed).

Why faiss (https://github.com/facebookresearch/faiss) for step 1 only: faiss-cpu is Meta's
maintained similarity-search library (wheels for every platform, releases every few months) with
a seeded, deterministic k-means. Its search paths were slower than numpy here, measured on random
unit 384-d vectors with 5 % planted pairs at cosine 0.95 (the bench's data, HNSW's worst case),
2-core machine, CPU seconds:

- usearch HNSW (the index before faiss): 50K rows, f16 / expansion_add 128: 18 s add + 13 s
  search (wall); 200K: 1,288 s, planted recall 0.956. HNSW as faiss's coarse quantizer was also
  slower than the flat one (100K: 9.4 vs 1.7–2.6 CPU s) and lost recall (0.974 vs 0.984–0.990).
- faiss ``IndexIVFFlat.range_search_preassigned`` at 100K (1,562 cells, 16 probes, one
  thread): 9.1 CPU s for its list scan, against 1.7 for one BLAS product per cell — faiss
  scans one query vector at a time (≈ 4–8 G multiply-adds per CPU second) where sgemm runs at
  ≈ 40; both find the same pairs for the same cells (recall is set by the cells and probes).
- faiss ``IndexFlatIP.search`` as the coarse quantizer (step 2 until 2026-12): 67 s wall for
  1M rows × 4,000 centroids × 64 probes, most of it in its top-``k`` heap; the chunked product
  and ``argpartition`` gives the same cells (3,000 rows compared) in ≈ 26 s.

So faiss trains (step 1) and numpy assigns and scans (steps 2–3), one BLAS thread per worker
(``threadpoolctl``, for the search's duration, process-wide).

Given an int8 product (``product``, :class:`~.quantized.Int8Product`: the console's RowCache
carries onnxruntime's, which ``plan()`` hands over), steps 2–3 run on int8 codes of the rows
(:mod:`.quantized`: each chunk coded as the probe reaches it, then every row once more for the
scan, 384 bytes a row; coding 200K rows took 0.5 s on one thread, measured): the probe ranks
the cells by the codes' integer products (an approximate ranking:
a near tie between a row's 96th and 97th cells may go the other way), and each tile is bounded
by the codes' product and their error norms (:func:`_tile8`: no pair at ≥ the threshold is
dropped, as with the float32 bound; a test probes every cell and gets exactly the exact pairs).
Measured at 1M (``bench/ann_bench.py --sizes 1000000 --methods ivf96,ivf96-q8``, load average
1.5–1.7, back to back): 64.1 s wall / 125 CPU s and 98.33 % of the 0.78 pairs in float32,
36.9 s / 71.5 CPU s and 98.31 % with the int8 product; every 0.95 pair found by both. At 200K:
7.8 / 6.0 s wall, 99.20 / 99.22 %.

Cost: step 2 is ``n × cells × d`` and step 3 ``n × probes × (n / cells) × d`` multiply-adds (≈
145/384 of that with the bound, which 0.03 % of the pairs pass on the bench's rows), so ``cells = c
√(probes · n)`` makes both ≈ ``n^1.5``; ``c = ½`` (:data:`CELL_SCALE`) gives the scan bigger tiles.
With 96 probes at 1M: 4,899 cells of ≈ 204 rows. Memory beyond the caller's matrix: the probed
cells (``uint16``, 192 MB at 1M with 96 probes) and the sorted lists (``int32``, 384 MB).

Measured at 1M (``bench/ann_bench.py --sizes 1000000``: 5 % planted pairs, half at 0.95 and
half at 0.78; 2 cores, load average 1–2), wall / CPU seconds and recall of the 0.78 pairs:

=========================================  ================  ===========
index (4 k-means iterations)               wall / CPU        recall 0.78
=========================================  ================  ===========
64 probes, faiss quantizer, one-stage      161.3 / 292       0.972
64 probes, numpy probe, ½ bound            74.8 / 142        0.972
96 probes, ½ bound (block's largest norm)  91.3 / 173        0.983
128 probes on ⅓ more cells (c 0.35)        115.9 / 220       0.993
=========================================  ================  ===========

Every 0.95 pair was found by all four. The virtual machine's speed drifts by up to 1.5× between
hours, so compare rows measured together: later the same day the 96-probe search took 126.8 s
/ 250 CPU s with the ½ bound (k-means 20 s, probe 37 s, lists 3 s, scan 67 s wall) and 97.4 /
192 with today's per-pair bound (scan 46 s), the same pairs. Where the 64-probe search's 161 s
went before any of this: k-means 8.5 s, the faiss probe 66.9 s, sorting the lists 11.7 s, the
one-stage scan ≈ 70 s. At 100K (64 probes, run back to back) the one-stage search took 16.1 s
wall / 30 CPU s and today's 6.3–7.4 / 12–14, the same 4,976 pairs.

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
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits

from .nearest import SLACK, TopK, dense
from .quantized import Int8Product, codes_of, floors, quantize
from .ranking import TOP_MIN_RATIO, top_columns
from .vectors import bound_head, bounding_rows, cpus, rest_norms

__all__ = ["ANN_MIN_ROWS", "ann_candidate_pairs"]

ANN_MIN_ROWS = 100_000
"""Full searches of at least this many rows use the index under ``method="auto"``.

Measured by :func:`~.candidates.candidate_pairs` on the bench's vectors with 5 % planted pairs,
half at cosine 0.95 and half at 0.78 (just above the 0.75 threshold), CPU seconds (the machine
ran at a load average of 9–17 from other jobs, so wall seconds were 3–7× these). "16 probes" is
the index until 2026-12 (on ``√(16n)`` cells), "64 probes" the next default (``½√(64n)``
cells, ``bench/ann_bench.py``, load average 15–17):

==========  ===========  ==========  =========  ===========  ===========  ===========
rows        exact split  16 probes   64 probes  recall 0.95  0.78, 16 p.  0.78, 64 p.
==========  ===========  ==========  =========  ===========  ===========  ===========
20,000      3.2 (3.8)    0.8 (1.3)   (3.3)      1.000        0.942        (0.998)
50,000      15.6         2.1                    1.000        0.920
100,000     55.3         5.4 (10.9)  19.5       0.9988       0.900        0.990
200,000     ≈ 220 (n²)   13.7        45.5       0.9986       0.874        0.986
1,000,000   ≈ 5,500      118.8       (142)      0.998        0.811        (0.972)
==========  ===========  ==========  =========  ===========  ===========  ===========

In brackets: ``bench/ann_bench.py``'s own runs of that size, at a load average of 3–17 (the
64-probe 20K figures on ``√(64n)`` cells; the 1M ones with the numpy probe and two-stage
scan, load average 1–2). "recall 0.95" is of the 16-probe index; with 64 probes it was 1.000
at 100K, 200K and 1M. Today's 96 probes: the module docstring's 1M table.

The index is cheaper from 20K rows on, but with 16 probes it missed pairs near the threshold
(and more of them as the store grew), where the exact product finds every pair; with 64 probes
it finds ≥ 98 % of them at 100K–200K for 2–3× the 16-probe CPU, still ≈ 3–5× under the exact
product. So the exact product is kept while it fits the planning budget (a full plan of 100K in
≤ 30 s: ≈ 25 s idle), and the index takes over from 100K rows.
"""

PROBES = 96
"""Cells each row is compared with (its own and the next 95 nearest centroids).

96, not 64 (the default until 2026-12): at 1M rows 64 probes found 97.2 % of the pairs at
0.78, 96 found 98.3 % for 1.2× the search's time (module docstring's 1M table).
With today's probe and bound (``bench/ann_bench.py``, load average 2, CPU seconds / recall at
0.78): 100K 64 probes 4.9 / 0.990, 96 probes 6.9 / 0.998; 200K 12.3 / 0.986, 16.9 / 0.992 —
the table below is of the code before, under a load of 11–17.

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

_DENSE_BOUND = 0.02
"""Share of a tile's pairs passing the bound above which the rest is computed as one product
(one gathered dot product per pair costs ≈ 20× a BLAS product's)."""

_LIST_CHUNK = 65536
"""Rows per step of :func:`_lists` (at 96 probes: 6.3M entries, ≈ 130 MB of temporaries)."""

_PROBE_CHUNK = 4096
"""Rows per probe product (4,096 × 4,000 centroids: a 64 MB similarity block per thread)."""

_SAMPLE_PER_CELL = 8
_KMEANS_ITER = 2
"""k-means iterations (4 until 2026-12). At 1M (``bench/ann_bench.py --methods
ivf96-i1,ivf96-i2,ivf96``, 96 probes) 1, 2 and 4 found 98.32, 98.33 and 98.33 % of the pairs at
0.78; each iteration is one faiss search of the sample (39K × 4,899 centroids: 3–4 s here)."""


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


def _lists(
    cell_of: np.ndarray, rows: np.ndarray, cells: int, threads: int
) -> tuple[np.ndarray, np.ndarray]:
    """Inverted lists of ``cell_of`` (``(q, w)`` ``uint16`` or ``int32``: ``w`` cells per row
    of ``rows``): the ``(q·w,) int32`` rows sorted by cell (stable, so by row within a cell)
    and each cell's bounds in it (``(cells + 1,) int64``).

    A counting sort in chunks of :data:`_LIST_CHUNK` rows, ``threads`` at a time: each chunk
    is sorted on its own and its entries go after the earlier chunks' in every cell, so no
    ``int64`` order of all ``q·w`` entries is held (at 1M rows and 96 probes that order alone
    was 768 MB, the plan's peak) and the chunks sort in parallel (96M ``uint16`` entries: 5.1
    s as one ``argsort``, 2.7 s in chunks on 2 threads, measured). A ``uint16`` array (at
    most 65,536 cells: every store under ≈ 180M rows at 96 probes) is sorted by numpy's radix
    sort, ≈ 4× faster than ``int32``."""
    q, w = cell_of.shape
    starts = range(0, q, _LIST_CHUNK)

    def count(s: int) -> np.ndarray:
        return np.bincount(cell_of[s : s + _LIST_CHUNK].ravel(), minlength=cells)

    with ThreadPoolExecutor(threads) as pool:
        mine = list(pool.map(count, starts))
    bounds = np.zeros(cells + 1, dtype=np.int64)
    np.cumsum(np.sum(mine, axis=0), out=bounds[1:])
    offsets = [bounds[:-1].copy()]  # where each chunk's first entry of each cell goes
    for m in mine[:-1]:
        offsets.append(offsets[-1] + m)
    out = np.empty(q * w, dtype=np.int32)

    def place(c: int) -> None:
        s = starts[c]
        order = np.argsort(cell_of[s : s + _LIST_CHUNK].ravel(), kind="stable")
        first = np.zeros(cells, dtype=np.int64)  # each cell's first place in the sorted chunk
        np.cumsum(mine[c][:-1], out=first[1:])
        # the sorted chunk's entry t, of cell x, goes to offsets[c][x] + (t − first[x])
        dest = np.repeat(offsets[c] - first, mine[c])
        dest += np.arange(len(order), dtype=np.int64)
        order //= w
        order += s
        out[dest] = rows[order]

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(place, range(len(starts))))
    return out, bounds


def _probe(
    centroids: np.ndarray,
    emb: np.ndarray,
    rows: np.ndarray | None,
    k: int,
    threads: int,
    product: Int8Product | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(probed, home)`` of each of ``rows`` (all when ``None``): ``(q, k)`` (``uint16`` for
    at most 65,536 centroids, else ``int32``), its ``k`` most similar ``centroids`` (``(cells,
    d) float32``) in no particular order, and ``(q, 1) int32``, the most similar (ties: the
    first; among the ``k`` unless the ``k``-th ties with it). Chunks of :data:`_PROBE_CHUNK`
    rows, one BLAS product, an ``argmax`` and an ``argpartition`` each, ``threads`` chunks at
    a time, so no ``(q, cells)`` matrix is held.

    Why not faiss's ``IndexFlatIP.search``: its top-``k`` selection kept 1M rows × 4,000
    centroids × 64 probes at 67 s wall here; the product and ``argpartition`` on two threads
    take ≈ 26 s and give the same cells (3,000 rows compared: the same sets).

    With ``product`` (an :class:`~.quantized.Int8Product`) each chunk of rows is coded in int8
    and the similarities are the codes' integer products with the centroids' codes
    (:mod:`.quantized`): an approximate ranking (each product is within the codes' error of the
    float32 one), so a row whose ``k``-th and ``k+1``-th cells nearly tie may probe the other;
    the recall this gives is measured, not assumed (``bench/ann_bench.py``'s ``-q8`` methods,
    the module docstring). The chunks are coded here, not taken from the scan's codes of every
    row: holding those through the lists' sort took a 1M plan's peak RSS from 3.53 to 3.89 GB."""
    q = len(emb) if rows is None else len(rows)
    probed = np.empty((q, k), dtype=np.uint16 if len(centroids) <= 65536 else np.int32)
    home = np.empty((q, 1), dtype=np.int32)
    if product is not None:
        right = codes_of(quantize(centroids)[0])
    else:
        right = np.ascontiguousarray(centroids.T)
    every = np.arange(k, dtype=np.int32)

    def chunk(s: int) -> None:
        part = emb[s : s + _PROBE_CHUNK] if rows is None else emb[rows[s : s + _PROBE_CHUNK]]
        if product is None:
            sims = part @ right
        else:  # into memory of its own, freed after the chunk (an arena would keep it)
            sims = product(
                quantize(part)[0], right, np.empty((len(part), len(centroids)), np.int32)
            )
        at = slice(s, s + _PROBE_CHUNK)
        if k > 1 and sims.shape[1] >= TOP_MIN_RATIO * k:
            probed[at], home[at, 0] = top_columns(sims, k)
            return
        home[at, 0] = sims.argmax(axis=1)
        if k == 1:
            probed[at] = home[at]
        elif k >= sims.shape[1]:
            probed[at] = every
        else:
            probed[at] = np.argpartition(sims, -k, axis=1)[:, -k:]

    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
        list(pool.map(chunk, range(0, q, _PROBE_CHUNK)))
    return probed, home


def _tile(
    emb: np.ndarray,
    ss: np.ndarray,
    mm: np.ndarray,
    right: np.ndarray,
    head: int,
    resid: np.ndarray,
    threshold: float,
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The pairs of searchers ``ss`` × members ``mm`` that can reach ``threshold``: ``(tile,
    r, k)``, positions ``ss[r]``, ``mm[k]`` (``int64`` arrays) of a superset of the pairs ≥
    ``threshold − _MARGIN``, and ``tile`` the whole ``(len(ss), len(mm))`` product when it was
    computed (else ``None``).

    Two stages: one product of the rows' first ``head`` coordinates with each row's residual
    norm appended (:func:`~.vectors.bounding_rows`; ``right``: the members', transposed) bounds
    every pair by Cauchy–Schwarz, and only a pair passing the bound has its rest added (one
    gathered dot product each). On the bench's random unit rows (no direction favoured, the
    worst case) the head of :func:`~.vectors.bound_head` (144 of 384 at 0.75) passes 0.03 % of
    the pairs, so a tile costs ≈ 145/384 of its whole product; a tile where more than
    :data:`_DENSE_BOUND` pass (clustered rows) takes the rest's product too, so it never costs
    much more than the whole product.
    """
    first = bounding_rows(emb[ss, :head], resid[ss]) @ right
    floor = threshold - _MARGIN
    rows = np.flatnonzero(first.max(axis=1) >= floor)  # few: no scan of the whole tile's mask
    if not len(rows):
        return None, rows, rows
    rr, k = np.nonzero(first[rows] >= floor)
    if len(rr) > _DENSE_BOUND * first.size:
        tile = first
        tile -= np.outer(resid[ss], resid[mm])
        tile += emb[ss, head:] @ emb[mm, head:].T
        r, k = np.nonzero(tile >= floor)
        return tile, r, k
    r = rows[rr]
    a, b = ss[r], mm[k]
    rest = np.einsum("ij,ij->i", emb[a, head:], emb[b, head:])
    keep = first[r, k] - resid[a] * resid[b] + rest >= floor
    return None, r[keep], k[keep]


class _Coded:
    """Every row's int8 codes and norms (:func:`~.quantized.quantize`) with the product that
    multiplies them: the scan's tiles are bounded by :func:`_tile8` instead of :func:`_tile`."""

    def __init__(self, emb: np.ndarray, product: Int8Product, threads: int) -> None:
        n, d = emb.shape
        self.codes = np.empty((n, d), np.uint8)
        self.norms = np.empty((n, 2), np.float64)
        self.product = product

        def code(s: int) -> None:
            part = slice(s, s + _LIST_CHUNK)
            self.norms[part] = quantize(emb[part], out=self.codes[part])[1]

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(code, range(0, n, _LIST_CHUNK)))


def _tile8(
    emb: np.ndarray,
    ss: np.ndarray,
    mm: np.ndarray,
    right: np.ndarray,
    coded: _Coded,
    threshold: float,
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """:func:`_tile` by the int8 bound of :mod:`.quantized` (``right``: the members' codes,
    :func:`~.quantized.codes_of`): one integer product of the tile, each searcher's least
    product that can reach ``threshold − _MARGIN`` with any member (:func:`~.quantized.floors`),
    and each pair passing it checked on its float32 rows. The same pairs as :func:`_tile`
    (both keep every pair at ≥ ``threshold − _MARGIN``, then the caller keeps those at
    ``threshold``); a tile where more than :data:`_DENSE_BOUND` pass takes the float32 product
    instead, and returns it."""
    floor = threshold - _MARGIN
    y = coded.product(coded.codes[ss], right)
    low = floors(coded.norms[ss], coded.norms[mm], floor)
    rows = np.flatnonzero(y.max(axis=1) >= low)  # few: no scan of the whole tile's mask
    if not len(rows):
        return None, rows, rows
    rr, k = np.nonzero(y[rows] >= low[rows, None])
    if len(rr) > _DENSE_BOUND * y.size:
        tile = emb[ss] @ emb[mm].T
        r, k = np.nonzero(tile >= floor)
        return tile, r, k
    r = rows[rr]
    keep = np.einsum("ij,ij->i", emb[ss[r]], emb[mm[k]]) >= floor
    return None, r[keep], k[keep]


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
    coded: _Coded | None = None,
) -> np.ndarray:
    """``(m,) int64`` codes ``i * n + j`` (``i < j``, unique, sorted) of the pairs whose tile
    similarity is ≥ ``threshold − _MARGIN``: every cell's members × the rows probing it.

    The tiles are small (≈ 4,000 × 250 at 1M), so each runs on one BLAS thread and ``threads``
    workers share the cells: a 2-thread BLAS call per small tile waits for its second thread,
    which on the loaded machine made the scan of 100K rows take 20.2 s wall instead of 3.4 s.

    With ``topk``, a dense tile (a row or column of more than ``topk.k`` candidates) is offered
    to it instead (each row's nearest partners, :mod:`.nearest`); its pairs are not in the
    returned codes. ``labels``: a pair whose ends share a label ≥ 0 is skipped (counted into
    ``excluded[0]``). ``coded``: the rows' int8 codes; the tiles are bounded by them
    (:func:`_tile8`), the same pairs."""
    n, d = emb.shape
    head = bound_head(threshold, d)
    resid = rest_norms(emb, head) if coded is None else np.empty(0, np.float32)
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
                if coded is not None:
                    right = codes_of(coded.codes[mm])
                else:
                    right = bounding_rows(emb[mm, :head], resid[mm]).T
                for s0 in range(0, len(srch), block):
                    ss = srch[s0 : s0 + block]
                    if coded is not None:
                        tile, r, k = _tile8(emb, ss, mm, right, coded, threshold)
                    else:
                        tile, r, k = _tile(emb, ss, mm, right, head, resid, threshold)
                    if not len(r):
                        continue
                    if labels is not None:
                        la, lb = labels[ss[r]], labels[mm[k]]
                        same = (la == lb) & (la >= 0)
                        if same.any():
                            if excluded is not None:
                                excluded[0] += int(np.count_nonzero(same))
                            r, k = r[~same], k[~same]
                    if topk is not None and len(r) > topk.k:
                        hit = np.zeros((len(ss), len(mm)), dtype=bool)
                        hit[r, k] = True
                        if dense(hit, topk.k):
                            if tile is None:  # the whole product, for the nearest partners
                                tile = emb[ss] @ emb[mm].T
                            hit &= ss[:, None].astype(np.int64) != mm[None, :]
                            topk.offer(ss, mm, tile, hit)
                            topk.offer(mm, ss, tile.T, hit.T)
                            continue
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
    product: Int8Product | None = None,
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
    - ``product``: an :class:`~.quantized.Int8Product`; with one, every row is coded in int8
      and the scan's tiles are bounded by its integer product (:func:`_tile8`): the same
      cells, the same pairs, less time where the CPU has 8-bit dot-product instructions.

    Returns ``(i, j, sim)``: ``int64``, ``int64``, ``float32``, sorted by ``(i, j)``, every sim
    exact (recomputed from ``emb``). Raises ``ImportError`` naming the package when faiss is not
    installed, ``ValueError`` for ``probes`` or ``cells`` under 1.
    """
    try:
        import faiss  # noqa: F401 - k-means (_centroids) needs it
    except ImportError as exc:  # pragma: no cover - a dependency in pyproject.toml
        raise ImportError("the approximate candidate search needs the 'faiss-cpu' package") from exc
    if probes < 1 or (cells is not None and cells < 1):
        raise ValueError(f"probes and cells must be ≥ 1, got {probes} and {cells}")
    emb = np.ascontiguousarray(emb, dtype=np.float32)
    n, d = emb.shape
    if n < 2:
        return _empty()
    cells = min(n, cells or max(1, round(CELL_SCALE * math.sqrt(probes * n))))
    centroids = _centroids(emb, cells, seed)
    threads = threads or cpus()
    every = np.arange(n, dtype=np.int32)
    if query is None:
        srows = every
        probed, home = _probe(centroids, emb, None, min(probes, cells), threads, product)
    else:
        srows = np.unique(np.asarray(query, dtype=np.int64)).astype(np.int32)
        home = _probe(centroids, emb, None, 1, threads, product)[1]
        probed = _probe(centroids, emb, srows, min(2 * probes, cells), threads, product)[0]
    members = _lists(home, every, cells, threads)
    searchers = _lists(probed, srows, cells, threads)
    del probed, home
    topk = TopK(n, per_row + SLACK) if per_row else None
    excluded = [0]
    coded = _Coded(emb, product, threads) if product is not None else None
    code = _scan(emb, members, searchers, threshold, block, threads, topk, exclude, excluded, coded)
    del coded
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
