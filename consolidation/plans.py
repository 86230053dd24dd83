"""`Operation` and `Plan`: what a pass proposes, as pure, serialisable data.

A plan is data before it is action (docs/ARCHITECTURE.md): nothing writes to a store while planning.
Each operation carries its source ids and their content hashes (to detect staleness at apply
time, I-4), its scores, a human-readable reason and, for a merge, the merged record to write.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import (
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .result import ConsolidationResult

__all__ = [
    "Fate",
    "Fates",
    "OpKind",
    "Operation",
    "Plan",
    "count_copies",
    "leave_out",
    "merged_id",
    "summarize",
]


class OpKind(StrEnum):
    """The operations a proposal can hold."""

    MERGE = "merge"
    PROMOTE = "promote"
    PRUNE = "prune"
    RECONCILE = "reconcile"
    DISTILL = "distill"
    CONFLICT = "conflict"
    SUMMARIZE = "summarize"


class Fate(StrEnum):
    """What a plan does to each input record; every record has exactly one (accounting)."""

    KEPT = "kept"  # untouched, or metadata-only change (promote)
    MERGED = "merged"  # folded into a merged memory (removed)
    PRUNED = "pruned"  # removed as stale/low-value
    SUPERSEDED = "superseded"  # removed by a reconcile (older side of a contradiction)


class Fates(MutableMapping[str, Fate]):
    """Every input id's :class:`Fate`: ``KEPT`` unless a stage set another.

    Holds the sorted ids (shared with the planner, looked up by bisection) and only the fates
    that are not ``KEPT``, so a 1M-memory plan does not build a 1M-entry dict (0.26 s and
    ~100 MB here). Iterates in id order. Setting the fate of an id that is not an input raises
    ``KeyError``; ids cannot be deleted (``TypeError``).
    """

    __slots__ = ("_ids", "_set")

    def __init__(self, ids: Sequence[str]) -> None:
        self._ids = ids  # sorted and unique (prepare checks both)
        self._set: dict[str, Fate] = {}

    def _has(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        i = bisect_left(self._ids, key)
        return i < len(self._ids) and self._ids[i] == key

    def __contains__(self, key: object) -> bool:
        return key in self._set or self._has(key)

    def __getitem__(self, key: str) -> Fate:
        got = self._set.get(key)
        if got is not None:
            return got
        if self._has(key):
            return Fate.KEPT
        raise KeyError(key)

    def __setitem__(self, key: str, fate: Fate) -> None:
        if key not in self._set and not self._has(key):
            raise KeyError(f"{key!r} is not an input id of this plan")
        if fate == Fate.KEPT:
            self._set.pop(key, None)
        else:
            self._set[key] = Fate(fate)

    def __delitem__(self, key: str) -> None:
        raise TypeError("every input id keeps a fate; set it to Fate.KEPT instead")

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def items(self) -> ItemsView[str, Fate]:
        return _FateItems(self)

    def values(self) -> ValuesView[Fate]:
        return _FateValues(self)

    def __repr__(self) -> str:
        return f"Fates({len(self)} ids, {len(self._set)} not kept)"


class _FateItems(ItemsView[str, Fate]):
    _mapping: Fates

    def __iter__(self) -> Iterator[tuple[str, Fate]]:
        get, kept = self._mapping._set.get, Fate.KEPT
        for k in self._mapping._ids:
            yield k, get(k, kept)


class _FateValues(ValuesView[Fate]):
    _mapping: Fates

    def __iter__(self) -> Iterator[Fate]:
        get, kept = self._mapping._set.get, Fate.KEPT
        for k in self._mapping._ids:
            yield get(k, kept)


def merged_id(source_ids: Iterable[str], source_hashes: Iterable[str]) -> str:
    """Deterministic id for a merged memory: ``"m-"`` + 24 hex of SHA-256 over sorted sources.

    Same sources with the same content give the same id, so a retried apply is idempotent (I-3).
    """
    h = hashlib.sha256()
    for sid, sh in sorted(zip(source_ids, source_hashes, strict=True)):
        h.update(sid.encode("utf-8"))
        h.update(b"\x00")
        h.update(sh.encode("ascii"))
        h.update(b"\x01")
    return "m-" + h.hexdigest()[:24]


def merge_result_id(
    source_ids: Sequence[str], source_hashes: Sequence[str], source_texts: Sequence[str], text: str
) -> str:
    """The id a merge writes its memory under (all three sequences in one order, one per
    source; ``text``: the merged text).

    The first source whose text is exactly ``text`` (an exact duplicate, or the near-duplicate
    whose text holds the others'): its record stays and only its metadata is rewritten — its
    text and vector are already the merged memory's, so apply updates the metadata alone (a
    tenth of writing a new record and deleting this one, ``bench/chroma_batch_bench.py``),
    and the id an agent holds for it still answers. The merge still ``removes`` every source,
    that one included: its previous version is archived and a rollback restores it under its
    id. Any other text gets :func:`merged_id`. Deterministic either way, so a retried apply is
    idempotent (I-3). Raises ``ValueError`` when the sequences differ in length.
    """
    if not len(source_ids) == len(source_hashes) == len(source_texts):
        raise ValueError("source_ids, source_hashes and source_texts must have the same length")
    for sid, source_text in zip(source_ids, source_texts, strict=True):
        if source_text == text:
            return sid
    return merged_id(source_ids, source_hashes)


@dataclass
class Operation:
    """One proposed change.

    - ``kind``: merge | promote | prune | reconcile | distill | conflict | summarize. A
      ``summarize`` writes one summary memory over a cluster of memories of one scope (its
      children, ``source_ids``; when it rewrites an existing summary, that summary's id is
      ``result_id`` and is listed last in ``source_ids``, so apply archives its previous
      version): it removes nothing (:mod:`consolidation.pyramid`). A ``conflict`` holds a
      contradiction the engine could not settle (``source_ids``: both memories; ``rule``: the
      cue; ``scores``: cosine, cue and both dates); it removes nothing, writes nothing, is
      outside the loss fraction and is never applied automatically.
    - ``source_ids``: the memories it reads, in display order. For reconcile, ``source_ids[0]``
      is the winner (kept) and the rest are superseded.
    - ``source_hashes``: ``content_hash`` of each source at planning time (same order).
    - ``removes``: ids that leave the store when applied (merge: all sources; prune: the
      source; reconcile: the superseded ones; promote/distill/conflict/summarize: none).
    - ``result_id`` / ``result_document`` / ``result_metadata``: the record to write (merge:
      the merged memory; promote: the source id with its new metadata; distill: a new memory;
      summarize: the summary, new or rewritten).
    - ``scores``: figures behind the decision, e.g. ``{"min_cosine": 0.93}`` (cosine in
      [-1, 1]), ``{"score": 0.01, "age_days": 120}``; ``pairwise`` holds a merge's pairwise
      cosine matrix as nested lists.
    - ``rule``: short machine name of the rule that fired (``"exact_duplicate"``,
      ``"near_duplicate"``, ``"decay"``, ``"negation"`` …); ``reason``: a sentence for humans.
    """

    kind: OpKind
    source_ids: list[str]
    source_hashes: list[str]
    removes: list[str]
    reason: str
    rule: str
    scores: dict[str, Any] = field(default_factory=dict)
    result_id: str | None = None
    result_document: str | None = None
    result_metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.kind = OpKind(self.kind)
        if len(self.source_ids) != len(self.source_hashes):
            raise ValueError("source_ids and source_hashes must have the same length")
        if not set(self.removes) <= set(self.source_ids):
            raise ValueError("an operation can only remove its own sources")

    @property
    def key(self) -> str:
        """Stable identifier of the operation within a plan (kind + sorted sources)."""
        return f"{self.kind.value}:" + ",".join(sorted(self.source_ids))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "kind": self.kind.value,
            "source_ids": list(self.source_ids),
            "source_hashes": list(self.source_hashes),
            "removes": list(self.removes),
            "reason": self.reason,
            "rule": self.rule,
            "scores": self.scores,
            "result_id": self.result_id,
            "result_document": self.result_document,
            "result_metadata": self.result_metadata,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Operation:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


@dataclass
class Plan:
    """Operations + the `ConsolidationResult` they imply + telemetry.

    ``fates`` maps every input id to its :class:`Fate` (exactly one each). ``context`` (also
    copied into ``result.context``) holds telemetry: ``timings`` (seconds per stage),
    ``candidates`` (pair counts per stage), ``incremental`` and similar.
    """

    operations: list[Operation]
    result: ConsolidationResult
    fates: MutableMapping[str, Fate]
    context: dict[str, Any] = field(default_factory=dict)

    def by_kind(self, kind: OpKind | str) -> list[Operation]:
        """The operations of one kind, in plan order."""
        kind = OpKind(kind)
        return [op for op in self.operations if op.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (round-trips through :meth:`from_dict`)."""
        return {
            "operations": [op.to_dict() for op in self.operations],
            "result": self.result.to_dict(),
            "fates": {k: v.value for k, v in self.fates.items()},
            "context": self.context,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """Inverse of :meth:`to_dict`."""
        r = dict(data["result"])
        r.pop("loss_fraction", None)
        return cls(
            operations=[Operation.from_dict(o) for o in data["operations"]],
            result=ConsolidationResult(**r),
            fates={k: Fate(v) for k, v in data["fates"].items()},
            context=dict(data.get("context") or {}),
        )


def summarize(
    entries_before: int,
    operations: Iterable[Operation],
    copies: Mapping[str, str] | None = None,
) -> ConsolidationResult:
    """The `ConsolidationResult` that applying ``operations`` to a store of ``entries_before``
    memories would give: removed originals are not retained; each merge/distill adds one entry,
    and so does each summarize that writes a new summary (one that rewrites an existing summary,
    its ``result_id`` among its sources, adds none); ``promoted`` counts promote operations and
    merges whose result is promoted (``scores["promoted"]``).

    ``copies`` (a store's ``library_copies()``: the id of each extra copy a library stored of a
    memory → the id of the copy that stands for the original) counts every such memory as ONE
    original (:func:`count_copies`); without it every stored entry is an original.

    Used at planning time and again at review/apply time on the operations actually kept (the
    guard is re-evaluated on what is applied, docs/ARCHITECTURE.md "Loss guard and budget").
    """
    operations = list(operations)
    removed: set[str] = set()
    added = merged = promoted = pruned = reconciled = 0
    counts: dict[str, int] = {k.value: 0 for k in OpKind}
    for op in operations:
        counts[op.kind.value] += 1
        removed.update(op.removes)
        # a summarize that rewrites an existing summary (its result among its sources) adds none
        new_summary = op.kind == OpKind.SUMMARIZE and op.result_id not in op.source_ids
        if op.kind in (OpKind.MERGE, OpKind.DISTILL) or new_summary:
            added += 1
        if op.kind == OpKind.MERGE:
            merged += len(op.removes)
            if op.scores.get("promoted"):  # merged memory written straight into the curated tier
                promoted += 1
        elif op.kind == OpKind.PROMOTE:
            promoted += 1
        elif op.kind == OpKind.PRUNE:
            pruned += len(op.removes)
        elif op.kind == OpKind.RECONCILE:
            reconciled += len(op.removes)
    context: dict[str, Any] = {"operations": counts, "reconciled": reconciled}
    if copies:
        originals, lost = count_copies(entries_before, operations, removed, copies)
        context["stored"] = {
            "before": entries_before,
            "after": entries_before - len(removed) + added,
        }
        context["library_copies"] = len(copies)
        return ConsolidationResult(
            entries_before=originals,
            entries_after=context["stored"]["after"],
            merged=merged,
            promoted=promoted,
            pruned=pruned,
            retained_originals=originals - lost,
            context=context,
        )
    return ConsolidationResult(
        entries_before=entries_before,
        entries_after=entries_before - len(removed) + added,
        merged=merged,
        promoted=promoted,
        pruned=pruned,
        retained_originals=entries_before - len(removed),
        context=context,
    )


def count_copies(
    entries_before: int,
    operations: Sequence[Operation],
    removed: set[str],
    copies: Mapping[str, str],
) -> tuple[int, int]:
    """``(originals, lost)``: how many originals a store of ``entries_before`` entries holds
    when each library copy (``copies``: extra copy id → the id standing for its original)
    counts as one, and how many of them ``operations`` (removing ``removed``) lose.

    An original is lost when every stored copy of it is removed, except that a merge of
    identical texts (rule ``exact_duplicate``: the same text after normalisation) keeps one
    original whose copies it removes: its merged memory is that text. So merging the two copies
    PraisonAI stores of each turn loses nothing, merging two turns that said the same thing
    loses one, and any other merge, prune or reconcile loses its sources as usual
    (docs/ARCHITECTURE.md "Loss guard and budget")."""
    members: dict[str, set[str]] = {}
    for copy_id, original in copies.items():
        members.setdefault(original, {original}).add(copy_id)
    gone = {
        copies.get(rid, rid)
        for rid in removed
        if members.get(copies.get(rid, rid), {rid}) <= removed
    }
    kept: set[str] = set()
    for op in operations:
        if op.kind == OpKind.MERGE and op.rule == "exact_duplicate":
            originals = (copies.get(s, s) for s in op.source_ids)
            one = next((g for g in originals if g in gone and g not in kept), None)
            if one is not None:
                kept.add(one)
    return entries_before - len(copies), len(gone) - len(kept)


def leave_out(plan: Plan, reasons: Mapping[str, str], entries_before: int) -> Plan:
    """``plan`` without the operations whose result text the store cannot write.

    ``reasons`` maps a result text to why it cannot be written (from the store's
    ``unwritable(texts)``: an empty text; a new text for a collection of another model's vectors
    with no embedder for it). Those operations are dropped, every source they would have removed
    is ``KEPT`` again (unless a kept operation removes it), ``result`` is recomputed with
    :func:`summarize` over ``entries_before`` memories, and ``context["left_out"]`` lists
    ``{"kind", "source_ids", "text", "reason"}`` for each. Returns ``plan`` (changed in place)
    untouched when no reason applies.
    """

    def reason_of(op: Operation) -> str | None:
        return None if op.result_document is None else reasons.get(op.result_document)

    dropped = [op for op in plan.operations if reason_of(op) is not None]
    if not dropped:
        return plan
    plan.operations = [op for op in plan.operations if reason_of(op) is None]
    still_removed = {rid for op in plan.operations for rid in op.removes}
    for op in dropped:
        for rid in op.removes:
            if rid not in still_removed and rid in plan.fates:
                plan.fates[rid] = Fate.KEPT
    plan.context.setdefault("left_out", []).extend(
        {
            "kind": op.kind.value,
            "source_ids": list(op.source_ids),
            "text": (op.result_document or "")[:200],
            "reason": reason_of(op),
        }
        for op in dropped
    )
    plan.result = summarize(entries_before, plan.operations)
    return plan
