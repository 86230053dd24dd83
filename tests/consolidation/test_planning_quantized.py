"""The int8 codes of unit rows (:mod:`consolidation.planning.quantized`) and the product that
multiplies them (onnxruntime's, :mod:`consolidation.adapters.int8_product`).

What a user would notice if these broke: an incremental pass that misses a pair a full search
finds (the bound is below a pair's cosine), or a worker whose product dies after django-q2
forks it. So: the product is exact integer arithmetic, including the codes' extremes; the
bound holds for every pair, including rows with coordinates past the coding range (clipped)
and pairs a hair above the floor; a forked child multiplies as the parent does.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from consolidation.adapters.int8_product import int8_product
from consolidation.planning.quantized import (
    STEP,
    block_rows,
    codes_of,
    floors,
    quantize,
)


def unit(rng: np.random.Generator, n: int, d: int = 384) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def towards(rng: np.random.Generator, base: np.ndarray, cos: float) -> np.ndarray:
    """``(len(base), d) float32`` unit rows at cosine ``cos`` to each row of ``base``."""
    noise = rng.standard_normal(base.shape)
    noise -= (noise * base).sum(1, keepdims=True) * base
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    out = (cos * base + np.sqrt(1 - cos**2) * noise).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_the_product_is_exact_integer_arithmetic_at_the_codes_extremes():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (300, 384), dtype=np.uint8)
    a[0] = 0  # −128 after the zero point: the most negative left value
    a[1] = 255
    b = rng.integers(-127, 128, (384, 70), dtype=np.int8)
    b[:, 0] = -127
    b[:, 1] = 127
    got = int8_product()(a, b)
    want = (a.astype(np.int64) - 128) @ b.astype(np.int64)
    assert got.dtype == np.int32 and got.shape == (300, 70)
    np.testing.assert_array_equal(got, want)
    out = np.full((300, 70), 7, np.int32)  # a caller's own memory: written in place
    assert int8_product()(a, b, out) is out
    np.testing.assert_array_equal(out, want)
    with pytest.raises(ValueError, match="shape"):
        int8_product()(a, b, np.empty((70, 300), np.int32))


def test_codes_round_trip_and_the_error_norm_is_the_coding_error():
    rng = np.random.default_rng(1)
    x = unit(rng, 50)
    x[0, 3] = 0.9  # past ±127·STEP: clipped, and its error says so
    x[0] /= np.linalg.norm(x[0])
    codes, norms = quantize(x)
    q = codes_of(codes).T.astype(np.float64)
    assert q.min() >= -127 and q.max() <= 127
    err = np.linalg.norm(x.astype(np.float64) - q * STEP, axis=1)
    assert (norms[:, 1] >= err).all() and np.allclose(norms[:, 1], err, rtol=1e-12)
    assert norms[0, 1] > 0.3 and norms[1:, 1].max() < 0.02  # only the clipped row is far off


def test_the_bound_holds_for_every_pair_at_the_floor_and_for_clipped_rows():
    rng = np.random.default_rng(2)
    base = unit(rng, 400)
    near = np.concatenate(
        [
            towards(rng, base[:100], 0.7501),  # a hair above a 0.75 floor
            towards(rng, base[100:200], 0.76),
            towards(rng, base[200:300], 0.95),
            towards(rng, base[300:], 0.3),
        ]
    )
    spiky = unit(rng, 20)
    spiky[:, :4] = 0.45  # four coordinates past the coding range: clipped in every row
    spiky /= np.linalg.norm(spiky, axis=1, keepdims=True)
    left = np.concatenate([near, spiky, unit(rng, 80)])
    right = np.concatenate([base, spiky[::-1], -spiky[:5]])
    cl, nl = quantize(left)
    cr, nr = quantize(right)
    y = int8_product()(cl, codes_of(cr))  # (left, right)
    exact = left.astype(np.float64) @ right.astype(np.float64).T
    floor = 0.75
    low = floors(nr, nl, floor)  # each right row's least product with any left row
    reach = exact >= floor
    assert reach.sum() >= 300  # the planted pairs reach the floor, and the spiky ones
    assert (y[reach] >= np.broadcast_to(low, y.shape)[reach]).all()  # none is missed
    # the bound is tight enough to matter: random pairs stay well under it
    assert (y >= low).sum() <= reach.sum() + 120


def test_blocks_aim_at_a_product_that_stays_in_the_cache():
    assert block_rows(1000, 4096) == 1048
    assert block_rows(10, 4096) == 4096 and block_rows(100_000, 4096) == 256
    assert block_rows(1000, 128) == 128


def test_a_forked_child_multiplies_as_the_parent_does():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (64, 384), dtype=np.uint8)
    b = rng.integers(-127, 128, (384, 8), dtype=np.int8)
    product = int8_product()
    parent = product(a, b)  # the session exists before the fork, as in a django-q2 worker
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new session, the same numbers
        code = 1
        try:
            os.write(write, pickle.dumps(product(a, b)))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = pickle.loads(pipe.read())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    np.testing.assert_array_equal(child, parent)
