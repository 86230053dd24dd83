"""Two values in one frame, in scripts written without spaces: the span one text replaces.

In scripts with spaces, :func:`consolidation.judgment.judge_pair` keeps "likes jazz" /
"likes rock" apart ("one word differs: two values, not one fact"). Chinese and Japanese (and
Thai, Lao, Khmer, Myanmar) have no spaces, so their tokens are character bigrams
(:mod:`consolidation.atoms`): a changed character changes two bigrams on each side and that
rule never fires — "我的生日是三月五日" /
"我的生日是三月六日" (two birthdays) and "我喜欢吃饺子" / "我喜欢吃火锅" / "我喜欢吃烤鸭" (three
dishes) were merged into one text each. :func:`value_span` reads the texts character by
character and finds the short span one text has in place of the other's: a value in a shared
frame. The planner (:func:`consolidation.planning.grouping.verdict`) turns a ``"same"`` verdict
with such a span into ``"distinct"`` before any merge group is formed, so no merged text holds
two values of one frame — a complete-linkage group needs every pair ``"same"``. (Folds and
windows join ``"distinct"`` pairs in every script alike: a dialog window is a transcript.)

Conservative by design: a synonym in place of a word ("爱" / "喜欢") is also a replaced span,
so the pair stays two memories (a missed merge costs storage; a wrong one states a
contradiction). A span of hiragana only (a particle or an ending: "です" / "だ") or of
punctuation is no value.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from functools import lru_cache

from .text import normalize_text

__all__ = ["MAX_VALUE_CHARS", "SEARCH_CHARS", "value_span"]

MAX_VALUE_CHARS = 8
"""The longest span (characters, each side) read as one value. Hand-picked: the values of the
reported cases and the table tests are 1–4 characters (a day "五", a dish "宫保鸡丁", a place
"北京", "ラーメン"); a longer replaced span is a rewording, left to the cosine and word rules."""

SEARCH_CHARS = 64
"""The longest differing part (characters, each side) aligned character by character to find
a value among several differences. :class:`difflib.SequenceMatcher` is quadratic on repetitive
text: measured here, two 200-character texts took 65 ms, two of 64 under 2 ms; a pair that
differs in more than this is a rewording (left to the cosine and word rules)."""

_SEA = "\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff"  # Thai, Lao, Myanmar, Khmer
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_NOSPACE = re.compile(f"[\u3040-\u30ff\u31f0-\u31ff{_HAN}{_SEA}]")
"""Hiragana, Katakana, Han, Thai, Lao, Myanmar and Khmer: the scripts written without spaces
(as :mod:`consolidation.atoms` reads them)."""

_CONTENT = re.compile(f"[\u30a0-\u30ff\u31f0-\u31ff{_HAN}{_SEA}]")
"""The same without hiragana: a span with one of these names a thing (hiragana alone is
grammar: a particle, an ending)."""


@lru_cache(maxsize=16384)
def _normalised(text: str) -> str | None:
    """The normalised text when it has a character of a script without spaces, else ``None``
    (computed once per memory text; most texts of most stores have none)."""
    f = normalize_text(text)
    return f if _NOSPACE.search(f) else None


def _common(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b``."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def value_span(a: str, b: str) -> tuple[str, str] | None:
    """The span ``a`` has in place of ``b``'s when both share a frame, else ``None``.

    Both texts are normalised (:func:`consolidation.text.normalize_text`: a final full stop is
    no difference); their common beginning and end are cut off, and the parts between, when
    each is at most :data:`SEARCH_CHARS` long, are aligned character by character
    (:class:`difflib.SequenceMatcher`, no junk heuristic). The span is both parts when each is
    at most :data:`MAX_VALUE_CHARS` characters, else the first replaced pair of at most that
    many. The span counts when both sides hold a character of a script without spaces other than
    hiragana, and the frame (the shared characters) is at least two characters and half the
    shorter differing part (a short frame, "我住在", holds a four-character value):
    ``value_span("我的生日是三月五日", "我的生日是三月六日") == ("五", "六")`` (normalised
    text, as :func:`~consolidation.text.normalize_text` gives it). A text without such a
    script, an insertion only ("我喜欢吃饺子" / "我很喜欢吃饺子") or a longer rewording
    gives ``None``. Pure; never raises; at most ~2 ms a pair (the alignment is bounded).
    """
    fa, fb = _normalised(a), _normalised(b)
    if fa is None or fb is None or fa == fb:
        return None
    head = _common(fa, fb)
    tail = _common(fa[head:][::-1], fb[head:][::-1])
    mx, my = fa[head : len(fa) - tail], fb[head : len(fb) - tail]
    if not mx or not my:
        return None  # one text adds to the other: nothing replaced
    if len(mx) > SEARCH_CHARS or len(my) > SEARCH_CHARS:
        return None
    sm = SequenceMatcher(None, mx, my, autojunk=False)
    shared = head + tail + sum(size for _, _, size in sm.get_matching_blocks())
    if len(mx) <= MAX_VALUE_CHARS and len(my) <= MAX_VALUE_CHARS:
        pairs = [(mx, my)]  # one short difference: the whole of it is the value
    else:
        pairs = [
            (mx[i1:i2], my[j1:j2]) for op, i1, i2, j1, j2 in sm.get_opcodes() if op == "replace"
        ]
    if shared < 2 or 2 * shared < min(len(mx), len(my)):
        return None  # no frame: two texts, not one text with another value
    for x, y in pairs:
        if (
            len(x) <= MAX_VALUE_CHARS
            and len(y) <= MAX_VALUE_CHARS
            and _CONTENT.search(x)
            and _CONTENT.search(y)
        ):
            return x, y
    return None
