"""Grouping stages: candidate search, exact duplicates, contradictions, complete linkage.

Also the pair predicates the later stages share: :func:`check_contradiction` (memoised),
:func:`pair_sim`, :func:`linked` and :func:`conflicts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..plans import Fate, Operation, OpKind
from ..text import detect_contradiction, extractive_merge, normalize_text
from .candidates import candidate_pairs
from .state import PlanState, short

__all__ = [
    "check_contradiction",
    "conflicts",
    "find_exact",
    "link_groups",
    "linked",
    "pair_sim",
    "reconcile_contradictions",
    "search_candidates",
]


def search_candidates(st: PlanState) -> None:
    """Stage ``candidates``: every pair with cosine ≥ ``min(link_threshold,
    contradiction_threshold)`` into ``st.sim`` (``{(i, j): cosine}``, ``i < j``) — only new ×
    store pairs in a partial incremental pass (:func:`~.candidates.candidate_pairs`)."""
    policy = st.policy
    need_sim = policy.merge_near or policy.reconcile
    t_cand = min(policy.link_threshold, policy.contradiction_threshold)
    if need_sim and st.n >= 2 and len(st.new_idx):
        pi, pj, ps = candidate_pairs(
            st.emb, t_cand, query=st.new_idx if st.partial else None,
            method=st.candidate_method,
        )
    else:
        pi = pj = np.empty(0, np.int64)
        ps = np.empty(0, np.float32)
    st.pi, st.pj = pi, pj
    st.sim = {(int(a), int(b)): float(s) for a, b, s in zip(pi, pj, ps, strict=True)}
    st.candidates["similar_pairs"] = len(st.sim)


def find_exact(st: PlanState) -> None:
    """Stage ``exact``: normalised text keys (:func:`~consolidation.text.normalize_text`) and
    the exact-duplicate link edges (chunks of ``max_group_size``, each with a new member).

    Partial incremental pass: only new records and their similarity partners get a key. An
    exact duplicate has the same text, hence (with one embedding model) the same vector, so it
    is always among the partners; this keeps the pass O(new), not O(store).
    """
    policy, n = st.policy, st.n
    if st.partial:
        keyed = sorted(set(st.new_idx.tolist()) | set(st.pi.tolist()) | set(st.pj.tolist()))
    else:
        keyed = list(range(n))
    keys: list[str | None] = [None] * n
    for i in keyed:
        keys[i] = normalize_text(st.docs[i])
    by_key: dict[str, list[int]] = {}
    for i in keyed:
        by_key.setdefault(keys[i], []).append(i)
    exact_edges: list[tuple[int, int]] = []
    exact_pairs = 0
    if policy.merge_exact:
        for members in by_key.values():
            if len(members) < 2 or not any(st.is_new[i] for i in members):
                continue
            exact_pairs += len(members) * (len(members) - 1) // 2
            for c0 in range(0, len(members), policy.max_group_size):
                chunk = members[c0 : c0 + policy.max_group_size]
                exact_edges.extend((chunk[0], j) for j in chunk[1:])
    st.keys = keys
    st.exact_edges = exact_edges
    st.candidates["exact_pairs"] = exact_pairs


def check_contradiction(st: PlanState, a: int, b: int, s: float) -> Any:
    """The contradiction cue of pair ``a < b`` at cosine ``s`` (memoised), or ``None``.

    Only pairs at ``s ≥ contradiction_threshold`` with different normalised text are checked
    (:func:`~consolidation.text.detect_contradiction`), each counted in ``st.contra_stats``.
    """
    if (a, b) in st.contra:
        return st.contra[(a, b)]
    cue = None
    if s >= st.policy.contradiction_threshold and st.keys[a] != st.keys[b]:
        stats = st.contra_stats
        stats["checked"] += 1
        cue = detect_contradiction(st.docs[a], st.docs[b])
        if cue is not None:
            stats["found"][cue.kind] = stats["found"].get(cue.kind, 0) + 1
    st.contra[(a, b)] = cue
    return cue


def reconcile_contradictions(st: PlanState) -> None:
    """Stage ``contradictions``: check similar pairs by descending cosine; an unambiguous cue
    with both ``created_at`` set and different becomes a RECONCILE (newer kept =
    ``source_ids[0]``, older superseded); otherwise both are left alone and counted as
    ``unsure``. A protected loser blocks it (``blocked_protected``)."""
    policy, fm, metas, ids, hashes, docs = st.policy, st.fm, st.metas, st.ids, st.hashes, st.docs
    stats = st.contra_stats
    pending: list[tuple[float, int, int, Any]] = []
    for (a, b), s in sorted(st.sim.items(), key=lambda kv: (-kv[1], kv[0])):
        cue = check_contradiction(st, a, b, s)
        if cue is not None:
            pending.append((s, a, b, cue))
    for s, a, b, cue in pending:
        if st.removed[a] or st.removed[b]:
            continue
        ta, tb = fm.get_created_at(metas[a]), fm.get_created_at(metas[b])
        if not (policy.reconcile and cue.unambiguous and ta and tb and ta != tb):
            stats["unsure"] += 1
            continue
        win, lose = (a, b) if ta > tb else (b, a)
        if st.protected[lose]:
            stats["blocked_protected"] += 1
            continue
        st.removed[lose] = True
        st.winners.add(win)
        st.fates[ids[lose]] = Fate.SUPERSEDED
        stats["reconciled"] += 1
        st.ops_reconcile.append(Operation(
            kind=OpKind.RECONCILE, source_ids=[ids[win], ids[lose]],
            source_hashes=[hashes[win], hashes[lose]], removes=[ids[lose]], rule=cue.kind,
            reason=(f"{cue.kind.replace('_', ' ')}: {cue.detail}; newer "
                    f"“{short(docs[win])}” supersedes older “{short(docs[lose])}”"),
            scores={"cosine": round(s, 6), "newer_created_at": str(metas[win][fm.created_at]),
                    "older_created_at": str(metas[lose][fm.created_at])},
        ))
    st.candidates["contradiction_checked"] = stats["checked"]


def pair_sim(st: PlanState, a: int, b: int) -> float | None:
    """Cosine of ``a`` and ``b`` if searched (or, in a partial pass, computed and cached);
    ``None`` when every pair was searched and this one is below the candidate threshold."""
    key = (a, b) if a < b else (b, a)
    if key in st.sim:
        return st.sim[key]
    if not st.partial:
        return None  # every pair was searched: this one is below the candidate threshold
    s = float(np.dot(st.emb[key[0]], st.emb[key[1]]))
    st.sim[key] = s
    return s


def linked(st: PlanState, a: int, b: int) -> bool:
    """Whether ``a`` and ``b`` may share a group: same normalised text (``merge_exact``), or
    cosine ≥ ``link_threshold`` (``merge_near``) and not contradicting."""
    policy = st.policy
    if st.keys[a] is not None and st.keys[a] == st.keys[b] and policy.merge_exact:
        return True
    if not policy.merge_near:
        return False
    s = pair_sim(st, a, b)
    if s is None or s < policy.link_threshold:
        return False
    key = (a, b) if a < b else (b, a)
    return check_contradiction(st, key[0], key[1], s) is None


def conflicts(st: PlanState, a: int, members: Sequence[int]) -> bool:
    """Whether ``a`` contradicts any of ``members`` (cosine ≥ ``contradiction_threshold``)."""
    for b in members:
        x, y = (a, b) if a < b else (b, a)
        s = st.sim.get((x, y))
        if s is None:  # not searched (below the candidate threshold, or search off)
            s = float(np.dot(st.emb[x], st.emb[y]))
        if s >= st.policy.contradiction_threshold and check_contradiction(st, x, y, s):
            return True
    return False


def link_groups(st: PlanState) -> None:
    """Stage ``grouping``: greedy complete linkage into ``st.group_of`` / ``st.merged_text``.

    Links (exact duplicates first, then by descending cosine, ties by id) join two groups only
    if *every* cross pair is :func:`linked`, the union has at most ``max_group_size`` members
    and its extractive merge fits ``max_merged_chars``. A reconcile winner is not merged in the
    same pass: the reconcile reads it, and applying a merge first would make that operation
    stale (I-4). It can merge on the next pass. Sets ``st.eligible``.
    """
    policy, n = st.policy, st.n
    st.eligible = [not st.protected[i] and not st.removed[i] and i not in st.winners
                   for i in range(n)]
    edges: list[tuple[int, float, int, int]] = [(0, -1.0, a, b) for a, b in st.exact_edges]
    if policy.merge_near:
        edges.extend(
            (1, -s, a, b) for (a, b), s in st.sim.items()
            if s >= policy.link_threshold and st.contra.get((a, b)) is None
        )
    edges.sort()
    st.candidates["link_edges"] = len(edges)
    group_of, merged_text, eligible = st.group_of, st.merged_text, st.eligible
    for _, _, a, b in edges:
        if not (eligible[a] and eligible[b]):
            continue
        ga, gb = group_of.get(a, [a]), group_of.get(b, [b])
        if ga is gb:
            continue
        if len(ga) + len(gb) > policy.max_group_size:
            continue
        if not all(linked(st, x, y) for x in ga for y in gb):
            continue
        union = sorted(ga + gb)
        text = extractive_merge([st.docs[i] for i in union], policy.max_merged_chars)
        if text is None:
            continue
        for i in union:
            group_of[i] = union
        merged_text[union[0]] = text
