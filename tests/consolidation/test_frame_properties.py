"""Properties of one slot (unsure means ask): a pair in one frame that differs in one value is
reconciled or asked, never silently both (nor merged); a pair that differs in a name is never
reconciled. Frames in en, de, fr, es, ja, zh; values are words, numbers with the same unit,
versions and names; any cosine, dated either way or not at all.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from consolidation.judgment import CONFLICT, SUPERSEDES, judge_pair

SUBJECTS = ["Alice", "Bob", "The user"]
WORD_FRAMES = [
    ("{s}'s usual coffee order is a {v}", ["cortado", "espresso", "mocha", "macchiato"]),
    ("{s} uses {v} for web search", ["jina", "exa", "tavily", "serper"]),
    ("Device A of {s} is a {v} NAS", ["synology", "fnos", "qnap", "truenas"]),
    ("La boisson préférée de {s} est le {v}", ["café", "thé", "chocolat", "cidre"]),
    ("La bebida favorita de {s} es el {v}", ["café", "té", "mate", "zumo"]),
    ("{s}の好きな飲み物は{v}です", ["コーヒー", "紅茶", "緑茶", "牛乳"]),
    ("{s}喜欢的饮料是{v}", ["咖啡", "红茶", "牛奶", "果汁"]),
]
NUMBER_FRAMES = [
    "{s}'s API key rotates every {v} days",
    "The server of {s} runs Debian {v}",
    "Der Server von {s} läuft mit Debian {v}",
]
VERSION_FRAMES = ["The app version of {s} is {v}", "{s} deploys release {v} to staging"]
NAME_FRAMES = [
    "{s}'s manager is {v}",
    "{s}'s brother is named {v}",
    "Der Chef von {s} ist {v}",
    "Le frère de {s} s'appelle {v}",
    "El hermano de {s} se llama {v}",
]
NAMES = ["Carol", "Dave", "Jon", "John", "Erin", "Frank", "Grace", "Heidi"]
DATES = ["2026-02-01T09:00:00Z", "2026-11-01T09:00:00Z"]


@st.composite
def _metas(draw):
    how = draw(st.sampled_from(["older-first", "newer-first", "same", "none"]))
    a, b = {"user_id": "alice"}, {"user_id": "alice"}
    if how != "none":
        ia, ib = {"older-first": (0, 1), "newer-first": (1, 0), "same": (0, 0)}[how]
        a["created_at"], b["created_at"] = DATES[ia], DATES[ib]
    return a, b


@st.composite
def _slot_pair(draw):
    kind = draw(st.sampled_from(["word", "number", "version"]))
    s = draw(st.sampled_from(SUBJECTS))
    if kind == "word":
        frame, values = draw(st.sampled_from(WORD_FRAMES))
        if any(not c.isascii() for c in frame):
            s = draw(st.sampled_from(["アリス", "ボブ"] if "の" in frame else ["用户", "鲍勃"]))
        va, vb = draw(st.lists(st.sampled_from(values), min_size=2, max_size=2, unique=True))
    elif kind == "number":
        frame = draw(st.sampled_from(NUMBER_FRAMES))
        va, vb = (str(x) for x in draw(st.lists(st.integers(10, 99), min_size=2, max_size=2,
                                                unique=True)))  # fmt: skip
    else:
        frame = draw(st.sampled_from(VERSION_FRAMES))
        parts = st.tuples(st.integers(1, 12), st.integers(0, 9), st.integers(0, 9))
        va, vb = (".".join(map(str, p)) for p in draw(st.lists(parts, min_size=2, max_size=2,
                                                               unique=True)))  # fmt: skip
    return frame.format(s=s, v=va), frame.format(s=s, v=vb)


@settings(max_examples=200, deadline=None)
@given(_slot_pair(), _metas(), st.floats(0.0, 1.0))
def test_one_frame_one_value_apart_is_reconciled_or_asked_never_both_silently(pair, metas, cos):
    a, b = pair
    v = judge_pair(a, metas[0], b, metas[1], cosine=cos)
    assert v.kind in (SUPERSEDES, CONFLICT), (a, b, v.reasons)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(NAME_FRAMES),
    st.sampled_from(SUBJECTS[:2]),
    st.lists(st.sampled_from(NAMES), min_size=2, max_size=2, unique=True),
    st.booleans(),
    _metas(),
    st.floats(0.0, 1.0),
)
def test_a_different_name_is_never_reconciled(frame, s, names, now, metas, cos):
    a = frame.format(s=s, v=names[0])
    b = frame.format(s=s, v=("now " if now and "{s}'s" in frame else "") + names[1])
    v = judge_pair(a, metas[0], b, metas[1], cosine=cos)
    assert v.kind == CONFLICT, (a, b, v.reasons)
