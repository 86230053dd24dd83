"""What a pass would make the agent forget: content that no longer exists verbatim after it.

An operation loses a sentence of a source it removes when that sentence is found neither in the
operation's *reference text* nor anywhere else in the store after the pass:

- merge / distill: the reference is the result text (the merged memory);
- reconcile: the reference is the kept winner's text, so what is lost is the superseded
  sentence, and inside it the words the winner does not repeat (``"Rome"`` of
  ``"Jon lives in Rome"`` superseded by ``"Jon lives in Paris now"``);
- prune: there is no reference; every sentence is lost unless a copy stays elsewhere;
- promote, conflict: nothing is removed, nothing is lost.

Sentences are split as :func:`consolidation.text.split_sentences` splits them (after ``. ! ? ;``
and on newlines), because that is the unit the extractive merge and the session windows keep or
drop. A dialog turn's speaker label (``"Jon: "``) belongs to every sentence of its line: the same
words said by another speaker are not the same content. Comparison is NFKC + case folding with
whitespace collapsed and trailing sentence punctuation ignored (the merge adds a full stop);
every other symbol, sign, digit and emoji counts.

Inside a lost sentence the words missing from the reference are found with a word-level
:class:`difflib.SequenceMatcher` (the highlighted loss); the *content words* lost are its
terms (:func:`.terms.terms`: words with their stemmed content tokens, numbers included, and
code terms — paths, comparisons, flags, file names, versions, identifiers — as written) that
the reference does not contain, unless the term is a plain word (:attr:`.terms.Term.portable`)
that another memory of the same scope keeps after the pass. So ``rm -rf /cache`` merged into
``rm -rf ~/cache`` loses ``/cache``, ``retry if x > 5`` merged into ``retry if x >= 5`` loses
``x > 5``, a pruned turn whose names its session repeats loses none of them, and a number is
lost wherever else the same digits appear.

Everything here is pure: the console stores each operation's :class:`OperationLoss` at proposal
time (with the keys of sentences and words kept elsewhere, so a later edit of the merged text
is re-checked without reading the store) and renders :mod:`.segments` from stored rows. The
loss of a set of operations — a whole pass or the part auto-apply would apply — is
:func:`.content.content_loss`, the same definition per operation and in total.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..text import content_tokens
from .terms import (
    EDGE_PUNCT,
    WORD,
    Term,
    WordIndex,
    cue_terms,
    missing_words,
    terms,
    word_key,
)

__all__ = [
    "LostSentence",
    "OperationLoss",
    "OperationText",
    "Sentence",
    "SentenceIndex",
    "SourceText",
    "Suspect",
    "finish_loss",
    "is_number",
    "operation_loss",
    "operation_text",
    "sentences",
    "suspects",
]

_SENT_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+")
"""The pattern of :func:`consolidation.text.split_sentences` (spans are needed here)."""
_LABEL = re.compile(r"([^\W\d_][\w'\u2019.-]*(?: [^\W\d_][\w'\u2019.-]*){0,2}):\s+")
"""A speaker label at the start of a line: ``"Jon: "``, ``"Dr. Who: "`` (one to three words,
each capitalised; checked in :func:`_label`)."""
_WS = re.compile(r"\s+")
_TRAIL = " .!?;\u3002\uff01\uff1f\uff1b"
"""Trailing sentence punctuation ignored when comparing (ASCII and the CJK full-width marks)."""


def _norm(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


@dataclass(frozen=True)
class Sentence:
    """One sentence of a text: ``text[start:end]``, its speaker ``label`` (``""`` when none)
    and ``body`` (normalised, label and trailing ``. ! ? ;`` removed) used for comparison."""

    start: int
    end: int
    label: str
    body: str

    @property
    def key(self) -> str:
        """``"label\\x1fbody"``: the identity stored for sentences kept elsewhere."""
        return f"{self.label}\x1f{self.body}"


def sentences(text: str) -> list[Sentence]:
    """Sentences of ``text`` with their character spans, in order (empty ones skipped).

    The label of a line (``"Jon: I lost my job. It hurts."``) is given to each of its sentences;
    a sentence's span starts after the label for the first sentence of a line.
    """
    out: list[Sentence] = []
    pos = 0
    for line_m in re.finditer(r"[^\n]+", text):
        line, base = line_m.group(0), line_m.start()
        label = ""
        offset = len(line) - len(line.lstrip())
        lm = _LABEL.match(line, offset)
        if lm and all(w[0].isupper() for w in lm.group(1).split()):
            label = _norm(lm.group(1))
            offset = lm.end()
        pos = base + offset
        body_text = text[pos : base + len(line)]
        cursor = 0
        for part in [*_SENT_SPLIT.finditer(body_text), None]:
            stop = part.start() if part else len(body_text)
            chunk = body_text[cursor:stop]
            stripped = chunk.strip()
            if stripped:
                lead = len(chunk) - len(chunk.lstrip())
                s0 = pos + cursor + lead
                body = _norm(stripped).rstrip(_TRAIL).strip()
                if body:
                    out.append(Sentence(s0, s0 + len(stripped), label, body))
            if part:
                cursor = part.end()
    return out


class SentenceIndex:
    """The sentences of a set of texts, for "is this sentence still there?" in O(1).

    A sentence is found when a sentence with the same body and the same speaker label is
    indexed, or when one of the two has no label and the bodies are equal (a merge keeps the
    first sentence of a turn with its label and appends later ones without).
    """

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._keys: set[str] = set()
        self._bodies: set[str] = set()
        self._unlabelled: set[str] = set()
        for t in texts:
            self.add(t)

    def add(self, text: str) -> int:
        """Index every sentence of ``text``; returns how many it has."""
        found = sentences(text)
        for s in found:
            self._keys.add(s.key)
            self._bodies.add(s.body)
            if not s.label:
                self._unlabelled.add(s.body)
        return len(found)

    def __contains__(self, s: object) -> bool:
        if not isinstance(s, Sentence):
            return False
        if not s.label:
            return s.body in self._bodies
        return s.key in self._keys or s.body in self._unlabelled


@dataclass(frozen=True)
class SourceText:
    """A memory an operation reads: id, text, metadata, and whether the operation removes it."""

    memory_id: str
    document: str
    removed: bool
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OperationText:
    """What the loss and risk functions need of one operation, as stored by the console.

    ``kind`` is ``merge | promote | prune | reconcile | distill | conflict``; ``sources`` in
    display order (for a reconcile the kept winner is not ``removed``); ``result_document`` the
    text a merge/distill writes (``None`` otherwise); ``rule`` and ``scores`` as the planner gave
    them (e.g. ``scores["min_cosine"]``, cosine in [-1, 1]).
    """

    kind: str
    sources: tuple[SourceText, ...]
    result_document: str | None = None
    rule: str = ""
    scores: Mapping[str, Any] = field(default_factory=dict)

    @property
    def removed(self) -> list[SourceText]:
        """The sources that leave the store when the operation is applied."""
        return [s for s in self.sources if s.removed]

    @property
    def reference(self) -> str:
        """The text the removed sources' content must survive in (see the module docstring)."""
        if self.kind in ("merge", "distill"):
            return self.result_document or ""
        if self.kind == "prune":
            return ""
        return "\n".join(s.document for s in self.sources if not s.removed)


def operation_text(
    op: Any, documents: Mapping[str, str], metadatas: Mapping[str, Mapping[str, Any]] | None = None
) -> OperationText:
    """An :class:`OperationText` from an engine ``Operation`` (``kind``, ``source_ids``,
    ``removes``, ``result_document``, ``rule``, ``scores``) and the sources' texts by id.

    Raises ``KeyError`` naming a source id missing from ``documents``.
    """
    metadatas = metadatas or {}
    removes = set(op.removes)
    return OperationText(
        kind=str(getattr(op.kind, "value", op.kind)),
        sources=tuple(
            SourceText(sid, documents[sid], sid in removes, metadatas.get(sid) or {})
            for sid in op.source_ids
        ),
        result_document=op.result_document,
        rule=op.rule or "",
        scores=dict(op.scores or {}),
    )


@dataclass(frozen=True)
class LostSentence:
    """One lost sentence: its source ``memory_id``, ``text`` as written there, the ``words`` of
    it missing from the reference (word-level diff, as written) and its ``content_words``
    (as written, numbers included) whose stemmed content token the reference does not hold
    (``"Rome"`` is lost, ``"lived"`` is not when the reference says ``"lives"``); ``key`` is the
    sentence's :attr:`Sentence.key`."""

    memory_id: str
    text: str
    words: tuple[str, ...]
    content_words: tuple[str, ...]
    key: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "memory_id": self.memory_id,
            "text": self.text,
            "words": list(self.words),
            "content_words": list(self.content_words),
            "key": self.key,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LostSentence:
        """Inverse of :meth:`to_dict`."""
        return cls(
            str(data["memory_id"]),
            str(data["text"]),
            tuple(data.get("words") or ()),
            tuple(data.get("content_words") or ()),
            str(data.get("key") or ""),
        )

    def sentence(self) -> Sentence:
        """The :class:`Sentence` it was (spans relative to its own ``text``)."""
        label, _, body = self.key.partition("\x1f")
        return Sentence(0, len(self.text), label, body)


@dataclass(frozen=True)
class OperationLoss:
    """What one operation loses. ``elsewhere`` holds the :attr:`Sentence.key` of removed-source
    sentences whose copy stays elsewhere in the store after the pass, ``elsewhere_words`` the
    :attr:`~.terms.Term.key` of plain words of its lost sentences another memory keeps.

    ``outside`` and ``outside_words`` are the sentence and plain-word keys of the operation's
    sources (every sentence and word they hold, not only the lost ones) that a memory *no
    operation of the pass reads* holds: the part of the store a review never changes, recorded
    when the pass is planned (:func:`.content.plan_content_loss`) so the pass's loss can be
    measured again from its stored operations after an exclusion, an edit or a decision
    (:func:`.content.content_loss` ``outside``).

    ``shared`` names the lost content words another operation of the same set also loses and
    counts: ``(word as written, that operation's number)``. A word no memory keeps after the
    pass is counted once, under the first operation (in plan order) that loses it, so the
    operations' :attr:`counted_words` add up to the set's distinct lost words."""

    sentences: tuple[LostSentence, ...] = ()
    elsewhere: tuple[str, ...] = ()
    elsewhere_words: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()
    outside_words: tuple[str, ...] = ()
    shared: tuple[tuple[str, int], ...] = ()

    @property
    def nothing_lost(self) -> bool:
        """True when every sentence of every removed source survives."""
        return not self.sentences

    @property
    def memories(self) -> list[str]:
        """Ids of the sources that lose at least one sentence, in order, once each."""
        return list(dict.fromkeys(s.memory_id for s in self.sentences))

    @property
    def content_words(self) -> list[str]:
        """Distinct lost content words (as first written), in order of appearance: every word
        this operation makes the store forget, counted here or under another operation.
        Case-folded as the pass's totals are (:func:`.content.content_loss`): "Rome" and
        "rome" are one word, so the card, the auto-apply reason and the total agree."""
        first: dict[str, str] = {}
        for s in self.sentences:
            for w in s.content_words:
                first.setdefault(w.casefold(), w)
        return list(first.values())

    @property
    def counted_words(self) -> list[str]:
        """The lost content words counted under this operation: :attr:`content_words` less
        the :attr:`shared` ones (case-folded)."""
        shared = {w.casefold() for w, _ in self.shared}
        return [w for w in self.content_words if w.casefold() not in shared]

    @property
    def numbers(self) -> list[str]:
        """The lost content words that are numbers (:func:`is_number`)."""
        return [w for w in self.content_words if is_number(w)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (round-trips through :meth:`from_dict`)."""
        return {
            "sentences": [s.to_dict() for s in self.sentences],
            "elsewhere": list(self.elsewhere),
            "elsewhere_words": list(self.elsewhere_words),
            "outside": list(self.outside),
            "outside_words": list(self.outside_words),
            "shared": [[w, n] for w, n in self.shared],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> OperationLoss:
        """Inverse of :meth:`to_dict`; ``None`` or ``{}`` is "nothing lost"."""
        data = data or {}
        return cls(
            tuple(LostSentence.from_dict(s) for s in data.get("sentences") or ()),
            tuple(data.get("elsewhere") or ()),
            tuple(data.get("elsewhere_words") or ()),
            tuple(data.get("outside") or ()),
            tuple(data.get("outside_words") or ()),
            tuple((str(w), int(n)) for w, n in data.get("shared") or ()),
        )


def is_number(word: str) -> bool:
    """True when ``word`` holds a digit (``"5"``, ``"2023"``, ``"3.5"``, ``"9-5"``). Number
    words are left out: "one" is far more often a pronoun ("Nice one!") than an amount."""
    return any(c.isdigit() for c in word)


@dataclass(frozen=True)
class Suspect:
    """A sentence of a removed source that neither the reference nor the store keeps:
    ``memory_id``, its ``key`` (:attr:`Sentence.key`), ``text`` as written, the ``words``
    missing from the reference (word-level diff) and the ``lost`` terms the reference lacks —
    before asking whether another memory keeps the plain ones (:func:`finish_loss`)."""

    memory_id: str
    key: str
    text: str
    words: tuple[str, ...]
    lost: tuple[Term, ...]


def suspects(
    op: OperationText,
    sentences_elsewhere: Container[str] | SentenceIndex,
    outside: Container[str] = (),
) -> tuple[list[Suspect], list[str]]:
    """The sentences ``op`` may lose and the keys of those kept elsewhere.

    ``sentences_elsewhere``: a :class:`SentenceIndex` of the store after the pass, or stored
    :attr:`Sentence.key` s; ``outside``: keys kept by memories not in that index
    (:attr:`OperationLoss.outside`). A sentence repeated inside the reference or found
    elsewhere is not lost; inside the others, a term is lost when the reference lacks its
    code term or one of its content tokens (compared per word on both sides, so an idiom
    counts the same way).
    """
    if op.kind in ("promote", "conflict"):
        return [], []
    ref_text = op.reference
    ref_index = SentenceIndex([ref_text])
    ref: tuple[list[str], set[str], set[str]] | None = None  # computed at the first suspect
    out: list[Suspect] = []
    kept: list[str] = []
    is_index = isinstance(sentences_elsewhere, SentenceIndex)
    for src in op.removed:
        for s in sentences(src.document):
            if s in ref_index:
                continue
            if (
                (s in sentences_elsewhere) if is_index else (s.key in sentences_elsewhere)
            ) or s.key in outside:
                kept.append(s.key)
                continue
            if ref is None:
                ref = (
                    [word_key(w) for w in WORD.findall(ref_text)],
                    {t for w in WORD.findall(ref_text) for t in content_tokens(w)},
                    {t.code for t in terms(ref_text) if t.code is not None},
                )
            ref_words, ref_tokens, ref_codes = ref
            text = src.document[s.start : s.end]
            spans = missing_words(text, ref_words)
            words = tuple(
                w for a, b, missing in spans if missing if (w := text[a:b].strip(EDGE_PUNCT))
            )
            lost = tuple(
                t
                for t in terms(text)
                if (t.code is not None and t.code not in ref_codes)
                or any(x not in ref_tokens for x in t.tokens)
            ) + tuple(cue_terms(text, ref_text))
            out.append(Suspect(src.memory_id, s.key, text, words, lost))
    return out, kept


def finish_loss(
    found: list[Suspect],
    kept: list[str],
    words_elsewhere: Container[str] | WordIndex = (),
    outside_words: Container[str] = (),
) -> OperationLoss:
    """The :class:`OperationLoss` of :func:`suspects`: a lost term counts unless it is a plain
    word that ``words_elsewhere`` holds (a :class:`~.terms.WordIndex` of the operation's scope
    after the pass, or stored :attr:`OperationLoss.elsewhere_words`) or ``outside_words`` names
    (:attr:`OperationLoss.outside_words`)."""
    lost: list[LostSentence] = []
    elsewhere_words: set[str] = set()
    for sus in found:
        words: list[str] = []
        for t in sus.lost:
            if t.portable and (
                t.key in outside_words
                or (
                    words_elsewhere.holds(t)
                    if isinstance(words_elsewhere, WordIndex)
                    else t.key in words_elsewhere
                )
            ):
                elsewhere_words.add(t.key)
            else:
                words.append(t.shown)
        lost.append(
            LostSentence(sus.memory_id, sus.text, sus.words, tuple(dict.fromkeys(words)), sus.key)
        )
    return OperationLoss(tuple(lost), tuple(sorted(set(kept))), tuple(sorted(elsewhere_words)))


def operation_loss(
    op: OperationText,
    *,
    elsewhere: Container[str] | SentenceIndex | OperationLoss = (),
    words_elsewhere: Container[str] | WordIndex = (),
) -> OperationLoss:
    """What ``op`` loses (see the module docstring), on its own.

    ``elsewhere`` says which sentences survive outside the operation: a :class:`SentenceIndex`
    of the store after the pass, stored :attr:`Sentence.key` s, or the operation's stored
    :class:`OperationLoss` (its sentence and word keys: what a recomputation after an edit
    passes); ``words_elsewhere`` the plain words kept by other memories (a
    :class:`~.terms.WordIndex` or stored keys). A whole pass is measured with
    :func:`.content.content_loss`, which builds both for every operation at once.
    """
    if isinstance(elsewhere, OperationLoss):
        words_elsewhere = set(elsewhere.elsewhere_words)
        elsewhere = set(elsewhere.elsewhere)
    found, kept = suspects(op, elsewhere)
    return finish_loss(found, kept, words_elsewhere)
