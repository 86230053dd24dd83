"""`plan()`: turn a snapshot of memories into a `Plan` — pure and deterministic (I-8).

Stages (each timed into ``plan.context["timings"]``, seconds):

1. ``prepare`` — validate, sort by id (so input order never matters), normalise embeddings.
2. ``prune`` — decay score ``importance × 0.5 ** (age_days / prune_half_life_days)`` below
   ``prune_threshold`` and ``age_days ≥ prune_min_age_days`` (seed 002, "Time-based decay").
   Never pinned/curated, never a memory without ``created_at``, never a memory that meets a
   promotion rule (a durable fact by definition). Decided first, so pruned memories take part
   in no merge or reconcile.
3. ``exact`` — same normalised text (:func:`consolidation.text.normalize_text`).
4. ``candidates`` — every pair with cosine ≥ ``min(link_threshold, contradiction_threshold)``
   (:func:`~consolidation.planning.candidates.candidate_pairs`, exact, blocked).
5. ``contradictions`` — pairs with cosine ≥ ``contradiction_threshold`` are checked with
   :func:`consolidation.text.detect_contradiction`. A contradicting pair is never merged. An
   unambiguous cue with both ``created_at`` set and different becomes a ``reconcile``
   (newer kept = ``source_ids[0]``, older superseded); otherwise both are left alone and
   counted as ``unsure`` (role swaps are always unsure: see the function's docstring).
6. ``grouping`` — greedy complete linkage: links (exact duplicates first, then by descending
   cosine, ties by id) join two groups only if *every* cross pair is linked (cosine ≥
   ``link_threshold`` or same normalised text, and not contradicting), the union has at most
   ``max_group_size`` members and its extractive merge fits ``max_merged_chars``. So
   A~B, B~C, A≁C never puts A and C in one group.
7. ``merge`` — one operation per group: deterministic id (:func:`~consolidation.plans.merged_id`),
   extractive text (:func:`~consolidation.text.extractive_merge`), united metadata
   (:mod:`consolidation.planning.metadata`), pairwise cosine matrix and min/mean cosine in
   ``scores``. Reconcile winners are not merged in the same pass (the reconcile reads them).
   A merged memory that meets a promotion rule (its sessions are the union of its sources',
   its access count their sum) is written straight into the curated tier:
   ``scores["promoted"] = True`` and it counts in ``result.promoted``.
8. ``promote`` — metadata-only; surviving, non-curated memories reinforced in ≥
   ``promote_min_sessions`` distinct sessions, or importance ≥ ``promote_min_importance``, or
   ``access_count`` ≥ ``promote_min_access``.

Pinned or curated memories are never pruned, superseded or merged (I-6). Incremental mode
(``checkpoint`` given): only new or changed records are searched against the whole store
(O(new × store)); prune and promote are evaluated on new/changed records only; old records
can still be merged with, or superseded by, a new one.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..plans import Fate, Operation, OpKind, Plan, merged_id, summarize
from ..policy import Policy
from ..records import FieldMap, MemoryRecord
from ..text import (
    content_tokens,
    detect_contradiction,
    extractive_merge,
    labelled_fragment,
    normalize_text,
    novel_sentences,
)
from .candidates import candidate_pairs, normalize_rows
from .metadata import merge_metadata

__all__ = ["plan", "promotion_rules"]


def promotion_rules(
    meta: Mapping[str, Any], policy: Policy, fieldmap: FieldMap
) -> list[str]:
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


def _promote_reason(rules: list[str], meta: Mapping[str, Any], fm: FieldMap, policy: Policy) -> str:
    parts = []
    if "sessions" in rules:
        parts.append(f"reinforced in {len(set(fm.get_sessions(meta)))} sessions "
                     f"(≥ {policy.promote_min_sessions})")
    if "importance" in rules:
        parts.append(f"importance {fm.get_importance(meta, default=0.0):.2f} "
                     f"(≥ {policy.promote_min_importance})")
    if "access" in rules:
        parts.append(f"accessed {fm.get_access_count(meta)} times (≥ {policy.promote_min_access})")
    return "; ".join(parts)


_EPISODIC, _SEMANTIC, _SUMMARY = "episodic", "semantic", "summary"
"""``layer`` values (FieldMap ``layer`` key): dialog turns/events, facts, session summaries."""

_DIGITS = re.compile(r"(\d+)")

_RULE_ORDER = ["exact_duplicate", "reconcile", "near_duplicate", "evidence_fold", "session_window",
               "semantic_window", "decay", "decay_covered"]
"""Trim order (most confident first): what a removal rests on, from identical text to coverage."""


def _natural(s: str) -> tuple[tuple[int, Any], ...]:
    """Natural sort key: ``"D1:2" < "D1:10"`` (digit runs compare as numbers)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _DIGITS.split(s) if p)


def _join(text: str, fragment: str) -> str:
    text = text.rstrip()
    if text and text[-1] not in ".!?;":
        text += "."
    return f"{text} {fragment}" if text else fragment


class _Units:
    """Merge units under construction: member indices, merged text and rule (None = dup group)."""

    def __init__(self, n: int) -> None:
        self.members: list[list[int]] = []
        self.text: list[str] = []
        self.rule: list[str | None] = []
        self.alive: list[bool] = []
        self.of: dict[int, int] = {}

    def add(self, members: list[int], text: str, rule: str | None) -> int:
        u = len(self.members)
        self.members.append(list(members))
        self.text.append(text)
        self.rule.append(rule)
        self.alive.append(True)
        for k in members:
            self.of[k] = u
        return u

    def extend(self, u: int, more: list[int], text: str, rule: str) -> None:
        self.members[u].extend(more)
        self.text[u] = text
        self.rule[u] = rule
        for k in more:
            self.of[k] = u

    def drop(self, u: int) -> None:
        self.alive[u] = False
        for k in self.members[u]:
            if self.of.get(k) == u:
                del self.of[k]

    def live(self) -> list[int]:
        return [u for u in range(len(self.members)) if self.alive[u]]


def _trim_to_guard(
    operations: list[Operation], n: int, max_loss: float, fates: dict[str, Fate]
) -> tuple[list[Operation], dict[str, Any] | None]:
    """Keep the most confident removing operations whose removals fit ``max_loss × n``.

    Order: :data:`_RULE_ORDER`, then ``scores["confidence"]`` descending, then the operation key.
    Dropped operations' sources get back :attr:`Fate.KEPT`. Operations that remove nothing
    (promote) are always kept. Returns ``(operations, info)``; ``info`` is ``None`` when the
    plan already fits.
    """
    budget = int(math.floor(max_loss * n + 1e-9))
    total = len({rid for op in operations for rid in op.removes})
    if total <= budget:
        return operations, None
    ranked = sorted(
        (op for op in operations if op.removes),
        key=lambda op: (_RULE_ORDER.index(op.rule) if op.rule in _RULE_ORDER else len(_RULE_ORDER),
                        -float(op.scores.get("confidence", 0.0)), op.key),
    )
    keep: set[int] = set()
    used = 0
    for op in ranked:
        if used + len(op.removes) <= budget:
            keep.add(id(op))
            used += len(op.removes)
    out, dropped, dropped_removals = [], 0, 0
    for op in operations:
        if not op.removes or id(op) in keep:
            out.append(op)
            continue
        dropped += 1
        dropped_removals += len(op.removes)
        for rid in op.removes:
            fates[rid] = Fate.KEPT
    return out, {"budget": budget, "kept_removals": used, "dropped_operations": dropped,
                 "dropped_removals": dropped_removals}


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


class _Timer:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        t = time.perf_counter()
        self.timings[name] = round(t - self._t, 6)
        self._t = t


def plan(
    records: Sequence[MemoryRecord],
    policy: Policy | None = None,
    *,
    now: datetime,
    fieldmap: FieldMap | None = None,
    checkpoint: Mapping[str, str] | None = None,
    candidate_method: str = "auto",
) -> Plan:
    """Plan a consolidation pass over ``records`` (see the module docstring for the stages).

    - ``records``: memories with embeddings (``(384,) float32``; rows are re-normalised).
    - ``policy``: thresholds (default :class:`Policy`).
    - ``now``: the clock (aware datetime; naive means UTC) — ages are measured against it.
    - ``fieldmap``: metadata keys (default :class:`FieldMap`).
    - ``checkpoint``: ``{id: content_hash}`` of memories already consolidated; when given,
      only new or changed records are compared with the store (incremental).
    - ``candidate_method``: ``"auto"``, ``"exact"`` or ``"split"`` (same pairs, different speed).

    Returns a :class:`Plan` whose ``fates`` account for every input id exactly once. Raises
    ``ValueError`` for a duplicate id or a record without an embedding (naming the id).
    Nothing is written anywhere.
    """
    policy = policy or Policy()
    fm = fieldmap or FieldMap()
    if not isinstance(now, datetime):
        raise ValueError(f"now must be a datetime, got {now!r}")
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    timer = _Timer()

    # 1. prepare ---------------------------------------------------------------------------
    recs = sorted(records, key=lambda r: r.id)
    n = len(recs)
    for a, b in zip(recs, recs[1:], strict=False):
        if a.id == b.id:
            raise ValueError(f"duplicate memory id {a.id!r}")
    for r in recs:
        if r.embedding is None:
            raise ValueError(f"memory {r.id!r} has no embedding; embed it before planning")
    ids = [r.id for r in recs]
    docs = [r.document for r in recs]
    metas = [r.metadata for r in recs]
    hashes = [r.content_hash for r in recs]
    emb = (
        normalize_rows(np.stack([r.embedding for r in recs]))
        if n
        else np.zeros((0, 384), np.float32)
    )
    protected = [
        fm.is_pinned(m) or fm.get_tier(m) == policy.curated_tier for m in metas
    ]
    if checkpoint is None:
        is_new = [True] * n
    else:
        is_new = [checkpoint.get(i) != h for i, h in zip(ids, hashes, strict=True)]
    new_idx = np.array([i for i in range(n) if is_new[i]], dtype=np.int64)
    incremental = checkpoint is not None
    # only some records are new: search new × store; the rest of the pairs are unknown
    partial = incremental and len(new_idx) < n
    timer.lap("prepare")

    fates: dict[str, Fate] = dict.fromkeys(ids, Fate.KEPT)
    removed = [False] * n
    ops_merge: list[Operation] = []
    ops_reconcile: list[Operation] = []
    ops_promote: list[Operation] = []
    ops_prune: list[Operation] = []
    candidates: dict[str, int] = {}
    contra_stats: dict[str, Any] = {"checked": 0, "found": {}, "reconciled": 0, "unsure": 0,
                                    "blocked_protected": 0}

    # 2. prune -----------------------------------------------------------------------------
    decayed: dict[int, tuple[float, float]] = {}  # decayed, importance missing: (score, age)
    layers0 = [frozenset(fm.get_list(m, fm.layer)) for m in metas]
    if policy.prune:
        for i in range(n):
            if not is_new[i] or protected[i]:
                continue
            created = fm.get_created_at(metas[i])
            if created is None or promotion_rules(metas[i], policy, fm):
                continue
            age_days = max(0.0, (now - created).total_seconds() / 86400.0)
            explicit = fm.get_importance(metas[i], default=-1.0) >= 0.0
            importance = fm.get_importance(metas[i])
            score = importance * 0.5 ** (age_days / policy.prune_half_life_days)
            if score < policy.prune_threshold and age_days >= policy.prune_min_age_days:
                if not explicit and policy.prune_coverage > 0.0:
                    if layers0[i] != {_EPISODIC}:
                        continue  # facts and summaries never decay on a missing importance
                    # neutral importance only: pruned later, and only when covered (stage 6e)
                    decayed[i] = (score, age_days)
                    continue
                removed[i] = True
                fates[ids[i]] = Fate.PRUNED
                ops_prune.append(Operation(
                    kind=OpKind.PRUNE, source_ids=[ids[i]], source_hashes=[hashes[i]],
                    removes=[ids[i]], rule="decay",
                    reason=(f"stale: importance {importance:.2f} × 0.5^({age_days:.0f} d / "
                            f"{policy.prune_half_life_days:g} d) = {score:.4f} < "
                            f"{policy.prune_threshold:g}, age ≥ {policy.prune_min_age_days:g} d"),
                    scores={"score": round(score, 6), "age_days": round(age_days, 3),
                            "importance": importance},
                ))
    timer.lap("prune")

    # 3. candidate search ------------------------------------------------------------------
    need_sim = policy.merge_near or policy.reconcile
    t_cand = min(policy.link_threshold, policy.contradiction_threshold)
    if need_sim and n >= 2 and len(new_idx):
        pi, pj, ps = candidate_pairs(
            emb, t_cand, query=new_idx if partial else None, method=candidate_method
        )
    else:
        pi = pj = np.empty(0, np.int64)
        ps = np.empty(0, np.float32)
    sim: dict[tuple[int, int], float] = {
        (int(a), int(b)): float(s) for a, b, s in zip(pi, pj, ps, strict=True)
    }
    candidates["similar_pairs"] = len(sim)
    timer.lap("candidates")

    # 4. exact duplicates ------------------------------------------------------------------
    # Partial incremental pass: only new records and their similarity partners get a key.
    # An exact duplicate has the same text, hence (with one embedding model) the same vector,
    # so it is always among the partners; this keeps the pass O(new), not O(store).
    if partial:
        keyed = sorted(set(new_idx.tolist()) | set(pi.tolist()) | set(pj.tolist()))
    else:
        keyed = list(range(n))
    keys: list[str | None] = [None] * n
    for i in keyed:
        keys[i] = normalize_text(docs[i])
    by_key: dict[str, list[int]] = {}
    for i in keyed:
        by_key.setdefault(keys[i], []).append(i)
    exact_edges: list[tuple[int, int]] = []
    exact_pairs = 0
    if policy.merge_exact:
        for members in by_key.values():
            if len(members) < 2 or not any(is_new[i] for i in members):
                continue
            exact_pairs += len(members) * (len(members) - 1) // 2
            for c0 in range(0, len(members), policy.max_group_size):
                chunk = members[c0 : c0 + policy.max_group_size]
                exact_edges.extend((chunk[0], j) for j in chunk[1:])
    candidates["exact_pairs"] = exact_pairs
    timer.lap("exact")

    # 5. contradictions --------------------------------------------------------------------
    contra: dict[tuple[int, int], Any] = {}

    def check_contradiction(a: int, b: int, s: float) -> Any:
        if (a, b) in contra:
            return contra[(a, b)]
        cue = None
        if s >= policy.contradiction_threshold and keys[a] != keys[b]:
            contra_stats["checked"] += 1
            cue = detect_contradiction(docs[a], docs[b])
            if cue is not None:
                contra_stats["found"][cue.kind] = contra_stats["found"].get(cue.kind, 0) + 1
        contra[(a, b)] = cue
        return cue

    pending: list[tuple[float, int, int, Any]] = []
    winners: set[int] = set()
    for (a, b), s in sorted(sim.items(), key=lambda kv: (-kv[1], kv[0])):
        cue = check_contradiction(a, b, s)
        if cue is not None:
            pending.append((s, a, b, cue))
    for s, a, b, cue in pending:
        if removed[a] or removed[b]:
            continue
        ta, tb = fm.get_created_at(metas[a]), fm.get_created_at(metas[b])
        if not (policy.reconcile and cue.unambiguous and ta and tb and ta != tb):
            contra_stats["unsure"] += 1
            continue
        win, lose = (a, b) if ta > tb else (b, a)
        if protected[lose]:
            contra_stats["blocked_protected"] += 1
            continue
        removed[lose] = True
        winners.add(win)
        fates[ids[lose]] = Fate.SUPERSEDED
        contra_stats["reconciled"] += 1
        ops_reconcile.append(Operation(
            kind=OpKind.RECONCILE, source_ids=[ids[win], ids[lose]],
            source_hashes=[hashes[win], hashes[lose]], removes=[ids[lose]], rule=cue.kind,
            reason=(f"{cue.kind.replace('_', ' ')}: {cue.detail}; newer "
                    f"“{_short(docs[win])}” supersedes older “{_short(docs[lose])}”"),
            scores={"cosine": round(s, 6), "newer_created_at": str(metas[win][fm.created_at]),
                    "older_created_at": str(metas[lose][fm.created_at])},
        ))
    candidates["contradiction_checked"] = contra_stats["checked"]
    timer.lap("contradictions")

    # 6. grouping (greedy complete linkage) ------------------------------------------------
    # A reconcile winner is not merged in the same pass: the reconcile reads it, and applying
    # a merge first would make that operation stale (I-4). It can merge on the next pass.
    eligible = [not protected[i] and not removed[i] and i not in winners for i in range(n)]

    def pair_sim(a: int, b: int) -> float | None:
        key = (a, b) if a < b else (b, a)
        if key in sim:
            return sim[key]
        if not partial:
            return None  # every pair was searched: this one is below the candidate threshold
        s = float(np.dot(emb[key[0]], emb[key[1]]))
        sim[key] = s
        return s

    def linked(a: int, b: int) -> bool:
        if keys[a] is not None and keys[a] == keys[b] and policy.merge_exact:
            return True
        if not policy.merge_near:
            return False
        s = pair_sim(a, b)
        if s is None or s < policy.link_threshold:
            return False
        key = (a, b) if a < b else (b, a)
        return check_contradiction(key[0], key[1], s) is None

    edges: list[tuple[int, float, int, int]] = [(0, -1.0, a, b) for a, b in exact_edges]
    if policy.merge_near:
        edges.extend(
            (1, -s, a, b) for (a, b), s in sim.items()
            if s >= policy.link_threshold and contra.get((a, b)) is None
        )
    edges.sort()
    candidates["link_edges"] = len(edges)
    group_of: dict[int, list[int]] = {}
    merged_text: dict[int, str] = {}
    for _, _, a, b in edges:
        if not (eligible[a] and eligible[b]):
            continue
        ga, gb = group_of.get(a, [a]), group_of.get(b, [b])
        if ga is gb:
            continue
        if len(ga) + len(gb) > policy.max_group_size:
            continue
        if not all(linked(x, y) for x in ga for y in gb):
            continue
        union = sorted(ga + gb)
        text = extractive_merge([docs[i] for i in union], policy.max_merged_chars)
        if text is None:
            continue
        for i in union:
            group_of[i] = union
        merged_text[union[0]] = text
    timer.lap("grouping")

    # 6b–6e. folds, covered prune, session windows, semantic windows --------------------------------------------------
    units = _Units(n)
    for i in range(n):
        group = group_of.get(i)
        if group is not None and group[0] == i:
            units.add(list(group), merged_text[i], None)
    layers = layers0
    speakers = [fm.get_list(m, fm.speaker) for m in metas]
    labels = [sp[0] if len(sp) == 1 else None for sp in speakers]
    sessions = [tuple(sorted(set(fm.get_sessions(m)))) for m in metas]
    epoch = datetime.min.replace(tzinfo=UTC)
    order = [(sessions[i], fm.get_created_at(metas[i]) or epoch, _natural(ids[i])) for i in range(n)]

    def conflicts(a: int, members: Sequence[int]) -> bool:
        for b in members:
            x, y = (a, b) if a < b else (b, a)
            s = sim.get((x, y))
            if s is None:  # not searched (below the candidate threshold, or search off)
                s = float(np.dot(emb[x], emb[y]))
            if s >= policy.contradiction_threshold and check_contradiction(x, y, s):
                return True
        return False

    def episodic(i: int) -> bool:
        return (eligible[i] and not removed[i] and i not in units.of and layers[i] == {_EPISODIC}
                and (not partial or is_new[i]))

    def semantic(i: int) -> bool:
        return eligible[i] and _SEMANTIC in layers[i] and _SUMMARY not in layers[i]

    if policy.fold_evidence:
        cited_by: dict[str, list[int]] = {}
        for t in range(n):
            if semantic(t):
                for e in set(fm.get_list(metas[t], fm.evidence)):
                    cited_by.setdefault(e, []).append(t)
        folds = 0
        for e in sorted((i for i in range(n) if episodic(i)), key=order.__getitem__):
            ev = set(fm.get_list(metas[e], fm.evidence))
            if not ev:
                continue
            targets = set.intersection(*(set(cited_by.get(x, ())) for x in ev)) - {e}
            for t in sorted(targets, key=lambda t, e=e: (-float(emb[t] @ emb[e]), ids[t])):
                u = units.of.get(t)
                members = units.members[u] if u is not None else [t]
                if conflicts(e, members):
                    continue  # a contradicting turn is never folded (try the next citer)
                if len(members) >= policy.max_group_size:
                    break
                text = units.text[u] if u is not None else docs[t].strip()
                covered = set(content_tokens(text))
                frag = labelled_fragment(docs[e], labels[e], covered)
                new_text = text if frag is None else _join(text, frag)
                if len(new_text) > policy.fold_max_chars:
                    break  # only the most similar citer is tried for size: one turn, one fact
                if u is None:
                    u = units.add([t], text, "evidence_fold")
                units.extend(u, [e], new_text, "evidence_fold")
                folds += 1
                break
        candidates["folded"] = folds

    # 6c. covered prune: decayed episodic memories with no explicit importance, not folded, whose
    # content words the rest of their session keeps (folds included). Before windows, so a
    # window only gathers what would otherwise be lost.
    covered_pruned = 0
    if decayed:
        counts: dict[tuple[str, ...] | str, dict[str, int]] = {}

        def count(text: str, sess: Sequence[str], sign: int) -> None:
            for tok in set(content_tokens(text)):
                for ss in sess:
                    c = counts.setdefault(ss, {})
                    c[tok] = c.get(tok, 0) + sign

        for i in range(n):
            if not removed[i] and i not in units.of:
                count(docs[i], sessions[i], 1)
        for u in units.live():
            count(units.text[u], sorted({x for k in units.members[u] for x in sessions[k]}), 1)
        for i in sorted(decayed, key=lambda i: (len(docs[i]), ids[i])):
            if removed[i] or i in units.of or not eligible[i] or not sessions[i]:
                continue
            toks = set(content_tokens(docs[i]))
            hit = sum(1 for tok in toks
                      if any(counts.get(ss, {}).get(tok, 0) > 1 for ss in sessions[i]))
            frac = hit / len(toks) if toks else 1.0
            if frac + 1e-12 < policy.prune_coverage:
                continue
            count(docs[i], sessions[i], -1)
            score, age_days = decayed[i]
            removed[i] = True
            fates[ids[i]] = Fate.PRUNED
            covered_pruned += 1
            ops_prune.append(Operation(
                kind=OpKind.PRUNE, source_ids=[ids[i]], source_hashes=[hashes[i]],
                removes=[ids[i]], rule="decay_covered",
                reason=(f"stale and covered: no importance set (neutral 0.5) × 0.5^({age_days:.0f} d"
                        f" / {policy.prune_half_life_days:g} d) = {score:.4f} < "
                        f"{policy.prune_threshold:g}, and {frac:.0%} of its content words are "
                        f"kept by other memories of its session (≥ {policy.prune_coverage:.0%})"),
                scores={"score": round(score, 6), "age_days": round(age_days, 3),
                        "coverage": round(frac, 4), "confidence": round(frac, 4)},
            ))
    candidates["covered_pruned"] = covered_pruned
    if policy.window_max_size > 1:
        cur: list[int] = []
        lines: list[str] = []
        covered_w: set[str] = set()

        def flush() -> None:
            if len(cur) >= 2 and lines:
                units.add(list(cur), "\n".join(lines), "session_window")
            cur.clear()
            lines.clear()
            covered_w.clear()

        pool = [i for i in range(n) if episodic(i) and not promotion_rules(metas[i], policy, fm)]
        for i in sorted(pool, key=order.__getitem__):
            trial = set(covered_w)
            frag = labelled_fragment(docs[i], labels[i], trial)
            text = "\n".join(lines + ([frag] if frag else []))
            if cur and (sessions[i] != sessions[cur[0]] or len(cur) >= policy.window_max_size
                        or len(text) > policy.max_merged_chars or conflicts(i, cur)):
                flush()
                trial = set()
                frag = labelled_fragment(docs[i], labels[i], trial)
                text = frag or ""
            if len(text) > policy.max_merged_chars:
                continue  # a single turn longer than the bound stays as it is
            cur.append(i)
            if frag:
                lines.append(frag)
            covered_w |= trial
        flush()

    if policy.semantic_window_size > 1:
        items: list[tuple[Any, list[int], str]] = []
        for u in units.live():
            members = units.members[u]
            if units.rule[u] == "evidence_fold" or (
                units.rule[u] is None and all(semantic(k) for k in members)
            ):
                items.append((members[0], members, units.text[u]))
        items += [(i, [i], docs[i].strip()) for i in range(n)
                  if semantic(i) and i not in units.of and (not partial or is_new[i])]

        def skey(head: int) -> tuple[Any, ...]:
            return (sessions[head], tuple(speakers[head]))

        items.sort(key=lambda it: (skey(it[0]), order[it[0]]))
        chunk: list[tuple[Any, list[int], str]] = []

        def flush_sem() -> None:
            if len(chunk) >= 2:
                members = [k for _, ms, _ in chunk for k in ms]
                covered_s: set[str] = set()
                parts = []
                for _, _, text in chunk:
                    kept = novel_sentences(text, covered_s)
                    if kept:
                        parts.append(" ".join(kept))
                for _, ms, _ in chunk:
                    if ms[0] in units.of:
                        units.drop(units.of[ms[0]])
                units.add(members, " ".join(parts), "semantic_window")
            chunk.clear()

        for it in items:
            if chunk:
                size = sum(len(ms) for _, ms, _ in chunk) + len(it[1])
                length = sum(len(t) + 1 for _, _, t in chunk) + len(it[2])
                if (skey(it[0]) != skey(chunk[0][0]) or len(chunk) >= policy.semantic_window_size
                        or size > policy.max_group_size or length > policy.semantic_window_chars
                        or any(conflicts(k, ms) for k in it[1] for _, ms, _ in chunk)):
                    flush_sem()
            chunk.append(it)
        flush_sem()

    timer.lap("folds_windows")

    # 7. merge operations ------------------------------------------------------------------
    for u in sorted(units.live(), key=lambda u: min(units.members[u])):
        group = units.members[u]
        if len(group) < 2:
            continue
        gids = [ids[k] for k in group]
        ghashes = [hashes[k] for k in group]
        sub = emb[group]
        mat = np.clip(sub @ sub.T, -1.0, 1.0)
        off = mat[~np.eye(len(group), dtype=bool)]
        rule = units.rule[u]
        meta = merge_metadata([metas[k] for k in group], gids, fieldmap=fm,
                              curated_tier=policy.curated_tier)
        scores: dict[str, Any] = {
            "pairwise": [[round(float(x), 4) for x in row] for row in mat],
            "min_cosine": round(float(off.min()), 4),
            "mean_cosine": round(float(off.mean()), 4),
        }
        if rule is None:
            exact = len({keys[k] for k in group}) == 1 and keys[group[0]] is not None
            rule = "exact_duplicate" if exact else "near_duplicate"
        if rule == "exact_duplicate":
            reason = f"{len(group)} memories with the same text after normalisation"
            scores["confidence"] = 1.0
        elif rule == "near_duplicate":
            reason = (f"{len(group)} memories state the same fact (every pair cosine ≥ "
                      f"{policy.link_threshold:g}, min {scores['min_cosine']:.3f})")
            scores["confidence"] = scores["min_cosine"]
        elif rule == "evidence_fold":
            folded = [k for k in group if layers[k] == {_EPISODIC}]
            reason = (f"{len(folded)} episodic memor{'y' if len(folded) == 1 else 'ies'} cited by "
                      f"the evidence of “{_short(docs[group[0]], 60)}” folded into it (only "
                      f"sentences with new content words kept, ≤ {policy.fold_max_chars} chars)")
            scores["confidence"] = round(float(np.mean(mat[0, 1:])), 4)
        elif rule == "session_window":
            reason = (f"{len(group)} consecutive episodic memories of session "
                      f"{', '.join(sessions[group[0]]) or '?'} merged into one window (repeated "
                      f"content dropped, ≤ {policy.max_merged_chars} chars)")
            scores["confidence"] = round(float(np.mean(np.diag(mat, 1))), 4)
        else:
            reason = (f"{len(group)} semantic memories of session "
                      f"{', '.join(sessions[group[0]]) or '?'} about "
                      f"{', '.join(speakers[group[0]]) or '?'} merged "
                      f"(≤ {policy.semantic_window_chars} chars)")
            scores["confidence"] = scores["mean_cosine"]
        scores["rule"] = rule
        rules = promotion_rules(meta, policy, fm) if policy.promote else []
        if rules and fm.get_tier(meta) != policy.curated_tier:
            meta[fm.tier] = policy.curated_tier
            scores["promoted"] = True
            scores["promote_rules"] = rules
            reason += "; promoted to the curated tier: " + _promote_reason(rules, meta, fm, policy)
        for k in group:
            removed[k] = True
            fates[ids[k]] = Fate.MERGED
        ops_merge.append(Operation(
            kind=OpKind.MERGE, source_ids=gids, source_hashes=ghashes, removes=list(gids),
            rule=rule, reason=reason, scores=scores,
            result_id=merged_id(gids, ghashes), result_document=units.text[u],
            result_metadata=meta,
        ))
    timer.lap("merge")

    # 8. promote ---------------------------------------------------------------------------
    if policy.promote:
        for i in range(n):
            if removed[i] or not is_new[i] or fm.get_tier(metas[i]) == policy.curated_tier:
                continue
            rules = promotion_rules(metas[i], policy, fm)
            if not rules:
                continue
            meta = dict(metas[i])
            meta[fm.tier] = policy.curated_tier
            ops_promote.append(Operation(
                kind=OpKind.PROMOTE, source_ids=[ids[i]], source_hashes=[hashes[i]], removes=[],
                rule=rules[0], reason="durable: " + _promote_reason(rules, metas[i], fm, policy),
                scores={"rules": rules, "sessions": len(set(fm.get_sessions(metas[i]))),
                        "importance": fm.get_importance(metas[i], default=0.0),
                        "access_count": fm.get_access_count(metas[i])},
                result_id=ids[i], result_document=docs[i], result_metadata=meta,
            ))
    timer.lap("promote")

    operations = ops_reconcile + ops_merge + ops_promote + ops_prune
    trimmed = None
    if policy.trim_to_guard:
        operations, trimmed = _trim_to_guard(operations, n, policy.max_loss_fraction, fates)
    result = summarize(n, operations)
    timer.timings["total"] = round(sum(timer.timings.values()), 6)
    context: dict[str, Any] = {
        "timings": timer.timings,
        "candidates": candidates,
        "contradictions": contra_stats,
        "operations": result.context["operations"],
        "reconciled": result.context["reconciled"],
        "loss_fraction": result.loss_fraction,
        "records": n,
        "candidate_method": candidate_method,
        "policy": policy.to_dict(),
        "now": now.isoformat(),
    }
    if trimmed is not None:
        context["trimmed"] = trimmed
    if incremental:
        context["incremental"] = {"new": len(new_idx), "store": n}
    result.context = context
    return Plan(operations=operations, result=result, fates=fates, context=context)

