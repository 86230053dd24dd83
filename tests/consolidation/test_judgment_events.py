"""Events that end or change a state.

A change event that names an older state's attribute or object supersedes it when it states
the new value, else asks; an event that agrees with the state is never asked; a leading verb
is never the subject. Tables in en, de, fr, es, ja, zh.
"""

from __future__ import annotations

import pytest

from consolidation.changes import CHANGE_EVENTS, change_events
from consolidation.judgment import CONFLICT, DISTINCT, SUPERSEDES, judge_pair
from consolidation.text import subject_of

FEB = {"user_id": "alice", "created_at": "2026-02-01T09:00:00Z"}
NOV = {"user_id": "alice", "created_at": "2026-11-01T09:00:00Z"}
UNDATED = {"user_id": "alice"}

NEW_VALUE = [
    ("User prefers React", "User switched to Svelte"),
    ("Wohnt in Bern", "Ist nach Zürich gezogen"),
    (
        "The main branch is read-only until the security review lands",
        "The security review has landed and the main branch is open again",
    ),
    (
        "Use SQLAlchemy ORM and Alembic for migrations",
        "Switched to Tortoise ORM and Aerich for migrations",
    ),  # fmt: skip
    ("Habite à Lyon.", "A déménagé à Paris."),
    ("Vive en Madrid.", "Se mudó a Barcelona."),
    ("ボブは東京に住んでいる。", "ボブは大阪に引っ越した。"),
    ("用户住在北京。", "用户搬到上海了。"),
    ("Bob lives in Lyon.", "Bob moved from Lyon to Paris."),
]


@pytest.mark.parametrize(("state", "event"), NEW_VALUE)
def test_a_newer_event_with_the_new_value_supersedes_the_state(state, event):
    v = judge_pair(state, FEB, event, NOV, cosine=0.6)
    assert (v.kind, v.newer) == (SUPERSEDES, 1), v.reasons
    v = judge_pair(event, NOV, state, FEB, cosine=0.6)
    assert (v.kind, v.newer) == (SUPERSEDES, 0), v.reasons


@pytest.mark.parametrize(("state", "event"), NEW_VALUE)
def test_an_undated_or_older_event_is_asked(state, event):
    assert judge_pair(state, UNDATED, event, UNDATED, cosine=0.6).kind == CONFLICT
    assert judge_pair(state, NOV, event, FEB, cosine=0.6).kind == CONFLICT


ENDED = [
    ("Partner is Sarah", "Broke up with Sarah last month"),
    ("Bob's girlfriend is Sarah.", "Bob broke up with Sarah."),
    ("Die Freundin von Bob ist Sarah.", "Bob hat sich von Sarah getrennt."),
    ("La copine de Bob est Sarah.", "Bob a rompu avec Sarah."),
    ("La novia de Bob es Sarah.", "Bob rompió con Sarah."),
    ("ボブの彼女はサラです。", "ボブはサラと別れた。"),
    ("鲍勃的女朋友是莎拉。", "鲍勃和莎拉分手了。"),
    (
        "The main branch is read-only until the security review lands",
        "The security review has landed.",
    ),  # fmt: skip
]


@pytest.mark.parametrize(("state", "event"), ENDED)
def test_an_event_that_ends_a_state_without_a_new_value_is_asked(state, event):
    """The state ended, but what holds now is a question for a person."""
    v = judge_pair(state, FEB, event, NOV, cosine=0.6)
    assert v.kind == CONFLICT, v.reasons


AGREE = [
    ("Bob lives in Paris.", "Bob moved from Lyon to Paris."),
    ("Bob lebt in Paris.", "Bob ist von Lyon nach Paris gezogen."),
    ("User prefers Svelte", "User switched from React to Svelte"),
]


@pytest.mark.parametrize(("state", "event"), AGREE)
@pytest.mark.parametrize("dated", [True, False])
def test_an_event_that_agrees_with_the_state_is_never_asked(state, event, dated):
    """Item 4: "moved from Lyon to Paris" and "lives in Paris" agree on the current value."""
    ma, mb = (FEB, NOV) if dated else (UNDATED, UNDATED)
    for x, mx, y, my in ((state, ma, event, mb), (event, mb, state, ma)):
        v = judge_pair(x, mx, y, my, cosine=0.8)
        assert v.kind == DISTINCT, v.reasons


UNRELATED = [
    ("Caroline works at Google.", "Caroline left the party early."),
    ("Caroline likes painting.", "Caroline started painting last year."),
    ("Caroline works at Google.", "Caroline quit smoking."),
    ("Caroline uses a laptop for work.", "Caroline switched careers."),
    ("User uses a Mac", "User switched careers a year ago"),  # "a": an article, no destination
    # LoCoMo conv-30: "left" ends a job it names, not every state sharing a word with it
    (
        "Jon is a dancer who runs his own dance studio.",
        "Jon left his secure 9-5 job as a banker to pursue his passion for dancing.",
    ),  # fmt: skip
    ("Alice lives in Paris.", "Bob moved to Berlin."),
]


@pytest.mark.parametrize(("state", "event"), UNRELATED)
def test_an_event_about_something_else_changes_nothing(state, event):
    v = judge_pair(state, FEB, event, NOV, cosine=0.6)
    assert v.kind == DISTINCT, v.reasons


def test_two_scopes_are_never_linked():
    bob = {"user_id": "bob", "created_at": "2026-11-01T09:00:00Z"}
    assert judge_pair(
        "User prefers React", FEB, "User switched to Svelte", bob, cosine=0.9
    ).kind == (DISTINCT)


@pytest.mark.parametrize(
    "text", ["Switched to Tortoise ORM", "Use SQLAlchemy ORM", "Moved to Berlin", "Quit smoking"]
)
def test_a_leading_verb_is_never_the_subject(text):
    assert subject_of(text) is None


def test_every_row_has_a_source_and_every_language_is_present():
    assert {r.lang for r in CHANGE_EVENTS} == {"en", "de", "fr", "es", "ja", "zh"}
    for r in CHANGE_EVENTS:
        assert (
            r.source.startswith("wiktionary:")
            and r.attributes
            and r.kind
            in (
                "change",
                "end",
                "begin",
            )
        )
    assert [r.phrase for r in change_events("the security review has landed")] == ["has landed"]


DEADLINES = [
    ("The coupon is valid until March 3.", "The coupon's validity was extended to April 30."),
    ("The subscription runs until 2026-06-30.", "The subscription was extended to 2026-12-31."),
    ("Die Lizenz ist gültig bis 3. März 2026.", "Die Lizenz wurde bis 30. April 2026 verlängert."),
    (
        "Le bon est valable jusqu'au 3 mars 2026.",
        "La validité du bon a été prolongée jusqu'au 30 avril 2026.",
    ),
    (
        "El cupón es válido hasta el 3 de marzo de 2026.",
        "La validez del cupón se extendió hasta el 30 de abril de 2026.",
    ),
]


@pytest.mark.parametrize(("state", "event"), DEADLINES)
def test_an_extended_deadline_supersedes_the_old_one_when_dated_else_is_asked(state, event):
    """A date after "valid until", "gültig bis", "jusqu'au", "hasta" is the value of a state,
    not an event of its own: the newer extension replaces it (two dates used to read as two
    events, both kept silently)."""
    v = judge_pair(state, FEB, event, NOV, cosine=0.7)
    assert (v.kind, v.newer) == (SUPERSEDES, 1), v.reasons
    assert judge_pair(state, UNDATED, event, UNDATED, cosine=0.7).kind == CONFLICT


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("The coupon is valid until March 3.", "state"),
        ("Alice is in Paris until 5 May.", "state"),
        ("Der Gutschein ist gültig bis 3. März 2026.", "state"),
        ("Bob met Alice on 3 March 2023.", "event"),
        ("The meeting is on 3 March.", "event"),
        ("Bob stayed in Paris until 5 May.", "event"),
    ],
)
def test_a_date_is_an_event_unless_it_says_until_when_a_state_holds(text, kind):
    from consolidation.judgment import statement_kind

    assert statement_kind(text) == kind


def test_every_extended_deadline_is_reconciled_in_both_scopes_of_a_plan():
    from consolidation import OpKind

    from .test_judgment_kinds import SCOPES, _plan

    p = _plan(DEADLINES)
    settled = {frozenset(op.source_ids): op.removes for op in p.by_kind(OpKind.RECONCILE)}
    for s in SCOPES:
        for k in range(len(DEADLINES)):
            pair = frozenset({f"{s}-{k}-a", f"{s}-{k}-b"})
            assert settled.get(pair) == [f"{s}-{k}-a"], DEADLINES[k]
