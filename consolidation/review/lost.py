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
:class:`difflib.SequenceMatcher` (the highlighted loss); the *content words* lost are the
sentence's stemmed content tokens (:func:`consolidation.text.content_tokens`, numbers included)
that the reference does not contain.

Everything here is pure: the console stores each operation's :class:`OperationLoss` at proposal
time (with the keys of sentences kept elsewhere, so a later edit of the merged text is
re-checked without reading the store) and renders :func:`source_segments` from stored rows.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..text import content_tokens

__all__ = [
    "LossTotals",
    "LostSentence",
    "OperationLoss",
    "OperationText",
    "Segment",
    "Sentence",
    "SentenceIndex",
    "SourceText",
    "is_number",
    "loss_totals",
    "lost_segments",
    "operation_loss",
    "operation_text",
    "pass_losses",
    "sentences",
    "source_segments",
]

_SENT_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+")
"""The pattern of :func:`consolidation.text.split_sentences` (spans are needed here)."""
_LABEL = re.compile(r"([^\W\d_][\w'\u2019.-]*(?: [^\W\d_][\w'\u2019.-]*){0,2}):\s+")
"""A speaker label at the start of a line: ``"Jon: "``, ``"Dr. Who: "`` (one to three words,
each capitalised; checked in :func:`_label`)."""
_WS = re.compile(r"\s+")
_TRAIL = " .!?;"
_WORD = re.compile(r"\S+")
_EDGE_PUNCT = ".,!?;:\"'()[]{}“”‘’«»…"


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

    def add(self, text: str) -> None:
        """Index every sentence of ``text``."""
        for s in sentences(text):
            self._keys.add(s.key)
            self._bodies.add(s.body)
            if not s.label:
                self._unlabelled.add(s.body)

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
    sentences whose copy stays elsewhere in the store after the pass (stored, so the loss can be
    recomputed after an edit without the store)."""

    sentences: tuple[LostSentence, ...] = ()
    elsewhere: tuple[str, ...] = ()

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
        """Distinct lost content words (as written), in order of appearance."""
        return list(dict.fromkeys(w for s in self.sentences for w in s.content_words))

    @property
    def numbers(self) -> list[str]:
        """The lost content words that are numbers (:func:`is_number`)."""
        return [w for w in self.content_words if is_number(w)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (round-trips through :meth:`from_dict`)."""
        return {
            "sentences": [s.to_dict() for s in self.sentences],
            "elsewhere": list(self.elsewhere),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> OperationLoss:
        """Inverse of :meth:`to_dict`; ``None`` or ``{}`` is "nothing lost"."""
        data = data or {}
        return cls(
            tuple(LostSentence.from_dict(s) for s in data.get("sentences") or ()),
            tuple(data.get("elsewhere") or ()),
        )


def is_number(word: str) -> bool:
    """True when ``word`` holds a digit (``"5"``, ``"2023"``, ``"3.5"``, ``"9-5"``). Number
    words are left out: "one" is far more often a pronoun ("Nice one!") than an amount."""
    return any(c.isdigit() for c in word)


def _word_key(w: str) -> str:
    return unicodedata.normalize("NFKC", w).casefold().strip(_EDGE_PUNCT)


def _missing_words(text: str, reference_words: list[str]) -> list[tuple[int, int, bool]]:
    """Word spans of ``text`` as ``(start, end, missing)`` against the reference words."""
    words = list(_WORD.finditer(text))
    if not reference_words:
        return [(m.start(), m.end(), True) for m in words]
    keys = [_word_key(m.group(0)) for m in words]
    matcher = difflib.SequenceMatcher(None, keys, reference_words, autojunk=False)
    present = [False] * len(words)
    for block in matcher.get_matching_blocks():
        for k in range(block.a, block.a + block.size):
            present[k] = True
    return [(m.start(), m.end(), not present[k]) for k, m in enumerate(words)]


def operation_loss(
    op: OperationText, *, elsewhere: Container[str] | SentenceIndex = ()
) -> OperationLoss:
    """The sentences ``op`` loses (see the module docstring).

    ``elsewhere`` says which sentences survive outside the operation: a :class:`SentenceIndex`
    of the store after the pass (at planning time), or the stored ``OperationLoss.elsewhere``
    keys (afterwards). A sentence repeated inside the reference or found elsewhere is not lost.
    """
    if op.kind in ("promote", "conflict"):
        return OperationLoss()
    ref_text = op.reference
    ref_index = SentenceIndex([ref_text])
    ref_words = [_word_key(w) for w in _WORD.findall(ref_text)]
    # per word, on both sides, so an idiom ("long time no see") counts the same way in each
    ref_tokens = {t for w in _WORD.findall(ref_text) for t in content_tokens(w)}
    lost: list[LostSentence] = []
    kept_elsewhere: list[str] = []
    for src in op.removed:
        for s in sentences(src.document):
            if s in ref_index:
                continue
            found = s in elsewhere if isinstance(elsewhere, SentenceIndex) else s.key in elsewhere
            if found:
                kept_elsewhere.append(s.key)
                continue
            text = src.document[s.start : s.end]
            spans = _missing_words(text, ref_words)
            words = tuple(
                w for a, b, missing in spans if missing if (w := text[a:b].strip(_EDGE_PUNCT))
            )
            tokens = tuple(
                dict.fromkeys(
                    w
                    for m in _WORD.finditer(text)
                    if (w := m.group(0).strip(_EDGE_PUNCT))
                    and any(t not in ref_tokens for t in content_tokens(w))
                )
            )
            lost.append(LostSentence(src.memory_id, text, words, tokens, s.key))
    return OperationLoss(tuple(lost), tuple(sorted(set(kept_elsewhere))))


@dataclass(frozen=True)
class Segment:
    """A piece of a source's text for display: ``tag`` is ``"kept"`` (verbatim in the result),
    ``"elsewhere"`` (a copy stays in another memory), ``"changed"`` (a word of a lost sentence
    the result still has), ``"lost"`` (a word the result does not have) or ``"space"``."""

    text: str
    tag: str


def source_segments(
    op: OperationText, source: SourceText, *, elsewhere: Container[str] = ()
) -> list[Segment]:
    """``source.document`` cut into :class:`Segment` s whose texts concatenate back to it.

    A source the operation does not remove is one ``"kept"`` segment. ``elsewhere`` is the
    stored :attr:`OperationLoss.elsewhere` (sentence keys).
    """
    doc = source.document
    if not source.removed or op.kind in ("promote", "conflict"):
        return [Segment(doc, "kept")] if doc else []
    ref_text = op.reference
    ref_index = SentenceIndex([ref_text])
    ref_words = [_word_key(w) for w in _WORD.findall(ref_text)]
    out: list[Segment] = []
    pos = 0

    def emit(text: str, tag: str) -> None:
        if not text:
            return
        if out and out[-1].tag == tag:
            out[-1] = Segment(out[-1].text + text, tag)
        else:
            out.append(Segment(text, tag))

    for s in sentences(doc):
        emit(doc[pos : s.start], "space")
        text = doc[s.start : s.end]
        if s in ref_index:
            emit(text, "kept")
        elif s.key in elsewhere:
            emit(text, "elsewhere")
        else:
            cur = 0
            for a, b, missing in _missing_words(text, ref_words):
                emit(text[cur:a], "space")
                emit(text[a:b], "lost" if missing else "changed")
                cur = b
            emit(text[cur:], "space")
        pos = s.end
    emit(doc[pos:], "space")
    return _compact(out)


def _compact(segs: list[Segment]) -> list[Segment]:
    """Join runs of one tag separated by single spaces ("changed", "space", "changed" → one)."""
    out: list[Segment] = []
    for k, seg in enumerate(segs):
        nxt = segs[k + 1] if k + 1 < len(segs) else None
        if (
            seg.tag == "space"
            and out
            and nxt is not None
            and out[-1].tag == nxt.tag
            and nxt.tag in ("changed", "lost")
        ):
            out[-1] = Segment(out[-1].text + seg.text, out[-1].tag)
        elif out and out[-1].tag == seg.tag and seg.tag != "space":
            out[-1] = Segment(out[-1].text + seg.text, seg.tag)
        else:
            out.append(seg)
    return out


def lost_segments(lost: LostSentence) -> list[Segment]:
    """A lost sentence as :class:`Segment` s with its missing words (``lost.words``, found in
    order) tagged ``"lost"`` and the rest ``"changed"``/``"space"``; texts concatenate back."""
    out: list[Segment] = []
    want = list(lost.words)
    pos = 0
    for m in _WORD.finditer(lost.text):
        if m.start() > pos:
            out.append(Segment(lost.text[pos : m.start()], "space"))
        word = m.group(0)
        hit = bool(want) and word.strip(_EDGE_PUNCT) == want[0]
        if hit:
            want.pop(0)
        out.append(Segment(word, "lost" if hit else "changed"))
        pos = m.end()
    if pos < len(lost.text):
        out.append(Segment(lost.text[pos:], "space"))
    return _compact(out)


def pass_losses(
    ops: Sequence[OperationText], store: Iterable[tuple[str, str]]
) -> list[OperationLoss]:
    """The loss of every operation of a pass, against the store after the whole pass.

    ``store`` yields ``(memory_id, document)`` of every memory before the pass. The store after
    the pass is every memory no operation removes plus every merge/distill result. One sentence
    index over it serves all operations: O(store + operations) sentence splits.
    """
    removed = {s.memory_id for op in ops for s in op.removed}
    index = SentenceIndex(doc for mid, doc in store if mid not in removed)
    for op in ops:
        if op.kind in ("merge", "distill") and op.result_document:
            index.add(op.result_document)
    return [operation_loss(op, elsewhere=index) for op in ops]


@dataclass(frozen=True)
class LossTotals:
    """Lost content of a set of operations: ``sentences`` lost, ``memories`` that lose some,
    distinct ``content_words`` and ``numbers`` lost (counts)."""

    sentences: int = 0
    memories: int = 0
    content_words: int = 0
    numbers: int = 0


def loss_totals(
    losses: Iterable[OperationLoss], *, kept: SentenceIndex | None = None
) -> LossTotals:
    """Sum of ``losses``; a sentence found in ``kept`` (e.g. the sources of the operations the
    reviewer excluded, which then stay in the store) is not counted."""
    n = 0
    mems: set[str] = set()
    words: set[str] = set()  # casefolded, so "Rome" and "rome" count once
    for loss in losses:
        for s in loss.sentences:
            if kept is not None and s.sentence() in kept:
                continue
            n += 1
            mems.add(s.memory_id)
            words.update(w.casefold() for w in s.content_words)
    return LossTotals(n, len(mems), len(words), sum(1 for w in words if is_number(w)))
