"""Prune stages: time-based decay (``decay``) and decay of covered episodic turns
(``decay_covered``).

Decay score ``importance × 0.5 ** (age_days / prune_half_life_days)`` (seeds/002 "Time-based
decay", quoted in docs/SOURCES.md); thresholds from :class:`~consolidation.policy.Policy`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..plans import Fate, Operation, OpKind
from ..text import content_tokens
from .constraints import held_kept
from .operations import promotion_rules
from .state import EPISODIC, PlanState

__all__ = ["MIN_COVERAGE", "prune_covered", "prune_decayed"]

MIN_COVERAGE = 0.5
"""Least fraction of a decayed memory's content words that other memories of its session must
keep for ``decay_covered`` to remove it, whatever ``prune_coverage`` says: below half, the
memory is mostly unique, and age alone never removes a unique memory. A
policy's ``prune_coverage`` of 0.0 (the old "missing importance alone" rule) acts as 0.5."""


def importance_text(st: PlanState, i: int) -> str:
    """``"0.50"`` for an explicit importance, ``"not set (neutral 0.5)"`` otherwise."""
    v = st.fm.get_importance(st.metas[i], default=-1.0)
    return f"{v:.2f}" if v >= 0.0 else "not set (neutral 0.5)"


def _may_share(st: PlanState, i: int, names: set[str]) -> bool:
    """Whether memory ``i`` may be in one of the sessions ``names`` (False only when its
    session value is a plain string not among them, or missing)."""
    v = st.metas[i].get(st.fm.session)
    if v is None or v == "":
        return False
    if isinstance(v, str) and not v.strip().startswith("["):
        return v in names
    return True


def prune_decayed(st: PlanState) -> None:
    """Stage ``prune``: PRUNE (rule ``decay``) new memories whose decay score is under
    ``prune_threshold``, ``age_days ≥ prune_min_age_days`` and whose *explicit* importance is
    below ``prune_max_importance``.

    Age alone never removes a unique memory: a decayed episodic memory with a
    higher or no importance is only noted in ``st.decayed`` and :func:`prune_covered` prunes it
    only when its session keeps its content; a decayed fact or summary with a higher or no
    importance is kept. Never pinned/curated, never a memory without ``created_at``, never one
    that meets a promotion rule, never one a reviewer decided to keep
    (:func:`~.constraints.held_kept`: listed as held back).
    """
    policy, fm, metas, ids, hashes = st.policy, st.fm, st.metas, st.ids, st.hashes
    if not policy.prune:
        return
    for i in st.new_rows:
        # cheapest test first (1M memories): a young or still-important memory is never
        # pruned, whatever its tier or promotion rules
        created = fm.get_created_at(metas[i])
        if created is None:
            continue
        age_days = max(0.0, (st.now - created).total_seconds() / 86400.0)
        if age_days < policy.prune_min_age_days:
            continue
        importance = fm.get_importance(metas[i])
        score = importance * 0.5 ** (age_days / policy.prune_half_life_days)
        if score < policy.prune_threshold:
            if st.protected[i] or promotion_rules(metas[i], policy, fm):
                continue
            explicit = fm.get_importance(metas[i], default=-1.0) >= 0.0
            if not (explicit and importance < policy.prune_max_importance):
                if st.layers[i] == {EPISODIC}:
                    st.decayed[i] = (score, age_days)  # pruned later, and only when covered
                continue
            if held_kept(st, i, "prune", "decay"):
                continue
            st.removed[i] = True
            st.fates[ids[i]] = Fate.PRUNED
            st.ops_prune.append(
                Operation(
                    kind=OpKind.PRUNE,
                    source_ids=[ids[i]],
                    source_hashes=[hashes[i]],
                    removes=[ids[i]],
                    rule="decay",
                    reason=(
                        f"stale and unimportant: importance {importance:.2f} (< "
                        f"{policy.prune_max_importance:g}) × 0.5^({age_days:.0f} d / "
                        f"{policy.prune_half_life_days:g} d) = {score:.4f} < "
                        f"{policy.prune_threshold:g}, age ≥ {policy.prune_min_age_days:g} d"
                    ),
                    scores={
                        "score": round(score, 6),
                        "age_days": round(age_days, 3),
                        "importance": importance,
                    },
                )
            )


def prune_covered(st: PlanState) -> None:
    """Stage ``covered prune``: PRUNE (rule ``decay_covered``) the memories in ``st.decayed``
    not removed, folded, held or protected, whose content words (fraction ≥
    ``max(prune_coverage, MIN_COVERAGE)``) the rest of their session — in the same scope —
    keeps (folds included), smallest first.

    Runs after evidence folds and before windows, so a window only gathers what would
    otherwise be lost. Sets ``st.candidates["covered_pruned"]``.
    """
    policy, docs, sessions, units = st.policy, st.docs, st.sessions, st.units
    covered_pruned = 0
    if st.decayed:
        counts: dict[tuple[str, ...] | str, dict[str, int]] = {}

        def count(text: str, sess: Sequence[Any], sign: int) -> None:
            if not sess:
                return
            for tok in set(content_tokens(text)):
                for ss in sess:
                    c = counts.setdefault(ss, {})
                    c[tok] = c.get(tok, 0) + sign

        def where(k: int) -> list[Any]:  # a session is compared within its scope only
            return [(st.scopes[k], x) for x in sessions[k]]

        # only the sessions of decayed memories are ever read: count nothing else (a store's
        # other memories are skipped on their raw session value, unparsed)
        need = {ss for i in st.decayed for ss in where(i)}
        names = {x for _, x in need}
        for i in range(st.n):
            if st.removed[i] or i in units.of or not _may_share(st, i, names):
                continue
            count(docs[i], [ss for ss in where(i) if ss in need], 1)
        for u in units.live():
            sess = {x for k in units.members[u] for x in where(k)}
            count(units.text[u], sorted(sess & need), 1)
        coverage = max(policy.prune_coverage, MIN_COVERAGE)
        for i in sorted(st.decayed, key=lambda i: (len(docs[i]), st.ids[i])):
            if st.removed[i] or i in units.of or not st.eligible[i] or not sessions[i]:
                continue
            toks = set(content_tokens(docs[i]))
            hit = sum(
                1 for tok in toks if any(counts.get(ss, {}).get(tok, 0) > 1 for ss in where(i))
            )
            frac = hit / len(toks) if toks else 1.0
            if frac + 1e-12 < coverage or held_kept(st, i, "prune", "decay_covered"):
                continue
            count(docs[i], where(i), -1)
            score, age_days = st.decayed[i]
            st.removed[i] = True
            st.fates[st.ids[i]] = Fate.PRUNED
            covered_pruned += 1
            st.ops_prune.append(
                Operation(
                    kind=OpKind.PRUNE,
                    source_ids=[st.ids[i]],
                    source_hashes=[st.hashes[i]],
                    removes=[st.ids[i]],
                    rule="decay_covered",
                    reason=(
                        f"stale and covered: importance {importance_text(st, i)} × 0.5^("
                        f"{age_days:.0f} d / {policy.prune_half_life_days:g} d) = {score:.4f}"
                        f" < {policy.prune_threshold:g}, and {frac:.0%} of its content words"
                        f" are kept by other memories of its session (≥ {coverage:.0%})"
                    ),
                    scores={
                        "score": round(score, 6),
                        "age_days": round(age_days, 3),
                        "coverage": round(frac, 4),
                        "confidence": round(frac, 4),
                    },
                )
            )
    st.candidates["covered_pruned"] = covered_pruned
