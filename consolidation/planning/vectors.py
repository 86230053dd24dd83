"""The planner's embeddings: unit rows without a second ``(n, 384)`` matrix, and the exact
new × store search an incremental pass runs over them.

:class:`UnitRows` holds the caller's float32 rows (shared with the records when they are the
rows of one matrix in id order, else stacked once) and each row's L2 norm, computed exactly as
:func:`~.candidates.normalize_rows` does; a row read through it is ``raw[i] / norm[i]``, the
very float32 values the normalised matrix would hold (the same IEEE division), so every
similarity is bit for bit what a normalised copy gives (I-8). A full search needs the matrix
itself (:meth:`UnitRows.matrix`): rows that normalising leaves unchanged are used as they are
(no copy); otherwise a stacked copy is normalised in place, as before.

Why: at 1M memories one ``(n, 384) float32`` matrix is 1.5 GB; the records' vectors, the
planner's normalised copy and the candidate index would not fit 4 GB together (issue 12).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["CHUNK", "UnitRows", "query_pairs"]

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
    """``(n,) float32`` L2 norms as :func:`~.candidates.normalize_rows` computes them (zero →
    1), a chunk at a time (each row's sum is independent of the chunk: same bits)."""
    out = np.empty(len(raw), np.float32)
    for s in range(0, len(raw), CHUNK):
        out[s : s + CHUNK] = np.linalg.norm(raw[s : s + CHUNK], axis=1)
    out[out == 0] = 1.0
    return out


class UnitRows:
    """L2-normalised embedding rows read as ``rows[i]`` (``(d,)``) or ``rows[list]`` (``(k, d)``).

    Built from the records' ``(d,) float32`` vectors; ``raw`` is the caller's matrix when the
    vectors are its rows in order (never written), else a stacked copy the planner owns.
    """

    def __init__(self, embs: Sequence[np.ndarray], dim: int = 384) -> None:
        if not embs:
            self.raw = np.zeros((0, dim), np.float32)
            self.owned = True
        else:
            shared = _one_matrix(embs)
            self.owned = shared is None
            if shared is None:
                shared = np.empty((len(embs), embs[0].shape[0]), np.float32)
                for s in range(0, len(embs), CHUNK):
                    np.stack(embs[s : s + CHUNK], out=shared[s : s + CHUNK])
            self.raw = shared
        self.norms = _norms(self.raw)
        self._unit: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.raw)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(n, d)``."""
        return self.raw.shape

    def __getitem__(self, idx: int | Sequence[int] | np.ndarray) -> np.ndarray:
        if self._unit is not None:
            return self._unit[idx]
        if isinstance(idx, int | np.integer):
            return self.raw[idx] / self.norms[idx]
        idx = np.asarray(idx, dtype=np.int64)
        return self.raw[idx] / self.norms[idx][:, None]

    def _unchanged(self) -> bool:
        """Whether normalising leaves every row as it is (unit rows written by a normaliser)."""
        for s in range(0, len(self.raw), CHUNK):
            block = self.raw[s : s + CHUNK]
            if not np.array_equal(block / self.norms[s : s + CHUNK, None], block):
                return False
        return True

    def matrix(self) -> np.ndarray:
        """The ``(n, d) float32`` normalised matrix (read-only): the caller's own rows when
        normalising changes none of them, else the stacked copy normalised in place (or, for
        shared rows that do change, a normalised copy)."""
        if self._unit is None:
            if self.owned:
                for s in range(0, len(self.raw), CHUNK):
                    self.raw[s : s + CHUNK] /= self.norms[s : s + CHUNK, None]
                unit = self.raw
            elif self._unchanged():
                unit = self.raw.view()
            else:
                unit = np.empty_like(self.raw)
                for s in range(0, len(self.raw), CHUNK):
                    block = self.raw[s : s + CHUNK]
                    np.divide(block, self.norms[s : s + CHUNK, None], out=unit[s : s + CHUNK])
            unit.flags.writeable = False
            self._unit = unit
        return self._unit


def query_pairs(
    rows: UnitRows, threshold: float, query: np.ndarray, *, block: int = 4096
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(i, j)``, ``i < j``, with an end in ``query`` and cosine ≥ ``threshold``: exactly
    the pairs and similarities of :func:`~.candidates.candidate_pairs` with ``query`` (every
    pair found, each similarity recomputed with ``einsum`` from the normalised rows), without
    the normalised ``(n, d)`` matrix.

    Store rows are read raw and each tile is compared with ``(threshold − margin) × norm``; the
    first half of the dimensions is multiplied first, and a tile whose bound (Cauchy–Schwarz:
    ``x·y ≤ x₁·y₁ + ‖x₂‖‖y₂‖``) leaves few candidates skips the second half — an O(q × n)
    product at half the cost. Returns ``(i, j, sim)``: ``int64``, ``int64``, ``float32``,
    sorted by ``(i, j)``.
    """
    n, d = rows.shape
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32))
    qrows = np.unique(np.asarray(query, dtype=np.int64))
    if n < 2 or not len(qrows):
        return empty
    k = d // 2
    qv = rows[qrows]
    q1 = np.ascontiguousarray(qv[:, :k])
    q2 = np.ascontiguousarray(qv[:, k:])
    q2max = float(np.linalg.norm(q2, axis=1).max())
    los: list[np.ndarray] = []
    his: list[np.ndarray] = []
    for b0 in range(0, n, block):
        raw = rows.raw[b0 : b0 + block]
        floor = (threshold - _MARGIN) * rows.norms[b0 : b0 + block]
        tile = q1 @ raw[:, :k].T
        bound = floor - q2max * np.linalg.norm(raw[:, k:], axis=1)
        hit = tile >= bound
        if np.count_nonzero(hit) > 4 * len(qrows):  # a weak bound here: finish the product
            tile += q2 @ raw[:, k:].T
            hit = tile >= floor
        r, c = np.nonzero(hit)
        if len(r):
            los.append(qrows[r])
            his.append(b0 + c)
    if not los:
        return empty
    a, b = np.concatenate(los), np.concatenate(his)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = lo != hi
    code = np.unique(lo[keep] * n + hi[keep])
    lo, hi = code // n, code % n
    sims = np.empty(len(lo), np.float32)
    for s in range(0, len(lo), 65536):
        sims[s : s + 65536] = np.einsum(
            "ij,ij->i", rows[lo[s : s + 65536]], rows[hi[s : s + 65536]]
        )
    ok = sims >= threshold
    return lo[ok], hi[ok], sims[ok]
