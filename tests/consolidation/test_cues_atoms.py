"""The cue table and the tokenizer: every required language, every script, every atom kind."""

from __future__ import annotations

import unicodedata

import pytest

from consolidation.atoms import scan
from consolidation.cues import CUES, NEGATION, PAST_STATE, find_cues
from consolidation.text import content_tokens, extractive_merge

REQUIRED = ["en", "de", "fr", "es", "pt", "it", "nl", "ru", "zh", "ja", "ko"]


@pytest.mark.parametrize("lang", REQUIRED)
def test_the_cue_table_covers_each_required_language(lang):
    kinds = {r.kind for r in CUES if r.lang == lang}
    assert kinds == {NEGATION, PAST_STATE}


def test_every_cue_row_has_a_source_and_one_meaning():
    meaning: dict[str, str] = {}
    for row in CUES:
        assert row.source.startswith("wiktionary:") and len(row.source) > len("wiktionary:")
        assert row.match in ("word", "substring")
        assert meaning.setdefault(row.phrase, row.kind) == row.kind, row.phrase


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("sam does not smoke", [NEGATION]),
        ("sam no longer smokes", [PAST_STATE]),
        ("je ne fume pas", [NEGATION]),  # a discontinuous pair counts once
        ("je ne fume plus", [PAST_STATE]),
        ("sie raucht keine zigaretten mehr", [PAST_STATE]),
        ("不要在代码里使用分号", [NEGATION]),
        ("他以前抽烟", [PAST_STATE]),
        ("もう吸わない", [PAST_STATE]),
        ("안녕하세요", []),  # "안" only as a word
        ("alice likes jazz", []),
    ],
)
def test_it_finds_cues(text, kinds):
    hits, _ = find_cues(text)
    assert [h.kind for h in hits] == kinds


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("Merged PR #260", "id", "#260"),
        ("Closed PR-480", "id", "pr-480"),
        ("commit 3f2a9c1e", "id", "3f2a9c1e"),
        ("id 123e4567-e89b-12d3-a456-426614174000", "id", "123e4567-e89b-12d3-a456-426614174000"),
        ("write to bob@example.com", "id", "bob@example.com"),
        ("see https://example.com/a?b=1.", "id", "https://example.com/a?b=1"),
        ("release v2.1.0", "id", "v2.1.0"),
        ("bought $AAPL", "id", "$aapl"),
        ("uses gpt4", "id", "gpt4"),
        ("on 2025-03-01", "date", "2025-03-01"),
        ("on March 3, 2025", "date", "march 3, 2025"),
        ("le 3 mars 2025", "date", "3 mars 2025"),
        ("2025年3月1日", "date", "2025年3月1日"),
        ("at 10:30", "date", "10:30"),
        ("has 1,000 users", "number", "1000"),
        ("weighs 3,5 kg", "number", "3.5"),
        ("balance -200", "number", "-200"),
        ("balance +200", "number", "+200"),
        ("temperature −5°C", "number", "-5°c"),
        ("ran 5km", "number", "5km"),
        ("has two cats", "number", "2"),
        ("有3个孩子", "number", "3"),
        ("prefers C++", "symbol", "c++"),
        ("prefers C#", "symbol", "c#"),
        ("grade A+", "symbol", "a+"),
        ("Alice 👍️ it", "emoji", "👍"),
    ],
)
def test_it_keeps_fact_atoms_whole(text, kind, value):
    assert (kind, value) in scan(text).tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("在代码里使用分号", ["在代", "代码", "码里", "里使", "使用", "用分", "分号"]),
        ("猫", ["猫"]),
        ("東京に住んでいる", ["東京", "京に", "に住", "住ん", "んで", "でい", "いる"]),
        ("Zoë lives in Zürich", ["zoë", "liv", "zürich"]),
        ("Мария живёт в Москве", ["мария", "живёт", "в", "москве"]),
    ],
)
def test_content_tokens_work_for_every_script(text, expected):
    assert content_tokens(text) == expected


def test_thai_marks_stay_with_their_letters():
    grams = [v for k, v in scan("ดื่มกาแฟ").tokens if k == "gram"]
    assert grams == ["ดื่ม", "มก", "กา", "าแ", "แฟ"]
    assert not any(unicodedata.category(g[0]).startswith("M") for g in grams)


def test_an_extractive_merge_keeps_chinese_sentences():
    merged = extractive_merge(["我喜欢猫。", "我喜欢猫。我住在上海。"], 1000)
    assert merged is not None and "上海" in merged and "猫" in merged
