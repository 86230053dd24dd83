"""The approximate (faiss IVF) candidate search finds what the exact product finds on planted
duplicates — including a cluster larger than one cell — nothing else, and the same pairs on
every run, with its tiles bounded in float32 or by an int8 product."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from consolidation import MemoryRecord, Policy
from consolidation.adapters.int8_product import int8_product
from consolidation.planning import RowCache, candidate_pairs, plan
from consolidation.planning.ann import ann_candidate_pairs
from consolidation.planning.ranking import top_columns


def _store(n: int = 6000, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 384)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    for b, d in zip(range(0, 600, 2), range(1, 600, 2), strict=True):  # 300 planted pairs
        noise = rng.standard_normal(384).astype(np.float32)
        noise -= noise.dot(x[b]) * x[b]
        x[d] = 0.95 * x[b] + np.sqrt(1 - 0.95**2) * noise / np.linalg.norm(noise)
    centre = x[1000]
    for m in range(1001, 1041):  # one cluster of 41 (larger than a cell of ≈ 20 rows)
        noise = rng.standard_normal(384).astype(np.float32)
        noise -= noise.dot(centre) * centre
        x[m] = 0.97 * centre + np.sqrt(1 - 0.97**2) * noise / np.linalg.norm(noise)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _pairs(found: tuple[np.ndarray, np.ndarray, np.ndarray]) -> set[tuple[int, int]]:
    return set(zip(found[0].tolist(), found[1].tolist(), strict=True))


def test_ann_pairs_are_exact_pairs_with_recall_of_at_least_99_percent():
    x = _store()
    exact = _pairs(candidate_pairs(x, 0.85, method="exact"))
    ai, aj, asim = found = candidate_pairs(x, 0.85, method="ann")
    ann = _pairs(found)
    assert len(exact) >= 300 + 41 * 40 // 2
    assert ann <= exact  # never a false pair
    planted = {(b, b + 1) for b in range(0, 600, 2)}
    assert len(ann & planted) / len(planted) >= 0.99
    assert len(ann - planted) / len(exact - planted) >= 0.99  # the cluster, across cells
    assert np.all(asim >= 0.85) and np.all(ai < aj)
    order = np.lexsort((aj, ai))
    assert np.array_equal(order, np.arange(len(ai)))  # sorted by (i, j)


def test_ann_gives_the_same_pairs_on_every_run():
    x = _store(seed=5)
    first = ann_candidate_pairs(x, 0.75)
    again = ann_candidate_pairs(x.copy(), 0.75)
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a, b)
    one_worker = ann_candidate_pairs(x, 0.75, threads=1)
    assert all(np.array_equal(a, b) for a, b in zip(first, one_worker, strict=True))


def test_ann_query_rows_find_their_partners_and_only_pairs_touching_them():
    x = _store()
    query = np.arange(1, 600, 2)  # the planted second halves
    i, j, _ = ann_candidate_pairs(x, 0.9, query=query)
    found = set(zip(i.tolist(), j.tolist(), strict=True))
    assert sum((b, b + 1) in found for b in range(0, 600, 2)) >= 297
    qset = set(query.tolist())
    assert all(a in qset or b in qset for a, b in found)


def test_ann_on_tiny_or_bad_input():
    one = np.ones((1, 384), np.float32)
    assert all(len(a) == 0 for a in ann_candidate_pairs(one, 0.5))
    twins = np.ones((2, 384), np.float32) / np.sqrt(384)
    i, j, s = ann_candidate_pairs(twins, 0.5)
    assert (i.tolist(), j.tolist()) == ([0], [1]) and s[0] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="probes"):
        ann_candidate_pairs(twins, 0.5, probes=0)


@pytest.mark.parametrize("q8", [False, True], ids=["float32", "int8"])
def test_ann_finds_98_percent_of_pairs_just_above_the_threshold(q8):
    """Pairs at cosine 0.78 (just above the 0.75 search threshold) among 24K random
    rows — the hardest case, no cluster to help — are found as the exact product finds them,
    with cells ranked by float32 products or by the rows' int8 codes, and no false pair."""
    rng = np.random.default_rng(11)
    n, per = 24_000, 600
    x = rng.standard_normal((n, 384), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    base, dup = np.arange(0, 2 * per, 2), np.arange(1, 2 * per, 2)
    noise = rng.standard_normal((per, 384), dtype=np.float32)
    noise -= (noise * x[base]).sum(1, keepdims=True) * x[base]
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    x[dup] = 0.78 * x[base] + np.sqrt(1 - 0.78**2) * noise
    x[dup] /= np.linalg.norm(x[dup], axis=1, keepdims=True)
    found = _pairs(candidate_pairs(x, 0.75, method="ann", product=int8_product() if q8 else None))
    planted = set(zip(base.tolist(), dup.tolist(), strict=True))
    assert len(found & planted) / per >= 0.98
    assert found <= _pairs(candidate_pairs(x, 0.75, method="exact"))


@pytest.mark.parametrize("tail_weight", [1.0, 4.0])
def test_ann_probing_every_cell_finds_exactly_the_exact_pairs(tail_weight):
    """With every cell probed nothing is left to approximation: the bound that skips most of
    each tile's product (Cauchy–Schwarz on the coordinates after the head) must drop no pair.
    ``tail_weight`` 4 puts most of each row's length after the head, so the bound is loose and
    tiles take the whole product; 1 is the random rows' case, where the bound passes almost
    nothing."""
    x = _store(n=3000)
    x[:, 200:] *= tail_weight
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    for threshold in (0.75, 0.9):
        ei, ej, es = candidate_pairs(x, threshold, method="exact")
        ai, aj, asim = ann_candidate_pairs(x, threshold, probes=100_000)
        assert len(ei) >= 300
        assert (ai.tolist(), aj.tolist()) == (ei.tolist(), ej.tolist())
        assert np.allclose(asim, es, atol=1e-6)


def _spiky(n: int = 3000) -> np.ndarray:
    """Rows with a few coordinates past the int8 coding range (±0.248, clipped) and planted
    pairs among them: the codes' error term must cover what clipping loses."""
    x = _store(n=n, seed=9)
    x[:400, :3] += 0.6  # the first 400 rows (200 planted pairs) share three large coordinates
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("case", ["random", "loose", "spiky"])
def test_the_int8_index_with_every_cell_probed_finds_exactly_the_exact_pairs(case):
    """With an int8 product the index's tiles are bounded by the rows' int8 codes
    (:mod:`consolidation.planning.quantized`) instead of the float32 head and rest, and its
    probe ranks cells by them. With every cell probed nothing is left to the ranking: the
    bound must drop no pair, on random rows, on rows whose bound is loose (dense tiles: the
    float32 product is taken) and on rows with clipped coordinates."""
    product = int8_product()
    x = {"random": _store(), "loose": _store(n=3000), "spiky": _spiky()}[case]
    if case == "loose":
        x[:, 200:] *= 4.0
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    for threshold in (0.75, 0.9):
        ei, ej, es = candidate_pairs(x, threshold, method="exact")
        ai, aj, asim = ann_candidate_pairs(x, threshold, probes=100_000, product=product)
        assert len(ei) >= 200
        assert (ai.tolist(), aj.tolist()) == (ei.tolist(), ej.tolist())
        assert np.allclose(asim, es, atol=1e-6)


def test_a_full_pass_given_the_console_row_cache_plans_as_one_without():
    """The engine hands the RowCache's product to the index (``plan(rows=...)``): the plan is
    the plan without it."""
    x = _store(n=2000, seed=4)
    rng = np.random.default_rng(4)
    words = [
        "apple",
        "river",
        "stone",
        "cloud",
        "garden",
        "violin",
        "harbor",
        "lantern",
        "meadow",
        "copper",
        "falcon",
    ]
    texts = [" ".join(rng.choice(words, 6)) for _ in range(len(x))]
    for b in range(0, 600, 2):  # the planted pairs' texts agree: one adds a word
        texts[b + 1] = f"{texts[b]} indeed"
    now = datetime(2026, 3, 1, tzinfo=UTC)
    records = [
        MemoryRecord(
            f"m{i:05d}",
            texts[i],
            x[i],
            {"created_at": (now - timedelta(days=1 + i % 30)).isoformat()},
        )
        for i in range(len(x))
    ]
    policy = Policy(trim_to_guard=False)
    plain = plan(records, policy, now=now, candidate_method="ann")
    calls = []

    def product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        calls.append(a.shape)
        return int8_product()(a, b, out)

    coded = plan(records, policy, now=now, candidate_method="ann", rows=RowCache(product=product))
    assert calls  # the index ran on the codes
    assert plain.context["candidates"]["similar_pairs"] >= 300
    assert [op.to_dict() for op in coded.operations] == [op.to_dict() for op in plain.operations]


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_each_row_probes_its_most_similar_cells_as_a_full_ranking_would(dtype):
    """The probe ranks a sample of the cells first, then only the cells that reach its cut: the
    cells it picks hold the same similarities as a full ranking's (ties taken either way), the
    home cell is the first most similar one, and a row whose sample holds its best cells (so
    too few reach the cut) is ranked whole."""
    rng = np.random.default_rng(5)
    sims = (rng.standard_normal((300, 2000)) * 1000).astype(dtype)
    sims[:20, ::8] += 10_000  # these rows' sampled columns are their best: 250 of them
    sims[20:40, ::8] = 5_000  # and these tie on them
    sims[40:60] = rng.integers(0, 4, (20, 2000)).astype(dtype)  # ties everywhere
    sims[60:62] = 7  # a degenerate row: every cell ties (ranked whole)
    top, best = top_columns(sims, 96)
    full = np.argpartition(sims, -96, axis=1)[:, -96:]
    got = np.sort(np.take_along_axis(sims, top, axis=1), axis=1)
    want = np.sort(np.take_along_axis(sims, full, axis=1), axis=1)
    assert np.array_equal(got, want)
    assert all(len(set(row)) == 96 for row in top.tolist())  # 96 distinct cells a row
    assert np.array_equal(best, sims.argmax(axis=1))
