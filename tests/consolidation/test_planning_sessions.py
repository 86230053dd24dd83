"""plan(): evidence-linked folds, session windows, semantic windows, covered prune, trim to
guard."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from consolidation import Fate, MemoryRecord, OpKind
from consolidation import Policy as FullPolicy
from consolidation.planning import plan
from consolidation.text import labelled_fragment, novel_sentences, strip_label

from ._vectors import at_cosine, basis
from .test_planning_engine import assert_accounted


def Policy(**fields):  # noqa: N802 - stands in for consolidation.Policy in these tests
    """These tests judge each rule on the full plan; the loss budget (``trim_to_guard``, on by
    default) is tested on its own (test_planning_budget.py and the trim tests below)."""
    return FullPolicy(**{"trim_to_guard": False, **fields})


NOW = datetime(2025, 1, 1, tzinfo=UTC)
OLD = (NOW - timedelta(days=200)).isoformat()
NEW = (NOW - timedelta(days=1)).isoformat()

# Only the strategy under test is on, unless a test says otherwise.
BARE = Policy(merge_near=False, fold_evidence=False, window_max_size=1, prune=False, promote=False)


def turn(
    mid: str, speaker: str, text: str, vec: np.ndarray, session: int = 1, **meta
) -> MemoryRecord:
    dia = mid.split(":", 1)[-1]
    return MemoryRecord(
        mid,
        f"{speaker}: {text}",
        vec,
        {
            "layer": "episodic",
            "speaker": speaker,
            "session": session,
            "created_at": NEW,
            "evidence": [dia],
            **meta,
        },
    )


def fact(
    mid: str, text: str, evidence: list[str], vec: np.ndarray, session: int = 1, **meta
) -> MemoryRecord:
    return MemoryRecord(
        mid,
        text,
        vec,
        {
            "layer": "semantic",
            "speaker": "Jon",
            "session": session,
            "created_at": NEW,
            "evidence": evidence,
            **meta,
        },
    )


# --- text helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "label", "expected"),
    [
        ("Jon: I lost my job.", "Jon", "I lost my job."),
        ("Jon lost his job.", "Jon", "Jon lost his job."),
        ("  plain  ", None, "plain"),
    ],
)
def test_it_strips_a_speaker_label(text, label, expected):
    assert strip_label(text, label) == expected


def test_it_keeps_only_sentences_with_new_content_words():
    covered: set[str] = set()
    assert novel_sentences("I lost my job. Wow! I lost my job again.", covered) == [
        "I lost my job.",
        "Wow!",
    ]
    assert labelled_fragment("Jon: Wow! I opened a dance studio.", "Jon", covered) == (
        "Jon: I opened a dance studio."
    )
    assert labelled_fragment("Jon: Wow!", "Jon", covered) is None


# --- evidence-linked fold -------------------------------------------------------------------


def test_it_folds_a_cited_turn_into_the_fact_that_cites_it():
    records = [
        fact("c:obs:1", "Jon lost his banking job.", ["D1:1"], basis(0), created_at=NEW),
        turn(
            "c:D1:1",
            "Jon",
            "I lost my job at the bank in Boston. It was tough.",
            at_cosine(0, 0.8, 1),
            created_at=OLD,
        ),
        turn("c:D1:2", "Gina", "Sorry to hear that!", basis(2)),
    ]
    p = plan(records, BARE.with_(fold_evidence=True, fold_max_chars=200), now=NOW)
    (op,) = p.by_kind(OpKind.MERGE)
    assert op.rule == "evidence_fold" and op.source_ids == ["c:obs:1", "c:D1:1"]
    assert op.result_document.startswith("Jon lost his banking job. Jon: ")
    assert "Boston" in op.result_document and "tough" in op.result_document
    meta = op.result_metadata
    assert meta["evidence"] == ["D1:1"] and meta["merged_from"] == ["c:D1:1", "c:obs:1"]
    assert meta["created_at"] == OLD and meta["layer"] == ["episodic", "semantic"]
    assert p.fates["c:D1:2"] == Fate.KEPT
    assert_accounted(records, p)


@pytest.mark.parametrize(("limit", "folded"), [(60, False), (200, True)])
def test_it_folds_only_within_fold_max_chars(limit, folded):
    records = [
        fact("c:obs:1", "Jon lost his banking job.", ["D1:1"], basis(0)),
        turn("c:D1:1", "Jon", "I lost my job at the bank in Boston.", at_cosine(0, 0.8, 1)),
    ]
    p = plan(records, BARE.with_(fold_evidence=True, fold_max_chars=limit), now=NOW)
    assert bool(p.by_kind(OpKind.MERGE)) is folded
    for op in p.by_kind(OpKind.MERGE):
        assert len(op.result_document) <= limit


def test_it_folds_a_turn_into_the_most_similar_citer_only():
    records = [
        fact("c:obs:1", "Jon opened a dance studio.", ["D1:1"], basis(0)),
        fact("c:obs:2", "Jon likes to dance.", ["D1:1", "D1:5"], basis(2)),
        turn("c:D1:1", "Jon", "I opened my dance studio downtown!", at_cosine(0, 0.9, 1)),
    ]
    p = plan(records, BARE.with_(fold_evidence=True, fold_max_chars=200), now=NOW)
    (op,) = p.by_kind(OpKind.MERGE)
    assert op.source_ids == ["c:obs:1", "c:D1:1"] and p.fates["c:obs:2"] == Fate.KEPT


@pytest.mark.parametrize("meta", [{"pinned": True}, {"tier": "curated"}])
def test_it_never_folds_a_protected_turn(meta):
    records = [
        fact("c:obs:1", "Jon lost his banking job.", ["D1:1"], basis(0)),
        turn("c:D1:1", "Jon", "I lost my job at the bank.", at_cosine(0, 0.8, 1), **meta),
    ]
    p = plan(records, BARE.with_(fold_evidence=True, fold_max_chars=200), now=NOW)
    assert p.operations == []


def test_it_never_folds_a_contradicting_turn():
    records = [
        fact("c:obs:1", "Jon likes jazz.", ["D1:1"], basis(0)),
        turn("c:D1:1", "Jon", "Jon does not like jazz.", at_cosine(0, 0.9, 1)),
    ]
    p = plan(records, BARE.with_(fold_evidence=True, fold_max_chars=200, reconcile=False), now=NOW)
    assert p.by_kind(OpKind.MERGE) == []


# --- session windows ------------------------------------------------------------------------


def _dialog(n: int, session: int = 1) -> list[MemoryRecord]:
    words = [
        "apples",
        "boats",
        "chess",
        "dancing",
        "eagles",
        "fishing",
        "guitars",
        "hiking",
        "islands",
        "jazz",
        "kites",
        "lemons",
    ]
    return [
        turn(
            f"c:D{session}:{i + 1}",
            "Jon" if i % 2 == 0 else "Gina",
            f"I talked about {words[(i + 3 * session - 3) % 12]}.",
            basis(10 * session + i),
            session=session,
        )
        for i in range(n)
    ]


def test_it_merges_consecutive_turns_of_a_session_into_windows():
    records = _dialog(12)  # ids D1:1 … D1:12: natural order, not string order
    p = plan(records, BARE.with_(window_max_size=4), now=NOW)
    ops = p.by_kind(OpKind.MERGE)
    assert [op.rule for op in ops] == ["session_window"] * 3
    windows = {op.source_ids[0]: op for op in ops}
    assert windows["c:D1:9"].source_ids == ["c:D1:9", "c:D1:10", "c:D1:11", "c:D1:12"]
    assert windows["c:D1:1"].source_ids == ["c:D1:1", "c:D1:2", "c:D1:3", "c:D1:4"]
    assert windows["c:D1:1"].result_document.splitlines() == [
        "Jon: I talked about apples.",
        "Gina: I talked about boats.",
        "Jon: I talked about chess.",
        "Gina: I talked about dancing.",
    ]
    assert windows["c:D1:1"].result_metadata["speaker"] == ["Gina", "Jon"]
    assert_accounted(records, p)


def test_it_never_windows_across_sessions_or_past_max_merged_chars():
    records = _dialog(3, session=1) + _dialog(3, session=2)
    p = plan(records, BARE.with_(window_max_size=8), now=NOW)
    assert sorted(len(op.source_ids) for op in p.by_kind(OpKind.MERGE)) == [3, 3]
    p = plan(records, BARE.with_(window_max_size=8, max_merged_chars=60), now=NOW)
    for op in p.by_kind(OpKind.MERGE):
        assert len(op.result_document) <= 60 and len(op.source_ids) == 2


# --- semantic windows -----------------------------------------------------------------------


def test_it_merges_facts_of_one_session_and_speaker_when_asked():
    records = [
        fact("c:obs:1:Jon:1", "Jon lost his job.", ["D1:1"], basis(0)),
        fact("c:obs:1:Jon:2", "Jon opened a dance studio.", ["D1:3"], basis(1)),
        fact("c:obs:2:Jon:1", "Jon went to Paris.", ["D2:1"], basis(2), session=2),
    ]
    assert plan(records, BARE, now=NOW).operations == []
    p = plan(records, BARE.with_(semantic_window_size=3, semantic_window_chars=200), now=NOW)
    (op,) = p.by_kind(OpKind.MERGE)
    assert op.rule == "semantic_window" and op.source_ids == ["c:obs:1:Jon:1", "c:obs:1:Jon:2"]
    assert op.result_document == "Jon lost his job. Jon opened a dance studio."


# --- prune only when covered ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "coverage", "pruned"),
    [
        ("I adopted a puppy named Max.", 1.0, True),  # every content word kept elsewhere
        ("I adopted a kitten.", 1.0, False),  # "kitten" would be lost
        ("I adopted a kitten.", 0.5, True),
        # 0.0 was "missing importance alone"; age alone never removes a unique memory,
        # so at least half of the words must be kept elsewhere ("adopt" is, "kitten" is not)
        ("I adopted a kitten.", 0.0, True),
        ("I adopted a tiny grey kitten.", 0.0, False),
    ],
)
def test_it_prunes_a_stale_turn_only_when_its_session_keeps_its_words(extra, coverage, pruned):
    records = [
        MemoryRecord(
            "c:sum:1",
            "Jon adopted a puppy named Max.",
            basis(0),
            {"layer": "summary", "session": 1, "created_at": OLD},
        ),
        turn("c:D1:1", "Jon", extra, basis(1), created_at=OLD),
    ]
    p = plan(records, BARE.with_(prune=True, prune_coverage=coverage), now=NOW)
    assert (p.fates["c:D1:1"] == Fate.PRUNED) is pruned
    assert p.fates["c:sum:1"] == Fate.KEPT
    assert_accounted(records, p)


def test_it_never_age_prunes_a_fact_without_importance_but_honours_an_explicit_one():
    records = [
        fact("c:obs:1", "Jon likes jazz.", ["D1:1"], basis(0), created_at=OLD),
        fact("c:obs:2", "Jon likes chess.", ["D1:2"], basis(1), created_at=OLD, importance=0.1),
    ]
    p = plan(records, BARE.with_(prune=True), now=NOW)
    assert p.fates == {"c:obs:1": Fate.KEPT, "c:obs:2": Fate.PRUNED}
    assert p.by_kind(OpKind.PRUNE)[0].rule == "decay"


# --- trim to the guard's budget -------------------------------------------------------------


@pytest.mark.parametrize(
    ("trim", "max_loss"), [(False, 0.25), (True, 0.25), (True, 0.5), (True, 0.0)]
)
def test_it_trims_a_plan_to_the_loss_budget_only_when_asked(trim, max_loss):
    records = _dialog(12)
    p = plan(
        records,
        BARE.with_(window_max_size=2, trim_to_guard=trim, max_loss_fraction=max_loss),
        now=NOW,
    )
    assert_accounted(records, p)
    if not trim:
        assert p.result.exceeds_loss(max_loss) and "trimmed" not in p.context
        return
    assert not p.result.exceeds_loss(max_loss)
    kept = len(p.by_kind(OpKind.MERGE))
    assert kept == int(max_loss * 12) // 2
    assert p.context["trimmed"]["dropped_operations"] == 6 - kept
    assert p.context["trimmed"]["budget"] == int(max_loss * 12)


def test_it_is_deterministic_with_every_strategy_on():
    records = _dialog(6) + [
        fact("c:obs:1", "Jon talked about apples.", ["D1:1"], at_cosine(10, 0.9, 40))
    ]
    policy = Policy(semantic_window_size=2, trim_to_guard=True, max_loss_fraction=0.5)
    a = plan(records, policy, now=NOW).to_dict()
    b = plan(list(reversed(records)), policy, now=NOW).to_dict()
    for d in (a, b):
        d["context"].pop("timings")
        d["result"]["context"].pop("timings", None)
    assert a == b
