"""A plan is the same with a cold, a warm or no feature cache, in full and incremental passes.

The cache (:class:`~consolidation.planning.FeatureCache`) only changes how the update channel
finds its pairs: with every stored row known, a new unmarked memory is compared with the marked
stored rows only. Stores here mix marked and unmarked texts at cosines around the channel's
floor, in clusters, so new rows have update partners, marked and not.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from consolidation import MemoryRecord, Policy
from consolidation.planning import FeatureCache, plan
from consolidation.planning.features import marked

from ._texts import UPDATE_TEXTS

NOW = datetime(2026, 3, 1, tzinfo=UTC)
TEXTS = UPDATE_TEXTS


def store(seed: int, n: int) -> list[MemoryRecord]:
    """``n`` memories in clusters of one topic: cosines to the cluster's centre near 0.6–0.95."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 6), 384)).astype(np.float32)
    out = []
    for i in range(n):
        c = centres[i % len(centres)]
        v = c / np.linalg.norm(c) + rng.uniform(0.2, 0.9) * rng.standard_normal(384) / 19.6
        text = TEXTS[int(rng.integers(0, len(TEXTS)))]
        out.append(
            MemoryRecord(
                f"m{i:04d}",
                text if i % 3 else f"{text} ({i})",
                (v / np.linalg.norm(v)).astype(np.float32),
                {"created_at": (NOW - timedelta(days=int(rng.integers(1, 90)))).isoformat()},
            )
        )
    return out


def ops(p) -> list[str]:
    return sorted(repr(op.to_dict()) for op in p.operations)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_full_and_incremental_plans_are_the_same_with_a_cold_a_warm_or_no_cache(seed):
    records = store(seed, 120)
    old, new = records[:100], records[100:]
    policy = Policy(trim_to_guard=False)
    cache = FeatureCache()
    assert ops(plan(old, policy, now=NOW, features=cache)) == ops(plan(old, policy, now=NOW))
    assert len(cache) > 0  # the full pass left its texts' features
    checkpoint = {r.id: r.content_hash for r in old}
    without = plan(records, policy, now=NOW, checkpoint=checkpoint)
    warm = plan(records, policy, now=NOW, checkpoint=checkpoint, features=cache)
    cold = plan(records, policy, now=NOW, checkpoint=checkpoint, features=FeatureCache())
    assert ops(warm) == ops(without) == ops(cold)
    assert warm.context["candidates"] == without.context["candidates"]
    assert without.context["candidates"]["update_pairs"] > 0  # the channel had work
    assert any(marked(r.document) for r in new) and not all(marked(r.document) for r in new)


def test_a_full_cache_starts_again_and_refuses_no_room():
    cache = FeatureCache(max_texts=2)
    assert [cache.marked(t) for t in TEXTS[:3]] == [marked(t) for t in TEXTS[:3]]
    assert len(cache) == 1  # the third text found the cache full: it started again
    assert cache.marked_rows(TEXTS, compute_at_most=0) is None
    assert cache.marked_rows(TEXTS) == [i for i, t in enumerate(TEXTS) if marked(t)]
    with pytest.raises(ValueError, match="at least 1"):
        FeatureCache(max_texts=0)
