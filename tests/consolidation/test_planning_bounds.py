"""Bounded planning (planning/nearest.py, planning/templates.py): a dense cluster costs each
memory its nearest partners only, a numbered series is not reconciled against itself, every
bound reached is reported in the plan, and a varied store plans exactly as without bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from consolidation import MemoryRecord, OpKind, Policy
from consolidation.planning import candidate_pairs, grouping, nearest, plan
from consolidation.planning.nearest import bound_pairs

from ._vectors import DIM, basis, random_unit

NOW = datetime(2025, 6, 1, tzinfo=UTC)
POLICY = Policy(trim_to_guard=False)


def day(n: float) -> str:
    return (NOW - timedelta(days=n)).isoformat()


def cluster(rng: np.random.Generator, n: int, axis: int, cos: float = 0.95) -> np.ndarray:
    """``(n, 384)`` unit rows whose pairwise cosine is about ``cos`` (around ``basis(axis)``)."""
    w = np.sqrt(cos)
    noise = random_unit(rng, n)
    x = w * basis(axis)[None, :] + np.sqrt(1 - cos) * noise
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def ops(p) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    return sorted((op.kind.value, tuple(op.source_ids), tuple(op.removes)) for op in p.operations)


def varied_store(seed: int, n: int = 300) -> list[MemoryRecord]:
    """Random facts with planted near-duplicates, value updates (numbers and words), negations
    and two scopes: the shapes the planner decides, few partners a memory."""
    rng = np.random.default_rng(seed)
    x = random_unit(rng, n)
    words = [
        "tea",
        "jazz",
        "Lyon",
        "chess",
        "Porto",
        "sushi",
        "opera",
        "rain",
        "maple",
        "violin",
        "harbor",
        "quartz",
    ]
    texts = [" ".join(rng.choice(words, 6)) for _ in range(n)]
    metas = [{"created_at": day(int(rng.integers(1, 50)))} for _ in range(n)]
    for k in range(0, n - 1, 10):  # near-duplicates, updates, negations, another scope
        x[k + 1] = 0.96 * x[k] + 0.28 * x[(k + 5) % n]
        x[k + 1] /= np.linalg.norm(x[k + 1])
        kind = (k // 10) % 4
        if kind == 0:
            texts[k + 1] = texts[k] + " indeed"
        elif kind == 1:
            texts[k], texts[k + 1] = f"The user weighs {60 + k} kg", f"The user weighs {61 + k} kg"
        elif kind == 2:
            texts[k], texts[k + 1] = f"{texts[k]} is true", f"{texts[k]} is not true"
            del metas[k]["created_at"]  # undated: which one holds is for a person
        else:
            texts[k + 1] = texts[k]
            metas[k + 1]["user_id"] = "bob"
    return [MemoryRecord(f"m{i:04d}", texts[i], x[i], metas[i]) for i in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_varied_store_plans_the_same_with_and_without_the_bound(seed, monkeypatch):
    records = varied_store(seed)
    bounded = plan(records, POLICY, now=NOW)
    monkeypatch.setattr(nearest, "PER_MEMORY", 10**6)
    free = plan(records, POLICY, now=NOW)
    assert ops(bounded) == ops(free)
    kinds = {op.kind for op in bounded.operations}
    assert {OpKind.MERGE, OpKind.RECONCILE, OpKind.CONFLICT} <= kinds
    assert "candidates_per_memory" not in bounded.context["bounds_hit"]
    assert bounded.context["bounds"]["candidates_per_memory"] == 64


def series(n: int, text: str, rng: np.random.Generator) -> list[MemoryRecord]:
    x = cluster(rng, n, axis=0)
    return [
        MemoryRecord(
            f"s{i:04d}",
            text.format(i=i, a=i % 97, b=i % 13, w=70 + i),
            x[i],
            {"created_at": day(n - i)},
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "(note {i}) the user weighs {w} kg",
        "imported memory {i}: the user likes topic {a} and colour {b}",
        "ticket #{i}: the user has {a} open orders",
    ],
)
def test_a_numbered_series_is_not_reconciled_against_itself(text):
    """The number that differs in every line names the line: thirty weights of thirty notes are
    thirty readings, not one weight changed twenty-nine times."""
    rng = np.random.default_rng(7)
    records = series(30, text, rng)
    p = plan(records, POLICY, now=NOW)
    assert not p.by_kind(OpKind.RECONCILE) and not p.by_kind(OpKind.CONFLICT)
    assert not p.by_kind(OpKind.MERGE)
    assert p.context["templates"]["series"] == 1 and p.context["templates"]["members"] == 30
    assert p.context["contradictions"]["checked"] == 0  # nothing of the series judged


def test_a_value_without_a_record_number_is_still_an_update():
    rng = np.random.default_rng(8)
    x = cluster(rng, 2, axis=0, cos=0.97)
    records = [
        MemoryRecord("old", "The user weighs 80 kg", x[0], {"created_at": day(40)}),
        MemoryRecord("new", "The user weighs 82 kg", x[1], {"created_at": day(2)}),
    ]
    p = plan(records, POLICY, now=NOW)
    (op,) = p.by_kind(OpKind.RECONCILE)
    assert op.removes == ["old"]


def test_a_single_number_template_of_readings_is_settled_once():
    """Sixty build times: judged once per kind of difference (the same number, and 1 vs 1,
    1 vs 2, 2 vs 2 digits), all readings of an event, so the search skips their pairs and only
    equal texts are merged (by the exact-duplicate channel)."""
    rng = np.random.default_rng(9)
    n = 60
    x = cluster(rng, n, axis=0, cos=0.93)
    records = [
        MemoryRecord(
            f"b{i:03d}",
            f"the nightly build took {i % 40} minutes",
            x[i],
            {"created_at": day(n - i)},
        )
        for i in range(n)
    ]
    p = plan(records, POLICY, now=NOW)
    assert p.context["templates"]["settled"] == 1 and p.context["templates"]["judged"] == 4
    assert p.context["candidates"]["similar_pairs"] == 0
    merged = [op.source_ids for op in p.by_kind(OpKind.MERGE)]
    assert len(merged) == 20
    assert all(len({records[int(s[1:])].document for s in ids}) == 1 for ids in merged)
    assert not p.by_kind(OpKind.RECONCILE) and not p.by_kind(OpKind.CONFLICT)


def test_a_dense_cluster_is_bounded_and_the_plan_says_so(monkeypatch):
    """Forty alike texts with a bound of 8 partners: the plan keeps each memory's nearest
    pairs only, says it reached the bound, and joins no pair it did not search."""
    monkeypatch.setattr(nearest, "PER_MEMORY", 8)
    rng = np.random.default_rng(10)
    n = 40
    x = cluster(rng, n, axis=0, cos=0.93)
    words = ["tea", "jazz", "chess", "opera", "rain", "maple", "violin", "harbor"]
    records = [
        MemoryRecord(f"c{i:03d}", " ".join(rng.choice(words, 5)), x[i], {"created_at": day(i)})
        for i in range(n)
    ]
    p = plan(records, POLICY, now=NOW)
    hit = p.context["bounds_hit"]["candidates_per_memory"]
    assert hit["memories"] == n and hit["max_candidates"] == n - 1
    assert p.context["bounds"]["candidates_per_memory"] == 8
    searched = p.context["candidates"]["similar_pairs"]
    assert searched <= n * 8 < n * (n - 1) // 2
    full = candidate_pairs(np.stack([r.embedding for r in records]), 0.75, method="exact")
    nearest_pairs = bound_pairs(*full, n, 8)
    kept = {
        (records[a].id, records[b].id)
        for a, b in zip(nearest_pairs[0].tolist(), nearest_pairs[1].tolist(), strict=True)
    }
    for op in p.operations:
        ids = sorted(op.source_ids)
        for x_id in ids:
            for y_id in ids:
                if x_id < y_id and op.kind in (OpKind.MERGE, OpKind.RECONCILE):
                    assert (x_id, y_id) in kept


def test_pairs_past_the_judgment_bound_are_left_as_they_are(monkeypatch):
    """A pass that may judge no pair proposes nothing that needs a judgment, and says why."""
    records = varied_store(4, n=60)
    monkeypatch.setattr(grouping, "JUDGED_FLOOR", 0)
    monkeypatch.setattr(grouping, "JUDGED_PER_MEMORY", 0)
    p = plan(records, POLICY, now=NOW)
    removing = [op for op in p.operations if op.kind in (OpKind.MERGE, OpKind.RECONCILE)]
    assert not removing and not p.by_kind(OpKind.CONFLICT)
    assert p.context["bounds"]["judged_pairs"] == 0
    assert p.context["bounds_hit"]["judged_pairs"]["not_judged"] > 0


@pytest.mark.parametrize("method", ["exact", "split"])
def test_the_bounded_search_keeps_each_rows_nearest_partners(method):
    """Two dense clusters and noise: the bounded search gives exactly the pairs of the full
    search cut to each row's k nearest (ties by index)."""
    rng = np.random.default_rng(5)
    x = np.concatenate(
        [cluster(rng, 300, 0, 0.9), cluster(rng, 200, 1, 0.85), random_unit(rng, 9000)]
    )
    full = candidate_pairs(x, 0.75, method="exact")
    want = bound_pairs(*full, len(x), 8)
    stats: dict[str, int] = {}
    got = bound_pairs(*candidate_pairs(x, 0.75, method=method, per_row=8, stats=stats), len(x), 8)
    assert set(zip(got[0].tolist(), got[1].tolist(), strict=True)) == set(
        zip(want[0].tolist(), want[1].tolist(), strict=True)
    )
    assert stats["over"] == 500 and stats["max_seen"] == 299
    assert len(got[0]) <= 500 * 8


@pytest.mark.parametrize("method", ["exact", "split"])
@pytest.mark.parametrize("block", [2048, 8])
def test_a_series_is_skipped_by_the_search(method, block):
    """Forty rows of one series and ten others, all alike: only the pairs with an end outside
    the series come back, whether the series' tiles are masked or skipped whole."""
    x = cluster(np.random.default_rng(6), 50, 0)
    labels = np.zeros(50, np.int64)
    labels[::5] = -1  # ten rows outside the series, among them
    stats: dict[str, int] = {}
    lo, hi, _ = candidate_pairs(
        x, 0.75, method=method, exclude=labels, stats=stats, block=block, split_dims=DIM // 2
    )
    got = set(zip(lo.tolist(), hi.tolist(), strict=True))
    assert got == {
        (a, b) for a in range(50) for b in range(a + 1, 50) if -1 in (labels[a], labels[b])
    }
    assert stats["excluded"] == 40 * 39 // 2
