"""judge_pair: one table per kind of difference, in several languages."""

from __future__ import annotations

import pytest

from consolidation import FieldMap, Policy
from consolidation.judgment import (
    CONFLICT,
    DISTINCT,
    SAME,
    SUPERSEDES,
    judge_pair,
    statement_kind,
)

OLD = {"created_at": "2025-01-10T00:00:00Z"}
NEW = {"created_at": "2025-03-01T00:00:00Z"}
AGGRESSIVE = Policy(link_threshold=0.5, contradiction_threshold=0.5)


def judge(a, b, am=None, bm=None, cosine=0.95, policy=None, fieldmap=None):
    return judge_pair(a, am or {}, b, bm or {}, cosine=cosine, policy=policy, fieldmap=fieldmap)


def both_ways(a, b, am, bm, **kw):
    """The verdict of (a, b) and of (b, a); ``newer`` is mapped back to (a, b) indices."""
    v1 = judge(a, b, am, bm, **kw)
    v2 = judge(b, a, bm, am, **kw)
    assert v1.kind == v2.kind, (v1, v2)
    if v1.newer is not None:
        assert v2.newer == 1 - v1.newer
    return v1


# --- 1. scope -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("am", "bm", "kind"),
    [
        ({"user_id": "alice"}, {"user_id": "bob"}, DISTINCT),  # a reported case
        ({"user_id": "alice"}, {}, DISTINCT),  # a scoped memory never meets an unscoped one
        ({"user_id": "alice", "agent_id": "x"}, {"user_id": "alice", "agent_id": "y"}, DISTINCT),
        ({"user_id": "alice", "run_id": "1"}, {"user_id": "alice", "run_id": "1"}, SAME),
        ({"user_id": "alice"}, {"user_id": "alice"}, SAME),
    ],
)
def test_it_never_compares_memories_of_different_scopes(am, bm, kind):
    v = both_ways(
        "Prefers dark mode in the editor",
        "Prefers dark mode in the editor",
        am,
        bm,
        cosine=1.0,
        policy=AGGRESSIVE,
    )
    assert v.kind == kind


def test_the_scope_keys_come_from_the_field_map():
    fm = FieldMap(scope=("tenant",))
    same = judge(
        "Likes tea",
        "Likes tea",
        {"user_id": "a", "tenant": "t"},
        {"user_id": "b", "tenant": "t"},
        fieldmap=fm,
    )
    other = judge("Likes tea", "Likes tea", {"tenant": "t1"}, {"tenant": "t2"}, fieldmap=fm)
    assert (same.kind, other.kind) == (SAME, DISTINCT)


# --- 2. empty text -------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), [("", ""), ("  ", "\t\n"), ("", "Alice likes jazz")])
def test_an_empty_text_is_never_a_duplicate(a, b):
    assert both_ways(a, b, {}, {}, cosine=1.0, policy=AGGRESSIVE).kind == DISTINCT


# --- 3. exact duplicates and fact atoms ----------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        ("Alice likes jazz", "alice   LIKES jazz!", SAME),
        ("Ｕｓｅｒ prefers Python", "user prefers python", SAME),  # NFKC
        ("我喜欢猫。", "我喜欢猫", SAME),
        ("User prefers C++", "User prefers C", DISTINCT),  # a reported case
        ("User prefers C#", "User prefers C", DISTINCT),
        ("User prefers C++", "User prefers C#", DISTINCT),
        ("Alice 🎉 the release", "Alice 🔥 the release", DISTINCT),
        ("Merged PR #260 into main", "Merged PR #480 into main", DISTINCT),  # a reported case
        ("Fixed in commit 3f2a9c1", "Fixed in commit 8b7e6d5", DISTINCT),
        ("Ticket ABC-123 is closed", "Ticket ABC-124 is closed", DISTINCT),
        ("Mail bob@example.com for access", "Mail rob@example.com for access", DISTINCT),
        ("Docs at https://a.example/v1", "Docs at https://a.example/v2", DISTINCT),
        # a version of one frame is a slot's value, not a record's id: asked
        ("Runs version 1.4.2", "Runs version 1.4.3", CONFLICT),
        ("Holds $AAPL", "Holds $MSFT", DISTINCT),
        ("Uses model gpt4", "Uses model gpt5", DISTINCT),
        ("Meeting on 2025-03-01", "Meeting on 2025-03-08", DISTINCT),
        ("Meeting on March 1, 2025", "Meeting on March 8, 2025", DISTINCT),
        ("Treffen am 3. März 2025", "Treffen am 4. März 2025", DISTINCT),
        ("会议在2025年3月1日", "会议在2025年3月8日", DISTINCT),
        ("Standup at 9:30", "Standup at 10:30", DISTINCT),
        ("Bob adopted a dog in 2021", "Bob adopted a dog in 2022", DISTINCT),
    ],
)
def test_exact_duplicates_and_replaced_atoms(a, b, kind):
    """Identical after NFKC/casefold/whitespace → same; a replaced atom → distinct, even at
    cosine 0.99 under an aggressive policy."""
    v = both_ways(a, b, OLD, NEW, cosine=0.99, policy=AGGRESSIVE)
    assert v.kind == kind, v.reasons


def test_polar_emoji_are_a_conflict_not_a_merge():
    v = both_ways(
        "Alice 👍 the new logo design",
        "Alice 👎 the new logo design",
        OLD,
        NEW,
        cosine=0.99,
        policy=AGGRESSIVE,
    )  # a reported case
    assert v.kind == CONFLICT and v.cue == "polarity"


def test_an_added_atom_is_more_detail_not_a_change():
    v = both_ways("Alice has 2 cats", "Alice has 2 cats and 1 dog", {}, {}, cosine=0.93)
    assert v.kind == SAME


# --- 4. every language: negation and past-state cues --------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "cue"),
    [
        ("Alice likes jazz", "Alice doesn't like jazz", "negation"),
        ("Sam smokes", "Sam used to smoke", "past_state"),  # a reported case
        ("Sam smokes", "Sam no longer smokes", "past_state"),
        ("Sam smokes", "Sam doesn't smoke anymore", "past_state"),
        ("Sam raucht", "Sam raucht nicht", "negation"),  # de
        ("Sam raucht", "Sam raucht nicht mehr", "past_state"),
        ("Sam fume", "Sam ne fume pas", "negation"),  # fr
        ("Sam fume", "Sam ne fume plus", "past_state"),
        ("Sam fuma", "Sam no fuma", "negation"),  # es
        ("Sam fuma", "Sam ya no fuma", "past_state"),
        ("Sam fuma", "Sam não fuma", "negation"),  # pt
        ("Sam fuma", "Sam non fuma", "negation"),  # it
        ("Sam fuma", "Sam non fuma più", "past_state"),
        ("Sam rookt", "Sam rookt niet", "negation"),  # nl
        ("Sam rookt", "Sam rookt niet meer", "past_state"),
        ("Сэм курит", "Сэм не курит", "negation"),  # ru
        ("Сэм курит", "Сэм больше не курит", "past_state"),
        ("在代码里使用分号", "不要在代码里使用分号", "negation"),  # zh, a reported case
        ("小明有猫", "小明没有猫", "negation"),
        ("小明吃肉", "小明不再吃肉", "past_state"),
        ("サムはタバコを吸います", "サムはタバコを吸いません", "negation"),  # ja
        ("민수는 담배를 피운다", "민수는 담배를 안 피운다", "negation"),  # ko
        ("민수는 고양이가 있다", "민수는 고양이가 없다", "negation"),
        ("ทอมดื่มกาแฟ", "ทอมไม่ดื่มกาแฟ", "negation"),  # th
    ],
)
def test_a_cue_is_never_a_merge_and_needs_recency_to_supersede(a, b, cue):
    """Unknown recency → conflict; never same at any threshold."""
    for pol in (Policy(), AGGRESSIVE):
        v = both_ways(a, b, {}, {}, cosine=0.99, policy=pol)
        assert v.kind == CONFLICT and v.cue == cue, v.reasons
    dated = both_ways(a, b, OLD, NEW, cosine=0.99)
    assert dated.kind == SUPERSEDES and dated.newer == 1 and dated.cue == cue


def test_the_current_statement_wins_over_a_past_state():
    """ "Sam used to smoke" (older) / "Sam smokes" (newer): the current statement is kept."""
    v = judge("Sam used to smoke", "Sam smokes", OLD, NEW, cosine=0.8)
    assert (v.kind, v.newer, v.cue) == (SUPERSEDES, 1, "past_state")


# --- 5. recency ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("am", "bm", "kind", "newer"),
    [
        # a reported case: updated_at of the first beats the created_at of the second
        (
            {"created_at": "2025-01-10", "updated_at": "2025-05-20"},
            {"created_at": "2025-03-01"},
            SUPERSEDES,
            0,
        ),
        ({"created_at": "2025-01-10"}, {"created_at": "2025-03-01"}, SUPERSEDES, 1),
        ({"created_at": "2025-03-01"}, {"created_at": "2025-03-01"}, CONFLICT, None),
        ({}, {"created_at": "2025-03-01"}, CONFLICT, None),
        ({"created_at": "not a date"}, {"created_at": "2025-03-01"}, CONFLICT, None),
        ({}, {}, CONFLICT, None),
    ],
)
def test_recency_decides_which_state_is_current(am, bm, kind, newer):
    v = both_ways("Is allergic to penicillin", "Is not allergic to penicillin", am, bm, cosine=0.9)
    assert (v.kind, v.newer) == (kind, newer)


# --- 6. events are not states ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        ("The team has 12 engineers", "The team has 15 engineers", SUPERSEDES),  # a reported case
        ("Alice is 30 years old", "Alice is 31 years old", SUPERSEDES),
        ("Das Team hat 12 Ingenieure", "Das Team hat 15 Ingenieure", SUPERSEDES),
        ("团队有12名工程师", "团队有15名工程师", SUPERSEDES),
        ("Alice lives in Paris", "Alice lives in Berlin", SUPERSEDES),
        ("Alice ran 5 km", "Alice ran 10 km", DISTINCT),  # two readings
        ("Alice bought 2 tickets", "Alice bought 3 tickets", DISTINCT),
        ("Alice hat 2 Karten gekauft", "Alice hat 3 Karten gekauft", DISTINCT),
        ("Merged PR #260 into main", "Merged PR #480 into main", DISTINCT),
        ("Her dog is named Rex", "Her dog is called Rex", SAME),  # synonyms, not a value
        ("Alice met Bob", "Alice met Carol", DISTINCT),  # a different name
        (
            "Caroline went to an LGBTQ support group on Sunday.",
            "On Sunday Caroline attended the LGBTQ support group.",
            SAME,
        ),
    ],
)
def test_changed_numbers_supersede_only_states(a, b, kind):
    v = both_ways(a, b, OLD, NEW, cosine=0.95)
    assert v.kind == kind, v.reasons
    if kind == SUPERSEDES:
        assert v.newer == 1


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("The team has 12 engineers", "state"),
        ("Sam used to smoke", "state"),
        ("Is allergic to penicillin", "state"),
        ("Alice is married to Bob", "state"),
        ("Merged PR #260 into main", "event"),
        ("Alice ran 5 km", "event"),
        ("Meeting on 2025-03-01", "event"),
        ("Alice hat 2 Karten gekauft", "event"),
        ("小明昨天买了书", "event"),
        ("Nice weather", "unknown"),
    ],
)
def test_it_tells_states_from_events(text, kind):
    assert statement_kind(text) == kind


# --- 7/9. aggressive thresholds and conflicts ---------------------------------------------------


@pytest.mark.parametrize("link", [0.3, 0.5, 0.82, 0.9, 0.99])
def test_no_threshold_merges_a_contradiction(link):
    pol = Policy(link_threshold=link, contradiction_threshold=0.3)
    for a, b in [
        ("Alice likes jazz", "Alice does not like jazz"),
        ("Alice likes jazz and rock music in bars", "Alice never likes jazz"),
        ("The team has 12 engineers", "The team has 15 engineers"),
        ("Sam used to smoke", "Sam smokes"),
    ]:
        assert judge(a, b, cosine=0.999, policy=pol).kind != SAME


def test_similar_paraphrases_merge_and_unrelated_texts_do_not():
    assert judge("Alice likes jazz", "Alice enjoys jazz a lot", cosine=0.93).kind == SAME
    # below the link threshold only a lossless duplicate (one text's words all in the other)
    # is the same fact; a pair that adds and drops a word each is not
    assert judge("Alice likes jazz", "Alice enjoys jazz a lot", cosine=0.85).lossless
    assert judge("Alice likes jazz", "Alice enjoys jazz in bars", cosine=0.85).kind == SAME
    # one frame ("likes jazz …"), one value differs: never merged, and asked
    assert judge("Alice likes jazz clubs", "Alice enjoys jazz bars", cosine=0.85).kind == CONFLICT
    assert (
        judge("Alice likes jazz", "Bob plays chess", cosine=0.95, policy=AGGRESSIVE).kind
        == DISTINCT
    )
    assert judge("Alice likes jazz", "Alice enjoys jazz", cosine=None).kind == DISTINCT


def test_a_conflict_explains_itself():
    v = judge("Is allergic to penicillin", "Is not allergic to penicillin", cosine=0.9)
    assert v.kind == CONFLICT and v.newer is None
    assert any("newer is unknown" in r for r in v.reasons)
