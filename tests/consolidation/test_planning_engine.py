"""plan(): each strategy, accounting, determinism, complete linkage, I-6, incremental."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consolidation import Fate, MemoryRecord, OpKind, Plan, content_hash, summarize
from consolidation import Policy as FullPolicy
from consolidation.planning import merge_metadata, plan
from consolidation.plans import merge_result_id, merged_id
from consolidation.text import normalize_text

from ._vectors import at_cosine, basis, random_unit, rotated


def Policy(**fields):  # noqa: N802 - stands in for consolidation.Policy in these tests
    """These tests judge each rule on the full plan; the loss budget (``trim_to_guard``, on by
    default) is tested on its own (test_planning_budget.py and the trim tests below)."""
    return FullPolicy(**{"trim_to_guard": False, **fields})


NOW = datetime(2025, 1, 1, tzinfo=UTC)


def day(n: float) -> str:
    """ISO timestamp ``n`` days before NOW."""
    return (NOW - timedelta(days=n)).isoformat()


def rec(mid: str, text: str, vec: np.ndarray, **meta) -> MemoryRecord:
    return MemoryRecord(mid, text, vec, meta)


def fates_by_kind(p: Plan) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for mid, fate in p.fates.items():
        out.setdefault(fate.value, set()).add(mid)
    return out


def assert_accounted(records, p: Plan) -> None:
    ids = [r.id for r in records]
    assert sorted(p.fates) == sorted(ids)
    removed = [rid for op in p.operations for rid in op.removes]
    assert len(removed) == len(set(removed)), "an id is removed twice"
    for op in p.operations:
        for rid in op.removes:
            expected = {
                OpKind.MERGE: Fate.MERGED,
                OpKind.PRUNE: Fate.PRUNED,
                OpKind.RECONCILE: Fate.SUPERSEDED,
            }[op.kind]
            assert p.fates[rid] == expected
    kept = [i for i, f in p.fates.items() if f == Fate.KEPT]
    assert len(kept) + len(removed) == len(ids)
    r = p.result
    assert r.entries_before == len(ids)
    assert r.retained_originals == len(kept)
    assert r.entries_after == len(kept) + len(p.by_kind(OpKind.MERGE))
    assert r.merged == sum(f == Fate.MERGED for f in p.fates.values())
    assert r.pruned == sum(f == Fate.PRUNED for f in p.fates.values())
    assert p.context["loss_fraction"] == pytest.approx(r.loss_fraction)
    assert summarize(len(ids), p.operations).to_dict()["retained_originals"] == len(kept)


# --- exact and near duplicates --------------------------------------------------------------


def test_it_merges_exact_duplicates_by_normalised_text():
    rng = np.random.default_rng(0)
    v = random_unit(rng, 3)
    records = [
        rec("a", "Alice likes jazz", v[0], created_at=day(3)),
        rec("b", "alice  LIKES jazz!", v[1], created_at=day(2)),
        rec("c", "Bob plays chess", v[2], created_at=day(1)),
    ]
    p = plan(records, Policy(), now=NOW)
    (op,) = p.by_kind(OpKind.MERGE)
    assert op.rule == "exact_duplicate" and op.source_ids == ["a", "b"]
    assert op.result_document.casefold().startswith("alice")
    assert p.fates == {"a": Fate.MERGED, "b": Fate.MERGED, "c": Fate.KEPT}
    assert_accounted(records, p)


@pytest.mark.parametrize(
    ("cos", "merged"), [(0.95, True), (0.91, True), (0.89, False), (0.5, False)]
)
def test_it_merges_near_duplicates_at_the_link_threshold(cos, merged):
    records = [
        rec("a", "Caroline went to an LGBTQ support group on Sunday.", basis(0)),
        rec("b", "On Sunday Caroline attended the LGBTQ support group.", at_cosine(0, cos, 1)),
    ]
    p = plan(records, Policy(link_threshold=0.9), now=NOW)
    ops = p.by_kind(OpKind.MERGE)
    assert bool(ops) is merged
    if merged:
        (op,) = ops
        assert op.rule == "near_duplicate"
        assert op.scores["min_cosine"] == pytest.approx(cos, abs=1e-3)
        assert op.scores["pairwise"][0][1] == pytest.approx(cos, abs=1e-3)
        assert "attended" in op.result_document and "went" in op.result_document


def test_it_uses_complete_linkage_not_chaining():
    theta = math.acos(0.93)  # A~B and B~C at 0.93, A~C at cos(2θ) ≈ 0.73
    records = [
        rec("a", "the first fact, about apples", rotated(0.0)),
        rec("b", "the second fact, about bananas", rotated(theta)),
        rec("c", "the third fact, about cherries", rotated(2 * theta)),
    ]
    p = plan(records, Policy(link_threshold=0.9), now=NOW)
    groups = [set(op.source_ids) for op in p.by_kind(OpKind.MERGE)]
    assert len(groups) == 1 and groups[0] in ({"a", "b"}, {"b", "c"})
    assert {"a", "c"} not in groups and not any({"a", "c"} <= g for g in groups)
    assert_accounted(records, p)


def test_it_bounds_group_size():
    texts = ["Alice likes jazz", "Alice likes jazz a lot", "Alice really likes jazz"]
    records = [rec(f"m{i}", texts[i % 3] + "!" * (i // 3), basis(0)) for i in range(7)]
    p = plan(records, Policy(max_group_size=3), now=NOW)
    sizes = sorted(len(op.source_ids) for op in p.by_kind(OpKind.MERGE))
    assert all(s <= 3 for s in sizes) and sum(sizes) >= 6
    assert_accounted(records, p)


def test_copies_of_one_text_merge_in_one_group_past_max_group_size():
    # split 8 + 7, two identical merged memories stayed: no incremental pass compared them again
    records = [rec(f"m{i:02d}", "Alice likes jazz", basis(0)) for i in range(15)]
    p = plan(records, Policy(max_group_size=3), now=NOW)
    assert [len(op.source_ids) for op in p.by_kind(OpKind.MERGE)] == [15]
    records = [rec(f"m{i:02d}", "Alice likes jazz", basis(0)) for i in range(40)]
    sizes = sorted(len(op.source_ids) for op in plan(records, Policy(), now=NOW).operations)
    assert sizes == [8, 32]  # at most grouping.EXACT_MAX_GROUP copies per merge


def test_it_skips_a_merge_longer_than_max_merged_chars():
    records = [
        rec("a", "Alice likes jazz and blues a lot.", basis(0)),
        rec("b", "Alice enjoys listening to saxophone records.", at_cosine(0, 0.95, 1)),
    ]
    assert plan(records, Policy(max_merged_chars=1000), now=NOW).by_kind(OpKind.MERGE)
    p = plan(records, Policy(max_merged_chars=40), now=NOW)
    assert not p.by_kind(OpKind.MERGE)
    assert set(p.fates.values()) == {Fate.KEPT}


@pytest.mark.parametrize(
    ("metas", "expected"),
    [
        (
            [{"verified": True, "confidence": 0.7}, {"confidence": 0.95}],
            {"verified": True, "confidence": 0.95},
        ),
        (
            [
                {"evidence": ["D1:3", "D1:2"], "access_count": 2},
                {"evidence": "D2:1", "access_count": 3},
            ],
            {"evidence": ["D1:2", "D1:3", "D2:1"], "access_count": 5},
        ),
        (
            [
                {
                    "created_at": "2024-03-01T00:00:00+00:00",
                    "last_accessed_at": "2024-05-01T00:00:00+00:00",
                },
                {
                    "created_at": "2024-01-01T00:00:00+00:00",
                    "last_accessed_at": "2024-04-01T00:00:00+00:00",
                },
            ],
            {
                "created_at": "2024-01-01T00:00:00+00:00",
                "last_accessed_at": "2024-05-01T00:00:00+00:00",
            },
        ),
        (
            [{"importance": 0.2, "tier": "working"}, {"importance": 0.6, "tier": "curated"}],
            {"importance": 0.6, "tier": "curated"},
        ),
        (
            [{"session": "s1", "flag": False}, {"session": ["s2", "s1"], "flag": True}],
            {"session": ["s1", "s2"], "flag": True},
        ),
        ([{"speaker": "Alice"}, {"speaker": "Alice"}], {"speaker": "Alice"}),
        ([{"speaker": "Bob"}, {"speaker": "Alice"}], {"speaker": ["Alice", "Bob"]}),
    ],
)
def test_it_unites_metadata(metas, expected):
    merged = merge_metadata(metas, ["x", "y"])
    for key, value in expected.items():
        assert merged[key] == value
    assert merged["merged_from"] == ["x", "y"]
    for m in metas:
        assert set(m) <= set(merged), "a source key was dropped"


def test_it_writes_united_metadata_into_the_merge():
    records = [
        rec("a", "Alice likes jazz", basis(0), verified=True, confidence=0.7, session="s1"),
        rec("b", "Alice likes jazz.", basis(0), confidence=0.95, session="s2"),
    ]
    (op,) = plan(records, Policy(), now=NOW).by_kind(OpKind.MERGE)
    assert op.result_metadata["verified"] is True
    assert op.result_metadata["confidence"] == 0.95
    assert op.result_metadata["merged_from"] == ["a", "b"]
    assert op.result_metadata["session"] == ["s1", "s2"]
    # the merged text is one source's: that source's record is kept (its id), both are removed
    # as they were (archived; a rollback restores them)
    assert op.result_id == next(r.id for r in records if r.document == op.result_document)
    assert sorted(op.removes) == ["a", "b"]


def test_a_merge_with_a_new_text_gets_a_new_id_and_one_that_keeps_a_text_the_sources_id():
    ids, hashes = ["x", "y", "z"], ["hx", "hy", "hz"]
    assert merge_result_id(ids, hashes, ["A b", "A b c", "A b c"], "A b c") == "y"
    assert merge_result_id(ids, hashes, ["A b", "A c", "B"], "A b and c") == merged_id(ids, hashes)
    assert merged_id(ids, hashes).startswith("m-")
    with pytest.raises(ValueError, match="same length"):
        merge_result_id(ids, hashes, ["A b"], "A b")


# --- contradictions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ("Alice likes jazz", "Alice no longer likes jazz", "past_state"),
        ("Alice likes jazz", "Alice doesn't like jazz", "negation"),
        ("Alice lives in Paris", "Alice lives in Berlin", "changed_value"),
        ("Alice is 30 years old", "Alice is 31 years old", "changed_number"),
    ],
)
def test_it_reconciles_unambiguous_contradictions_newer_wins(old, new, rule):
    records = [
        rec("old", old, basis(0), created_at=day(10)),
        rec("new", new, at_cosine(0, 0.95, 1), created_at=day(1)),
    ]
    p = plan(records, Policy(), now=NOW)
    assert not p.by_kind(OpKind.MERGE)
    (op,) = p.by_kind(OpKind.RECONCILE)
    assert op.source_ids == ["new", "old"] and op.removes == ["old"] and op.rule == rule
    assert rule.replace("_", " ") in op.reason
    assert p.fates == {"new": Fate.KEPT, "old": Fate.SUPERSEDED}
    assert_accounted(records, p)


@pytest.mark.parametrize(
    ("a", "b", "meta_a", "meta_b", "conflict"),
    [
        # a role swap is two facts (both can be true): kept apart, no item
        (
            "Alice hired Bob",
            "Bob hired Alice",
            {"created_at": day(9)},
            {"created_at": day(1)},
            False,
        ),
        # unsure means keep both and ask: an unsure contradiction is a conflict item for a reviewer
        # (was: left alone)
        ("Alice likes jazz", "Alice no longer likes jazz", {}, {}, True),  # no dates
        (
            "Alice likes jazz",
            "Alice no longer likes jazz",
            {"created_at": day(2)},
            {"created_at": day(2)},
            True,
        ),  # same time
    ],
)
def test_it_never_merges_unsure_contradictions_and_asks_about_them(a, b, meta_a, meta_b, conflict):
    records = [rec("a", a, basis(0), **meta_a), rec("b", b, at_cosine(0, 0.97, 1), **meta_b)]
    p = plan(records, Policy(), now=NOW)
    assert [op.kind for op in p.operations] == ([OpKind.CONFLICT] if conflict else [])
    assert all(op.removes == [] for op in p.operations)
    assert set(p.fates.values()) == {Fate.KEPT}


def test_it_merges_the_same_fact_twice():
    records = [
        rec("a", "Alice likes jazz", basis(0), created_at=day(5)),
        rec("b", "Alice likes jazz.", at_cosine(0, 0.99, 1), created_at=day(1)),
    ]
    p = plan(records, Policy(), now=NOW)
    assert [op.kind for op in p.operations] == [OpKind.MERGE]
    assert p.context["contradictions"]["found"] == {}


def test_it_never_supersedes_a_protected_memory():
    records = [
        rec("old", "Alice lives in Paris", basis(0), created_at=day(10), pinned=True),
        rec("new", "Alice lives in Berlin", at_cosine(0, 0.95, 1), created_at=day(1)),
    ]
    p = plan(records, Policy(), now=NOW)
    assert p.context["contradictions"]["blocked_protected"] == 1
    (op,) = p.operations  # unsure means ask: a reviewer decides (was: silently left alone)
    assert op.kind == OpKind.CONFLICT and op.removes == []


# --- I-6, promote, prune ------------------------------------------------------------------


@pytest.mark.parametrize("protect", [{"pinned": True}, {"pinned": "yes"}, {"tier": "curated"}])
def test_it_never_removes_pinned_or_curated(protect):
    records = [
        rec("p", "Alice likes jazz", basis(0), created_at=day(900), importance=0.0, **protect),
        rec("q", "alice likes jazz", basis(0), created_at=day(1)),
    ]
    p = plan(records, Policy(prune_min_age_days=1), now=NOW)
    assert p.fates["p"] == Fate.KEPT
    assert all("p" not in op.removes for op in p.operations)


@pytest.mark.parametrize(
    ("meta", "rule"),
    [
        ({"session": ["s1", "s2", "s3"]}, "sessions"),
        ({"importance": 0.85}, "importance"),
        ({"access_count": 7}, "access"),
        ({"pinned": True, "importance": 0.9}, "importance"),
    ],
)
def test_it_promotes_durable_memories(meta, rule):
    records = [rec("a", "Alice is allergic to peanuts", basis(0), **meta)]
    (op,) = plan(records, Policy(), now=NOW).operations
    assert op.kind == OpKind.PROMOTE and op.rule == rule and op.removes == []
    assert op.result_id == "a" and op.result_metadata["tier"] == "curated"
    assert {k: v for k, v in op.result_metadata.items() if k != "tier"} == meta


@pytest.mark.parametrize(
    "meta",
    [{"session": ["s1", "s2"]}, {"importance": 0.5}, {"tier": "curated", "importance": 0.95}],
)
def test_it_does_not_promote_below_thresholds_or_twice(meta):
    assert (
        plan(
            [rec("a", "Alice is allergic to peanuts", basis(0), **meta)], Policy(), now=NOW
        ).operations
        == []
    )


def test_it_promotes_a_merge_reinforced_across_sessions():
    records = [
        rec("a", "Alice likes jazz", basis(0), session="s1"),
        rec("b", "Alice likes jazz.", basis(0), session="s2"),
        rec("c", "alice likes jazz", basis(0), session=["s3"]),
    ]
    p = plan(records, Policy(promote_min_sessions=3), now=NOW)
    (op,) = p.operations
    assert op.kind == OpKind.MERGE and op.scores["promoted"] is True
    assert op.result_metadata["tier"] == "curated" and p.result.promoted == 1


@pytest.mark.parametrize(
    ("age_days", "importance", "pruned"),
    [
        # age alone never removes a unique memory: age alone prunes only an explicit importance
        # below prune_max_importance (0.3); 0.5 (neutral) was pruned after ~100 days before
        (200, 0.5, False),
        (400, 0.79, False),
        (200, 0.2, True),  # 0.2 × 0.5^(200/30) ≈ 0.0020
        (100, 0.29, True),  # ≈ 0.0287 < 0.05
        (40, 0.1, True),  # ≈ 0.0397
        (30, 0.1, False),  # ≈ 0.05: not below the threshold
        (20, 0.01, False),  # below threshold but younger than the minimum age
        (400, 0.8, False),  # meets the promotion rule: durable, never decayed away
    ],
)
def test_it_prunes_by_decay_score_and_minimum_age(age_days, importance, pruned):
    records = [
        rec("a", "The weather was nice", basis(0), created_at=day(age_days), importance=importance)
    ]
    p = plan(records, Policy(promote=False), now=NOW)
    ops = p.by_kind(OpKind.PRUNE)
    assert bool(ops) is pruned
    if pruned:
        (op,) = ops
        expected = importance * 0.5 ** (age_days / 30)
        assert op.rule == "decay" and op.scores["score"] == pytest.approx(expected, abs=1e-6)
        assert op.scores["age_days"] == pytest.approx(age_days)
        assert op.scores["importance"] == importance


def test_it_never_prunes_without_created_at():
    p = plan([rec("a", "Undated note", basis(0), importance=0.0)], Policy(), now=NOW)
    assert p.operations == []


# --- errors, determinism, telemetry -------------------------------------------------------


def test_it_names_a_record_without_embedding():
    with pytest.raises(ValueError, match="no-vec"):
        plan([rec("a", "x", basis(0)), MemoryRecord("no-vec", "y")], Policy(), now=NOW)


def test_it_rejects_duplicate_ids():
    with pytest.raises(ValueError, match="dup"):
        plan([rec("dup", "x", basis(0)), rec("dup", "y", basis(1))], Policy(), now=NOW)


def test_it_plans_an_empty_store():
    p = plan([], Policy(), now=NOW)
    assert p.operations == [] and p.fates == {} and p.result.loss_fraction == 0.0


def _mixed_store(seed: int) -> list[MemoryRecord]:
    rng = np.random.default_rng(seed)
    vecs = random_unit(rng, 60)
    texts = ["Alice likes jazz", "Bob lives in Paris", "Carol has 2 cats", "Dan hired Eve"]
    out = []
    for i in range(60):
        v = vecs[i]
        text = f"Unrelated memory number {i} about topic {chr(97 + i % 26)}"
        if i < 24:  # near-duplicate families with small noise
            v = vecs[i % 4] + 0.05 * vecs[(i + 7) % 60]
            text = texts[i % 4] + ("." if i % 3 else "")
        out.append(
            rec(
                f"id{i:03d}",
                text,
                v,
                created_at=day(i * 7),
                session=f"s{i % 5}",
                importance=round(float(rng.random()), 2),
                access_count=int(i % 6),
            )
        )
    out.append(rec("z-new", "Alice no longer likes jazz", vecs[0], created_at=day(0)))
    return out


def test_it_is_deterministic_whatever_the_input_order():
    records = _mixed_store(1)
    shuffled = list(records)
    random.Random(7).shuffle(shuffled)
    a = plan(records, Policy(), now=NOW).to_dict()
    b = plan(shuffled, Policy(), now=NOW).to_dict()
    for d in (a, b):
        d["context"].pop("timings")
        d["result"]["context"].pop("timings", None)
    assert a == b
    assert a["operations"], "the fixture should produce operations"


def test_it_reports_timings_and_candidate_counts():
    p = plan(_mixed_store(2), Policy(), now=NOW)
    stages = {
        "prepare",
        "prune",
        "exact",
        "candidates",
        "contradictions",
        "grouping",
        "merge",
        "promote",
        "total",
    }
    assert stages <= set(p.context["timings"])
    assert all(v >= 0 for v in p.context["timings"].values())
    assert {"exact_pairs", "similar_pairs", "link_edges"} <= set(p.context["candidates"])
    assert p.result.context is p.context


def test_it_round_trips_the_plan():
    p = plan(_mixed_store(3), Policy(), now=NOW)
    assert Plan.from_dict(p.to_dict()).to_dict() == p.to_dict()


# --- incremental --------------------------------------------------------------------------


def test_it_compares_only_new_records_against_the_store():
    records = _mixed_store(4)
    full = plan(records, Policy(), now=NOW)
    checkpoint = {r.id: r.content_hash for r in records}
    assert plan(records, Policy(), now=NOW, checkpoint=checkpoint).operations == []
    new = rec("zz-dup", "Bob lives in Paris!", records[1].embedding, created_at=day(0))
    p = plan(records + [new], Policy(), now=NOW, checkpoint=checkpoint)
    assert p.context["incremental"] == {"new": 1, "store": len(records) + 1}
    assert all("zz-dup" in op.source_ids for op in p.operations)
    assert any(op.kind == OpKind.MERGE for op in p.operations)
    assert_accounted(records + [new], p)
    assert full.context.get("incremental") is None


def test_it_treats_a_changed_record_as_new():
    records = [rec("a", "Alice likes jazz", basis(0)), rec("b", "Alice likes jazz!", basis(0))]
    checkpoint = {"a": content_hash("Alice likes jazz", {}), "b": "stale-hash"}
    p = plan(records, Policy(), now=NOW, checkpoint=checkpoint)
    assert p.context["incremental"]["new"] == 1 and len(p.by_kind(OpKind.MERGE)) == 1


# --- accounting property ------------------------------------------------------------------

_TEXTS = [
    "Alice likes jazz",
    "alice likes jazz!",
    "Alice no longer likes jazz",
    "Bob hired Alice",
    "Alice hired Bob",
    "Alice lives in Paris",
    "Alice lives in Berlin",
    "Carol has 2 cats",
    "Carol has 3 cats",
    "The sky is blue",
]


@st.composite
def stores(draw):
    n = draw(st.integers(min_value=0, max_value=14))
    seed = draw(st.integers(min_value=0, max_value=2**16))
    rng = np.random.default_rng(seed)
    anchors = random_unit(rng, 3)
    out = []
    for i in range(n):
        a = draw(st.integers(0, 2))
        noise = draw(st.sampled_from([0.0, 0.05, 0.2, 1.0]))
        v = anchors[a] + noise * random_unit(rng, 1)[0]
        meta = {}
        if draw(st.booleans()):
            meta["created_at"] = day(draw(st.integers(0, 500)))
        if draw(st.booleans()):
            meta["importance"] = draw(st.floats(0, 1))
        if draw(st.booleans()):
            meta["session"] = draw(st.lists(st.sampled_from(["s1", "s2", "s3", "s4"]), max_size=4))
        if draw(st.booleans()):
            meta["pinned"] = draw(st.booleans())
        if draw(st.booleans()):
            meta["tier"] = draw(st.sampled_from(["working", "curated"]))
        if draw(st.booleans()):
            meta["access_count"] = draw(st.integers(0, 9))
        out.append(rec(f"r{i}", draw(st.sampled_from(_TEXTS)), v, **meta))
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=stores(), group=st.integers(2, 5), link=st.sampled_from([0.8, 0.9, 0.97]))
def test_it_accounts_for_every_record_exactly_once(records, group, link):
    policy = Policy(max_group_size=group, link_threshold=link, prune_min_age_days=10)
    p = plan(records, policy, now=NOW)
    assert_accounted(records, p)
    protected = {
        r.id
        for r in records
        if r.metadata.get("pinned") is True or r.metadata.get("tier") == "curated"
    }
    removed = {rid for op in p.operations for rid in op.removes}
    assert not (protected & removed)
    promoted = {op.source_ids[0] for op in p.by_kind(OpKind.PROMOTE)}
    assert not (promoted & removed)
    text = {r.id: normalize_text(r.document) for r in records}
    for op in p.by_kind(OpKind.MERGE):
        # copies of one text merge in one group past max_group_size (grouping.EXACT_MAX_GROUP)
        assert len(op.source_ids) <= group or len({text[x] for x in op.source_ids}) == 1
        for x, row in zip(op.source_ids, op.scores["pairwise"], strict=True):
            for y, cos in zip(op.source_ids, row, strict=True):
                assert text[x] == text[y] or cos >= link - 1e-3, "complete linkage violated"


def test_it_keeps_a_reconcile_winner_out_of_merges_in_the_same_pass():
    records = [
        rec("old", "Alice lives in Paris", basis(0), created_at=day(10)),
        rec("new1", "Alice lives in Berlin", at_cosine(0, 0.95, 1), created_at=day(1)),
        rec("new2", "alice lives in berlin!", at_cosine(0, 0.95, 1), created_at=day(2)),
    ]
    p = plan(records, Policy(), now=NOW)
    assert p.fates["old"] == Fate.SUPERSEDED
    winners = {op.source_ids[0] for op in p.by_kind(OpKind.RECONCILE)}
    assert winners and all(p.fates[w] == Fate.KEPT for w in winners)
    assert p.operations[0].kind == OpKind.RECONCILE
    assert_accounted(records, p)


def test_fates_hold_every_input_id_and_refuse_an_unknown_one():
    from consolidation import Fates

    f = Fates(["a", "b", "c"])
    f["b"] = Fate.MERGED
    assert dict(f) == {"a": Fate.KEPT, "b": Fate.MERGED, "c": Fate.KEPT} and len(f) == 3
    assert "b" in f and "z" not in f and 3 not in f
    f["b"] = Fate.KEPT
    assert set(f.values()) == {Fate.KEPT}
    with pytest.raises(KeyError):
        f["z"] = Fate.PRUNED
    with pytest.raises(KeyError):
        f["z"]
    with pytest.raises(TypeError):
        del f["a"]
