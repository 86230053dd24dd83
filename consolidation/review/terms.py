"""The terms of a sentence whose loss counts: words with their content tokens, and code terms.

A *term* is a word of a sentence as written (edge punctuation stripped) with its content
tokens (:func:`consolidation.text.content_tokens`: stemmed words, numbers, dates, ids,
symbols, emoji), or a *code term*: a token whose meaning lives in characters the content
tokens fold away. Code terms are kept as written (NFKC only; a sentence that differs only in
case is still the same sentence, as everywhere in :mod:`.lost`):

- paths: a word holding ``/`` or ``\\`` or starting with ``~`` (``~/cache`` is not ``/cache``,
  ``./build`` not ``build``; URLs and fractions too);
- comparisons and assignments: an operator word (``>=``, ``>``, ``==``, ``!=``, ``=>``,
  ``&&`` …) with its two neighbours, compared without spaces (``x >= 5`` → ``x>=5``, so
  ``x > 5`` differs), or a word with one inside (``foo>=1.2``, ``--level=3``);
- flags: ``-rf``, ``--force``;
- file names and extensions: ``config.yaml`` (not ``config.yml``), ``.env``, ``*.log``
  (abbreviations of single letters such as ``e.g.`` and ``U.S.`` are not file names);
- versions: ``3.11``, ``v2.0.1``, ``1.2.3-rc1``;
- identifiers: ``max_retries``, ``os.path.join()``, ``std::vector``, ``$HOME``, ``%PATH%``.

Negation and past-state cues, which are no content tokens, are terms too (:func:`cue_terms`):
a merge keeping ``"I like jazz"`` and dropping ``"I do not like jazz"`` loses its ``not``.

A term is *lost* from a sentence when the reference text lacks one of its content tokens or
its code term (:mod:`.lost`). Whether another memory keeping the term makes up for it depends
on what it is: :attr:`Term.portable` — a plain word (a name, a noun) kept by another memory of
the same scope is still known to the store; a fact atom or a code term is not portable: ``5``
in another memory is another fact's number, ``/cache`` in ``mount /cache`` is not the command
that deleted it.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from ..atoms import scan
from ..cues import NEGATION
from ..text import content_tokens, parse

__all__ = [
    "EDGE_PUNCT",
    "WORD",
    "Term",
    "WordIndex",
    "code_term",
    "cue_terms",
    "missing_words",
    "terms",
    "word_key",
]

WORD = re.compile(r"\S+")
"""A word: a run of non-space characters."""
EDGE_PUNCT = ".,!?;:\"'()[]{}“”‘’«»…"
"""Punctuation stripped from both ends of a word before it is compared."""
_LEAD = "\"'([{“‘«`"
_CLOSE = {")": "(", "]": "[", "}": "{"}
_TRAIL = ".,!?;:\"'”’»…`"
_OPERATORS = frozenset(
    ">= <= == != === !== => -> <- && || > < = += -= *= /= >> << | ≥ ≤ ≠".split()  # noqa: SIM905
)
_HAS_OPERATOR = re.compile(r"[<>=≥≤≠]|&&|\|\|")
_FLAG = re.compile(r"--?[A-Za-z][\w.-]*(?:=\S*)?")
_FILE = re.compile(r"(?:[\w*~-][\w*~.-]*)?\.[A-Za-z][A-Za-z0-9]{0,7}")
_VERSION = re.compile(r"v?\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.]+)?")
_IDENT = re.compile(r"[A-Za-z]\w*_\w+|[\w.]+\(\)|\w+::\w+(?:::\w+)*|\$\{?[A-Za-z_]\w*\}?|%\w+%")


def word_key(word: str) -> str:
    """A word as compared: NFKC, case-folded, edge punctuation stripped."""
    return unicodedata.normalize("NFKC", word).casefold().strip(EDGE_PUNCT)


def _core(word: str) -> str:
    """``word`` without quotes, brackets and sentence punctuation around it; a closing
    bracket is stripped only when unbalanced (``foo()`` keeps its pair)."""
    w = unicodedata.normalize("NFKC", word).lstrip(_LEAD)
    while w and (w[-1] in _TRAIL or (w[-1] in _CLOSE and w.count(w[-1]) > w.count(_CLOSE[w[-1]]))):
        w = w[:-1]
    return w


def code_term(word: str) -> str | None:
    """The code term of one word (see the module docstring), as written, or ``None``."""
    w = _core(word)
    if len(w) < 2 or not any(c.isalnum() for c in w):
        return None
    if "/" in w or "\\" in w or w.startswith("~") or _HAS_OPERATOR.search(w):
        return w
    if _FLAG.fullmatch(w) or _VERSION.fullmatch(w) or _IDENT.fullmatch(w):
        return w
    if _FILE.fullmatch(w) and not all(len(p) <= 1 for p in w.split(".")):
        return w
    return None


@dataclass(frozen=True)
class Term:
    """One term of a text: ``text[start:end]`` as ``shown`` (edge punctuation stripped),
    its content ``tokens``, its ``code`` term (``None`` for a plain word), its ``key``
    (:func:`word_key`, for a plain word kept elsewhere) and whether it is ``portable`` (a
    plain word without fact atoms: another memory of the scope holding it keeps it)."""

    start: int
    end: int
    shown: str
    tokens: frozenset[str]
    code: str | None
    key: str
    portable: bool


def terms(text: str) -> list[Term]:
    """The terms of ``text`` in order: one per word, plus one per operator word joining its
    neighbours (``x >= 5``: the words ``x``, ``>=``, ``5`` and the comparison ``x>=5``)."""
    words = list(WORD.finditer(text))
    out: list[Term] = []
    for k, m in enumerate(words):
        raw = m.group(0)
        shown = raw.strip(EDGE_PUNCT)
        if not shown:
            continue
        core = _core(raw)
        if core in _OPERATORS:
            left = _core(words[k - 1].group(0)) if k > 0 else ""
            right = _core(words[k + 1].group(0)) if k + 1 < len(words) else ""
            start = words[k - 1].start() if left else m.start()
            end = words[k + 1].end() if right else m.end()
            code: str | None = f"{left}{core}{right}"
            out.append(
                Term(start, end, text[start:end].strip(EDGE_PUNCT), frozenset(), code, "", False)
            )
            continue
        parsed = parse(shown)
        toks = frozenset(content_tokens(shown))
        code = code_term(raw)
        portable = code is None and not parsed.kinds
        out.append(Term(m.start(), m.end(), shown, toks, code, word_key(shown), portable))
    return out


def cue_terms(text: str, reference: str) -> list[Term]:
    """Negation and past-state cues of ``text`` the ``reference`` lacks, as terms (a cue is
    no content token: ``"I do not like jazz"`` merged into ``"I like jazz"`` loses its
    ``not``). A negated sentence loses its negation when the reference has none; a past-state
    cue (``"used to"``, ``"no longer"``, ``"nicht mehr"`` …) when the reference lacks it."""
    pt, pr = parse(text), parse(reference)
    lost_negation = pt.negations > 0 and pr.negations == 0
    past = [p for p in dict.fromkeys(pt.past_state) if p not in pr.past_state]
    if not lost_negation and not past:
        return []
    shown = next((c.phrase for c in scan(text).cues if c.kind == NEGATION), "not")
    out = [Term(0, 0, shown, frozenset({f"cue:{NEGATION}"}), None, "", False)]
    out = out if lost_negation else []
    out += [Term(0, 0, p, frozenset({f"cue:{p}"}), None, "", False) for p in past]
    return out


def missing_words(text: str, reference_words: list[str]) -> list[tuple[int, int, bool]]:
    """Word spans of ``text`` as ``(start, end, missing)`` against ``reference_words`` (the
    reference's :func:`word_key` s, in order), by a word-level
    :class:`difflib.SequenceMatcher` (the highlighted loss)."""
    words = list(WORD.finditer(text))
    if not reference_words:
        return [(m.start(), m.end(), True) for m in words]
    keys = [word_key(m.group(0)) for m in words]
    matcher = difflib.SequenceMatcher(None, keys, reference_words, autojunk=False)
    present = [False] * len(words)
    for block in matcher.get_matching_blocks():
        for k in range(block.a, block.a + block.size):
            present[k] = True
    return [(m.start(), m.end(), not present[k]) for k, m in enumerate(words)]


class WordIndex:
    """Which of some wanted plain words the texts of a store hold: ``found`` keys.

    Built for the few words a set of operations would lose (``wanted``: :attr:`Term.key` →
    its content tokens): a text's words are compared by key, and those sharing a wanted
    word's first three letters by content tokens too (``lives`` keeps ``lived``). O(words of
    the texts) set lookups; content tokens are computed only for the words near a wanted one.
    """

    def __init__(self, wanted: dict[str, frozenset[str]]) -> None:
        self.wanted = wanted
        self.found: set[str] = set()
        self._prefixes = {k[:3] for k in wanted}
        self._tokens: set[str] = set()
        self._need = {t for toks in wanted.values() for t in toks}
        self._done: set[str] = set()  # words already tokenised: a store repeats its words

    def add(self, text: str) -> None:
        """Index one text."""
        if not self.wanted:
            return
        wanted, prefixes, need, seen = self.wanted, self._prefixes, self._need, self._tokens
        done = self._done
        for raw in unicodedata.normalize("NFKC", text).casefold().split():
            k = raw.strip(EDGE_PUNCT)
            if k in wanted:
                self.found.add(k)
            elif k[:3] in prefixes and k not in done:
                done.add(k)
                seen.update(t for t in content_tokens(k) if t in need)

    def add_all(self, texts: Iterable[str]) -> None:
        """Index ``texts``."""
        for text in texts:
            self.add(text)

    def holds(self, term: Term) -> bool:
        """Whether the indexed texts keep the plain word ``term`` (by key or every token)."""
        return term.key in self.found or (bool(term.tokens) and term.tokens <= self._tokens)
