"""Candidate search: every pair of rows whose cosine similarity is at least a threshold.

Exact (no approximate index): blocked matrix products over the ``(n, d) float32`` matrix of
L2-normalised embeddings, upper triangle only (each pair computed once), tiles of
``block × block`` rows so the similarity tile stays small (2048² float32 = 16 MB).

Two filters, same answer (measured in ``bench/plan_bench.py``):

- ``"exact"``: the tile is the full ``d``-dimensional product. On this 2-core machine, idle,
  OpenBLAS sgemm runs at ≈ 110 GFLOP/s: 3.2 s for 30K rows, ≈ 34 s extrapolated for 100K.
- ``"split"`` (default for n ≥ 8192): rows are rotated onto their principal axes (an
  orthogonal map, so dot products are unchanged) and split into the first ``k`` and the
  remaining ``d − k`` coordinates. By Cauchy–Schwarz ``x·y ≤ x₁·y₁ + ‖x₂‖‖y₂‖``, so a pair
  whose bound ``x₁·y₁ + max‖x₂‖·max‖y₂‖`` (per tile) is under the threshold cannot qualify;
  only the pairs passing the bound are checked exactly. Rows are sorted by ‖x₂‖ so each tile's
  maximum is tight. No pair is ever missed (the bound is exact; a 1e-3 margin absorbs float32
  rounding); with k = d/2 it halves the product cost even for isotropic random vectors, and
  real MiniLM embeddings concentrate energy in the leading components, so the bound is tighter.
  Idle machine: 2.3–2.5 s for 30K rows (≈ 25 s extrapolated for 100K) vs 3.2 s exact; its
  fixed cost (eigh + rotating every row) makes it slower below ~8K rows, hence ``"auto"``.
  Measured alternatives: k = 160 or 128 let too many pairs through the bound on isotropic
  data (0.3M / 5.5M candidates at 30K) and were 2–10× slower; 4096-row tiles were slower than
  2048. An approximate index misses some pairs (LSH needs hundreds of bands for recall at
  cosine 0.75), which the guard and the review would not see; so the faiss IVF search
  (:mod:`.ann`) is used only for full searches of ``ANN_MIN_ROWS`` rows or more, where the
  exact product takes minutes to hours.

Every returned similarity is recomputed per pair from the original rows (``einsum``), so the
result does not depend on tiling, rotation or BLAS threading (I-8 determinism).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
from threadpoolctl import threadpool_limits

from .ann import ANN_MIN_ROWS, ann_candidate_pairs
from .nearest import SLACK, TopK, dense
from .quantized import Int8Product

__all__ = ["candidate_pairs", "normalize_rows"]

_MARGIN = 1e-3
"""Safety margin on the prefilter (float32 rounding of 384-term dot products is ~1e-6)."""


def normalize_rows(matrix: np.ndarray, *, copy: bool = True) -> np.ndarray:
    """``(n, d) float32`` with each row scaled to unit L2 norm (zero rows stay zero).

    ``copy=False`` scales a float32 ``matrix`` in place (no second ``n × d`` matrix: 1.5 GB at
    1M × 384), for a caller that owns it (the planner's freshly stacked embeddings)."""
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    if not copy and m is matrix:
        m /= norms
        return m
    return (m / norms).astype(np.float32, copy=False)


def _exact_sims(emb: np.ndarray, i: np.ndarray, j: np.ndarray, chunk: int = 65536) -> np.ndarray:
    out = np.empty(len(i), dtype=np.float32)
    for s in range(0, len(i), chunk):
        out[s : s + chunk] = np.einsum("ij,ij->i", emb[i[s : s + chunk]], emb[j[s : s + chunk]])
    return out


def candidate_pairs(
    emb: np.ndarray,
    threshold: float,
    *,
    query: np.ndarray | None = None,
    block: int = 2048,
    method: str = "auto",
    split_dims: int | None = None,
    per_row: int | None = None,
    stats: dict[str, int] | None = None,
    exclude: np.ndarray | None = None,
    product: Int8Product | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(i, j)`` with ``i < j`` and cosine(emb[i], emb[j]) ≥ ``threshold``.

    - ``emb``: ``(n, d) float32``, rows L2-normalised (see :func:`normalize_rows`).
    - ``threshold``: cosine in [-1, 1].
    - ``query``: optional ``(q,) int`` row indices; when given only pairs with at least one
      end in ``query`` are searched (incremental planning: O(q × n), not O(n²)).
    - ``block``: tile edge in rows (2048 measured fastest here, bench/plan_bench.py).
    - ``method``: ``"exact"``, ``"split"``, ``"ann"`` or ``"auto"``: the faiss IVF search of
      :mod:`.ann` for a full search of n ≥ ``ANN_MIN_ROWS`` rows (approximate: a subset of the
      exact pairs), else split for a full search of n ≥ 8192 rows or ≥ 4096 query rows, when
      d ≥ 64. An incremental (``query``) search stays exact: it is O(q × n).
    - ``per_row``: when given, a tile with a row or column of more than ``per_row`` candidates
      keeps only each row's ``per_row`` most similar partners (:class:`~.nearest.TopK`, on the
      tile's exact product), so a dense cluster costs O(n × per_row) pairs, not O(n²); the
      caller bounds the result (:func:`~.nearest.bound_pairs`). ``stats`` (a dict) then gets
      ``dense_tiles``, ``max_seen`` (the most candidates a row had in them) and ``over``
      (rows with more than ``per_row``).
    - ``exclude``: optional ``(n,) int64`` labels; a pair whose ends share a label ≥ 0 is
      known distinct and never returned (the members of one numbered series,
      :mod:`.templates`); in a full search the rows of one label are tiled together and a tile
      inside one label is not computed. ``stats["excluded"]`` counts those pairs (every pair
      of a skipped tile, and the pairs of a computed tile that passed its filter).
    - ``product``: an int8 product (:class:`~.quantized.Int8Product`) for the index (:mod:`.ann`).

    Returns ``(i, j, sim)``: ``int64``, ``int64``, ``float32`` arrays sorted by ``(i, j)``.
    Raises ``ValueError`` for a non-2-D matrix or an unknown method.
    """
    emb = np.asarray(emb, dtype=np.float32)
    if emb.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D (n, d) matrix, got shape {emb.shape}")
    if method not in ("auto", "exact", "split", "ann"):
        raise ValueError(f"unknown candidate method {method!r}")
    n, d = emb.shape
    if n < 2:
        return _no_pairs()
    if method == "ann" or (method == "auto" and query is None and n >= ANN_MIN_ROWS):
        ann = partial(ann_candidate_pairs, per_row=per_row, stats=stats, exclude=exclude)
        return ann(emb, threshold, query=query, product=product)  # approximate: planning/ann.py
    if method == "auto":
        # the split's fixed cost (rotating all n rows, O(n·d²)) only pays off when the
        # product itself is large: a full triangle of ≥ 8192 rows, or ≥ 4096 query rows
        big = len(query) >= 4096 if query is not None else n >= 8192
        method = "split" if big and d >= 64 else "exact"

    order, head, resid = _sorted_rows(emb, method, split_dims)
    uniform: list[int] = []
    if exclude is not None and query is None:
        order, head, resid, uniform = _series_together(
            emb, exclude, order, head, resid, split=method == "split", block=block
        )

    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)  # pos[row] = its place in the sorted matrix
    if query is not None:
        qrows = np.unique(np.asarray(query, dtype=np.int64))
        qsorted = np.sort(pos[qrows])
    ii: list[np.ndarray] = []
    jj: list[np.ndarray] = []
    topk = TopK(n, per_row + SLACK) if per_row else None
    dense_tiles = excluded = 0
    labels = exclude[order] if exclude is not None else None  # by sorted position

    def _collect(
        a_idx: np.ndarray, b0: int, tile: np.ndarray, bound: float, diagonal: bool
    ) -> None:
        nonlocal dense_tiles, excluded
        hit = tile >= bound
        if diagonal:  # a tile on the diagonal: keep each pair once, no self pairs
            hit &= a_idx[:, None] < np.arange(b0, b0 + tile.shape[1])[None, :]
        if labels is not None:
            la, lb = labels[a_idx], labels[b0 : b0 + tile.shape[1]]
            if (la >= 0).any() and (lb >= 0).any():
                same = (la[:, None] == lb[None, :]) & (la >= 0)[:, None]
                excluded += int(np.count_nonzero(hit & same))
                hit &= ~same
        if topk is not None and dense(hit, topk.k):
            # a dense tile: each row's nearest partners only, on the exact product
            dense_tiles += 1
            rs, cs = np.flatnonzero(hit.any(axis=1)), np.flatnonzero(hit.any(axis=0))
            hit = hit[np.ix_(rs, cs)]
            ra, rb = order[a_idx[rs]], order[b0 + cs]
            exact = tile[np.ix_(rs, cs)] if method != "split" else emb[ra] @ emb[rb].T
            # ``hit`` holds every pair that can qualify (the split's bound is an upper bound),
            # minus the pairs the masks above removed
            ok = hit & (exact >= threshold - _MARGIN)
            topk.offer(ra, rb, exact, ok)
            topk.offer(rb, ra, exact.T, ok.T)
            return
        r, c = np.nonzero(hit)
        if len(r):
            ii.append(a_idx[r])
            jj.append(b0 + c)

    if query is None:
        skipped = _full_tiles(head, resid, threshold, block, uniform, _collect)
        excluded += skipped  # added after the call: ``_collect`` adds to it meanwhile
    else:
        _query_tiles(head, resid, qsorted, threshold, block, _collect)

    if stats is not None:
        _record(stats, excluded, topk, dense_tiles, per_row)
    if topk is not None and dense_tiles:
        ii.append(topk.codes(n))
        jj.append(np.full(len(ii[-1]), -1, np.int64))
    if not ii:
        return _no_pairs()
    return _original_pairs(emb, order, np.concatenate(ii), np.concatenate(jj), threshold)


def _no_pairs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32)


def _sorted_rows(
    emb: np.ndarray, method: str, split_dims: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, head, resid)`` of :func:`candidate_pairs`: the rows' search order, the
    matrix searched (the split's first ``k`` rotated dimensions, rows in ``order``; else
    ``emb`` itself) and each sorted row's residual norm (0 without the split)."""
    n, d = emb.shape
    if method != "split":
        return np.arange(n), emb, np.zeros(n, dtype=np.float32)
    k = split_dims or d // 2
    # float32 eigh: ~0.04 s for d = 384 (float64 dsyevd took seconds here); exact
    # orthogonality is not needed — the 1e-3 margin absorbs it, and sims are recomputed
    # on one BLAS thread: 0.15 s for d = 384, where two threads on the shared 2-core
    # machine took 3.0–3.6 s (measured; LAPACK's threads wait on each other under load)
    gram = emb.T @ emb
    with threadpool_limits(1, user_api="blas"):
        _, vecs = np.linalg.eigh(gram)
    rot = emb @ np.ascontiguousarray(vecs[:, ::-1])
    resid = np.linalg.norm(rot[:, k:], axis=1)
    order = np.argsort(-resid, kind="stable")
    return order, np.ascontiguousarray(rot[order, :k]), resid[order]


def _series_together(
    emb: np.ndarray,
    exclude: np.ndarray,
    order: np.ndarray,
    head: np.ndarray,
    resid: np.ndarray,
    *,
    split: bool,
    block: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """The rows of one numbered series side by side (in the method's order within it), so a
    tile whose rows and columns are all one series is skipped without its product: the new
    ``(order, head, resid)`` and per tile of ``block`` rows its series label (-1: mixed)."""
    lab = np.asarray(exclude, dtype=np.int64)
    regroup = np.argsort(np.where(lab >= 0, lab, np.iinfo(np.int64).max)[order], kind="stable")
    order, resid = order[regroup], resid[regroup]
    head = np.ascontiguousarray(head[regroup]) if split else emb[order]
    uniform: list[int] = []
    for s0 in range(0, len(order), block):
        blk = lab[order[s0 : s0 + block]]
        uniform.append(int(blk[0]) if blk[0] >= 0 and (blk == blk[0]).all() else -1)
    return order, head, resid, uniform


def _full_tiles(
    head: np.ndarray,
    resid: np.ndarray,
    threshold: float,
    block: int,
    uniform: list[int],
    collect: Callable[[np.ndarray, int, np.ndarray, float, bool], None],
) -> int:
    """The upper triangle of tiles of a full search, each handed to ``collect(a_idx, b0,
    tile, bound, diagonal)``; a tile inside one numbered series is skipped. Returns the pairs
    skipped that way."""
    n = len(head)
    skipped = 0
    for a0 in range(0, n, block):
        a = head[a0 : a0 + block]
        ma = float(resid[a0 : a0 + block].max())
        a_idx = np.arange(a0, a0 + len(a))
        for b0 in range(a0, n, block):
            b = head[b0 : b0 + block]
            if (
                uniform
                and uniform[a0 // block] >= 0
                and uniform[a0 // block] == uniform[b0 // block]
            ):
                skipped += len(a) * (len(a) - 1) // 2 if b0 == a0 else len(a) * len(b)
                continue
            mb = float(resid[b0 : b0 + block].max())
            collect(a_idx, b0, a @ b.T, threshold - ma * mb - _MARGIN, b0 == a0)
    return skipped


def _query_tiles(
    head: np.ndarray,
    resid: np.ndarray,
    qsorted: np.ndarray,
    threshold: float,
    block: int,
    collect: Callable[[np.ndarray, int, np.ndarray, float, bool], None],
) -> None:
    """The tiles of an incremental search: the query rows (sorted positions ``qsorted``)
    against every row, each tile handed to ``collect`` (see :func:`_full_tiles`)."""
    n = len(head)
    for a0 in range(0, len(qsorted), block):
        a_idx = qsorted[a0 : a0 + block]
        a = head[a_idx]
        ma = float(resid[a_idx].max()) if len(a_idx) else 0.0
        for b0 in range(0, n, block):
            mb = float(resid[b0 : b0 + block].max())
            collect(a_idx, b0, a @ head[b0 : b0 + block].T, threshold - ma * mb - _MARGIN, False)


def _record(
    stats: dict[str, int], excluded: int, topk: TopK | None, dense_tiles: int, per_row: int | None
) -> None:
    """Add a search's counts to ``stats`` (see :func:`candidate_pairs`)."""
    if excluded:
        stats["excluded"] = stats.get("excluded", 0) + excluded
    if topk is not None:
        stats["dense_tiles"] = stats.get("dense_tiles", 0) + dense_tiles
        stats["max_seen"] = max(stats.get("max_seen", 0), int(topk.seen.max(initial=0)))
        stats["over"] = stats.get("over", 0) + int((topk.seen > (per_row or 0)).sum())


def _original_pairs(
    emb: np.ndarray, order: np.ndarray, si: np.ndarray, sj: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted positions ``(si, sj)`` back to original row numbers, oriented ``i < j``,
    without self pairs and duplicates, kept when their exact cosine reaches ``threshold``;
    ``sj < 0`` marks codes ``lo * n + hi`` of the dense tiles' kept pairs (already original
    rows)."""
    n = len(emb)
    tk = sj < 0
    oi, oj = order[si[~tk]], order[sj[~tk]]
    lo, hi = np.minimum(oi, oj), np.maximum(oi, oj)
    keep = lo != hi
    lo, hi = lo[keep], hi[keep]
    if len(lo) or tk.any():
        code = np.unique(np.concatenate([lo.astype(np.int64) * n + hi.astype(np.int64), si[tk]]))
        lo, hi = code // n, code % n
    sims = _exact_sims(emb, lo, hi)
    ok = sims >= threshold
    return lo[ok].astype(np.int64), hi[ok].astype(np.int64), sims[ok]
