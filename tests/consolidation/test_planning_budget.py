"""plan() within the loss budget (``Policy.trim_to_guard``, on by default): the most certain
operations that fit, the rest deferred and counted by kind; the next plan takes the next slice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from consolidation import MemoryRecord, OpKind, Policy
from consolidation.planning import plan
from consolidation.recall import simulate_after

from ._vectors import at_cosine, basis
from .test_planning_engine import assert_accounted

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def day(n: float) -> str:
    return (NOW - timedelta(days=n)).isoformat()


def store() -> list[MemoryRecord]:
    """20 memories: 2 exact duplicate pairs (4 removals), 1 near-duplicate pair (2), 4 stale
    low-importance notes (4 prunes) and 10 distinct fresh facts: 10 of 20 would leave."""
    recent = {"created_at": day(1), "importance": 0.5}
    out = [
        MemoryRecord("x1", "Alice likes jazz", basis(0), recent),
        MemoryRecord("x2", "alice likes jazz", basis(0), recent),
        MemoryRecord("y1", "Bob runs marathons", basis(1), recent),
        MemoryRecord("y2", "Bob runs marathons", basis(1), recent),
        MemoryRecord("n1", "Carol moved to Lisbon in May", basis(2), recent),
        MemoryRecord("n2", "In May Carol moved to Lisbon", at_cosine(2, 0.95, 3), recent),
    ]
    out += [
        MemoryRecord(
            f"s{i}",
            f"Old note number {i} about errands",
            basis(4 + i),
            {"created_at": day(400), "importance": 0.01},
        )
        for i in range(4)
    ]
    out += [
        MemoryRecord(f"f{i}", f"Distinct fact {i} about topic {i * 7}", basis(10 + i), recent)
        for i in range(10)
    ]
    return out


def test_the_default_policy_plans_within_the_loss_budget():
    assert Policy().trim_to_guard is True
    records = store()
    full = plan(records, Policy(trim_to_guard=False), now=NOW)
    assert len({r for op in full.operations for r in op.removes}) == 10  # 50 %: over 25 %

    p = plan(records, Policy(max_loss_fraction=0.3), now=NOW)
    assert_accounted(records, p)
    assert not p.result.exceeds_loss(0.3)
    # most certain first: both exact duplicates and the near-duplicate fit (6 = budget), the
    # prunes wait
    assert sorted(op.rule for op in p.operations) == [
        "exact_duplicate",
        "exact_duplicate",
        "near_duplicate",
    ]
    info = dict(p.context["trimmed"])
    listed = info.pop("deferred")  # each deferred operation by name, for the proposal
    assert [(d["kind"], d["source_ids"]) for d in listed] == [
        ("prune", [f"s{i}"]) for i in range(4)
    ]
    assert info == {
        "budget": 6,
        "kept_removals": 6,
        "dropped_operations": 4,
        "dropped_removals": 4,
        "planned_removals": 10,
        "deferred_by_kind": {"prune": 4},
        "deferred_ids": ["s0", "s1", "s2", "s3"],
    }


class _Embed:
    dim = 384

    def embed(self, texts):
        import numpy as np

        return np.stack([basis(30 + i % 300) for i, _ in enumerate(texts)]).astype(np.float32)


@pytest.mark.parametrize("max_loss", [0.25, 0.3])
def test_passes_one_after_another_converge_each_within_the_budget(max_loss):
    current, passes = store(), 0
    policy = Policy(max_loss_fraction=max_loss)
    while True:
        p = plan(current, policy, now=NOW)
        if not any(op.removes for op in p.operations):
            break
        assert not p.result.exceeds_loss(max_loss)
        current = simulate_after(current, p, _Embed())
        passes += 1
        assert passes < 6
    assert passes >= 2 and len(current) == 20 - 10 + 3  # 3 merged memories written
    assert all(not r.id.startswith("s") for r in current)  # every stale note pruned in the end
    assert plan(current, policy, now=NOW).context.get("trimmed") is None
    first = plan(store(), policy, now=NOW)
    # the exact duplicates always come first; what budget is left takes the next that fit
    assert sum(op.rule == "exact_duplicate" for op in first.operations) == 2
    assert {op.kind for op in first.operations} <= {OpKind.MERGE, OpKind.PRUNE}
