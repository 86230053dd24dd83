"""Risk score: the ordering a reviewer triages by, on pinned examples, with reasons."""

from __future__ import annotations

import pytest

from consolidation import Policy
from consolidation.review import (
    RISK_LINE,
    OperationText,
    SourceText,
    operation_loss,
    operation_risk,
)


def op(
    kind: str,
    sources: list[tuple[str, bool]],
    result: str | None = None,
    rule: str = "",
    scores: dict | None = None,
    meta: dict | None = None,
) -> OperationText:
    return OperationText(
        kind,
        tuple(SourceText(f"m{i}", d, r, meta or {}) for i, (d, r) in enumerate(sources)),
        result,
        rule,
        scores or {},
    )


PINNED = {
    "conflict": op(
        "conflict",
        [("Jon lives in Paris.", False), ("Jon lives in Rome.", False)],
        rule="changed_value",
    ),
    "near number merge": op(
        "merge",
        [("The deadline is June 3.", True), ("The deadline is June 5.", True)],
        "The deadline is June 3.",
        "near_duplicate",
        {"min_cosine": 0.905},
    ),
    "uncovered prune": op(
        "prune", [("Going to the gym at 5.", True)], rule="decay", meta={"access_count": 0}
    ),
    "reconcile": op(
        "reconcile",
        [("Jon lives in Paris now.", False), ("Jon lives in Rome.", True)],
        rule="changed_value",
        scores={"cosine": 0.86},
    ),
    "window drops wording": op(
        "merge",
        [("Jon: I lost my job.", True), ("Gina: Sorry! I lost my job too.", True)],
        "Jon: I lost my job.\nGina: Sorry!",
        "session_window",
        {"min_cosine": 0.41},
    ),
    "covered prune": op(
        "prune", [("Gina: Thanks!", True)], rule="decay_covered", scores={"coverage": 1.0}
    ),
    "far near duplicate": op(
        "merge",
        [("Alice likes jazz music.", True), ("Alice likes jazz.", True)],
        "Alice likes jazz music.",
        "near_duplicate",
        {"min_cosine": 0.97},
    ),
    "exact duplicate": op(
        "merge",
        [("Alice likes jazz.", True), ("alice likes jazz", True)],
        "Alice likes jazz.",
        "exact_duplicate",
        {"min_cosine": 1.0},
    ),
}


def risk(name: str, **kw):
    o = PINNED[name]
    return operation_risk(o, operation_loss(o), **kw)


def test_the_pinned_examples_are_ordered_riskiest_first():
    scores = {name: risk(name).score for name in PINNED}
    ordered = sorted(PINNED, key=lambda n: -scores[n])
    assert ordered[:4] == ["conflict", "near number merge", "uncovered prune", "reconcile"], scores
    assert scores["conflict"] == 1.0
    assert scores["exact duplicate"] == 0.0
    # its shorter source is not verbatim in the merge, but every content word is
    assert 0 < scores["far near duplicate"] == scores["window drops wording"] < RISK_LINE
    assert scores["covered prune"] < RISK_LINE <= scores["reconcile"]
    assert 0 < scores["window drops wording"] < RISK_LINE


@pytest.mark.parametrize(
    ("name", "reason_part"),
    [
        ("conflict", "reviewer picks"),
        ("near number merge", "different numbers (june 3 vs june 5)"),
        ("near number merge", "loses the number 5"),
        ("near number merge", "within 0.03 of the link threshold 0.9"),
        ("uncovered prune", "never accessed"),
        ("reconcile", "supersedes an older memory (changed value)"),
        ("reconcile", "loses 1 content word: Rome"),
        ("window drops wording", "drops 1 sentence whose content words the result keeps"),
    ],
)
def test_each_factor_gives_a_reason_for_the_card(name, reason_part):
    assert any(reason_part in r for r in risk(name).reasons), risk(name).reasons


def test_a_source_written_by_a_recent_pass_raises_the_risk():
    before = risk("exact duplicate").score
    after = risk("exact duplicate", recent={"m1": "pass #7, 1 day ago"})
    assert after.score > before and "m1 was written by pass #7, 1 day ago" in after.reasons


def test_the_threshold_comes_from_the_policy():
    loose = risk("far near duplicate")
    strict = risk("far near duplicate", policy=Policy(link_threshold=0.96))
    assert strict.score > loose.score and "link threshold 0.96" in strict.reasons[0]


def test_a_merge_that_keeps_a_number_out_of_order_is_less_risky_than_one_that_drops_it():
    dropped = risk("near number merge").score
    kept = op(
        "merge",
        [("The deadline is June 3.", True), ("The deadline is June 5.", True)],
        "The deadline is June 3. The deadline is June 5.",
        "near_duplicate",
        {"min_cosine": 0.905},
    )
    assert operation_risk(kept, operation_loss(kept)).score < dropped


def test_a_semantic_window_is_not_scored_as_a_near_duplicate_of_low_similarity():
    """A window joins different facts of one session and speaker: a low cosine between them
    is expected, not a doubt that they state one fact (only disagreement and loss count)."""
    facts = [("Jon likes dancing.", True), ("Jon opened a studio.", True)]
    merged = "Jon likes dancing. Jon opened a studio."
    window = op("merge", facts, merged, "semantic_window", {"min_cosine": 0.31})
    same = op("merge", facts, merged, "near_duplicate", {"min_cosine": 0.31})
    w = operation_risk(window, operation_loss(window))
    assert w.score < 0.25 < operation_risk(same, operation_loss(same)).score, w
    clash = op(
        "merge",
        [("The deadline is June 3.", True), ("Jon's deadline is June 5.", True)],
        "The deadline is June 3. Jon's deadline is June 5.",
        "semantic_window",
        {"min_cosine": 0.31},
    )
    assert any(
        "different numbers" in r for r in operation_risk(clash, operation_loss(clash)).reasons
    )


def test_a_reconcile_below_the_contradiction_threshold_says_below_not_near():
    """A reconcile on an update cue between loosely similar memories is the doubtful kind: the
    card says its cosine is below the threshold (it said "near" for 0.616 against 0.75)."""
    low = op(
        "reconcile",
        [("Jon lives in Paris.", True), ("Jon moved to Rome.", False)],
        rule="update",
        scores={"cosine": 0.616},
    )
    reasons = operation_risk(low, operation_loss(low)).reasons
    assert any("0.616 is below the contradiction threshold 0.75" in r for r in reasons), reasons


@pytest.mark.parametrize(
    ("facts", "negates"),
    [
        (["Jon tanzt gern.", "Jon hat ein Studio eröffnet."], False),
        (["Jon tanzt gern.", "Jon tanzt nicht mehr."], True),
        (["Marie aime la danse.", "Marie a ouvert un studio."], False),
        (["Marie aime la danse.", "Marie ne danse plus jamais."], True),
    ],
)
def test_a_window_s_low_cosine_is_no_doubt_but_a_negation_still_is_in_any_language(
    facts: list[str], negates: bool
) -> None:
    """The window rule in German and French: a low cosine alone lets a window pass the risk
    line; a source that negates another still holds it back (the multilingual cue table)."""
    window = op("merge", [(f, True) for f in facts], " ".join(facts), "semantic_window")
    window.scores["min_cosine"] = 0.31
    risk = operation_risk(window, operation_loss(window))
    assert any("negates" in r for r in risk.reasons) is negates, risk
    assert (risk.score >= 0.25) is negates, risk


@pytest.mark.parametrize(
    "facts",
    [
        ["Jon dances every week.", "Jon no longer dances."],
        ["Jon tanzt jede Woche.", "Jon tanzt nicht mehr."],
        ["Marie danse chaque semaine.", "Marie ne danse plus."],
    ],
)
def test_a_window_joining_a_state_and_its_end_waits_for_a_person(facts: list[str]) -> None:
    """ "X" beside "no longer X" in one merged text is an update hidden in it: even with both
    sentences kept the window scores above the auto-apply line (0.25), in each language."""
    window = op("merge", [(f, True) for f in facts], " ".join(facts), "semantic_window")
    window.scores["min_cosine"] = 0.31
    risk = operation_risk(window, operation_loss(window))
    assert risk.score > 0.25 and any("negates" in r for r in risk.reasons), risk
