"""Int8 codes of unit rows: a bound on every pair's cosine from one integer product.

The candidate searches multiply unit rows: an incremental pass its new rows with every stored
row (:func:`~.vectors.query_pairs`), a full pass every row with its cells' centroids and
members (:mod:`.ann`). In float32 these products run at the BLAS's speed (≈ 100 GFLOP/s a
core here). In 8-bit integers they run ≈ 3–7× faster a multiply-add on a CPU with AVX-512
VNNI (one core, ``(4096, 384) × (384, 1000)``, measured: 705 G integer multiply-adds a second
against 100 G float32 on the machine this was built on, 153–206 G against 52 G on a Zen 4
machine of the same kind, :mod:`consolidation.adapters.int8_product`); numpy has no such
product, so a caller hands one in
(:class:`Int8Product`; the console's is onnxruntime's ``MatMulInteger``,
:mod:`consolidation.adapters.int8_product`, through its :class:`~.rowcache.RowCache`), and the
engine core stays free of onnxruntime.

The bound. Each unit row ``x`` (``(d,) float32``) is coded as ``q = clip(rint(x / STEP),
−127, 127)``, so ``x = STEP·q + e`` with ``‖e‖`` the row's coding error (clipped coordinates
included). For two rows, exactly (Cauchy–Schwarz on the three error terms)::

    x·y = STEP² (q_x·q_y) + x̂·e_y + e_x·ŷ + e_x·e_y
        ≤ STEP² (q_x·q_y) + ‖x̂‖‖e_y‖ + ‖e_x‖‖ŷ‖ + ‖e_x‖‖e_y‖

where ``x̂ = STEP·q_x``. With :data:`STEP` = 2⁻⁹ a coordinate up to 0.248 is coded unclipped
(an unclipped row's error is ≈ STEP √(d/12) ≈ 0.011 at d = 384), every product and sum is
exact in float64, and the integer product fits an ``int32`` (at most d·127²). So the pairs
whose integer product reaches :func:`floors` are a superset of the pairs at cosine ≥ the floor:
nothing is missed, and every hit is then checked exactly by the caller. Of 16.4M pairs of
random unit rows (1K × 16K, measured) none passed the bound at 0.749, against 49 for the
float32 head-and-rest bound of 160 coordinates (:func:`~.vectors.bound_head`); the slack,
taken with each block's largest norms, was at most 0.046 (a row with a clipped coordinate
raises its block's). Real embeddings: of 3,000 LoCoMo turns embedded by all-MiniLM-L6-v2, 3
rows had a coordinate past 0.248 (the largest 0.27) and the median error norm was 0.011; among
their 9M ordered pairs the bound passed 5,669 at 0.749 for the 4,122 that reach it (3,074 for
3,030 at 0.899) and missed none (measured).

A code is stored as ``uint8`` ``q + 128`` (``MatMulInteger``'s fast kernels take an unsigned
left side with a zero point of 128; its signed × signed form ran at a fifteenth of the
speed here): 384 bytes a row, against 640 for the float32 bounding rows.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = [
    "STEP",
    "CachedCodes",
    "Int8Product",
    "block_rows",
    "codes_of",
    "floors",
    "kept_at",
    "quantize",
]

STEP = 2.0**-9
"""The coding step of every coordinate: a power of two, so ``x / STEP`` and ``STEP² · n`` are
exact; coordinates of unit rows beyond ±127·STEP (±0.248) are clipped, which only widens that
row's error term (random unit 384-d rows: a coordinate is past 0.248 about once in 10⁶)."""

PRODUCT_CELLS = 1 << 20
"""Cells of one int8 product (``int32``: 4 MB) the search aims at: blocks of
:func:`block_rows` stored rows. The output is written and read back three times (compare, count,
positions), so it should stay in the CPU's cache: 1K new rows × 1M stored took 0.62 s in
blocks of 1,024 rows, 0.64 in 2,048 and 0.93–1.07 in 4,096 (the float32 search's block; it
took 1.40–1.48 s in each), measured."""

_CHUNK = 16384
"""Rows coded per step: 24 MB of float64 temporaries at d = 384."""


class Int8Product(Protocol):
    """``(m, d) uint8`` codes + 128 (zero point 128) × ``(d, k) int8`` codes → ``(m, k)
    int32``: exact integer dot products ``Σ (a − 128) · b``, written into ``out`` when given
    (``(m, k) int32``, C-contiguous) and returned. Called from several threads at once, so it
    must be thread-safe; each call should use one CPU (the caller shares the blocks over the
    CPUs)."""

    def __call__(
        self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray: ...


def quantize(unit: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Code ``unit`` (``(k, d) float32`` unit rows): ``(codes, norms)`` with ``codes`` ``(k,
    d) uint8`` (``q + 128``; written into ``out`` when given) and ``norms`` ``(k, 2)
    float64``, each row's ``‖x̂‖`` and ``‖x − x̂‖`` (module docstring), raised by 10⁻¹² of
    themselves so that rounding can only widen the bound."""
    k, d = unit.shape
    codes = np.empty((k, d), np.uint8) if out is None else out
    norms = np.empty((k, 2), np.float64)
    for s in range(0, k, _CHUNK):
        x = unit[s : s + _CHUNK].astype(np.float64)
        q = np.clip(np.rint(x / STEP), -127, 127)
        x -= q * STEP  # the coding error, exactly (float32 values, a power-of-two step)
        norms[s : s + _CHUNK, 0] = np.sqrt(np.einsum("ij,ij->i", q, q)) * STEP
        norms[s : s + _CHUNK, 1] = np.sqrt(np.einsum("ij,ij->i", x, x))
        codes[s : s + _CHUNK] = q + 128
    norms *= 1 + 1e-12  # above any rounding of the sums (≈ d · 2⁻⁵³ relative)
    return codes, norms


def block_rows(queries: int, most: int) -> int:
    """Stored rows per int8 product with ``queries`` new rows: about :data:`PRODUCT_CELLS`
    cells, at least 256 rows and at most ``most``."""
    return min(most, max(256, PRODUCT_CELLS // max(1, queries)))


def codes_of(codes: np.ndarray) -> np.ndarray:
    """``(d, k) int8``: the signed codes of ``codes`` (``(k, d) uint8``, ``q + 128``), as the
    right side of an :class:`Int8Product` (contiguous)."""
    return np.ascontiguousarray((codes ^ np.uint8(0x80)).view(np.int8).T)


def floors(norms: np.ndarray, block_norms: np.ndarray, floor: float) -> np.ndarray:
    """``(k,) int32``: for each row of ``norms`` (``(k, 2)`` of :func:`quantize`), the least
    integer product with *any* row of a block that can mean cosine ≥ ``floor`` (in [-1, 1]):
    ``ceil((floor − slack) / STEP²)``, the slack taken with the block's largest ``‖ŷ‖`` and
    ``‖e_y‖`` (``block_norms``: ``(m, 2)`` of :func:`quantize`), so it holds for each pair.
    A pair whose product is below its row's value is below ``floor``."""
    big_n, big_e = block_norms.max(axis=0)
    slack = norms[:, 0] * big_e + norms[:, 1] * big_n + norms[:, 1] * big_e
    low = np.ceil((floor - slack) / STEP**2)
    return np.clip(low, -(2**31), 2**31 - 1).astype(np.int32)


class CachedCodes:
    """Codes of a pass's store rows, kept from an earlier pass (:mod:`.rowcache`), with the
    product that multiplies them.

    ``codes``: ``(m, d) uint8`` and ``norms``: ``(m, 2) float64`` of :func:`quantize` (of
    *unit* rows), read-only; ``pos``: ``(n,) int64``, row ``i`` of the pass is ``codes[pos[i]]``;
    ``product``: an :class:`Int8Product`. :meth:`block` is a view when the block's rows lie in
    order (one slice), else a gathered copy."""

    def __init__(
        self, codes: np.ndarray, norms: np.ndarray, pos: np.ndarray, product: Int8Product
    ) -> None:
        if codes.ndim != 2 or norms.shape != (len(codes), 2) or pos.ndim != 1:
            raise ValueError(f"codes {codes.shape} and norms {norms.shape} do not fit")
        self.codes, self.norms, self.pos, self.product = codes, norms, pos, product

    def block(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """``(codes, norms)`` of rows ``start : stop``: ``(stop − start, d) uint8`` and
        ``(stop − start, 2) float64``."""
        at = kept_at(self.pos, start, stop)
        return self.codes[at], self.norms[at]


def kept_at(pos: np.ndarray, start: int, stop: int) -> slice | np.ndarray:
    """Where rows ``start : stop`` of a pass lie in a kept array whose row ``pos[i]`` is the
    pass's row ``i`` (``pos``: ``(n,) int64``): one slice when they lie in order (a view, no
    copy), else their positions (a gather)."""
    p = pos[start:stop]
    first = int(p[0])
    if int(p[-1]) - first == len(p) - 1 and np.array_equal(p, np.arange(first, first + len(p))):
        return slice(first, first + len(p))
    return p
