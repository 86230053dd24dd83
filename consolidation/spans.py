"""Two values in one frame, in scripts written without spaces: the span one text replaces.

In scripts with spaces, :func:`consolidation.judgment.judge_pair` keeps "likes jazz" /
"likes rock" apart ("one word differs: two values, not one fact"). Chinese and Japanese have no
spaces, so their tokens are character bigrams (:mod:`consolidation.atoms`): a changed character
changes two bigrams on each side and that rule never fires — "我的生日是三月五日" /
"我的生日是三月六日" (two birthdays) and "我喜欢吃饺子" / "我喜欢吃火锅" / "我喜欢吃烤鸭" (three
dishes) were merged into one text each. :func:`value_span` aligns the two texts character by
character and finds the short span one text has in place of the other's: a value in a shared
frame. The planner (:func:`consolidation.planning.grouping.verdict`) turns a ``"same"`` verdict
with such a span into ``"distinct"``, before any group, fold or window is formed, so no merged
text holds two values of one frame — a complete-linkage group needs every pair ``"same"``.

Conservative by design: a synonym in place of a word ("爱" / "喜欢") is also a replaced span,
so the pair stays two memories (a missed merge costs storage; a wrong one states a
contradiction). A span of hiragana only (a particle or an ending: "です" / "だ") or of
punctuation is no value.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from functools import lru_cache

from .atoms import fold

__all__ = ["MAX_VALUE_CHARS", "value_span"]

MAX_VALUE_CHARS = 8
"""The longest span (characters, each side) read as one value. Hand-picked: the values of the
reported cases and the table tests are 1–4 characters (a day "五", a dish "宫保鸡丁", a place
"北京", "ラーメン"); a longer replaced span is a rewording, left to the cosine and word rules."""

_NOSPACE = re.compile("[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
"""Hiragana, Katakana and Han: the scripts written without spaces that this module reads."""

_CONTENT = re.compile("[\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
"""Katakana and Han: a span with one of these names a thing (hiragana alone is grammar)."""


@lru_cache(maxsize=16384)
def _folded(text: str) -> str | None:
    """The folded text when it has a character of a script without spaces, else ``None``
    (computed once per memory text; most texts of most stores have none)."""
    f = fold(text)
    return f if _NOSPACE.search(f) else None


def value_span(a: str, b: str) -> tuple[str, str] | None:
    """The span ``a`` has in place of ``b``'s when both share a frame, else ``None``.

    Both texts are folded (:func:`consolidation.atoms.fold`) and aligned character by character
    (:class:`difflib.SequenceMatcher`, no junk heuristic). A frame is shared when the aligned
    characters are at least half of the shorter text. The span is the first replaced pair of
    1 to :data:`MAX_VALUE_CHARS` characters each, both holding a Han or Katakana character:
    ``value_span("我的生日是三月五日", "我的生日是三月六日") == ("五", "六")``. A text without
    Han or kana, an insertion only ("我喜欢吃饺子" / "我很喜欢吃饺子") or a longer rewording
    gives ``None``. Pure; never raises.
    """
    fa, fb = _folded(a), _folded(b)
    if fa is None or fb is None or fa == fb:
        return None
    sm = SequenceMatcher(None, fa, fb, autojunk=False)
    shared = sum(size for _, _, size in sm.get_matching_blocks())
    if 2 * shared < min(len(fa), len(fb)):
        return None
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        x, y = fa[i1:i2], fb[j1:j2]
        if (
            op == "replace"
            and len(x) <= MAX_VALUE_CHARS
            and len(y) <= MAX_VALUE_CHARS
            and _CONTENT.search(x)
            and _CONTENT.search(y)
        ):
            return x, y
    return None
