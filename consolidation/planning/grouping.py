"""Grouping stages: candidate search, exact duplicates, contradictions, complete linkage.

Also the pair predicates the later stages share: :func:`verdict` (memoised
:func:`~consolidation.judgment.judge_pair`), :func:`pair_sim`, :func:`linked` and :func:`conflicts`.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from ..decisions import Constraint
from ..judgment import CONFLICT, DISTINCT, SAME, SUPERSEDES, PairVerdict, judge_pair
from ..plans import Fate, Operation, OpKind
from ..spans import value_span
from ..text import extractive_merge, normalize_text
from . import nearest
from .candidates import candidate_pairs
from .constraints import held_apart, held_kept
from .copies import copy_representatives, spare_copies
from .nearest import bound_pairs
from .state import EPISODIC, Column, PlanState, equal_runs, short
from .templates import template_verdict
from .twins import twin_pairs
from .updates import update_pairs
from .vectors import query_pairs

__all__ = [
    "conflicts",
    "find_exact",
    "link_groups",
    "linked",
    "pair_sim",
    "reconcile_contradictions",
    "search_candidates",
    "verdict",
]


def search_candidates(st: PlanState) -> None:
    """Stage ``candidates``: every pair with cosine ≥ ``min(link_threshold,
    contradiction_threshold)`` into ``st.sim`` (``{(i, j): cosine}``, ``i < j``) — only new ×
    store pairs in a partial incremental pass (:func:`~.candidates.candidate_pairs`; an exact
    new × store search reads the rows without a normalised copy: :func:`~.vectors.query_pairs`,
    the same pairs; with the caller's :class:`~.rowcache.RowCache` the stored rows' bounding
    rows come from the previous pass). Bounded per memory (:mod:`.nearest`): a pair is kept
    when it is among the :data:`~.nearest.PER_MEMORY` most similar of one of its ends; the
    bound is reported in ``st.bounds_hit["candidates_per_memory"]`` when a memory had more."""
    policy = st.policy
    need_sim = policy.merge_near or policy.reconcile
    t_cand = min(policy.link_threshold, policy.contradiction_threshold)
    k = nearest.PER_MEMORY
    st.bounds["candidates_per_memory"] = k
    seen: dict[str, int] = {}
    # a numbered series' pairs are known distinct (:mod:`.templates`): not searched
    exclude = st.templates.series_labels(st.n) if st.templates is not None else None
    if need_sim and st.n >= 2 and len(st.new_idx):
        if st.partial and st.candidate_method in ("auto", "exact", "split"):
            if st.rows is not None:
                st.kept = st.rows.bounds(st.emb, st.ids, st.hashes, t_cand)
            pi, pj, ps = query_pairs(
                st.emb, t_cand, st.new_idx, per_row=k, stats=seen, bounds=st.kept
            )
        else:
            pi, pj, ps = candidate_pairs(
                st.emb.matrix(),
                t_cand,
                query=st.new_idx if st.partial else None,
                method=st.candidate_method,
                per_row=k,
                stats=seen,
                exclude=exclude,
                product=st.rows.product if st.rows is not None else None,
            )
        pi, pj, ps, hit = bound_pairs(pi, pj, ps, st.n, k)
        st.candidates["max_partners"] = hit["max_partners"]
        if hit["memories"] or seen.get("over", 0):
            st.bounds_hit["candidates_per_memory"] = {
                "memories": max(hit["memories"], seen.get("over", 0)),
                "max_candidates": max(hit["max_partners"], seen.get("max_seen", 0)),
            }
        if seen.get("excluded"):
            st.candidates["series_pairs_not_searched"] = seen["excluded"]
    else:
        pi = pj = np.empty(0, np.int64)
        ps = np.empty(0, np.float32)
    st.pi, st.pj = pi, pj
    st.sim = {(int(a), int(b)): float(s) for a, b, s in zip(pi, pj, ps, strict=True)}
    st.candidates["similar_pairs"] = len(st.sim)


def _same_key(st: PlanState, rows: Sequence[int], keys: Sequence[str | None]) -> list[list[int]]:
    """Groups (ascending indices, ≥ 2 each) of ``rows`` with the same scope and key.

    Hashed into one int64 array and grouped by a sort (a dict of 1M tuples and lists held
    ~0.2 GB at 1M memories); rows sharing a hash are then grouped by their actual scope and
    key, so a hash collision never makes a group."""
    owners, codes = array("q"), array("q")
    for i in rows:
        if keys[i] is not None:
            owners.append(i)
            codes.append(hash((st.scopes[i], keys[i])))
    if len(codes) < 2:
        return []
    order, runs = equal_runs(np.frombuffer(codes, dtype=np.int64))
    own = np.frombuffer(owners, dtype=np.int64)[order]
    out: list[list[int]] = []
    for s0, e0 in runs:
        groups: dict[tuple[tuple[str, ...], str | None], list[int]] = {}
        for i in own[s0:e0].tolist():
            groups.setdefault((st.scopes[i], keys[i]), []).append(i)
        out.extend(members for members in groups.values() if len(members) >= 2)
    return out


EXACT_MAX_GROUP = 32
"""Copies of one text (same scope, same :func:`~consolidation.text.normalize_text` key) merge
in groups of up to this many even when ``max_group_size`` is smaller: a merge of copies is
reviewable at any size, and a split one left two identical memories that no later incremental
pass compared again (both were already in its checkpoint: 15 re-writes of one mem0 user
became 8 + 7, then stayed two). 32 bounds the merge's pairwise cosine matrix (1,024 cells)."""


def _copies(st: PlanState, ga: Sequence[int], gb: Sequence[int]) -> bool:
    """Whether ``ga`` + ``gb`` are all copies of one text and at most :data:`EXACT_MAX_GROUP`."""
    if len(ga) + len(gb) > EXACT_MAX_GROUP or not st.policy.merge_exact:
        return False
    key = st.keys[ga[0]]
    return key is not None and all(st.keys[i] == key for i in (*ga, *gb))


def find_exact(st: PlanState) -> None:
    """Stage ``exact``: normalised text keys (:func:`~consolidation.text.normalize_text`) and
    the exact-duplicate link edges (chunks of ``max(max_group_size, EXACT_MAX_GROUP)``, each
    with a new member),
    within one scope; an empty or whitespace text gets no key.

    Partial incremental pass: only new records and their similarity partners get a key. An
    exact duplicate has the same text, hence (with one embedding model) the same vector, so it
    is always among the partners; this keeps the pass O(new), not O(store).
    """
    policy, n = st.policy, st.n
    keyed: Sequence[int]
    keyed = st.new_and_partners() if st.partial else range(n)
    keys: list[str | None] = [None] * n
    if len(st.keys) == n and not st.partial:
        keys = st.keys  # the ``templates`` stage keyed every row already
    else:
        for i in keyed:
            doc = st.docs[i]
            key = normalize_text(doc)
            # an empty text is nobody's duplicate; a text that is its own key shares its string
            keys[i] = (doc if key == doc else key) or None
    exact_edges: list[tuple[int, int]] = []
    exact_pairs = 0
    if policy.merge_exact:
        for members in _same_key(st, keyed, keys):
            if not any(st.is_new[i] for i in members):
                continue
            exact_pairs += len(members) * (len(members) - 1) // 2
            size = max(policy.max_group_size, EXACT_MAX_GROUP)
            for c0 in range(0, len(members), size):
                chunk = members[c0 : c0 + size]
                exact_edges.extend((chunk[0], j) for j in chunk[1:])
    st.keys = keys
    st.exact_edges = exact_edges
    st.candidates["exact_pairs"] = exact_pairs


def verdict(st: PlanState, a: int, b: int) -> PairVerdict:
    """:func:`~consolidation.judgment.judge_pair` of memories ``a`` and ``b`` at their cosine
    (memoised per pair in ``st.contra``; cues counted in ``st.contra_stats["found"]``).

    Every stage that would merge, fold, window or reconcile a pair asks this first: different
    scopes and empty texts are always ``"distinct"``, and so is a ``"same"`` pair that replaces
    one value in Chinese or Japanese (:func:`_one_value`). Two members of one template group get
    the group's answer when it has one (:func:`~.templates.template_verdict`, not stored).
    At most :func:`judge_bound` pairs are judged in a pass; a pair past it gets
    :data:`NOT_JUDGED` (its cue keeps it out of every merge, fold, window, reconcile and
    conflict: left as it is) and the bound is reported in ``st.bounds_hit["judged_pairs"]``.
    """
    key = (a, b) if a < b else (b, a)
    v = st.contra.get(key)
    if v is None:
        x, y = key
        tv = template_verdict(st, x, y)
        if tv is not None:
            return tv
        stats = st.contra_stats
        limit = st.bounds.setdefault("judged_pairs", judge_bound(st.n))
        if stats["checked"] >= limit:
            hit = st.bounds_hit.setdefault("judged_pairs", {"not_judged": 0})
            hit["not_judged"] += 1
            st.contra[key] = NOT_JUDGED
            return NOT_JUDGED
        s = st.sim.get(key)
        if s is None:
            s = float(np.dot(st.emb[x], st.emb[y]))
        v = judge_pair(
            st.docs[x],
            st.metas[x],
            st.docs[y],
            st.metas[y],
            cosine=s,
            fieldmap=st.fm,
            policy=st.policy,
        )
        v = _one_value(st.docs[x], st.docs[y], v)
        st.contra[key] = v
        stats["checked"] += 1
        if v.cue is not None:
            stats["found"][v.cue] = stats["found"].get(v.cue, 0) + 1
    return v


def _one_value(a: str, b: str, v: PairVerdict) -> PairVerdict:
    """``v``, or ``"distinct"`` when it is ``"same"`` but the texts replace one value of a
    shared frame in a script without spaces (:func:`~consolidation.spans.value_span`: the
    bigram tokens hide the "one word differs" rule of :func:`judge_pair` there)."""
    span = value_span(a, b) if v.kind == SAME else None
    if span is None:
        return v
    return PairVerdict(
        DISTINCT,
        None,
        None,
        (f"one span differs ({span[0]} vs {span[1]}): two values, not one fact",),
    )


JUDGED_PER_MEMORY = 4
JUDGED_FLOOR = 20_000
"""A pass judges at most ``JUDGED_FLOOR + JUDGED_PER_MEMORY × n`` pairs (:func:`judge_bound`):
≈ 7 s of ``judge_pair`` at its 0.36 ms a pair plus 1.4 ms a memory. The varied stores of the
tests and benches judge under one pair a memory; a templated store is answered per group
(:mod:`.templates`), so the bound is a safety net against a store nothing else bounds."""

NOT_JUDGED = PairVerdict(
    DISTINCT,
    None,
    "not_judged",
    ("not judged: the pass reached its bound on judged pairs, so both are left as they are",),
)
"""The verdict of a pair past the judgment bound: no operation may join or remove it."""


def judge_bound(n: int) -> int:
    """Pairs a pass of ``n`` memories may judge (see :data:`JUDGED_FLOOR`)."""
    return JUDGED_FLOOR + JUDGED_PER_MEMORY * n


def _recency_text(st: PlanState, i: int) -> str | None:
    t = st.fm.get_recency(st.metas[i])
    return t.isoformat() if t else None


def _conflict(st: PlanState, a: int, b: int, s: float, v: PairVerdict, why: str) -> None:
    """A CONFLICT item for a reviewer: both memories (the newer first when known), the cue and
    their dates; removes nothing; both are held out of merges, folds and windows."""
    ids, docs = st.ids, st.docs
    first, second = (a, b) if v.newer in (None, 0) else (b, a)
    st.held.update((a, b))
    st.contra_stats["conflicts"] = st.contra_stats.get("conflicts", 0) + 1
    st.ops_conflict.append(
        Operation(
            kind=OpKind.CONFLICT,
            source_ids=[ids[first], ids[second]],
            source_hashes=[st.hashes[first], st.hashes[second]],
            removes=[],
            rule=v.cue or "contradiction",
            reason=(
                f"unsure, keep both and ask: “{short(docs[first])}” vs “{short(docs[second])}”"
                f" — {'; '.join(v.reasons)}{why}"
            ),
            scores={
                "cosine": round(s, 6),
                "cue": v.cue or "",
                "verdict": v.kind,
                "dates": [_recency_text(st, first), _recency_text(st, second)],
            },
        )
    )


def reconcile_contradictions(st: PlanState) -> None:
    """Stage ``contradictions``: pairs with cosine ≥ ``contradiction_threshold``, the twin
    pairs of :func:`~.twins.twin_pairs` (one token apart, at any cosine) and the update pairs of
    :func:`~.updates.update_pairs` (a marked text and a partner sharing two content words, at
    cosine ≥ ``UPDATE_FLOOR``), by descending cosine, judged by :func:`verdict`.

    ``"supersedes"`` becomes a RECONCILE (newer kept = ``source_ids[0]``, older superseded)
    when ``policy.reconcile`` is on and the older memory is not pinned/curated, not a winner
    or conflict member of this pass; otherwise, and for every ``"conflict"``, a CONFLICT item
    is proposed instead (both kept; a reviewer decides). Nothing with a removed side.

    Copies of the two texts of a conflict are asked once; the spare copies are pruned
    (:mod:`.copies`, rule ``exact_copy``).

    Standing decisions (:mod:`.constraints`): a reviewer's conflict pick on the pair decides
    the winner (:func:`_decided_reconcile`); a kept-apart pair is neither reconciled nor
    offered as a conflict, and a kept older memory is not superseded (both listed as held
    back).
    """
    policy, fm, metas, ids, hashes, docs = st.policy, st.fm, st.metas, st.ids, st.hashes, st.docs
    stats = st.contra_stats
    stats.setdefault("conflicts", 0)
    st.bounds["judged_pairs"] = judge_bound(st.n)
    pending: list[tuple[float, int, int, PairVerdict]] = []
    offered = [kv for kv in st.sim.items() if kv[1] >= policy.contradiction_threshold]
    twins = twin_pairs(st)
    st.candidates["twin_pairs"] = len(twins)
    updates = update_pairs(st, {k for k, _ in offered} | set(twins))
    st.candidates["update_pairs"] = len(updates)
    channels = offered + list(twins.items()) + list(updates.items())
    for (a, b), s in sorted(channels, key=lambda kv: (-kv[1], kv[0])):
        v = verdict(st, a, b)
        if v.kind in (SUPERSEDES, CONFLICT):
            pending.append((s, a, b, v))
    reps = copy_representatives(st)
    asked: dict[tuple[int, int], tuple[int, int]] = {}
    for s, a, b, v in pending:
        if st.removed[a] or st.removed[b]:
            continue
        picked = st.decided.pick(a, b)
        if picked is not None:
            _decided_reconcile(st, a, b, s, v, *picked)
            continue
        if held_apart(st, a, b, "conflict" if v.kind == CONFLICT else "reconcile"):
            continue
        if v.kind == CONFLICT:
            if not spare_copies(st, reps, asked, a, b):  # copies: one question (.copies)
                _conflict(st, a, b, s, v, "")
            continue
        win, lose = (a, b) if v.newer == 0 else (b, a)
        if not policy.reconcile:
            _conflict(st, a, b, s, v, "; reconcile is off in this policy")
            continue
        if st.protected[lose]:
            stats["blocked_protected"] += 1
            _conflict(st, a, b, s, v, "; the older memory is pinned or curated")
            continue
        if held_kept(st, lose, "reconcile", f"superseded by “{short(docs[win])}”"):
            continue
        if lose in st.winners or lose in st.held or win in st.held:
            stats["unsure"] += 1  # one decision per memory and pass; the next pass sees the rest
            continue
        st.removed[lose] = True
        st.winners.add(win)
        st.fates[ids[lose]] = Fate.SUPERSEDED
        stats["reconciled"] += 1
        st.ops_reconcile.append(
            Operation(
                kind=OpKind.RECONCILE,
                source_ids=[ids[win], ids[lose]],
                source_hashes=[hashes[win], hashes[lose]],
                removes=[ids[lose]],
                rule=v.cue or "supersedes",
                reason=(
                    f"{'; '.join(v.reasons)}: newer “{short(docs[win])}” supersedes older "
                    f"“{short(docs[lose])}”"
                ),
                scores={
                    "cosine": round(s, 6),
                    "newer_at": _recency_text(st, win),
                    "older_at": _recency_text(st, lose),
                    "newer_created_at": str(metas[win].get(fm.created_at, "")),
                    "older_created_at": str(metas[lose].get(fm.created_at, "")),
                },
            )
        )
    st.candidates["contradiction_checked"] = stats["checked"]


def _decided_reconcile(
    st: PlanState, a: int, b: int, s: float, v: PairVerdict, c: Constraint, win: int
) -> None:
    """The pair ``a``, ``b`` contradicts again and a reviewer picked ``win`` before (conflict
    pick ``c``, same ids and hashes): a RECONCILE keeping ``win`` (rule ``"decided"``,
    ``scores["decision"]``), still a proposal a reviewer sees. A pinned, curated or kept loser
    makes it a CONFLICT item instead; a memory another reconcile or conflict of this pass
    already decides waits for the next pass."""
    lose = b if win == a else a
    docs, ids = st.docs, st.ids
    if st.protected[lose]:
        _conflict(st, a, b, s, v, f"; {c.label} keeps the other, but this one is pinned or curated")
        return
    other = st.decided.kept(lose)
    if other is not None:
        _conflict(st, a, b, s, v, f"; {c.label} keeps the other, but {other.label} keeps this one")
        return
    if lose in st.winners or lose in st.held or win in st.held:
        st.contra_stats["unsure"] += 1
        return
    st.removed[lose] = True
    st.winners.add(win)
    st.fates[ids[lose]] = Fate.SUPERSEDED
    st.contra_stats["reconciled"] += 1
    decided = st.decided.decided
    decided[str(c.decision)] = decided.get(str(c.decision), 0) + 1
    st.ops_reconcile.append(
        Operation(
            kind=OpKind.RECONCILE,
            source_ids=[ids[win], ids[lose]],
            source_hashes=[st.hashes[win], st.hashes[lose]],
            removes=[ids[lose]],
            rule="decided",
            reason=(
                f"decided before by {c.label}: keep “{short(docs[win])}” over "
                f"“{short(docs[lose])}” ({'; '.join(v.reasons) or v.kind})"
            ),
            scores={
                "cosine": round(s, 6),
                "decision": c.decision,
                "cue": v.cue or "",
                "verdict": v.kind,
                "kept_at": _recency_text(st, win),
                "superseded_at": _recency_text(st, lose),
                "confidence": 1.0,
            },
        )
    )


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
    """Whether ``a`` and ``b`` may share a group: :func:`verdict` ``"same"`` and either the
    same normalised text (``merge_exact``) or cosine ≥ ``link_threshold`` (``merge_near``),
    and no standing decision keeps them apart (:func:`~.constraints.held_apart`)."""
    return _linked(st, a, b) and not held_apart(st, a, b, "merge")


def _linked(st: PlanState, a: int, b: int) -> bool:
    policy = st.policy
    if st.keys[a] is not None and st.keys[a] == st.keys[b] and policy.merge_exact:
        return verdict(st, a, b).kind == SAME
    if not policy.merge_near:
        return False
    s = pair_sim(st, a, b)
    if s is None or s < policy.link_threshold:
        # below the link threshold only a lossless duplicate (one text covers the other's
        # content words) joins: judged at its own cosine, whichever channel offered it
        return _lossless(st, a, b)
    return verdict(st, a, b).kind == SAME


def conflicts(st: PlanState, a: int, members: Sequence[int], join: str = "window") -> bool:
    """Whether ``a`` may not join ``members`` in a fold or window (``join``: the stage's name,
    ``"evidence_fold"``, ``"session_window"`` or ``"semantic_window"``): a different scope, or
    a pair at cosine ≥ ``contradiction_threshold`` with any cue (negation, past state, changed
    value, role swap, different subject …) or a supersedes/conflict verdict — or, when none of
    these, a standing decision on a pair (:func:`~.constraints.held_apart`)."""
    for b in members:
        if st.scopes[a] != st.scopes[b]:
            return True
        x, y = (a, b) if a < b else (b, a)
        s = st.sim.get((x, y))
        if s is None:  # not searched (below the candidate threshold, or search off)
            s = float(np.dot(st.emb[x], st.emb[y]))
        if s >= st.policy.contradiction_threshold:
            v = verdict(st, x, y)
            if v.cue is not None or v.kind in (SUPERSEDES, CONFLICT):
                return True
    return any(held_apart(st, a, b, join) for b in members)


def _lossless(st: PlanState, a: int, b: int) -> bool:
    """A lossless duplicate (:attr:`~consolidation.judgment.PairVerdict.lossless`) of one layer,
    not episodic: an episodic turn and the fact citing it are the evidence fold's to join, and
    two dialog turns are two things said (they merge only at ``link_threshold``, or in a
    session window)."""
    if st.layers[a] != st.layers[b] or EPISODIC in st.layers[a]:
        return False
    key = (a, b) if a < b else (b, a)
    if key not in st.sim and key not in st.contra:
        return False  # no channel offered this pair: never joined unsearched
    v = verdict(st, a, b)
    return v.kind == SAME and v.lossless


def _cosine(st: PlanState, a: int, b: int) -> float:
    s = st.sim.get((a, b))
    return float(np.dot(st.emb[a], st.emb[b])) if s is None else s


def link_groups(st: PlanState) -> None:
    """Stage ``grouping``: greedy complete linkage into ``st.group_of`` / ``st.merged_text``.

    Links are exact duplicates, pairs at cosine ≥ ``link_threshold``, and the lossless
    duplicates (:attr:`~consolidation.judgment.PairVerdict.lossless`) of one non-episodic
    layer any candidate channel offered below it. Links (exact duplicates first, then by descending
    cosine, ties by id) join two groups only if *every* cross pair is :func:`linked`, the union
    has at most ``max_group_size`` members (copies of one text: :data:`EXACT_MAX_GROUP`) and its
    extractive merge fits ``max_merged_chars``. A reconcile winner is not merged in the
    same pass: the reconcile reads it, and applying a merge first would make that operation
    stale (I-4). It can merge on the next pass; so can a memory held in a conflict. An empty
    text is never eligible. Sets ``st.eligible``.
    """
    policy, n = st.policy, st.n
    protected, removed, winners, held, docs = (
        st.protected,
        list(st.removed),
        st.winners,
        st.held,
        st.docs,
    )
    # as of this stage (``removed`` copied: later stages remove more, eligibility stays)
    st.eligible = Column(
        n,
        lambda i: (
            not protected[i]
            and not removed[i]
            and i not in winners
            and i not in held
            and bool(docs[i].strip())
        ),
    )
    edges: list[tuple[int, float, int, int]] = [(0, -1.0, a, b) for a, b in st.exact_edges]
    if policy.merge_near:
        edges.extend(
            (1, -s, a, b)
            for (a, b), s in st.sim.items()
            if s >= policy.link_threshold
            and (st.contra.get((a, b)) is None or st.contra[(a, b)].kind == SAME)
        )
        # lossless duplicates any channel offered below the link threshold (judged already)
        edges.extend(
            (1, -_cosine(st, a, b), a, b)
            for (a, b), v in st.contra.items()
            if v.lossless
            and st.sim.get((a, b), -2.0) < policy.link_threshold
            and st.layers[a] == st.layers[b]
            and EPISODIC not in st.layers[a]
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
        if len(ga) + len(gb) > policy.max_group_size and not _copies(st, ga, gb):
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
