"""Which phrases of a fixed table can match in a text, without testing every phrase.

The cue, qualifier, update-marker and change-event tables (:mod:`consolidation.cues`,
:mod:`consolidation.qualifiers`, :mod:`consolidation.changes`) each hold a few hundred
phrases, and each lookup first asked ``phrase in text`` of every one of them before running
the phrase's regex: at 1M memories that loop (Python, once per phrase and text) was most of
a full plan's contradiction stage.

:class:`PhraseIndex` files each phrase under a key the text must hold for the phrase's regex
to match anywhere in it:

- a *word-bounded* phrase (matched as ``(?<!\\w)phrase(?!\\w)``, the tables' ``"word"`` rows)
  that starts with a word character, under its leading run of word characters: where the
  phrase matches, that run stands between two non-word characters, so it is one of the text's
  ``\\w+`` words ("no longer" → ``"no"``, "n'" → ``"n"``);
- any other phrase (``"substring"`` rows: Chinese, Japanese …), under its first character.

A text is read once for its words and its characters, and only the phrases filed under one
of them are tested with ``phrase in text``. Every phrase whose regex can match is returned
(with the regex's own word boundaries, it needs its key), so the callers, which run the regex
on what is returned, find exactly what testing every phrase found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["PhraseIndex"]

_WORD = re.compile(r"\w+")


class PhraseIndex:
    """An index of ``phrases`` (``str``, kept in order); ``bounded[k]`` says whether phrase
    ``k`` only ever matches between word boundaries (see the module docstring).

    Raises ``ValueError`` when the two sequences differ in length."""

    def __init__(self, phrases: Sequence[str], bounded: Sequence[bool]) -> None:
        if len(phrases) != len(bounded):
            raise ValueError(f"{len(phrases)} phrases but {len(bounded)} bounded flags")
        self.phrases = tuple(phrases)
        self.bounded = tuple(bool(b) for b in bounded)
        self._always: list[int] = []
        self._by_word: dict[str, list[int]] = {}
        self._by_char: dict[str, list[int]] = {}
        for k, (p, b) in enumerate(zip(self.phrases, bounded, strict=True)):
            lead = _WORD.match(p) if b else None
            if lead is not None:
                self._by_word.setdefault(lead.group(0), []).append(k)
            elif p:
                self._by_char.setdefault(p[0], []).append(k)
            else:
                self._always.append(k)
        self._words = frozenset(self._by_word)
        self._chars = frozenset(self._by_char)

    @classmethod
    def union(cls, *indexes: PhraseIndex) -> PhraseIndex:
        """One index of every phrase of ``indexes`` (in their order, each with its own
        ``bounded`` flag): it finds a phrase wherever one of them does."""
        phrases: list[str] = []
        bounded: list[bool] = []
        for ix in indexes:
            phrases.extend(ix.phrases)
            bounded.extend(ix.bounded)
        return cls(phrases, bounded)

    def present(self, text: str) -> list[int]:
        """Ascending indices ``k`` of the phrases that occur in ``text`` (``phrases[k] in
        text``) and, when bounded, whose leading word is one of the text's words: every phrase
        whose word-bounded (or plain) regex can match in ``text``; ``[]`` for none.

        Cost: the text's words and characters, then one substring test per phrase filed under
        one of them."""
        found = list(self._always)
        for w in self._words.intersection(_WORD.findall(text)):
            found.extend(self._by_word[w])
        for c in self._chars.intersection(text):
            found.extend(self._by_char[c])
        found.sort()
        phrases = self.phrases
        return [k for k in found if phrases[k] in text]
