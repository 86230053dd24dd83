"""Standing decisions in planning: keep apart, keep, conflict pick — and nothing dropped silently.

Every case is planned twice in one store holding the same memories under two scopes
(``user_id`` u1 and u2): the decision names u1's memories only, so u1's are held back and u2's
are planned as before (the baseline a decision changes).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consolidation import Consolidator, MemoryRecord, OpKind, Plan
from consolidation import Policy as FullPolicy
from consolidation.decisions import (
    Constraint,
    DecisionKind,
    StandingDecisions,
    operation_signature,
)
from consolidation.planning import plan
from consolidation.planning.constraints import HELD_BACK_LIMIT
from consolidation.snapshot import plan_snapshot

NOW = datetime(2025, 1, 1, tzinfo=UTC)
POLICY = FullPolicy(trim_to_guard=False)


def day(n: float) -> str:
    return (NOW - timedelta(days=n)).isoformat()


def vec(k: int, cos: float = 1.0, other: int | None = None) -> np.ndarray:
    """Unit vector on axis ``k`` (or at cosine ``cos`` to it, leaning on ``other``)."""
    x = np.zeros(384, np.float32)
    x[k] = cos
    if other is not None:
        x[other] = np.sqrt(max(0.0, 1 - cos * cos))
    return x


# (name, [(key, text, axis, cosine, other axis, metadata)]): every case's memories, one scope
Spec = list[tuple[str, str, int, float, int | None, dict]]
EPI = {"layer": "episodic", "session": 1, "created_at": day(3)}
CASES: dict[str, Spec] = {
    "exact duplicate, en": [
        ("a", "Alice likes jazz", 0, 1.0, None, {"created_at": day(3)}),
        ("b", "alice likes jazz!", 0, 1.0, None, {"created_at": day(2)}),
    ],
    "exact duplicate, de": [
        ("a", "Anna mag Jazz und Blues", 0, 1.0, None, {}),
        ("b", "anna mag jazz und blues.", 0, 1.0, None, {}),
    ],
    "exact duplicate, zh": [
        ("a", "小明喜欢爵士乐", 0, 1.0, None, {}),
        ("b", "小明喜欢爵士乐。", 0, 1.0, None, {}),
    ],
    "reconcile, en": [
        ("a", "Jon lives in Rome", 0, 1.0, None, {"created_at": day(30)}),
        ("b", "Jon lives in Paris", 0, 0.9, 1, {"created_at": day(1)}),
    ],
    "reconcile, de": [
        ("a", "Anna raucht", 0, 1.0, None, {"created_at": day(30)}),
        ("b", "Anna raucht nicht mehr", 0, 0.9, 1, {"created_at": day(1)}),
    ],
    "reconcile, zh": [
        ("a", "小明喝咖啡", 0, 1.0, None, {"created_at": day(30)}),
        ("b", "小明不再喝咖啡", 0, 0.9, 1, {"created_at": day(1)}),
    ],
    "session window": [
        ("a", "Jon: I started a bakery last week.", 2, 1.0, None, {**EPI, "speaker": "Jon"}),
        ("b", "Gina: Wow, which street is it on?", 3, 1.0, None, {**EPI, "speaker": "Gina"}),
    ],
    "evidence fold": [
        ("a", "Jon opened a bakery.", 4, 1.0, None, {"layer": "semantic", "evidence": ["D1:1"]}),
        (
            "b",
            "Jon: I opened a bakery on Main Street!",
            4,
            0.8,
            5,
            {**EPI, "evidence": ["D1:1"], "speaker": "Jon"},
        ),
    ],
}
WOULD_HAVE = {
    "exact duplicate, en": "merge",
    "exact duplicate, de": "merge",
    "exact duplicate, zh": "merge",
    "reconcile, en": "reconcile",
    "reconcile, de": "reconcile",
    "reconcile, zh": "reconcile",
    "session window": "session_window",
    "evidence fold": "evidence_fold",
}


def store(spec: Spec, scopes: tuple[str, ...] = ("u1", "u2")) -> list[MemoryRecord]:
    """The case's memories once per scope (ids ``u1:a``, ``u2:a`` …; scopes on other axes)."""
    out = []
    for n, scope in enumerate(scopes):
        for key, text, axis, cos, other, meta in spec:
            shift = 20 * n
            v = vec(axis + shift, cos, None if other is None else other + shift)
            out.append(MemoryRecord(f"{scope}:{key}", text, v, {**meta, "user_id": scope}))
    return out


def by_id(records: list[MemoryRecord]) -> dict[str, MemoryRecord]:
    return {r.id: r for r in records}


def joined(p: Plan, a: str, b: str) -> list[str]:
    """Kinds of the operations of ``p`` that read both ``a`` and ``b``."""
    return [op.kind.value for op in p.operations if {a, b} <= set(op.source_ids)]


def removed(p: Plan) -> set[str]:
    return {rid for op in p.operations for rid in op.removes}


def apart(decision: int, recs: dict[str, MemoryRecord], *ids: str, **kw) -> Constraint:
    mems = tuple((i, recs[i].content_hash) for i in ids)
    return Constraint(decision, DecisionKind.KEEP_APART, mems, **kw)


@pytest.mark.parametrize("case", sorted(CASES))
def test_it_keeps_apart_a_pair_a_reviewer_kept_apart_in_its_scope_only(case):
    records = store(CASES[case])
    recs = by_id(records)
    before = plan(records, POLICY, now=NOW)
    assert joined(before, "u1:a", "u1:b") and joined(before, "u2:a", "u2:b"), "baseline"
    decisions = StandingDecisions([apart(12, recs, "u1:a", "u1:b", note="set by alice")])
    p = plan(records, POLICY, now=NOW, decisions=decisions)
    assert joined(p, "u1:a", "u1:b") == []
    assert joined(p, "u2:a", "u2:b") == joined(before, "u2:a", "u2:b")
    assert p.context["held_back"] == [
        {
            "decision": 12,
            "kind": "keep_apart",
            "memory_ids": ["u1:a", "u1:b"],
            "would_have": WOULD_HAVE[case],
            "reason": p.context["held_back"][0]["reason"],
        }
    ]
    assert "decision #12 (keep apart, set by alice)" in p.context["held_back"][0]["reason"]
    assert p.context["held_back_by_decision"] == {"12": 1}


@pytest.mark.parametrize("case", sorted(CASES))
def test_it_judges_the_pair_again_once_one_of_them_was_edited(case):
    records = store(CASES[case], ("u1",))
    decisions = StandingDecisions(
        [Constraint(3, "keep_apart", (("u1:a", "0" * 64), ("u1:b", records[1].content_hash)))]
    )
    p = plan(records, POLICY, now=NOW, decisions=decisions)
    assert joined(p, "u1:a", "u1:b")
    assert p.context["held_back"] == []


def test_keep_apart_is_complete_linkage_the_others_still_merge():
    spec = [(k, "Alice likes jazz", 0, 1.0, None, {}) for k in ("a", "b", "c")]
    records = store(spec, ("u1",))
    recs = by_id(records)
    p = plan(
        records, POLICY, now=NOW, decisions=StandingDecisions([apart(1, recs, "u1:a", "u1:b")])
    )
    merges = [set(op.source_ids) for op in p.by_kind(OpKind.MERGE)]
    assert merges and not any({"u1:a", "u1:b"} <= m for m in merges)
    assert any("u1:c" in m for m in merges)


def test_a_memory_merged_from_a_kept_apart_one_stays_apart_from_the_other():
    records = [
        MemoryRecord("m-1", "Alice likes jazz", vec(0), {"merged_from": ["a", "x"]}),
        MemoryRecord("b", "alice likes jazz!", vec(0), {}),
    ]
    d = StandingDecisions(
        [Constraint(5, "keep_apart", (("a", "h-a"), ("b", records[1].content_hash)))]
    )
    assert joined(plan(records, POLICY, now=NOW), "m-1", "b")
    p = plan(records, POLICY, now=NOW, decisions=d)
    assert joined(p, "m-1", "b") == []
    assert p.context["held_back"][0]["memory_ids"] == ["b", "m-1"]


KEEP_CASES = {
    # case: (spec, the memory kept, what would have removed it)
    "prune": (
        [
            (
                "a",
                "Old note about the printer",
                6,
                1.0,
                None,
                {"created_at": day(300), "importance": 0.1},
            )
        ],
        "a",
        "prune",
    ),
    "superseded, en": (CASES["reconcile, en"], "a", "reconcile"),
    "superseded, zh": (CASES["reconcile, zh"], "a", "reconcile"),
    "merged away, de": (CASES["exact duplicate, de"], "b", "merge"),
    "windowed": (CASES["session window"], "a", "session_window"),
    "folded": (CASES["evidence fold"], "b", "evidence_fold"),
}


@pytest.mark.parametrize("case", sorted(KEEP_CASES))
def test_it_never_removes_a_memory_a_reviewer_decided_to_keep(case):
    spec, key, would_have = KEEP_CASES[case]
    records = store(spec)
    assert {f"u1:{key}", f"u2:{key}"} <= removed(plan(records, POLICY, now=NOW)), "baseline"
    decisions = StandingDecisions([Constraint(7, "keep", ((f"u1:{key}", ""),), note="restored")])
    p = plan(records, POLICY, now=NOW, decisions=decisions)
    assert f"u1:{key}" not in removed(p)
    assert f"u2:{key}" in removed(p)
    (entry,) = p.context["held_back"]
    assert (entry["decision"], entry["kind"], entry["would_have"]) == (7, "keep", would_have)
    if would_have in ("prune", "reconcile"):
        assert entry["memory_ids"] == [f"u1:{key}"]
    else:  # a join lists the pair it left apart: the kept memory and its partner
        assert f"u1:{key}" in entry["memory_ids"] and len(entry["memory_ids"]) == 2
        assert entry["reason"].endswith(f"removing the kept u1:{key}")


PICK_CASES = {
    # case: (older text, newer text, dates known, which one the reviewer kept)
    "supersedes, the reviewer kept the older, en": (
        "Jon lives in Rome",
        "Jon lives in Paris",
        True,
        "a",
    ),
    "supersedes, the reviewer kept the newer, de": (
        "Anna raucht",
        "Anna raucht nicht mehr",
        True,
        "b",
    ),
    "conflict without dates, zh": ("小明喝咖啡", "小明不再喝咖啡", False, "a"),
    "conflict without dates, fr": ("Marie fume", "Marie ne fume plus", False, "b"),
}


@pytest.mark.parametrize("case", sorted(PICK_CASES))
def test_a_conflict_pick_resolves_the_same_pair_the_same_way_and_stays_reviewable(case):
    old, new, dated, keep = PICK_CASES[case]
    meta_a = {"created_at": day(30)} if dated else {}
    meta_b = {"created_at": day(1)} if dated else {}
    spec = [("a", old, 0, 1.0, None, meta_a), ("b", new, 0, 0.9, 1, meta_b)]
    records = store(spec)
    recs = by_id(records)
    mems = (("u1:a", recs["u1:a"].content_hash), ("u1:b", recs["u1:b"].content_hash))
    d = StandingDecisions([Constraint(9, "conflict_pick", mems, keep=f"u1:{keep}")])
    p = plan(records, POLICY, now=NOW, decisions=d)
    (decided,) = [op for op in p.operations if "u1:a" in op.source_ids]
    assert decided.kind == OpKind.RECONCILE
    assert decided.source_ids[0] == f"u1:{keep}"
    assert decided.removes == [f"u1:{'b' if keep == 'a' else 'a'}"]
    assert decided.rule == "decided" and decided.scores["decision"] == 9
    assert decided.reason.startswith("decided before by decision #9")
    (other,) = [op for op in p.operations if "u2:a" in op.source_ids]
    assert other.rule != "decided"
    assert p.context["decided"] == {"9": 1}


def test_a_conflict_pick_no_longer_applies_once_a_memory_changed():
    records = store([("a", "小明喝咖啡", 0, 1.0, None, {}), ("b", "小明不再喝咖啡", 0, 0.9, 1, {})])
    d = StandingDecisions(
        [
            Constraint(
                9,
                "conflict_pick",
                (("u1:a", "0" * 64), ("u1:b", records[1].content_hash)),
                keep="u1:a",
            )
        ]
    )
    p = plan(records, POLICY, now=NOW, decisions=d)
    kinds = {op.kind for op in p.operations if "u1:a" in op.source_ids}
    assert kinds == {OpKind.CONFLICT}


def test_a_conflict_pick_never_removes_a_pinned_memory():
    spec = [
        ("a", "Jon lives in Rome", 0, 1.0, None, {"created_at": day(30)}),
        ("b", "Jon lives in Paris", 0, 0.9, 1, {"created_at": day(1), "pinned": True}),
    ]
    records = store(spec, ("u1",))
    mems = tuple((r.id, r.content_hash) for r in records)
    d = StandingDecisions([Constraint(2, "conflict_pick", mems, keep="u1:a")])
    p = plan(records, POLICY, now=NOW, decisions=d)
    assert [op.kind for op in p.operations] == [OpKind.CONFLICT]
    assert "decision #2" in p.operations[0].reason


def test_decisions_hold_in_an_incremental_pass():
    records = store(CASES["exact duplicate, en"])
    recs = by_id(records)
    checkpoint = {r.id: r.content_hash for r in records if r.id != "u1:b" and r.id != "u2:b"}
    d = StandingDecisions([apart(1, recs, "u1:a", "u1:b")])
    p = plan(records, POLICY, now=NOW, checkpoint=checkpoint, decisions=d)
    assert p.context["incremental"]["new"] == 2
    assert joined(p, "u1:a", "u1:b") == [] and joined(p, "u2:a", "u2:b") == ["merge"]


def test_held_back_lists_a_bounded_number_and_counts_all():
    n = HELD_BACK_LIMIT + 5
    records, decisions = [], []
    for k in range(n):
        a = MemoryRecord(f"a{k}", f"Note number {k} is here", vec(k % 300), {"user_id": f"u{k}"})
        b = MemoryRecord(f"b{k}", f"note number {k} is here!", vec(k % 300), {"user_id": f"u{k}"})
        records += [a, b]
        decisions.append(
            Constraint(k, "keep_apart", ((a.id, a.content_hash), (b.id, b.content_hash)))
        )
    p = plan(records, POLICY, now=NOW, decisions=StandingDecisions(decisions))
    assert p.by_kind(OpKind.MERGE) == []
    assert len(p.context["held_back"]) == HELD_BACK_LIMIT
    assert p.context["held_back_count"] == n
    assert len(p.context["held_back_by_decision"]) == n


def test_without_decisions_the_plan_is_unchanged_and_says_nothing_about_them():
    records = store(CASES["reconcile, en"])
    p1 = plan(records, POLICY, now=NOW)
    p2 = plan(records, POLICY, now=NOW, decisions=StandingDecisions())
    assert [op.to_dict() for op in p1.operations] == [op.to_dict() for op in p2.operations]
    assert "held_back" not in p2.context


class _Memory:
    """PraisonAI's ``get_all_memories()`` shape, read by ``plan_snapshot``."""

    def __init__(self, records: list[MemoryRecord]) -> None:
        self.records = records

    def get_all_memories(self) -> list[dict]:
        return [
            {"id": r.id, "text": r.document, "metadata": r.metadata, "embedding": r.embedding}
            for r in self.records
        ]


def test_plan_snapshot_and_the_consolidator_plan_with_the_decisions():
    records = store(CASES["exact duplicate, zh"], ("u1",))
    d = StandingDecisions([apart(4, by_id(records), "u1:a", "u1:b")])
    snap = plan_snapshot(_Memory(records), POLICY, now=NOW, decisions=d)
    assert snap.plan.operations == [] and snap.plan.context["held_back_count"] == 1
    c = Consolidator(POLICY, decisions=d, clock=lambda: NOW)
    assert c.plan(_Memory(records)).operations == []
    assert c.consolidate(_Memory(records)).context["held_back_count"] == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "rejected_plan", "memories": (("a", "h"),)}, "not a planning constraint"),
        ({"kind": "keep_apart", "memories": (("a", "h"),)}, "at least two"),
        ({"kind": "keep_apart", "memories": (("a", "h"), ("b", ""))}, "every content hash"),
        ({"kind": "keep_apart", "memories": (("a", "h"), ("a", "h"))}, "unique"),
        ({"kind": "conflict_pick", "memories": (("a", "h"), ("b", "h")), "keep": "c"}, "not one"),
        ({"kind": "conflict_pick", "memories": (("a", "h"),) * 3, "keep": "a"}, "unique"),
        ({"kind": "keep", "memories": ()}, "names no memory"),
        ({"kind": "forget", "memories": (("a", "h"),)}, "unknown decision kind"),
    ],
)
def test_a_malformed_decision_is_refused_with_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Constraint(1, **kwargs)


def test_a_constraint_round_trips_through_json():
    c = Constraint(3, "conflict_pick", (("a", "h1"), ("b", "h2")), keep="b", note="by bob")
    assert Constraint.from_dict(c.to_dict()) == c
    d = StandingDecisions([c])
    assert StandingDecisions.from_list(d.to_list()).constraints == d.constraints


def test_an_operation_planned_again_unchanged_has_the_same_signature():
    records = store(CASES["reconcile, de"] + CASES["exact duplicate, en"][:0], ("u1",))
    first = {operation_signature(op) for op in plan(records, POLICY, now=NOW).operations}
    again = {
        operation_signature(op) for op in plan(list(reversed(records)), POLICY, now=NOW).operations
    }
    assert first == again and len(first) == 1
    edited = [
        records[0],
        MemoryRecord(
            records[1].id, records[1].document + "!", records[1].embedding, records[1].metadata
        ),
    ]
    changed = {operation_signature(op) for op in plan(edited, POLICY, now=NOW).operations}
    assert changed.isdisjoint(first)


def test_signatures_tell_apart_another_winner_and_another_merged_text():
    records = store(CASES["exact duplicate, en"], ("u1",))
    (op,) = plan(records, POLICY, now=NOW).operations
    base = operation_signature(op)
    op.result_document = (op.result_document or "") + " Really."
    assert operation_signature(op) != base
    assert base.startswith("merge:")


# --- property: whatever the store, a decision holds ---------------------------------------

TEXTS = [
    "Alice likes jazz",
    "alice likes jazz!",
    "Jon: I started a bakery last week.",
    "Gina: Wow, which street is it on?",
    "Anna raucht",
    "Anna raucht nicht mehr",
    "小明喜欢爵士乐",
    "Old note about the printer",
]


@st.composite
def stores(draw):
    n = draw(st.integers(min_value=2, max_value=12))
    records = []
    for k in range(n):
        t = draw(st.integers(0, len(TEXTS) - 1))
        meta = {
            "layer": draw(st.sampled_from(["episodic", "semantic"])),
            "session": draw(st.integers(1, 2)),
            "created_at": day(draw(st.integers(0, 400))),
            "importance": draw(st.sampled_from([0.1, 0.5, 0.9])),
            "evidence": ["D1:1"] if draw(st.booleans()) else [],
        }
        axis = t * 3 + draw(st.integers(0, 1))
        v = vec(axis, draw(st.sampled_from([1.0, 0.95, 0.8])), axis + 1)
        records.append(MemoryRecord(f"m{k:02d}", TEXTS[t], v, meta))
    ids = [r.id for r in records]
    pairs = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), max_size=6))
    kept = draw(st.lists(st.sampled_from(ids), max_size=3))
    partial = draw(st.booleans())
    return records, [(a, b) for a, b in pairs if a != b], kept, partial


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores())
def test_no_plan_joins_a_kept_apart_pair_nor_removes_a_kept_memory(drawn):
    records, pairs, kept, partial = drawn
    recs = by_id(records)
    cons = [apart(k, recs, a, b) for k, (a, b) in enumerate(pairs)]
    cons += [Constraint(100 + k, "keep", ((m, ""),)) for k, m in enumerate(kept)]
    checkpoint = {r.id: r.content_hash for r in records[::2]} if partial else None
    policy = FullPolicy(trim_to_guard=False, semantic_window_size=4, prune_coverage=0.0)
    p = plan(records, policy, now=NOW, checkpoint=checkpoint, decisions=StandingDecisions(cons))
    for a, b in pairs:
        assert joined(p, a, b) == [], (a, b)
    assert removed(p).isdisjoint(kept)
