"""The shortcuts of the phrase and atom lookups answer exactly what the full lookups answer.

:class:`~consolidation.phrases.PhraseIndex` returns every phrase whose (word-bounded or plain)
regex can match and only phrases the text holds; a text the atom prefilter passes over holds
no atom; :func:`~consolidation.atoms.cue_hits` finds :func:`~consolidation.atoms.scan`'s cues.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consolidation.atoms import ATOM_HINT_RE, ATOM_RE, cue_hits, fold, scan
from consolidation.changes import CHANGE_EVENTS
from consolidation.cues import CUES
from consolidation.phrases import PhraseIndex
from consolidation.qualifiers import QUALIFIERS, UPDATE_MARKERS

TABLES = {
    "cues": [(r.phrase.split("…")[0].strip(), r.match == "word") for r in CUES],
    "qualifiers": [(r.phrase.split("…")[0].strip(), r.match == "word") for r in QUALIFIERS],
    "update markers": [(r.phrase.split("…")[0].strip(), r.match == "word") for r in UPDATE_MARKERS],
    "change events": [(r.phrase, r.match == "word") for r in CHANGE_EVENTS],
    "short and repeated": [
        ("a", True),
        ("", False),
        ("ab", False),
        ("ab", True),
        ("#x", True),
        ("不", False),
        ("不再", False),
    ],
}
WORDS = [p for rows in TABLES.values() for p, _ in rows] + ["the", "user", "x", "年", "5", "#"]


def matchable(phrase: str, bounded: bool, text: str) -> bool:
    esc = re.escape(phrase)
    return re.search(rf"(?<!\w){esc}(?!\w)" if bounded else esc, text) is not None


def check(rows: list[tuple[str, bool]], text: str) -> None:
    found = PhraseIndex([p for p, _ in rows], [b for _, b in rows]).present(text)
    assert found == sorted(set(found))
    assert all(rows[k][0] in text for k in found)
    assert {k for k, (p, b) in enumerate(rows) if matchable(p, b, text)} <= set(found)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x",
        "alice no longer lives in paris",
        "user switched to svelte for now",
        "用户不再喝酒",
        "ich bin jetzt nicht mehr im team",
        "il ne fume plus",
        "2024年no longer #x ab",
    ],
)
@pytest.mark.parametrize("table", sorted(TABLES))
def test_it_finds_every_phrase_that_can_match_and_only_phrases_the_text_holds(table, text):
    check(TABLES[table], text)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.sampled_from(WORDS), max_size=6), noise=st.text(max_size=12))
def test_it_holds_on_any_mixture_of_table_phrases(words, noise):
    text = fold(" ".join(words) + noise)
    for rows in TABLES.values():
        check(rows, text)


def test_it_refuses_flags_of_another_length():
    with pytest.raises(ValueError, match="2 phrases but 1"):
        PhraseIndex(["a", "b"], [True])


ATOMISH = ["monday", "www.x", "http://a", "a@b", "$abc", "#12", "deadbeef-", "v2", "3", "٣"]


@settings(max_examples=400, deadline=None)
@given(words=st.lists(st.sampled_from(WORDS + ATOMISH), max_size=6), noise=st.text(max_size=12))
def test_a_text_the_atom_prefilter_passes_over_holds_no_atom(words, noise):
    text = fold(" ".join(words) + noise)
    if ATOM_HINT_RE.search(text) is None:
        assert ATOM_RE.search(text) is None
    assert cue_hits(fold(text)) == list(scan(text).cues)


MARKED = [
    "User lives in Paris.",
    "User no longer lives in Paris.",
    "User used to smoke.",
    "The team switched to Teams for chat.",
    "Ist nach Zürich gezogen",
    "用户不能喝酒",
    "User moved on 2024-05-01 to Berlin",
    "Caroline can't wait for the concert!",
    "apple river stone cloud garden violin",
    "",
]


@pytest.mark.parametrize("text", MARKED)
def test_a_marked_text_is_one_with_a_marker_an_event_or_a_cue(text):
    from consolidation.changes import change_events
    from consolidation.planning.features import marked
    from consolidation.qualifiers import update_markers
    from consolidation.text import parse

    p = parse(text)
    expected = p.negations or p.past_state or update_markers(p.folded) or change_events(p.folded)
    assert marked(text) is bool(expected)


def test_a_union_finds_a_phrase_wherever_one_of_its_indexes_does():
    a, b = PhraseIndex(["no", "不再"], [True, False]), PhraseIndex(["now", "x"], [True, True])
    both = PhraseIndex.union(a, b)
    assert both.phrases == ("no", "不再", "now", "x") and both.bounded == (True, False, True, True)
    for text in ["no", "now", "不再", "x y", "nothing", ""]:
        assert bool(both.present(text)) == bool(a.present(text) or b.present(text))


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.sampled_from(WORDS + ATOMISH + ["NYC", "Alice", "doesn't"]), max_size=6),
    noise=st.text(max_size=8),
)
def test_marked_agrees_with_the_parse_on_any_mixture(words, noise):
    from consolidation.changes import change_events
    from consolidation.planning.features import marked
    from consolidation.qualifiers import update_markers
    from consolidation.text import parse

    text = " ".join(words) + noise
    p = parse(text)
    expected = p.negations or p.past_state or update_markers(p.folded) or change_events(p.folded)
    assert marked(text) is bool(expected)
