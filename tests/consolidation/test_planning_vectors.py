"""The planner's embedding rows: no normalised copy where none is needed, the same
pairs, similarities and plans as the normalised matrix, and the caller's vectors untouched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from consolidation import MemoryRecord, OpKind, Policy
from consolidation.planning import candidate_pairs, normalize_rows, plan
from consolidation.planning.vectors import UnitRows, query_pairs

from ._vectors import random_unit

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _settled(x: np.ndarray) -> np.ndarray:
    """The rows of ``x`` that normalising leaves bit for bit as they are (after a few rounds)."""
    for _ in range(4):
        x = normalize_rows(x)
    return np.ascontiguousarray(x[(normalize_rows(x) == x).all(axis=1)])


def _clustered(n: int, seed: int, scale: bool) -> np.ndarray:
    """Rows around a few centres (so many pairs pass any bound), optionally not unit length."""
    rng = np.random.default_rng(seed)
    centres = random_unit(rng, 5)
    x = centres[rng.integers(0, 5, n)] + 0.3 * random_unit(rng, n)
    if scale:
        x *= rng.uniform(0.5, 2.0, (n, 1)).astype(np.float32)
    return x.astype(np.float32)


@pytest.mark.parametrize(
    ("clustered", "block", "threshold"),
    [(False, 64, 0.75), (False, 4096, 0.55), (True, 100, 0.75), (True, 100, 0.55)],
)
def test_it_finds_the_pairs_and_similarities_of_the_normalised_matrix(clustered, block, threshold):
    """At the link threshold and at the update channel's floor (a different bounding head)."""
    rng = np.random.default_rng(5)
    if clustered:
        x = _clustered(600, seed=5, scale=True)
    else:
        x = random_unit(rng, 600) * rng.uniform(0.5, 2.0, (600, 1)).astype(np.float32)
        x[300:] = x[:300] * 1.5 + 0.02 * random_unit(rng, 300)  # planted near-duplicates
    query = np.arange(0, 600, 9)
    want = candidate_pairs(normalize_rows(x), threshold, query=query, method="exact")
    got = query_pairs(UnitRows(list(x)), threshold, query, block=block)
    assert len(want[0]) > 10
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)  # the same bits, not just close


def test_it_reads_a_settled_matrix_in_place_without_writing_it():
    x = _settled(random_unit(np.random.default_rng(1), 300))
    before = x.copy()
    rows = UnitRows([x[i] for i in range(len(x))])
    m = rows.matrix()
    assert np.shares_memory(m, x) and not m.flags.writeable
    assert np.array_equal(m, normalize_rows(x)) and np.array_equal(x, before)


def test_it_normalises_a_copy_when_the_rows_change():
    x = _clustered(200, seed=2, scale=True)
    before = x.copy()
    rows = UnitRows([x[i] for i in range(len(x))])
    unit = normalize_rows(x)
    assert np.array_equal(rows[7], unit[7]) and np.array_equal(rows[[3, 1, 3]], unit[[3, 1, 3]])
    m = rows.matrix()
    assert not np.shares_memory(m, x) and np.array_equal(m, unit) and np.array_equal(x, before)


def _store(x: np.ndarray, *, shared: bool) -> list[MemoryRecord]:
    texts = ["Alice likes jazz", "Bob lives in Paris", "Carol has 2 cats", "Dan hired Eve"]
    out = []
    for i in range(len(x)):
        layer = "semantic" if i % 3 == 0 else "episodic"
        meta = {
            "created_at": (NOW - timedelta(days=i)).isoformat(),
            "session": f"s{i % 4}",
            "layer": layer,
            "evidence": [f"D{i % 4}:{i // 3}"],
        }
        text = texts[i % 4] + ("!" if i % 2 else "") if i < 40 else f"Note {i} on topic {i % 7}"
        out.append(MemoryRecord(f"m{i:04d}", text, x[i] if shared else x[i].copy(), meta))
    return out


def _canon(p) -> dict:
    d = p.to_dict()
    d["context"].pop("timings")
    d["result"]["context"].pop("timings", None)
    return d


@pytest.mark.parametrize("settle", [False, True])
def test_it_plans_the_same_whether_the_vectors_share_one_matrix_or_not(settle):
    x = _clustered(120, seed=3, scale=not settle)
    if settle:
        x = _settled(x)
    shared, copied = _store(x, shared=True), _store(x, shared=False)
    checkpoint = {r.id: r.content_hash for r in shared[::2]}
    full = _canon(plan(shared, Policy(), now=NOW))
    assert full["operations"] and full == _canon(plan(copied, Policy(), now=NOW))
    everything_new = _canon(plan(shared, Policy(), now=NOW, checkpoint={}))
    assert everything_new["operations"] == full["operations"]
    incr = _canon(plan(shared, Policy(), now=NOW, checkpoint=checkpoint))
    assert incr["operations"] and incr == _canon(
        plan(copied, Policy(), now=NOW, checkpoint=checkpoint)
    )


def test_it_folds_a_new_turn_into_an_old_fact_that_cites_it():
    x = random_unit(np.random.default_rng(4), 2)
    ev = {"created_at": NOW.isoformat(), "session": "s1"}
    fact = MemoryRecord(
        "f", "Alice adopted a cat.", x[0], ev | {"layer": "semantic", "evidence": ["D1:1"]}
    )
    turn = MemoryRecord(
        "t",
        "Alice: I adopted a cat named Tom!",
        x[1],
        ev | {"layer": "episodic", "evidence": ["D1:1"]},
    )
    p = plan(
        [fact, turn], Policy(trim_to_guard=False), now=NOW, checkpoint={"f": fact.content_hash}
    )
    (op,) = p.operations
    assert op.kind == OpKind.MERGE and op.rule == "evidence_fold"
    assert op.source_ids == ["f", "t"] and "Tom" in op.result_document
