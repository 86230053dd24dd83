"""Which phrases of a fixed table a text contains, without testing every phrase.

The cue, qualifier, update-marker and change-event tables (:mod:`consolidation.cues`,
:mod:`consolidation.qualifiers`, :mod:`consolidation.changes`) each hold a few hundred
phrases, and each lookup first asked ``phrase in text`` of every one of them: at 1M memories
that loop (Python, once per phrase and text) was most of a full plan's contradiction stage.
:class:`PhraseIndex` files the phrases under their first two characters; a text is then
read once for its two-character substrings and only the phrases filed under one of them are
tested. A phrase that occurs in the text starts with one of the text's two-character
substrings (or is shorter than two characters and always tested), so the answer is exactly
the phrases for which ``phrase in text`` holds, in table order.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["PhraseIndex"]


class PhraseIndex:
    """The phrases of ``phrases`` (a sequence of ``str``, kept in order) that occur in a text.

    :meth:`present` gives their indices; building the index costs one pass over the phrases.
    """

    def __init__(self, phrases: Sequence[str]) -> None:
        self.phrases = tuple(phrases)
        self._always = [k for k, p in enumerate(self.phrases) if len(p) < 2]
        self._by_pair: dict[str, list[int]] = {}
        for k, p in enumerate(self.phrases):
            if len(p) >= 2:
                self._by_pair.setdefault(p[:2], []).append(k)

    def present(self, text: str) -> list[int]:
        """Ascending indices ``k`` with ``phrases[k] in text`` (exactly those; ``[]`` for none).

        Cost: one set of the text's two-character substrings plus one substring test per
        phrase filed under one of them (and per phrase shorter than two characters)."""
        by_pair = self._by_pair
        found = [k for k in self._always if self.phrases[k] in text]
        for pair in {text[i : i + 2] for i in range(len(text) - 1)}:
            filed = by_pair.get(pair)
            if filed is not None:
                found.extend(k for k in filed if self.phrases[k] in text)
        found.sort()
        return found
