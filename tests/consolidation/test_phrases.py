"""The phrase index answers exactly what testing every phrase answers, in table order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consolidation.atoms import fold
from consolidation.changes import CHANGE_EVENTS
from consolidation.cues import CUES
from consolidation.phrases import PhraseIndex
from consolidation.qualifiers import QUALIFIERS, UPDATE_MARKERS

TABLES = {
    "cues": [r.phrase for r in CUES],
    "qualifiers": [r.phrase for r in QUALIFIERS],
    "update markers": [r.phrase for r in UPDATE_MARKERS],
    "change events": [r.phrase for r in CHANGE_EVENTS],
    "short and repeated": ["a", "", "ab", "ab", "b…c", "不", "不再"],
}


def every_phrase(phrases: list[str], text: str) -> list[int]:
    return [k for k, p in enumerate(phrases) if p in text]


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
    ],
)
@pytest.mark.parametrize("table", sorted(TABLES))
def test_it_finds_exactly_the_phrases_a_text_holds(table, text):
    phrases = TABLES[table]
    assert PhraseIndex(phrases).present(text) == every_phrase(phrases, text)


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(
        st.sampled_from([p for ps in TABLES.values() for p in ps] + ["the", "user", "x"]),
        max_size=6,
    ),
    noise=st.text(max_size=12),
)
def test_it_matches_every_table_on_any_mixture(words, noise):
    text = fold(" ".join(words) + noise)
    for phrases in TABLES.values():
        assert PhraseIndex(phrases).present(text) == every_phrase(phrases, text)
