"""The content guard's measure: what a set of operations makes the store forget.

:func:`content_loss` measures any set of operations — a whole pass, or the part auto-apply
would apply — against the store after exactly that set: every memory the set does not remove,
plus every merge/distill result it writes. One definition (:mod:`.lost`) serves each
operation and the total, so the total is the union of the operations' losses:

- a sentence of a removed source is lost when neither the operation's reference text nor any
  memory of the store after the set holds it;
- a term of a lost sentence is lost when the reference lacks it, unless it is a plain word
  another memory of the same scope keeps (:attr:`.terms.Term.portable`): numbers, dates, ids,
  symbols, emoji and code terms count wherever else they appear;
- the total counts each lost sentence once and each lost content word once (case-folded).

A subset loses at most what it loses inside the whole pass (fewer removals, more kept
elsewhere), but it is measured on its own, not read off the whole pass's figures.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..policy import Policy
from .lost import (
    OperationLoss,
    OperationText,
    Sentence,
    SentenceIndex,
    Suspect,
    finish_loss,
    is_number,
    sentences,
    suspects,
)
from .terms import Term, WordIndex, terms

__all__ = [
    "ContentLoss",
    "LossTotals",
    "content_loss",
    "content_verdict",
    "loss_totals",
    "outside_keys",
    "pass_losses",
    "plan_content_loss",
]


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
    reviewer excluded, which then stay in the store) is not counted, nor are its words."""
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


@dataclass(frozen=True)
class ContentLoss:
    """What a set of operations loses: ``operations`` (one :class:`~.lost.OperationLoss` each,
    in the order given), their ``totals`` (:class:`LossTotals`, unique sentences and words)
    and ``store_sentences``, the sentences of the store before the set (the base of
    ``Policy.max_lost_sentence_fraction``)."""

    operations: tuple[OperationLoss, ...]
    totals: LossTotals
    store_sentences: int = 0

    @property
    def content_words(self) -> list[str]:
        """Distinct lost content words over the set (as first written), in order."""
        seen: dict[str, str] = {}
        for loss in self.operations:
            for w in loss.content_words:
                seen.setdefault(w.casefold(), w)
        return list(seen.values())


def content_loss(
    ops: Sequence[OperationText],
    store: Iterable[tuple[str, str]],
    *,
    scope_of: Mapping[str, Hashable] | None = None,
    outside: Sequence[OperationLoss] | None = None,
    numbers: Sequence[int] | None = None,
) -> ContentLoss:
    """What applying exactly ``ops`` would make the store forget (module docstring).

    ``store`` yields ``(memory_id, document)`` of every memory before the set; ``scope_of``
    maps a memory id to its scope (e.g. ``{r.id: fieldmap.scope_key(r.metadata)}``): a
    sentence or word counts as kept only by a memory of the operation's own scope (a result
    has its first source's). Without it the store is one scope. O(store) sentence splits and
    word lookups, plus the content tokens of the few store words that resemble a lost one.

    ``outside`` (one per operation of ``ops``): the store is then only the memories the pass's
    operations read (their sources, as the console stores them), and each operation's
    :attr:`~.lost.OperationLoss.outside` / ``outside_words`` say what the rest of the store
    keeps of its sources (:func:`plan_content_loss` records them); they are carried into the
    result. ``numbers`` name the operations (default: their positions) in
    :attr:`~.lost.OperationLoss.shared`: a lost word several operations lose is counted under
    the first of ``ops`` that loses it.
    """

    def scope(mid: str) -> Hashable:
        return scope_of.get(mid, ()) if scope_of is not None else ()

    removed = {s.memory_id for op in ops for s in op.removed}
    after: list[tuple[Hashable, str]] = []
    n_removed = 0
    for mid, doc in store:
        if mid in removed:
            n_removed += len(sentences(doc))
        else:
            after.append((scope(mid), doc))
    n_after = len(after)
    after += [
        (scope(op.sources[0].memory_id), op.result_document)
        for op in ops
        if op.kind in ("merge", "distill") and op.result_document and op.sources
    ]
    sentence_index: dict[Hashable, SentenceIndex] = {}
    n_kept = 0
    for k, (sc, doc) in enumerate(after):
        index = sentence_index.get(sc)
        if index is None:
            index = sentence_index[sc] = SentenceIndex()
        n = index.add(doc)
        n_kept += n if k < n_after else 0
    empty = SentenceIndex()
    outs = [
        (set(o.outside), set(o.outside_words)) if o is not None else (set(), set())
        for o in (outside if outside is not None else [None] * len(ops))
    ]
    found: list[tuple[Hashable, list[Suspect], list[str]]] = []
    wanted: dict[Hashable, dict[str, frozenset[str]]] = {}
    for op, (out_s, _) in zip(ops, outs, strict=True):
        sc = scope(op.sources[0].memory_id) if op.sources else ()
        sus, kept = suspects(op, sentence_index.get(sc, empty), out_s)
        found.append((sc, sus, kept))
        for s in sus:
            for t in s.lost:
                if t.portable:
                    wanted.setdefault(sc, {})[t.key] = t.tokens
    words = {sc: WordIndex(w) for sc, w in wanted.items()}
    if words:
        for sc, doc in after:
            word_index = words.get(sc)
            if word_index is not None:
                word_index.add(doc)
    none = WordIndex({})
    losses = [
        finish_loss(sus, kept, words.get(sc, none), out_w)
        for (sc, sus, kept), (_, out_w) in zip(found, outs, strict=True)
    ]
    if outside is not None:
        losses = [
            replace(loss, outside=o.outside, outside_words=o.outside_words)
            for loss, o in zip(losses, outside, strict=True)
        ]
    shared = _attribute(losses, list(numbers) if numbers is not None else list(range(len(ops))))
    return ContentLoss(shared, loss_totals(shared), n_kept + n_removed)


def _attribute(
    losses: Sequence[OperationLoss], numbers: Sequence[int]
) -> tuple[OperationLoss, ...]:
    """Each lost content word counted under the first operation that loses it: the others get
    it in :attr:`~.lost.OperationLoss.shared` with that operation's number."""
    first: dict[str, int] = {}
    out = []
    for loss, number in zip(losses, numbers, strict=True):
        shared = []
        for w in loss.content_words:
            owner = first.setdefault(w.casefold(), number)
            if owner != number:
                shared.append((w, owner))
        out.append(replace(loss, shared=tuple(shared)))
    return tuple(out)


def outside_keys(
    ops: Sequence[OperationText],
    untouched: Iterable[tuple[str, str]],
    *,
    scope_of: Mapping[str, Hashable] | None = None,
) -> list[OperationLoss]:
    """What the memories no operation reads (``untouched``: ``(id, document)``) keep of each
    operation's sources: an :class:`~.lost.OperationLoss` with only ``outside`` (the
    :attr:`~.lost.Sentence.key` of every sentence of its removed sources, or of both sides of a
    conflict, that an untouched memory of its scope holds) and ``outside_words`` (the plain
    words of those sources an untouched memory keeps, as :class:`~.terms.WordIndex` finds
    them). Every sentence and word, not only the lost ones, so an edit of a merged text or a
    conflict decided later is measured without the store. O(untouched store)."""

    def scope(mid: str) -> Hashable:
        return scope_of.get(mid, ()) if scope_of is not None else ()

    docs: dict[Hashable, list[str]] = {}
    for mid, doc in untouched:
        docs.setdefault(scope(mid), []).append(doc)
    index = {sc: SentenceIndex(d) for sc, d in docs.items()}
    empty = SentenceIndex()
    wanted: dict[Hashable, dict[str, frozenset[str]]] = {}
    per_op: list[tuple[Hashable, list[tuple[str, Sentence]], list[Term]]] = []
    for op in ops:
        sc = scope(op.sources[0].memory_id) if op.sources else ()
        srcs = op.sources if op.kind == "conflict" else op.removed
        sents = [(src.document, s) for src in srcs for s in sentences(src.document)]
        found = [t for doc, s in sents for t in terms(doc[s.start : s.end]) if t.portable]
        for t in found:
            wanted.setdefault(sc, {})[t.key] = t.tokens
        per_op.append((sc, sents, found))
    words = {sc: WordIndex(w) for sc, w in wanted.items()}
    for sc, w in words.items():
        w.add_all(docs.get(sc, ()))
    out = []
    for sc, sents, found in per_op:
        idx, held_by = index.get(sc, empty), words.get(sc)
        kept = sorted({s.key for _, s in sents if s in idx})
        held = sorted({t.key for t in found if held_by is not None and held_by.holds(t)})
        out.append(OperationLoss(outside=tuple(kept), outside_words=tuple(held)))
    return out


def plan_content_loss(
    ops: Sequence[OperationText],
    store: Iterable[tuple[str, str]],
    *,
    scope_of: Mapping[str, Hashable] | None = None,
    numbers: Sequence[int] | None = None,
) -> ContentLoss:
    """:func:`content_loss` of a planned pass against its whole store (``(id, document)`` of
    every memory before it), measured the way it is measured again later from the stored
    operations alone: the store split into the memories the operations read and the rest,
    whose part is recorded per operation (:func:`outside_keys`). The figures are those of
    :func:`content_loss` over the whole store; each operation's loss carries its ``outside``
    keys for the later measures."""
    touched = {s.memory_id for op in ops for s in op.sources}
    read: list[tuple[str, str]] = []
    rest: list[tuple[str, str]] = []
    for mid, doc in store:
        (read if mid in touched else rest).append((mid, doc))
    loss = content_loss(
        ops,
        read,
        scope_of=scope_of,
        outside=outside_keys(ops, rest, scope_of=scope_of),
        numbers=numbers,
    )
    n_rest = sum(len(sentences(doc)) for _, doc in rest)
    return replace(loss, store_sentences=loss.store_sentences + n_rest)


def pass_losses(
    ops: Sequence[OperationText],
    store: Iterable[tuple[str, str]],
    *,
    scope_of: Mapping[str, Hashable] | None = None,
) -> list[OperationLoss]:
    """The loss of every operation of a pass against the store after the whole pass:
    :func:`content_loss`'s ``operations`` (``store``: ``(id, document)`` before the pass)."""
    return list(plan_content_loss(ops, store, scope_of=scope_of).operations)


def content_verdict(totals: LossTotals, store_sentences: int, policy: Policy) -> tuple[bool, str]:
    """The content guard beside the loss guard: ``(passed, sentence)`` for what a pass, or the
    part auto-apply would apply, loses (``totals``) in a store of ``store_sentences``
    sentences. Passed when it loses at most ``policy.max_lost_content_words`` distinct content
    words (``None``: not checked) and at most ``policy.max_lost_sentence_fraction`` of the
    store's sentences. Auto-apply needs it to pass; a person may approve past it."""
    words, cap = totals.content_words, policy.max_lost_content_words
    frac = totals.sentences / store_sentences if store_sentences else 0.0
    if cap is not None and words > cap:
        return False, (
            f"content guard: loses {words} content word{'s' if words != 1 else ''} "
            f"(at most {cap} may be lost without a person)"
        )
    if frac > policy.max_lost_sentence_fraction + 1e-12:
        return False, (
            f"content guard: loses {totals.sentences} of {store_sentences} sentences "
            f"({frac:.1%} > {policy.max_lost_sentence_fraction:.1%})"
        )
    return True, (
        f"content guard passed: {words} content word{'s' if words != 1 else ''} and "
        f"{totals.sentences} sentence{'s' if totals.sentences != 1 else ''} ({frac:.1%}) lost"
    )
