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
from dataclasses import dataclass

from ..policy import Policy
from .lost import (
    OperationLoss,
    OperationText,
    SentenceIndex,
    Suspect,
    finish_loss,
    is_number,
    sentences,
    suspects,
)
from .terms import WordIndex

__all__ = [
    "ContentLoss",
    "LossTotals",
    "content_loss",
    "content_verdict",
    "loss_totals",
    "pass_losses",
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
) -> ContentLoss:
    """What applying exactly ``ops`` would make the store forget (module docstring).

    ``store`` yields ``(memory_id, document)`` of every memory before the set; ``scope_of``
    maps a memory id to its scope (e.g. ``{r.id: fieldmap.scope_key(r.metadata)}``): a
    sentence or word counts as kept only by a memory of the operation's own scope (a result
    has its first source's). Without it the store is one scope. O(store) sentence splits and
    word lookups, plus the content tokens of the few store words that resemble a lost one.
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
    for sc, doc in after[:n_after]:
        index = sentence_index.get(sc)
        if index is None:
            index = sentence_index[sc] = SentenceIndex()
        n_kept += index.add(doc)
    for sc, doc in after[n_after:]:
        index = sentence_index.get(sc)
        if index is None:
            index = sentence_index[sc] = SentenceIndex()
        index.add(doc)
    empty = SentenceIndex()
    found: list[tuple[Hashable, list[Suspect], list[str]]] = []
    wanted: dict[Hashable, dict[str, frozenset[str]]] = {}
    for op in ops:
        sc = scope(op.sources[0].memory_id) if op.sources else ()
        sus, kept = suspects(op, sentence_index.get(sc, empty))
        found.append((sc, sus, kept))
        for s in sus:
            for t in s.lost:
                if t.portable:
                    wanted.setdefault(sc, {})[t.key] = t.tokens
    words = {sc: WordIndex(w) for sc, w in wanted.items()}
    if words:
        for sc, doc in after:
            index = words.get(sc)
            if index is not None:
                index.add(doc)
    losses = tuple(finish_loss(sus, kept, words.get(sc, WordIndex({}))) for sc, sus, kept in found)
    return ContentLoss(losses, loss_totals(losses), n_kept + n_removed)


def pass_losses(
    ops: Sequence[OperationText],
    store: Iterable[tuple[str, str]],
    *,
    scope_of: Mapping[str, Hashable] | None = None,
) -> list[OperationLoss]:
    """The loss of every operation of a pass against the store after the whole pass:
    :func:`content_loss`'s ``operations`` (``store``: ``(id, document)`` before the pass)."""
    return list(content_loss(ops, store, scope_of=scope_of).operations)


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
