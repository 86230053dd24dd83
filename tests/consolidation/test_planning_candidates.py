"""Candidate search returns exactly the pairs above the threshold, whatever the method."""

from __future__ import annotations

import numpy as np
import pytest

from consolidation.planning import candidate_pairs, normalize_rows

from ._vectors import random_unit


def _planted(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = random_unit(rng, n)
    for k in range(n // 10):
        a, b = rng.integers(0, n, 2)
        x[b] = x[a] + rng.standard_normal(x.shape[1]).astype(np.float32) * (0.01 * (k % 9))
    return normalize_rows(x)


def _brute(x: np.ndarray, t: float, query=None) -> set[tuple[int, int]]:
    s = x @ x.T
    i, j = np.nonzero(np.triu(s >= t, 1))
    pairs = set(zip(i.tolist(), j.tolist(), strict=True))
    if query is not None:
        q = set(query.tolist())
        pairs = {p for p in pairs if p[0] in q or p[1] in q}
    return pairs


@pytest.mark.parametrize("method", ["exact", "split", "auto"])
@pytest.mark.parametrize(
    ("n", "block", "threshold"), [(700, 128, 0.75), (700, 256, 0.9), (33, 8, 0.5)]
)
def test_it_finds_every_pair_above_threshold(method, n, block, threshold):
    x = _planted(n, seed=n)
    i, j, s = candidate_pairs(x, threshold, method=method, block=block)
    assert set(zip(i.tolist(), j.tolist(), strict=True)) == _brute(x, threshold)
    assert np.all(i < j) and np.all(s >= threshold)
    np.testing.assert_allclose(s, np.einsum("ij,ij->i", x[i], x[j]), rtol=0, atol=1e-6)


@pytest.mark.parametrize("method", ["exact", "split"])
def test_it_searches_only_query_rows_against_the_store(method):
    x = _planted(900, seed=3)
    query = np.arange(0, 900, 7)
    i, j, _ = candidate_pairs(x, 0.75, query=query, method=method, block=200)
    assert set(zip(i.tolist(), j.tolist(), strict=True)) == _brute(x, 0.75, query)


@pytest.mark.parametrize("n", [0, 1])
def test_it_handles_tiny_inputs(n):
    i, j, s = candidate_pairs(np.zeros((n, 384), np.float32), 0.5)
    assert len(i) == len(j) == len(s) == 0


@pytest.mark.parametrize(
    ("arg", "kw"), [(np.zeros(384), {}), (np.zeros((3, 384)), {"method": "lsh"})]
)
def test_it_rejects_bad_input(arg, kw):
    with pytest.raises(ValueError):
        candidate_pairs(arg, 0.5, **kw)
