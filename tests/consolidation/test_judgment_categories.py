"""Category retractions: "No longer likes eating any fruit" against "Likes apples and
strawberries" is asked, never kept silently beside it (en de fr es, two scopes, through the
update channel of a real plan) — or settled by the update rule when it is sure (the same subject
and attribute, a change marker, the retraction newer); a category that is not retracted,
another category, or no shared predicate leaves the pair to the other rules."""

from __future__ import annotations

import pytest

from consolidation import OpKind
from consolidation.categories import CATEGORIES, category_ruling
from consolidation.judgment import CONFLICT, SUPERSEDES
from consolidation.text import parse

from .test_judgment_kinds import SCOPES, _judge, _plan

RETRACTED = [
    ("Likes apples and strawberries.", "No longer likes eating any fruit."),
    ("Bob drinks beer and wine on Fridays.", "Bob doesn't drink alcohol anymore."),
    ("User drinks a flat white every morning.", "User no longer drinks coffee."),
    ("User plays tennis on weekends.", "User no longer plays any sports."),
    ("Ich esse gern Äpfel.", "Ich esse kein Obst mehr."),
    ("Il boit du vin le soir.", "Il ne boit plus d'alcool."),
    ("Come pollo los domingos.", "Ya no come carne."),
]

LEFT_ALONE = [
    ("Likes apples.", "Likes fruit."),  # nothing retracted
    ("Eats chicken on Sundays.", "Doesn't eat fish."),  # another category
    ("Alice likes jazz.", "Alice no longer likes fruit."),  # no member named
    ("Apples are on sale.", "No longer likes fruit."),  # no predicate in common
    ("Tim ate strawberries at the fair on 3 May 2023.", "Tim no longer eats fruit."),  # an event
    (  # a summary that holds a "not" and a category word is no retraction
        "Nate makes ice cream for friends.",
        "Nate apologized for not being around, mentioning that he made ice cream and other "
        "desserts for a friend's party, tried a new recipe and went to the gym twice.",
    ),
]


@pytest.mark.parametrize(("a", "b"), RETRACTED)
def test_a_retracted_category_is_asked_or_the_newer_retraction_wins(a, b):
    v = _judge(a, b)
    assert (v.kind, v.cue) == (CONFLICT, "category") or (v.kind, v.newer) == (SUPERSEDES, 1)
    for v in (_judge(a, b, dated=False), _judge(b, a)):  # undated, or the retraction older
        assert v.kind == CONFLICT, v.reasons


def test_a_retraction_with_no_common_subject_is_asked_by_the_category_rule():
    a, b = RETRACTED[0]
    for v in (_judge(a, b), _judge(a, b, dated=False)):
        assert (v.kind, v.cue) == (CONFLICT, "category"), v.reasons


@pytest.mark.parametrize(("a", "b"), LEFT_ALONE)
def test_no_retraction_of_the_members_category_leaves_it_to_the_other_rules(a, b):
    from consolidation.judgment import statement_kind

    kinds = (statement_kind(a), statement_kind(b))
    assert category_ruling(a, b, parse(a), parse(b), kinds=kinds) is None
    assert _judge(a, b).cue != "category"


def test_the_reason_names_the_category_and_the_members_as_written():
    a, b = RETRACTED[0]
    v = _judge(a, b)
    assert "retracts a category (fruit)" in v.reasons[0]
    assert "(apple, strawberry)" in v.reasons[0]


def test_every_retraction_is_asked_in_both_scopes_of_a_plan():
    """The pairs score low (0.5–0.7), share only their predicate and have no change event: the
    update channel offers them because one retracts a category the other names."""
    p = _plan(RETRACTED)
    asked = {frozenset(op.source_ids) for op in p.by_kind(OpKind.CONFLICT)}
    settled = {frozenset(op.source_ids): op.removes for op in p.by_kind(OpKind.RECONCILE)}
    for s in SCOPES:
        for k in range(len(RETRACTED)):
            pair = frozenset({f"{s}-{k}-a", f"{s}-{k}-b"})
            assert pair in asked or settled.get(pair) == [f"{s}-{k}-a"], RETRACTED[k]
    assert frozenset({"alice-0-a", "alice-0-b"}) in asked  # the fruit: no subject in common
    assert not p.by_kind(OpKind.MERGE)
    for op in p.operations:
        assert len({sid.split("-")[0] for sid in op.source_ids}) == 1


def test_every_row_has_a_source_and_names_its_members_apart_from_itself():
    for row in CATEGORIES:
        assert row.source.startswith("wiktionary:") and row.lang in {"en", "de", "fr", "es"}
        names = {t for w in row.words for t in parse(w).tokens}
        for m in row.members:
            toks = set(parse(m).tokens)
            assert toks and not toks <= names, (row.words, m)
