"""Operation stages: MERGE per unit, PROMOTE, and the loss budget (trim to the guard).

Also the promotion rules (:func:`promotion_rules`) that prune and windows consult.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import numpy as np

from ..plans import Fate, Operation, OpKind, merge_result_id
from ..policy import Policy
from ..records import FieldMap
from ..result import loss_budget
from .metadata import merge_metadata
from .state import EPISODIC, PlanState, short

__all__ = [
    "RULE_ORDER",
    "merge_operations",
    "promote_operations",
    "promote_reason",
    "promotion_rules",
    "trim_to_guard",
]

RULE_ORDER = [
    "decided",
    "exact_duplicate",
    "exact_copy",
    "reconcile",
    "near_duplicate",
    "evidence_fold",
    "session_window",
    "semantic_window",
    "decay",
    "decay_covered",
]
"""Trim order (most confident first): what a removal rests on, from a reviewer's own pick
(``decided``: a conflict pick applied again) and identical text to coverage."""


def trim_order(op: Operation) -> tuple[int, float, str]:
    """The sort key of the budget's trim, most certain first: :data:`RULE_ORDER` (an unknown
    rule last), then ``scores["confidence"]`` descending, then the operation key (so the order
    is total and the trim deterministic, I-8)."""
    rank = RULE_ORDER.index(op.rule) if op.rule in RULE_ORDER else len(RULE_ORDER)
    return rank, -float(op.scores.get("confidence", 0.0)), op.key


DEFERRED_LISTED = 200
"""Deferred operations a plan lists by name (``trim_to_guard``'s ``info["deferred"]``); the
counts cover them all."""


def promotion_rules(meta: Mapping[str, Any], policy: Policy, fieldmap: FieldMap) -> list[str]:
    """Names of the promotion rules ``meta`` meets: ``"sessions"``, ``"importance"``, ``"access"``.

    Thresholds from ``policy`` (``promote_min_sessions`` distinct sessions,
    ``promote_min_importance``, ``promote_min_access``).
    """
    rules = []
    if len(set(fieldmap.get_sessions(meta))) >= policy.promote_min_sessions:
        rules.append("sessions")
    if fieldmap.get_importance(meta, default=0.0) >= policy.promote_min_importance:
        rules.append("importance")
    if fieldmap.get_access_count(meta) >= policy.promote_min_access:
        rules.append("access")
    return rules


def promote_reason(rules: list[str], meta: Mapping[str, Any], fm: FieldMap, policy: Policy) -> str:
    """Readable reason for ``rules`` met by ``meta``, e.g. ``"accessed 9 times (≥ 5)"``."""
    parts = []
    if "sessions" in rules:
        parts.append(
            f"reinforced in {len(set(fm.get_sessions(meta)))} sessions "
            f"(≥ {policy.promote_min_sessions})"
        )
    if "importance" in rules:
        parts.append(
            f"importance {fm.get_importance(meta, default=0.0):.2f} "
            f"(≥ {policy.promote_min_importance})"
        )
    if "access" in rules:
        parts.append(f"accessed {fm.get_access_count(meta)} times (≥ {policy.promote_min_access})")
    return "; ".join(parts)


def _merge_reason(
    st: PlanState, group: list[int], rule: str, mat: np.ndarray, scores: dict[str, Any]
) -> str:
    """Reason for a MERGE of ``group`` under ``rule``; sets ``scores["confidence"]``."""
    policy, sessions = st.policy, st.sessions
    if rule == "exact_duplicate":
        scores["confidence"] = 1.0
        return f"{len(group)} memories with the same text after normalisation"
    if rule == "near_duplicate":
        scores["confidence"] = scores["min_cosine"]
        if scores["min_cosine"] < policy.link_threshold:
            # a lossless duplicate linked below the threshold (judgment.PairVerdict.lossless)
            return (
                f"{len(group)} memories state the same fact (one text covers every content word "
                f"of the others, aliases included; min cosine {scores['min_cosine']:.3f})"
            )
        return (
            f"{len(group)} memories state the same fact (every pair cosine ≥ "
            f"{policy.link_threshold:g}, min {scores['min_cosine']:.3f})"
        )
    if rule == "evidence_fold":
        folded = [k for k in group if st.layers[k] == {EPISODIC}]
        scores["confidence"] = round(float(np.mean(mat[0, 1:])), 4)
        return (
            f"{len(folded)} episodic memor{'y' if len(folded) == 1 else 'ies'} cited by "
            f"the evidence of “{short(st.docs[group[0]], 60)}” folded into it (only "
            f"sentences with new content words kept, ≤ {policy.fold_max_chars} chars)"
        )
    if rule == "session_window":
        scores["confidence"] = round(float(np.mean(np.diag(mat, 1))), 4)
        return (
            f"{len(group)} consecutive episodic memories of session "
            f"{', '.join(sessions[group[0]]) or '?'} merged into one window (repeated "
            f"content dropped, ≤ {policy.max_merged_chars} chars)"
        )
    scores["confidence"] = scores["mean_cosine"]
    return (
        f"{len(group)} semantic memories of session "
        f"{', '.join(sessions[group[0]]) or '?'} about "
        f"{', '.join(st.speakers[group[0]]) or '?'} merged "
        f"(≤ {policy.semantic_window_chars} chars)"
    )


def merge_operations(st: PlanState) -> None:
    """Stage ``merge``: one MERGE per live unit of ≥ 2 members, in order of its smallest index.

    Deterministic id (:func:`~consolidation.plans.merge_result_id`: the id of the first source
    whose text the unit keeps, else a new one), the unit's text, united metadata
    (:mod:`consolidation.planning.metadata`), pairwise cosine matrix and min/mean cosine in
    ``scores``. A merged memory that meets a promotion rule (its sessions are the union of its
    sources', its access count their sum) is written straight into the curated tier:
    ``scores["promoted"] = True``.
    """
    policy, fm, ids, hashes, units = st.policy, st.fm, st.ids, st.hashes, st.units
    for u in sorted(units.live(), key=lambda u: min(units.members[u])):
        group = units.members[u]
        if len(group) < 2:
            continue
        gids = [ids[k] for k in group]
        ghashes = [hashes[k] for k in group]
        sub = st.emb[group]
        mat = np.clip(sub @ sub.T, -1.0, 1.0)
        off = mat[~np.eye(len(group), dtype=bool)]
        rule = units.rule[u]
        meta = merge_metadata(
            [st.metas[k] for k in group], gids, fieldmap=fm, curated_tier=policy.curated_tier
        )
        scores: dict[str, Any] = {
            "pairwise": [[round(float(x), 4) for x in row] for row in mat],
            "min_cosine": round(float(off.min()), 4),
            "mean_cosine": round(float(off.mean()), 4),
        }
        if rule is None:
            exact = len({st.keys[k] for k in group}) == 1 and st.keys[group[0]] is not None
            rule = "exact_duplicate" if exact else "near_duplicate"
        reason = _merge_reason(st, group, rule, mat, scores)
        scores["rule"] = rule
        rules = promotion_rules(meta, policy, fm) if policy.promote else []
        if rules and fm.get_tier(meta) != policy.curated_tier:
            meta[fm.tier] = policy.curated_tier
            scores["promoted"] = True
            scores["promote_rules"] = rules
            reason += "; promoted to the curated tier: " + promote_reason(rules, meta, fm, policy)
        for k in group:
            st.removed[k] = True
            st.fates[ids[k]] = Fate.MERGED
        st.ops_merge.append(
            Operation(
                kind=OpKind.MERGE,
                source_ids=gids,
                source_hashes=ghashes,
                removes=list(gids),
                rule=rule,
                reason=reason,
                scores=scores,
                result_id=merge_result_id(
                    gids, ghashes, [st.docs[k] for k in group], units.text[u]
                ),
                result_document=units.text[u],
                result_metadata=meta,
            )
        )


def promote_operations(st: PlanState) -> None:
    """Stage ``promote``: metadata-only PROMOTE of surviving, new, non-curated memories that
    meet a promotion rule (:func:`promotion_rules`); never one held in a conflict (``st.held``:
    kept as it is until a reviewer decides, who may remove it)."""
    policy, fm, metas, ids = st.policy, st.fm, st.metas, st.ids
    if not policy.promote:
        return
    for i in st.new_rows:
        if st.removed[i] or fm.get_tier(metas[i]) == policy.curated_tier:
            continue
        if i in st.held:
            continue
        rules = promotion_rules(metas[i], policy, fm)
        if not rules:
            continue
        meta = dict(metas[i])
        meta[fm.tier] = policy.curated_tier
        st.ops_promote.append(
            Operation(
                kind=OpKind.PROMOTE,
                source_ids=[ids[i]],
                source_hashes=[st.hashes[i]],
                removes=[],
                rule=rules[0],
                reason="durable: " + promote_reason(rules, metas[i], fm, policy),
                scores={
                    "rules": rules,
                    "sessions": len(set(fm.get_sessions(metas[i]))),
                    "importance": fm.get_importance(metas[i], default=0.0),
                    "access_count": fm.get_access_count(metas[i]),
                },
                result_id=ids[i],
                result_document=st.docs[i],
                result_metadata=meta,
            )
        )


def trim_to_guard(
    operations: list[Operation], n: int, max_loss: float, fates: MutableMapping[str, Fate]
) -> tuple[list[Operation], dict[str, Any] | None]:
    """Stage ``budget``: keep the most confident removing operations whose removals fit
    ``max_loss × n``.

    Order: :data:`RULE_ORDER`, then ``scores["confidence"]`` descending, then the operation key.
    Dropped operations' sources get back :attr:`Fate.KEPT`; they are *deferred*: the next pass
    plans them again (the console shows them as deferred work). Operations that remove nothing
    (promote) are always kept. Returns ``(operations, info)``; ``info`` is ``None`` when the
    plan already fits, else ``{"budget", "kept_removals", "dropped_operations",
    "dropped_removals", "planned_removals", "deferred_by_kind": {kind: operations},
    "deferred_ids", "deferred"}`` (counts of originals and operations; ``deferred_ids``: every
    source of a deferred operation, which an incremental next pass must treat as new to plan it
    again; ``deferred``: the first :data:`DEFERRED_LISTED` deferred operations, each
    ``{"kind", "rule", "source_ids", "reason"}``, for the proposal to list).
    """
    budget = loss_budget(max_loss, n)
    total = len({rid for op in operations for rid in op.removes})
    if total <= budget:
        return operations, None
    ranked = sorted((op for op in operations if op.removes), key=trim_order)
    keep: set[int] = set()
    used = 0
    for op in ranked:
        if used + len(op.removes) <= budget:
            keep.add(id(op))
            used += len(op.removes)
    out, dropped, dropped_removals = [], 0, 0
    by_kind: dict[str, int] = {}
    deferred_ids: set[str] = set()
    listed: list[dict[str, object]] = []
    for op in operations:
        if not op.removes or id(op) in keep:
            out.append(op)
            continue
        dropped += 1
        deferred_ids.update(op.source_ids)
        if len(listed) < DEFERRED_LISTED:
            listed.append(
                {
                    "kind": op.kind.value,
                    "rule": op.rule or "",
                    "source_ids": list(op.source_ids),
                    "reason": op.reason or "",
                }
            )
        dropped_removals += len(op.removes)
        by_kind[op.kind.value] = by_kind.get(op.kind.value, 0) + 1
        for rid in op.removes:
            fates[rid] = Fate.KEPT
    return out, {
        "budget": budget,
        "kept_removals": used,
        "dropped_operations": dropped,
        "dropped_removals": dropped_removals,
        "planned_removals": total,
        "deferred_by_kind": by_kind,
        "deferred_ids": sorted(deferred_ids),
        "deferred": listed,
    }
