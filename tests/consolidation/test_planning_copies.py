"""Copies beside a conflict: a memory stored several times that contradicts another is asked
about once, and its spare copies are pruned (nothing lost: the copy the conflict holds keeps
every word); a copy that may not be removed keeps its own question."""

from __future__ import annotations

import numpy as np

from consolidation import MemoryRecord, OpKind, Policy
from consolidation.planning import plan

from .test_judgment_kinds import NOW, POLICY, _embedder
from .test_planning_engine import assert_accounted

YES, NO = "Alice is allergic to penicillin.", "Alice is not allergic to penicillin."
OTHERS = ["Bob likes tea.", "Carol runs marathons."]


def _records(texts: list[str], metas: dict[int, dict] | None = None) -> list[MemoryRecord]:
    vecs = np.asarray(_embedder().embed(texts), dtype=np.float32)
    base = {"user_id": "u", "created_at": "2025-05-01T00:00:00Z"}
    return [
        MemoryRecord(f"m{i}", t, vecs[i], base | (metas or {}).get(i, {}))
        for i, t in enumerate(texts)
    ]


def test_copies_on_both_sides_are_asked_once_and_the_spares_pruned():
    recs = _records([YES] * 3 + [NO] * 2 + OTHERS)
    p = plan(recs, POLICY, now=NOW)
    assert_accounted(recs, p)
    (conflict,) = p.by_kind(OpKind.CONFLICT)
    assert sorted(conflict.source_ids) == ["m0", "m3"]
    prunes = {op.source_ids[0]: op for op in p.by_kind(OpKind.PRUNE)}
    assert sorted(prunes) == ["m1", "m2", "m4"]
    assert {op.rule for op in prunes.values()} == {"exact_copy"}
    assert prunes["m4"].scores["copy_of"] == "m3" and prunes["m1"].scores["copy_of"] == "m0"
    kept = {r.document for r in recs if r.id not in {i for op in p.operations for i in op.removes}}
    assert kept == {YES, NO, *OTHERS}  # every text stays once: nothing lost


def test_the_same_pair_asked_again_by_a_later_pass_is_still_one_question():
    recs = _records([YES] * 4 + [NO] + OTHERS)
    p = plan(recs, POLICY, now=NOW)
    assert len(p.by_kind(OpKind.CONFLICT)) == 1 and len(p.by_kind(OpKind.PRUNE)) == 3


def test_a_pinned_copy_keeps_its_own_question():
    recs = _records([YES] * 3 + [NO] + OTHERS, {2: {"pinned": True}})
    p = plan(recs, POLICY, now=NOW)
    asked = sorted(sorted(op.source_ids) for op in p.by_kind(OpKind.CONFLICT))
    assert asked == [["m0", "m3"], ["m2", "m3"]]
    assert [op.source_ids for op in p.by_kind(OpKind.PRUNE)] == [["m1"]]


def test_without_exact_merges_every_copy_is_asked_and_none_removed():
    recs = _records([YES] * 3 + [NO] + OTHERS)
    p = plan(recs, Policy(trim_to_guard=False, merge_exact=False), now=NOW)
    assert len(p.by_kind(OpKind.CONFLICT)) == 3 and not p.by_kind(OpKind.PRUNE)


def test_copies_are_counted_per_scope_and_in_any_language():
    """Two users each hold the German pair, one of them twice: each user is asked once, and only
    the copy of the user who holds two is pruned (another user's text is nobody's copy)."""
    ja, nein = (
        "Alice ist allergisch gegen Penicillin.",
        "Alice ist nicht allergisch gegen Penicillin.",
    )
    texts = [ja, ja, nein, ja, nein]
    vecs = np.asarray(_embedder().embed(texts), dtype=np.float32)
    users = ["u1", "u1", "u1", "u2", "u2"]
    recs = [
        MemoryRecord(f"m{i}", t, vecs[i], {"user_id": u, "created_at": "2025-05-01T00:00:00Z"})
        for i, (t, u) in enumerate(zip(texts, users, strict=True))
    ]
    p = plan(recs, POLICY, now=NOW)
    assert_accounted(recs, p)
    asked = sorted(sorted(op.source_ids) for op in p.by_kind(OpKind.CONFLICT))
    assert asked == [["m0", "m2"], ["m3", "m4"]]
    assert [op.source_ids for op in p.by_kind(OpKind.PRUNE)] == [["m1"]]
