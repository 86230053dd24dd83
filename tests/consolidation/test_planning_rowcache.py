"""The stored rows' bounding rows kept between incremental passes (:class:`RowCache`).

The cache only changes where an incremental search reads its bound from: the pairs, their
similarities and so the plans must be those of a search without it, pass after pass, while
memories are added (with ids between the old ones, so blocks are gathered, not sliced),
edited (same id, another text and vector), deleted (until the slab is compacted), and when
two memories share a content hash. Stores are clustered, so some tiles' bound is weak and
read the rows themselves, and marked texts give the update channel work (its flags are kept
beside the rows). Each test runs with the float32 bounding rows and with the int8 codes of a
cache given onnxruntime's product (:mod:`consolidation.planning.quantized`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from consolidation import MemoryRecord, Policy
from consolidation.adapters.int8_product import int8_product
from consolidation.planning import FeatureCache, RowCache, plan
from consolidation.planning.rowcache import SPREADS, KeptCodes
from consolidation.planning.vectors import UnitRows, bound_head, query_pairs

from ._texts import UPDATE_TEXTS

NOW = datetime(2026, 3, 1, tzinfo=UTC)
TEXTS = [
    *UPDATE_TEXTS,
    "Le chat dort sur le canapé rouge.",
    "Die Katze schläft auf dem roten Sofa.",
]


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    """``(n, 384) float32`` rows near ``centres`` (cosines to a centre ≈ 0.6–0.95), not unit
    length (the planner normalises them)."""
    c = centres[rng.integers(0, len(centres), n)]
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    v = c + rng.uniform(0.2, 0.9, (n, 1)) * rng.standard_normal((n, 384)) / 19.6
    return (v * rng.uniform(0.5, 2.0, (n, 1))).astype(np.float32)


def memory(rng: np.random.Generator, mid: str, vec: np.ndarray) -> MemoryRecord:
    text = TEXTS[int(rng.integers(0, len(TEXTS)))]
    return MemoryRecord(
        mid,
        text if rng.random() < 0.6 else f"{text} ({mid})",
        vec,
        {"created_at": (NOW - timedelta(days=int(rng.integers(1, 90)))).isoformat()},
    )


def ops(p) -> list[str]:
    return sorted(repr(op.to_dict()) for op in p.operations)


KINDS = pytest.mark.parametrize("product", [None, int8_product()], ids=["float32", "int8"])


@KINDS
@pytest.mark.parametrize("threshold", [0.75, 0.9])
def test_the_search_finds_the_same_pairs_from_kept_rows_as_from_the_vectors(threshold, product):
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((600, 384))  # ~5 a cluster: most tiles' bound is tight
    x = clustered(rng, 3000, centres)
    hashes = [f"h{i}" for i in range(len(x))]
    hashes[11] = hashes[10]  # two memories of one content: a kept row each
    ids = [f"m{i}" for i in range(len(x))]
    cache = RowCache(product=product)
    old = UnitRows(list(x[:2500]))
    assert cache.bounds(old, ids[:2500], hashes[:2500], threshold) is not None
    # the pass's order interleaves the new rows with the kept ones: gathered blocks
    order = rng.permutation(len(x))
    rows = UnitRows([x[i] for i in order])
    kept = cache.bounds(rows, [ids[i] for i in order], [hashes[i] for i in order], threshold)
    assert kept is not None
    if product is None:
        assert kept.head == bound_head(threshold, 384, SPREADS)
    else:
        assert isinstance(kept, KeptCodes)
    assert len(cache) == 3000  # the 500 new rows were added
    query = np.flatnonzero(order >= 2500)
    plain = query_pairs(UnitRows([x[i] for i in order]), threshold, query, block=256)
    with_kept = query_pairs(rows, threshold, query, block=256, bounds=kept)
    assert len(plain[0]) > 100  # clustered: the new rows have partners
    for a, b in zip(plain, with_kept, strict=True):
        np.testing.assert_array_equal(a, b)  # same pairs, same float32 similarities


@KINDS
def test_a_weak_bound_reads_the_rows_and_a_dense_tile_keeps_the_nearest_only(product):
    rng = np.random.default_rng(3)
    x = clustered(rng, 1200, rng.standard_normal((2, 384)))  # two tight clusters: dense
    rows = UnitRows(list(x))
    kept = RowCache(product=product).bounds(
        rows, [f"m{i}" for i in range(len(x))], ["h"] * len(x), 0.75
    )
    query = np.arange(1000, 1200)
    stats: dict[str, int] = {}
    got = query_pairs(rows, 0.75, query, per_row=8, stats=stats, bounds=kept)
    want = query_pairs(UnitRows(list(x)), 0.75, query, per_row=8, stats={})
    assert stats["over"] > 0  # memories with more than 8 partners: the bounded path ran
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)


@KINDS
def test_passes_with_kept_rows_plan_as_passes_without_while_the_store_changes(product):
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((200, 384))  # small clusters: tight bounds, some pairs
    store = {
        f"m{i:05d}": memory(rng, f"m{i:05d}", v) for i, v in enumerate(clustered(rng, 900, centres))
    }
    policy = Policy(trim_to_guard=False)
    rows, features = RowCache(product=product), FeatureCache()
    checkpoint = {mid: r.content_hash for mid, r in store.items()}
    held = []
    for step in range(4):
        # new memories, ids between the old ones; an edit (same id, other text and vector);
        # deletions; a copy of a stored memory's content under another id
        ids = sorted(store)
        for k, v in enumerate(clustered(rng, 60, centres)):
            mid = f"{ids[int(rng.integers(0, len(ids)))]}-{step}-{k}"
            store[mid] = memory(rng, mid, v)
        edited = ids[int(rng.integers(0, len(ids)))]
        store[edited] = memory(rng, edited, clustered(rng, 1, centres)[0])
        for mid in rng.choice(ids, 150, replace=False).tolist():
            if mid != edited:
                del store[mid]
        twin = store[sorted(store)[0]]
        store[f"twin-{step}"] = MemoryRecord(
            f"twin-{step}", twin.document, twin.embedding.copy(), dict(twin.metadata)
        )
        records = list(store.values())
        without = plan(records, policy, now=NOW, checkpoint=checkpoint)
        cached = plan(records, policy, now=NOW, checkpoint=checkpoint, features=features, rows=rows)
        assert ops(cached) == ops(without)
        assert cached.context["candidates"] == without.context["candidates"]
        assert without.context["candidates"]["similar_pairs"] > 0
        held.append(len(rows))
        checkpoint = {mid: r.content_hash for mid, r in store.items()}
    assert without.context["candidates"]["update_pairs"] > 0  # the flags' channel had work
    # every pass kept its new rows, and deletions never let the slab pass twice the store
    assert held[0] >= len(store) - 200 and max(held) <= 2 * max(len(store), 1) + 60


def blocks(kept) -> list[np.ndarray]:
    got = kept.block(0, 400)
    return list(got) if isinstance(got, tuple) else [got]


@KINDS
def test_a_pass_reads_the_kept_rows_instead_of_computing_them_again(product):
    rng = np.random.default_rng(5)
    x = clustered(rng, 400, rng.standard_normal((10, 384)))
    cache = RowCache(product=product)
    ids, hashes = [f"m{i}" for i in range(len(x))], [f"h{i}" for i in range(len(x))]
    first = cache.bounds(UnitRows(list(x)), ids, hashes, 0.75)
    # the same contents with other vectors: a kept row is read, not computed from these
    again = cache.bounds(UnitRows(list(-x)), ids, hashes, 0.75)
    assert first is not None and again is not None
    for a, b in zip(blocks(first), blocks(again), strict=True):
        np.testing.assert_array_equal(a, b)
    assert cache.clear() == 400 and len(cache) == 0
    fresh = cache.bounds(UnitRows(list(-x)), ids, hashes, 0.75)
    assert fresh is not None
    assert not np.array_equal(blocks(fresh)[0], blocks(first)[0])


def test_bad_input_is_refused_and_a_store_too_large_is_not_kept():
    with pytest.raises(ValueError, match="max_rows"):
        RowCache(max_rows=0)
    rows = UnitRows([np.ones(384, np.float32)] * 3)
    with pytest.raises(ValueError, match="3 rows"):
        RowCache().bounds(rows, ["a", "b", "c"], ["a", "b"], 0.75)
    small = RowCache(max_rows=2)
    assert small.bounds(rows, ["a", "b", "c"], ["a", "b", "c"], 0.75) is None and len(small) == 0
