"""Exact copies inside a merge the store cannot write still merge: one copy's text is kept.

A collection of another model's vectors with no embedder for it (a mem0 store of 1536-d OpenAI
vectors attached without the agent's embedder) can be written only the texts it already holds a
vector for (``store.unwritable(texts)``); a merge whose result text is new is left out
(:func:`consolidation.plans.leave_out`). When such a merge grouped exact copies with a
paraphrase ("Prefers dark mode in the editor" × 15 and "Likes the editor in dark mode"), leaving
the whole group out kept every copy. :func:`leave_out_keeping_copies` leaves it out and proposes,
in its place, one MERGE per set of its sources that are copies of one text (same
:func:`~consolidation.text.normalize_text` key, same scope): its text is one copy's own text, so
the store reuses that copy's stored vector and nothing is embedded; the paraphrase is untouched.
The operation has the shape of every exact-duplicate merge (the first copy's id kept, from
:func:`~consolidation.plans.merge_result_id`, every copy removed, the metadata united), so the loss
guard, review, apply and rollback treat it as the planner's own; it removes a subset of what the
left-out merge removed, so a plan within the loss budget stays within it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .planning import merge_metadata, promotion_rules
from .planning.operations import promote_reason
from .plans import Fate, Operation, OpKind, Plan, leave_out, merge_result_id, summarize
from .policy import Policy
from .records import FieldMap, MemoryRecord
from .text import normalize_text

__all__ = ["copy_merges", "leave_out_keeping_copies"]


def copy_merges(
    op: Operation,
    records: Mapping[str, MemoryRecord],
    policy: Policy,
    fieldmap: FieldMap,
    why: str,
) -> list[Operation]:
    """The exact-duplicate MERGEs among the sources of ``op`` (a MERGE left out for ``why``).

    ``records`` maps the pass's memory ids to their records (embeddings present, as
    :func:`consolidation.snapshot.embed_missing` leaves them). Sources are grouped by scope and
    :func:`~consolidation.text.normalize_text` key (an empty text has none); each group of two
    or more becomes a MERGE (rule ``"exact_duplicate"``, confidence 1.0) whose text is the raw
    text of its first source in ``op``'s order. A source missing from ``records`` is left as
    it is. Returns ``[]`` for any other kind of operation or when no two sources are copies.
    """
    if op.kind != OpKind.MERGE:
        return []
    hashes = dict(zip(op.source_ids, op.source_hashes, strict=True))
    groups: dict[tuple[tuple[str, ...], str], list[MemoryRecord]] = {}
    for sid in op.source_ids:
        rec = records.get(sid)
        key = normalize_text(rec.document) if rec is not None else ""
        if rec is not None and key:
            groups.setdefault((fieldmap.scope_key(rec.metadata), key), []).append(rec)
    out = []
    for copies in groups.values():
        if len(copies) < 2:
            continue
        ids = [r.id for r in copies]
        meta = merge_metadata(
            [r.metadata for r in copies],
            ids,
            fieldmap=fieldmap,
            curated_tier=policy.curated_tier,
        )
        vecs = np.asarray([r.embedding for r in copies], dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        unit = vecs / np.where(norms > 0, norms, 1.0)
        mat = np.clip(unit @ unit.T, -1.0, 1.0)
        off = mat[~np.eye(len(copies), dtype=bool)]
        scores: dict[str, Any] = {
            "pairwise": [[round(float(x), 4) for x in row] for row in mat],
            "min_cosine": round(float(off.min()), 4),
            "mean_cosine": round(float(off.mean()), 4),
            "confidence": 1.0,
            "rule": "exact_duplicate",
            "copies_of_left_out": len(op.source_ids),
        }
        reason = (
            f"{len(copies)} memories with the same text after normalisation, kept from a merge "
            f"of {len(op.source_ids)} the store cannot write ({why}): one copy's text and "
            "stored vector kept"
        )
        rules = promotion_rules(meta, policy, fieldmap) if policy.promote else []
        if rules and fieldmap.get_tier(meta) != policy.curated_tier:
            meta[fieldmap.tier] = policy.curated_tier
            scores["promoted"] = True
            scores["promote_rules"] = rules
            reason += "; promoted to the curated tier: " + promote_reason(
                rules, meta, fieldmap, policy
            )
        ghashes = [hashes[i] for i in ids]
        out.append(
            Operation(
                kind=OpKind.MERGE,
                source_ids=ids,
                source_hashes=ghashes,
                removes=list(ids),
                reason=reason,
                rule="exact_duplicate",
                scores=scores,
                result_id=merge_result_id(
                    ids, ghashes, [r.document for r in copies], copies[0].document
                ),
                result_document=copies[0].document,
                result_metadata=meta,
            )
        )
    return out


def leave_out_keeping_copies(
    plan: Plan,
    reasons: Mapping[str, str],
    records: Sequence[MemoryRecord],
    policy: Policy,
    fieldmap: FieldMap,
    unwritable: Callable[[list[str]], Mapping[str, str]] | None = None,
) -> Plan:
    """:func:`~consolidation.plans.leave_out` of the operations whose text the store cannot
    write (``reasons``: result text → why), then the :func:`copy_merges` of each left-out
    MERGE added after the plan's last MERGE (a copy merge whose text ``unwritable`` still
    refuses is dropped too). Each ``plan.context["left_out"]`` entry of a merge gets
    ``"copies_merged"``: how many of its sources merged anyway. Fates and ``plan.result``
    (:func:`~consolidation.plans.summarize` over ``len(records)`` memories) are updated.
    Returns ``plan`` (changed in place).
    """
    by_id = {r.id: r for r in records}
    rescued: dict[tuple[str, ...], list[Operation]] = {}
    for op in plan.operations:
        why = None if op.result_document is None else reasons.get(op.result_document)
        if why is not None and op.kind == OpKind.MERGE:
            got = copy_merges(op, by_id, policy, fieldmap, why)
            if got:
                rescued[tuple(op.source_ids)] = got
    plan = leave_out(plan, reasons, len(records))
    new_ops = [m for ms in rescued.values() for m in ms]
    if new_ops and unwritable is not None:
        refused = unwritable([m.result_document or "" for m in new_ops])
        new_ops = [m for m in new_ops if (m.result_document or "") not in refused]
    if not new_ops:
        return plan
    kept = {id(m) for m in new_ops}
    for entry in plan.context.get("left_out", []):
        ms = [m for m in rescued.get(tuple(entry["source_ids"]), []) if id(m) in kept]
        if ms:
            entry["copies_merged"] = sum(len(m.removes) for m in ms)
    for m in new_ops:
        for rid in m.removes:
            plan.fates[rid] = Fate.MERGED
    last = max((k for k, op in enumerate(plan.operations) if op.kind == OpKind.MERGE), default=-1)
    plan.operations[last + 1 : last + 1] = new_ops
    plan.result = summarize(len(records), plan.operations)
    return plan
