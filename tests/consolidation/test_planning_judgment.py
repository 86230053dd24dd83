"""plan() with the pair judgment: scope, empty texts, atoms, conflicts, decay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consolidation import NAMED_POLICIES, Fate, MemoryRecord, OpKind, Plan, Policy
from consolidation.planning import plan

from ._vectors import at_cosine, basis
from .test_judgment_properties import slot_pairs
from .test_planning_engine import assert_accounted

NOW = datetime(2025, 6, 1, tzinfo=UTC)
AGGRESSIVE = NAMED_POLICIES["aggressive"]
# These stores hold a handful of memories, so one merge is over the 25 % loss budget: the
# judgment under test is read with the budget off (budget planning has its own tests).
DEFAULT = Policy(trim_to_guard=False)


def day(n: float) -> str:
    return (NOW - timedelta(days=n)).isoformat()


def rec(mid: str, text: str, vec: np.ndarray, **meta) -> MemoryRecord:
    return MemoryRecord(mid, text, vec, meta)


def removed(p: Plan) -> set[str]:
    return {rid for op in p.operations for rid in op.removes}


# --- scope --------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [DEFAULT, AGGRESSIVE], ids=["default", "aggressive"])
def test_it_never_merges_across_users(policy):
    """A reported case: alice's and bob's identical memory stay two memories."""
    records = [
        rec("a1", "Prefers dark mode in the editor", basis(0), user_id="alice"),
        rec("b1", "Prefers dark mode in the editor", basis(0), user_id="bob"),
        rec("a2", "prefers dark mode in the editor.", basis(0), user_id="alice"),
    ]
    p = plan(records, policy, now=NOW)
    (op,) = p.by_kind(OpKind.MERGE)
    assert sorted(op.source_ids) == ["a1", "a2"]
    assert op.result_metadata["user_id"] == "alice"  # a scalar, never a list of users
    assert p.fates["b1"] == Fate.KEPT
    assert_accounted(records, p)


def test_it_never_windows_or_folds_across_scopes():
    turns = [
        rec(
            f"t{k}",
            f"Speaker: turn number {k} about the trip",
            basis(k),
            layer="episodic",
            session=1,
            run_id=f"r{k // 3}",
            created_at=day(10 + k),
        )
        for k in range(6)
    ]
    p = plan(turns, Policy(trim_to_guard=False, prune=False), now=NOW)
    for op in p.by_kind(OpKind.MERGE):
        runs = {next(r for r in turns if r.id == sid).metadata["run_id"] for sid in op.source_ids}
        assert len(runs) == 1
    assert len(p.by_kind(OpKind.MERGE)) == 2  # one window per run


# --- empty texts --------------------------------------------------------------------------------


def test_empty_texts_are_never_duplicates():
    """A reported case: 8 memories whose document is empty were one exact_duplicate merge."""
    records = [rec(f"m{k}", "" if k % 2 else "   ", basis(0)) for k in range(8)]
    p = plan(records, AGGRESSIVE, now=NOW)
    assert not p.operations
    assert set(p.fates.values()) == {Fate.KEPT}


# --- atoms and cues ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("User prefers C++", "User prefers C"),
        ("Alice 👍 the new logo design", "Alice 👎 the new logo design"),
        ("Merged PR #260 into main", "Merged PR #480 into main"),
        ("Fixed the bug in v1.2.3", "Fixed the bug in v1.2.4"),
    ],
)
@pytest.mark.parametrize("policy", [DEFAULT, AGGRESSIVE], ids=["default", "aggressive"])
def test_issue_cases_keep_both_memories(a, b, policy):
    records = [
        rec("a", a, basis(0), created_at=day(30)),
        rec("b", b, at_cosine(0, 0.95, 1), created_at=day(3)),
    ]
    p = plan(records, policy, now=NOW)
    assert not removed(p)
    assert_accounted(records, p)


@pytest.mark.parametrize("dated", [False, True])
def test_a_negated_instruction_is_never_merged(dated):
    """A reported case (cos 0.91): without dates a conflict; with dates the newer one wins."""
    meta_a, meta_b = ({"created_at": day(30)}, {"created_at": day(3)}) if dated else ({}, {})
    records = [
        rec("a", "不要在代码里使用分号", basis(0), **meta_a),
        rec("b", "在代码里使用分号", at_cosine(0, 0.91, 1), **meta_b),
    ]
    p = plan(records, AGGRESSIVE, now=NOW)
    assert not p.by_kind(OpKind.MERGE)
    if dated:
        (op,) = p.by_kind(OpKind.RECONCILE)
        assert op.source_ids == ["b", "a"] and op.rule == "negation"
    else:
        assert len(p.by_kind(OpKind.CONFLICT)) == 1 and not removed(p)


def test_a_past_state_is_superseded_by_the_current_statement():
    records = [
        rec("old", "Sam used to smoke", basis(0), created_at=day(30)),
        rec("new", "Sam smokes", at_cosine(0, 0.85, 1), created_at=day(3)),
    ]
    p = plan(records, DEFAULT, now=NOW)
    (op,) = p.by_kind(OpKind.RECONCILE)
    assert op.source_ids == ["new", "old"] and op.removes == ["old"] and op.rule == "past_state"


def test_updated_at_decides_which_memory_is_current():
    """A reported case: the first memory was rewritten after the second was created."""
    records = [
        rec(
            "first",
            "Is allergic to penicillin",
            basis(0),
            created_at="2025-01-10",
            updated_at="2025-05-20",
        ),
        rec(
            "second", "Is not allergic to penicillin", at_cosine(0, 0.9, 1), created_at="2025-03-01"
        ),
    ]
    p = plan(records, DEFAULT, now=NOW)
    (op,) = p.by_kind(OpKind.RECONCILE)
    assert op.source_ids == ["first", "second"] and op.removes == ["second"]


def test_an_unsure_contradiction_becomes_a_conflict_item():
    records = [
        rec("a", "Is allergic to penicillin", basis(0)),
        rec("b", "Is not allergic to penicillin", at_cosine(0, 0.9, 1)),
        rec("c", "Is not allergic to penicillin.", at_cosine(0, 0.9, 1)),
    ]
    p = plan(records, AGGRESSIVE, now=NOW)
    conflicts = p.by_kind(OpKind.CONFLICT)
    # one question for the two texts: c is b's exact copy, pruned (planning/copies.py)
    assert [tuple(sorted(op.source_ids)) for op in conflicts] == [("a", "b")]
    for op in conflicts:
        assert op.removes == [] and op.rule == "negation"
        assert op.scores["dates"] == [None, None] and "unknown" in op.reason
    (copy,) = p.by_kind(OpKind.PRUNE)
    assert copy.removes == ["c"] and copy.rule == "exact_copy" and copy.scores["copy_of"] == "b"
    assert removed(p) == {"c"}  # a and b are held: no merge, no reconcile of the question
    assert p.context["conflicts"] == 1
    assert Plan.from_dict(p.to_dict()).by_kind(OpKind.CONFLICT)[0].kind == OpKind.CONFLICT


def test_memories_held_in_a_conflict_are_not_promoted():
    """A conflict's memories are left as they are until a reviewer decides (who may remove one):
    the same pass promotes only the others."""
    records = [
        rec("a", "Is allergic to penicillin", basis(0), access_count=50),
        rec("b", "Is not allergic to penicillin", at_cosine(0, 0.9, 1), access_count=50),
        rec("c", "Likes long walks on the beach", basis(2), access_count=50),
    ]
    p = plan(records, AGGRESSIVE, now=NOW)
    (conflict,) = p.by_kind(OpKind.CONFLICT)
    assert sorted(conflict.source_ids) == ["a", "b"]
    assert [op.source_ids for op in p.by_kind(OpKind.PROMOTE)] == [["c"]]


def test_a_pinned_memory_that_would_be_superseded_is_a_conflict():
    records = [
        rec("old", "Alice lives in Paris", basis(0), created_at=day(30), pinned=True),
        rec("new", "Alice lives in Berlin", at_cosine(0, 0.9, 1), created_at=day(3)),
    ]
    p = plan(records, DEFAULT, now=NOW)
    assert not p.by_kind(OpKind.RECONCILE) and len(p.by_kind(OpKind.CONFLICT)) == 1


# --- decay --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("meta", "pruned"),
    [
        ({"importance": 0.5}, False),  # a reported case: neutral importance, 700 days old
        ({"importance": 0.3}, False),
        ({"importance": 0.29}, True),  # explicitly low: age may remove it
        ({}, False),  # no importance: a fact is never pruned by age
        ({"importance": 0.5, "layer": "episodic"}, False),  # episodic: only when covered
    ],
)
def test_age_alone_never_removes_a_unique_memory(meta, pruned):
    records = [
        rec(
            "m",
            "The build server password rotates on Mondays",
            basis(0),
            created_at=day(700),
            **meta,
        )
    ]
    p = plan(records, DEFAULT, now=NOW)
    assert (p.fates["m"] == Fate.PRUNED) is pruned


def test_a_store_of_old_neutral_memories_is_not_pruned_wholesale():
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((300, 384)).astype(np.float32)
    records = [
        rec(
            f"m{k}",
            f"Fact number {k} about the deployment",
            vecs[k],
            created_at=day(700),
            importance=0.5,
        )
        for k in range(300)
    ]
    p = plan(records, AGGRESSIVE.with_(merge_near=False), now=NOW)
    assert not p.by_kind(OpKind.PRUNE)


def test_prune_max_importance_is_validated():
    with pytest.raises(ValueError, match="prune_max_importance"):
        Policy(prune_max_importance=1.5)
    assert Policy().prune_max_importance == 0.3


# --- property -----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    slot_pairs(),
    st.floats(min_value=0.75, max_value=1.0),
    st.sampled_from(["default", "aggressive"]),
)
def test_a_single_difference_never_removes_either_memory(pair, cos, name):
    """Unsure means keep both, through the whole planner: no operation removes either memory (no
    timestamps, so nothing can be ordered; both are decayed candidates only by age, and have
    none)."""
    kind, a, b, am, bm = pair
    records = [rec("a", a, basis(0), **am), rec("b", b, at_cosine(0, cos, 1), **bm)]
    p = plan(records, NAMED_POLICIES[name], now=NOW)
    assert not removed(p), (kind, a, b, [op.to_dict() for op in p.operations])
