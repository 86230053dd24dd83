"""A memory's *frame*: what it is about (subject and attribute words) apart from its value.

Two texts share a frame when they say the same thing about the same subject except for one
short span: "Use *Jina* for web search" / "Use *Exa* for web search", "Usual coffee order is a
*cortado*" / "… a *flat white*", "Bob runs Ubuntu *22.04*" / "… *24.04*", "The app version is
*10.2.0*" / "… *10.3.1*", "Prefers *cola* to *coffee*" / "Prefers *coffee* to *cola*" (the order
of two items). Such a pair is about one *slot* with two values: :mod:`consolidation.slots`
decides whether the newer value replaces the older or a person is asked; it is never left
silently as two facts.

:func:`frame_diff` aligns the two texts' token sequences (:attr:`consolidation.text.Parsed.raw`:
stemmed words with function words kept, atoms, CJK character bigrams) with
:class:`difflib.SequenceMatcher`. It returns a :class:`FrameDiff` when

- the only difference is one replaced span of at most :data:`MAX_SPAN` tokens on each side
  (an added word is more detail, not another value; a "now" or "currently" is ignored), or
  the same tokens with two content words swapped (an order flip);
- the shared part holds at least :data:`MIN_FRAME` content words (subject and attribute);
- the span is outside the opening noun phrase (:func:`consolidation.text.opening_words`: "The
  *umber* project" / "The *ember* project" are two subjects, not two values);
- no negation or past-state cue differs (the cue rules handle those) and the span is no date
  or record identifier (two events or two records: "#260" / "#480").

The span's kind: ``"number"`` (a number atom, the same unit or label around it), ``"version"``
(a dotted version, "10.2.0", "v1.3"), ``"name"`` (capitalised names on both sides: "Jon" /
"John", "Carol" / "Dave"), ``"order"`` or ``"word"``. Pure; per-text work (the parse, the
tokens to align and their set) is memoised per text, so a pair costs a set difference and, when
few words differ, one alignment of two short sequences.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

from .spans import value_span
from .text import NOW_WORDS, STOPWORDS, Parsed, opening_words, parse, proper_names

__all__ = ["MAX_SPAN", "MIN_FRAME", "FrameDiff", "frame_diff"]

MAX_SPAN = 4
"""Tokens a differing span may hold on each side: a word or a two-word value ("flat white")
plus an article; two more for character bigrams (a CJK word of four characters changes up to
five bigrams around it: "コーヒー" / "紅茶")."""
MIN_FRAME = 2
"""Content words the two texts must share (a subject and an attribute): "likes tea" /
"likes jazz" share one word and say too little to be one slot."""
_IGNORED = NOW_WORDS | {"now", "currently", "actually", "today"}
_VERSION_RE = re.compile(r"^v?\d+(?:\.\d+){1,2}(?:[-+.]?[a-z0-9]+)?$")


@dataclass(frozen=True)
class FrameDiff:
    """How two texts of one frame differ: ``kind`` (``"word"``, ``"number"``, ``"version"``,
    ``"name"``, ``"order"``), the differing content tokens of the first (``old``) and second
    (``new``) text, and the shared content tokens (``frame``)."""

    kind: str
    old: tuple[str, ...]
    new: tuple[str, ...]
    frame: frozenset[str]

    def shown(self) -> str:
        """``"jina → exa"`` for a reviewer."""
        return f"{' '.join(self.old) or '—'} → {' '.join(self.new) or '—'}"


def _bigrams(toks: list[str]) -> bool:
    """True when the tokens are character bigrams of an unspaced script (a word of n
    characters changes n + 1 of them)."""
    return bool(toks) and all(len(t) == 2 and not t.isascii() for t in toks)


def _verbish(span: list[str], p: Parsed) -> bool:
    """True when a span token is an English "-ing" form in the text ("prepping"): a predicate,
    not a value, unless the other span is one too ("hiking" / "running")."""
    return any(re.search(rf"(?<!\w){re.escape(t)}\w*ing(?!\w)", p.folded) for t in span)


@lru_cache(maxsize=16384)
def _aligned(text: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """The text's tokens to align (``raw`` without "now" words) and their set, once per text:
    a planning pass compares a memory with many partners."""
    toks = tuple(t for t in parse(text).raw if t not in _IGNORED)
    return toks, frozenset(toks)


def _content(p: Parsed, toks: list[str]) -> list[str]:
    keep = set(p.tokens)
    return [t for t in toks if t in keep and t not in STOPWORDS]


def _span_kind(a: str, b: str, pa: Parsed, pb: Parsed, ca: list[str], cb: list[str]) -> str | None:
    kinds = {pa.kinds.get(t) for t in ca} | {pb.kinds.get(t) for t in cb}
    if "date" in kinds or kinds & {"symbol", "emoji"}:
        return None
    if "id" in kinds:
        ids = [t for t in ca + cb if (pa.kinds.get(t) or pb.kinds.get(t)) == "id"]
        return "version" if all(_VERSION_RE.match(t) for t in ids) else None
    if any(pa.kinds.get(t) == "number" for t in ca) and any(
        pb.kinds.get(t) == "number" for t in cb
    ):
        return "number"
    names_a, names_b = proper_names(a), proper_names(b)
    if ca and cb and set(ca) <= names_a and set(cb) <= names_b:
        return "name"
    return "word"


def _order_flip(pa: Parsed, pb: Parsed, ra: list[str], rb: list[str]) -> FrameDiff | None:
    moved = [(x, y) for x, y in zip(ra, rb, strict=True) if x != y]
    words = {x for x, _ in moved}
    content = set(pa.tokens)
    if len(words) != 2 or not words <= content or {y for _, y in moved} != words:
        return None
    frame = frozenset(content - words)
    if len(frame) < 1:
        return None
    seq = tuple(x for x, _ in moved)
    return FrameDiff("order", seq, tuple(y for _, y in moved), frame)


def frame_diff(a: str, b: str, pa: Parsed, pb: Parsed) -> FrameDiff | None:
    """The one-span difference of texts ``a`` and ``b`` (parsed as ``pa``, ``pb``) when they
    share a frame (module docstring), else ``None``. Never raises."""
    if (pa.negations % 2) != (pb.negations % 2) or bool(pa.past_state) != bool(pb.past_state):
        return None
    (ta, sa), (tb, sb) = _aligned(a), _aligned(b)
    if not ta or not tb or ta == tb or len(sa ^ sb) > 2 * MAX_SPAN:
        return None  # cheap: the same tokens, or too many words differ to be one span
    ra, rb = list(ta), list(tb)
    if len(ra) == len(rb) and Counter(ra) == Counter(rb):
        return _order_flip(pa, pb, ra, rb)
    ops = [o for o in SequenceMatcher(a=ra, b=rb, autojunk=False).get_opcodes() if o[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "replace":
        return None
    _, i1, i2, j1, j2 = ops[0]
    cjk = _bigrams(ra[i1:i2] + rb[j1:j2])
    limit = MAX_SPAN + 2 if cjk else MAX_SPAN
    if i2 - i1 > limit or j2 - j1 > limit:
        return None
    if cjk and value_span(a, b) is None:
        return None  # an ending (です / だ) or an inserted word (很): one fact, not two values
    ca, cb = _content(pa, ra[i1:i2]), _content(pb, rb[j1:j2])
    if not ca or not cb or set(ca) & set(cb):
        return None
    frame = frozenset(_content(pa, ra[:i1] + ra[i2:]))
    if len(frame) < MIN_FRAME:
        return None
    if _verbish(ca, pa) != _verbish(cb, pb):
        return None  # "is prepping for" / "is a dancer who runs": another predicate, no value
    opening = opening_words(a) | opening_words(b)
    if opening & (set(ca) | set(cb)):
        return None  # "The umber project" / "The ember project": two subjects
    kind = _span_kind(a, b, pa, pb, ca, cb)
    if kind is None:
        return None
    if kind == "word" and not cjk and not _after_predicate(ra[:i1], ra[i1:i2] + rb[j1:j2]):
        return None  # "a flaky test in gazette fails" / "in harbor": two subjects, not values
    return FrameDiff(kind, tuple(ca), tuple(cb), frame)


PREDICATES = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "has",
        "have",
        "had",
        "uses",
        "use",
        "used",
        "prefers",
        "prefer",
        "preferred",
        "likes",
        "like",
        "liked",
        "loves",
        "love",
        "drinks",
        "drink",
        "runs",
        "run",
        "lives",
        "live",
        "lived",
        "works",
        "work",
        "worked",
        "wants",
        "want",
        "needs",
        "need",
        "owns",
        "own",
        "named",
        "called",
        "ist",
        "sind",
        "war",
        "waren",
        "hat",
        "haben",
        "mag",
        "mögen",
        "wohnt",
        "arbeitet",
        "heißt",
        "est",
        "sont",
        "était",
        "ont",
        "aime",
        "vit",
        "travaille",
        "es",
        "son",
        "era",
        "está",
        "están",
        "tiene",
        "vive",
        "trabaja",
        "gusta",
        "prefiere",
        "boit",
        "mange",
        "trinkt",
        "isst",
        "bebe",
        "toma",
        "come",
    ]
)
"""Words after which a differing word is a value of the subject ("is a cortado", "prefers
dark roast", "ist in Bern") rather than part of the subject ("a flaky test in gazette fails"):
copulas and the state verbs of the field cases (en de fr es), as :func:`parse` tokenises them
(unstemmed). A differing span before any of them is read as another subject: two facts.
Measured on the coding demo: without it, 388 of its 388 conflicts were such subject pairs."""


def _after_predicate(before: list[str], span: list[str]) -> bool:
    """Whether a differing word span comes after a predicate word (:data:`PREDICATES`), and is
    not itself one ("is written in" / "uses": another predicate, not another value)."""
    stems = _predicate_stems()
    return bool(stems & set(before)) and not stems & set(span)


@lru_cache(maxsize=1)
def _predicate_stems() -> frozenset[str]:
    """:data:`PREDICATES` as :func:`parse` gives them in ``raw`` (stemmed: "likes" → "lik")."""
    return frozenset(parse(" ".join(sorted(PREDICATES))).raw) | PREDICATES
