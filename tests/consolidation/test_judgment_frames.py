"""Same slot, other value → settled or asked.

Two memories of one scope that share a frame (subject and attribute words, one short span
differs) are reconciled when the dates order them and the newer text carries a change marker
or the attribute is single-valued; otherwise they are a conflict. A different name for the same
role is always asked. Labelled numbers of separate records, two events and two scopes stay
apart. Tables in en, de, fr, es, ja, zh.
"""

from __future__ import annotations

import pytest

from consolidation.judgment import CONFLICT, DISTINCT, SAME, SUPERSEDES, judge_pair

FEB = "2026-02-01T09:00:00Z"
NOV = "2026-11-01T09:00:00Z"


def _judge(a: str, b: str, *, dated: bool = True, user_b: str = "alice", cosine: float = 0.8):
    ma = {"user_id": "alice", **({"created_at": FEB} if dated else {})}
    mb = {"user_id": user_b, **({"created_at": NOV} if dated else {})}
    return judge_pair(a, ma, b, mb, cosine=cosine)


ASKED = [
    # a new user's planted cases
    ("Alice's timezone is Europe/Paris.", "Alice's timezone is Europe/Berlin.", "changed_name"),
    (
        "Bob runs Ubuntu 22.04 on his workstation.",
        "Bob runs Ubuntu 24.04 on his workstation.",
        "changed_number",
    ),  # fmt: skip
    ("Device A is a Synology NAS", "Device A is a fnos NAS", "changed_value"),
    ("The app version is 10.2.0", "The app version is 10.3.1", "changed_version"),
    ("Usual coffee order is a cortado", "Usual coffee order is a flat white", "changed_value"),
    ("Prefers cola to coffee", "Prefers coffee to cola", "changed_order"),
    # de
    (
        "Bobs Lieblingskaffee ist ein Cortado.",
        "Bobs Lieblingskaffee ist ein Espresso.",
        "changed_name",
    ),  # fmt: skip
    # fr
    ("Le serveur tourne sous Debian 11.", "Le serveur tourne sous Debian 12.", "changed_number"),
    ("Alice boit un café noir le matin.", "Alice boit un thé vert le matin.", "changed_value"),
    # es
    ("Bob prefiere el té al café.", "Bob prefiere el café al té.", "changed_order"),
    # ja
    ("アリスの好きな飲み物はコーヒーです。", "アリスの好きな飲み物は紅茶です。", "changed_value"),
    # zh
    ("用户喜欢的饮料是咖啡。", "用户喜欢的饮料是茶。", "changed_value"),
]


@pytest.mark.parametrize(("a", "b", "cue"), ASKED)
@pytest.mark.parametrize("dated", [True, False])
def test_one_slot_with_two_values_and_no_change_marker_is_asked(a, b, cue, dated):
    """No change marker and no single-valued attribute: which value holds (or whether both
    do) is a question — never two facts kept silently, never one merged text."""
    v = _judge(a, b, dated=dated)
    assert (v.kind, v.cue) == (CONFLICT, cue), v.reasons
    assert _judge(b, a, dated=dated).kind == CONFLICT


SETTLED = [
    ("Bob lives in Paris.", "Bob lives in Berlin."),  # single-valued attribute
    ("Bob weighs 80 kg.", "Bob weighs 78 kg."),
    ("ボブのエディタはVimです。", "ボブのエディタは今はEmacsです。"),  # 今は: a change marker
    ("The app version is 10.2.0", "The app version is now 10.3.1"),
    ("Usual coffee order is a cortado", "Usual coffee order is now a flat white"),
    ("Alice wohnt in Bern.", "Alice wohnt jetzt in Zürich."),
    ("Alice habite à Lyon.", "Alice habite maintenant à Paris."),
    ("Alice vive en Madrid.", "Alice ahora vive en Barcelona."),
    ("用户的手机是华为。", "用户的手机现在是小米。"),
]


@pytest.mark.parametrize(("a", "b"), SETTLED)
def test_a_dated_slot_with_a_change_marker_or_one_value_keeps_the_newer(a, b):
    v = _judge(a, b)
    assert (v.kind, v.newer) == (SUPERSEDES, 1), v.reasons
    # undated: which one holds is asked
    assert _judge(a, b, dated=False).kind == CONFLICT


NAMES = [
    ("Alice's brother is named Jon.", "Alice's brother is named John."),
    ("Bob's manager is Carol.", "Bob's manager is now Dave."),
    ("The human's first name is Chad", "The human's first name is Sarah"),
    ("Use Jina for web search", "Use Exa for web search"),
    ("Stack: Python, FastAPI, PostgreSQL, Redis", "Stack: Python, FastAPI, MySQL, Redis"),
    ("El servidor usa PostgreSQL como base de datos.", "El servidor usa MySQL como base de datos."),
    ("Der Teamleiter von Bob ist Carsten.", "Der Teamleiter von Bob ist jetzt Dieter."),
]


@pytest.mark.parametrize(("a", "b"), NAMES)
def test_a_different_name_for_the_same_role_is_always_asked_never_reconciled(a, b):
    """Even dated and with "now": Jon → John may be a spelling fix or another person."""
    for x, y in ((a, b), (b, a)):
        v = _judge(x, y)
        assert (v.kind, v.cue) == (CONFLICT, "changed_name"), v.reasons


KEPT = [
    ("Invoice #260 is paid.", "Invoice #480 is paid."),  # labelled numbers: two records
    ("Ticket 4411 is open.", "Ticket 4412 is open."),
    ("Alice went to Paris last week.", "Alice went to Rome last week."),  # two events
    ("Meeting on 2025-03-01", "Meeting on 2025-03-08"),
    ("Weight on 2026-05-01: 82.4 kg", "Weight on 2026-05-20: 81.9 kg"),
    ("The umber project is written in Kotlin.", "The ember project is written in Kotlin."),
    ("Alice hired Bob", "Bob hired Alice"),
    # LoCoMo conv-30: another predicate ("prepping for" / "runs"), not another value
    ("Jon is prepping for his own dance studio.", "Jon is a dancer who runs his own dance studio."),
]


@pytest.mark.parametrize(("a", "b"), KEPT)
def test_separate_records_events_and_subjects_stay_apart(a, b):
    assert _judge(a, b).kind == DISTINCT, _judge(a, b).reasons


@pytest.mark.parametrize(("a", "b", "_cue"), ASKED[:4])
def test_two_scopes_are_never_compared(a, b, _cue):
    """alice's old value and bob's new one: two users, nothing asked."""
    assert _judge(a, b, user_b="bob").kind == DISTINCT


def test_the_same_fact_twice_still_merges():
    assert _judge("Alice likes jazz", "alice likes jazz!").kind == SAME
    assert _judge("Uses React for the frontend", "Uses React for the frontend.").kind == SAME


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "A flaky test in gazette fails when the clock crosses midnight.",
            "A flaky test in harbor fails when the clock crosses midnight.",
        ),
        (
            "The iris service follows a hexagonal architecture.",
            "The hemlock service follows a hexagonal architecture.",
        ),
        ("The juniper project is written in TypeScript.", "The juniper project uses TypeScript."),
    ],
)
@pytest.mark.parametrize("dated", [True, False])
def test_another_subject_or_another_predicate_is_not_a_second_value(a, b, dated):
    """The demo's coding store asked 388 such questions: a word that differs before the
    predicate names another subject (two facts), and "is written in" / "uses" are two ways of
    saying one fact; neither is one slot with two values."""
    assert _judge(a, b, dated=dated, cosine=0.9).kind != CONFLICT
