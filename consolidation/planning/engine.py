"""`plan()`: turn a snapshot of memories into a `Plan` — pure and deterministic (I-8).

A pipeline of stage functions over one :class:`~.state.PlanState`. Stages, in the order
:func:`plan` runs them (each timed into ``plan.context["timings"]`` under the name in
brackets, seconds):

1. ``prepare`` [prepare] (:mod:`.state`) — validate, sort by id (so input order never
   matters), the embeddings' norms (:class:`~.vectors.UnitRows`: rows normalised as read, no
   second ``(n, 384)`` matrix unless a full search needs one and the caller's rows are not
   already settled unit rows). Columns read from metadata (tier, layer, scope, sessions …)
   are lazy: a stage computes those of the memories it looks at.
2. ``prune`` [prune] (:mod:`.prune`) — decay score ``importance × 0.5 ** (age_days /
   prune_half_life_days)`` below ``prune_threshold`` and ``age_days ≥ prune_min_age_days``
   (seeds/002, docs/SOURCES.md). Age alone prunes only a memory whose *explicit* importance
   is below ``prune_max_importance``; a decayed episodic memory otherwise is
   only noted here and step 9 prunes it only when its content is covered. Never
   pinned/curated, never a memory without ``created_at``, never a memory that meets a
   promotion rule (a durable fact by definition). Decided first, so pruned memories take part
   in no merge or reconcile.
   ``templates`` [templates] (:mod:`.templates`) — texts that differ only in numbers: a
   numbered series (a number different in every member names the record) is never paired,
   another group is judged once per kind of difference (in a partial incremental pass this
   runs after ``exact``, over the new rows and their partners).
3. ``candidates`` [candidates] (:mod:`.grouping`) — every pair with cosine ≥
   ``min(link_threshold, contradiction_threshold)``
   (:func:`~consolidation.planning.candidates.candidate_pairs`, exact, blocked; in a partial
   incremental pass :func:`~.vectors.query_pairs`, the same pairs, new × store), cut to each
   memory's :data:`~.nearest.PER_MEMORY` nearest (:mod:`.nearest`), a series' pairs skipped.
4. ``exact`` [exact] (:mod:`.grouping`) — same normalised text
   (:func:`consolidation.text.normalize_text`).
5. ``contradictions`` [contradictions] (:mod:`.grouping`) — pairs with cosine ≥
   ``contradiction_threshold``, the twin pairs of :mod:`.twins` (short texts one token
   apart, at any cosine) and the update pairs of :mod:`.updates` (a text with an update
   marker or a negation/past-state cue and a partner sharing two content words, at cosine ≥
   0.55), are judged by :func:`consolidation.judgment.judge_pair`
   (**unsure means keep both and ask**). ``"supersedes"`` (two state statements, only the value
   or a negation/past-state cue differs, recency known) becomes a ``reconcile`` (newer kept =
   ``source_ids[0]``, older superseded); ``"conflict"`` becomes a ``conflict`` item with both
   memories, the cue and their dates — it removes nothing, is outside the loss fraction and
   its memories are held out of every merge, fold and window of the pass.
6. ``grouping`` [grouping] (:mod:`.grouping`) — greedy complete linkage: links (exact
   duplicates first, then by descending cosine, ties by id) join two groups only if *every*
   cross pair is linked (verdict ``"same"``: same normalised text, or cosine ≥
   ``link_threshold`` with no replaced fact atom, cue, name or scope, or a lossless
   duplicate — one text covers the other's content words — at any cosine a channel offered),
   the union has at most
   ``max_group_size`` members and its extractive merge fits ``max_merged_chars``. So A~B,
   B~C, A≁C never puts A and C in one group. Reconcile winners are not grouped in the same
   pass (the reconcile reads them). Memories of different scopes (``FieldMap.scope``) are
   never compared here nor in any later stage; an empty text is never grouped.
7. ``units`` (:mod:`.windows`) — one merge unit per group.
8. ``folds`` (:mod:`.windows`) — an episodic memory joins the semantic memory citing its
   evidence (``evidence_fold``, ≤ ``fold_max_chars``).
9. ``covered prune`` (:mod:`.prune`) — a decayed episodic memory with no importance set, not
   folded, whose content words the rest of its session keeps (``decay_covered``).
10. ``session windows`` (:mod:`.windows`) — consecutive episodic memories of one session
    (``session_window``, ≤ ``window_max_size`` and ``max_merged_chars``).
11. ``semantic windows`` (:mod:`.windows`) — semantic memories of one session and speaker
    (``semantic_window``, ≤ ``semantic_window_size``); steps 7–11 are timed together
    [folds_windows].
12. ``merge`` [merge] (:mod:`.operations`) — one operation per unit: deterministic id
    (:func:`~consolidation.plans.merged_id`), the unit's text (extractive,
    :func:`~consolidation.text.extractive_merge`, for duplicate groups), united metadata
    (:mod:`consolidation.planning.metadata`), pairwise cosine matrix and min/mean cosine in
    ``scores``. A merged memory that meets a promotion rule (its sessions are the union of its
    sources', its access count their sum) is written straight into the curated tier:
    ``scores["promoted"] = True`` and it counts in ``result.promoted``.
13. ``promote`` [promote] (:mod:`.operations`) — metadata-only; surviving, non-curated memories
    reinforced in ≥ ``promote_min_sessions`` distinct sessions, or importance ≥
    ``promote_min_importance``, or ``access_count`` ≥ ``promote_min_access``.
14. ``budget`` (:func:`~.operations.trim_to_guard`, only with ``policy.trim_to_guard``) — keep
    the most confident removing operations that fit the loss guard; then the summary and
    telemetry.

Bounds: every stage's pairs are bounded — candidate partners per memory, pairs judged per pass
(:func:`~.grouping.judge_bound`), twin keys (:data:`~.twins.MAX_BUCKET`), group and window
sizes (the policy) — listed in ``plan.context["bounds"]``; one reached is reported in
``plan.context["bounds_hit"]`` and what it left unjudged gets no operation (docs/ARCHITECTURE.md,
with the candidate channels). Template groups are counted in ``plan.context["templates"]``.

Standing decisions (``decisions``, :mod:`.constraints`) are checked where a stage would join
two memories (:func:`~.grouping.linked`, :func:`~.grouping.conflicts`), reconcile a pair
(stage 5: a conflict pick decides it) or remove one (stages 2, 5, 9); what they held back is
listed in ``plan.context["held_back"]``.

Operations come out as reconcile, conflict, merge, promote, prune. Pinned or curated memories
are never pruned, superseded or merged (I-6). Incremental mode (``checkpoint`` given): only new or
changed records are searched against the whole store (O(new × store)); prune, promote, folds
and windows visit new/changed records only; old records can still be merged with, or
superseded by, a new one. Per-record work on the whole store is then only ``prepare``'s:
sorting, each record's content hash (compared with the checkpoint; cached on the record) and
the embeddings' norms — and, without a :class:`~.features.FeatureCache` from the previous pass
(``features``), the update channel's second new × store product at cosine 0.55; with one, an
unmarked new row's update partners are searched among the marked stored rows only.

Measured at 1M memories (``bench/plan_bench.py``'s synthetic store, 2 cores shared with other jobs,
so CPU seconds of the process are the comparable figure; before = main without these changes):

- full 1M (``auto``: the faiss IVF search): 247 s wall, 171 s CPU of which 114 s the
  candidate search and 57 s the other stages; peak RSS 3.24 GB, the store itself 2.27 GB
  (the twin keys of :mod:`.twins` in ``contradictions`` are the planner's own peak);
- full 200K: 9.8 s CPU in the stages other than ``candidates`` (19.5 before), peak RSS
  732 MB (1,113); full 100K: 4.0 s (7.0), 606 MB (782);
- incremental 1K into 200K: 2.6 s CPU (8.0; ``prepare`` 0.20 s, was 3.0), 602 MB (1,163);
- incremental 1K into 1M: 11.1 s wall, 10.9 s CPU (load average 1.4), 2,549 MB of which the
  store holds 2,272: ``prepare`` 1.0 s, ``candidates`` 9.3 s — the exact new × store
  product (1K × 1M × 192 multiply-adds first, :func:`~.vectors.query_pairs`) at the
  ~40–50 GFLOP/s sgemm gave under that load (≈ 110 idle); every other stage ≤ 0.4 s.
  On a quiet box (load ≈ 1): 5.96 s wall; then with the scan's blocks shared over both CPUs
  (one BLAS thread each) and fates kept as :class:`~consolidation.plans.Fates`: 5.0–5.4 s
  wall, 8.0 s CPU (``prepare`` 0.9 s, ``candidates`` 3.5 s) — at the 5 s target's edge.
  With the per-pair bound of :func:`~.vectors.bound_head` (145 coordinates first, not 192;
  2026-12-06, load average 1.2): 6.39 s wall, 8.9 s CPU (``candidates`` 4.66 s for both
  scans, the update floor's included) against a 3 s target. With the stored rows' bounding
  rows kept between passes (``rows``, :class:`~.rowcache.RowCache`), the bound's hits
  finished from the block in hand and the cycle collector paused (:func:`_collector_paused`;
  load average 1.3): 2.81 s wall, 4.2 s CPU (``candidates`` 1.76 s, ``prepare`` 0.64 s,
  ``contradictions`` 0.19 s); full 1M in the same run 118.3 s wall.
  With an int8 product in the pass's ``rows`` (the console's :class:`~.rowcache.RowCache`;
  :mod:`.quantized`: the incremental search bounds its tiles by the stored rows' kept int8
  codes, the index's probe and scan run on codes too; 2026-12-07, load average 1.2): full 1M
  78.0 s wall / 114 s CPU (``candidates`` 40.8 s), peak RSS 3.62 GB; incremental 1K into 1M
  1.79 s wall (``candidates`` 0.93 s).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from ..decisions import StandingDecisions
from ..plans import Plan, summarize
from ..policy import Policy
from ..records import FieldMap, MemoryRecord
from ..text import parse_scope
from .features import FeatureCache
from .grouping import find_exact, link_groups, reconcile_contradictions, search_candidates
from .operations import merge_operations, promote_operations, promotion_rules, trim_to_guard
from .prune import prune_covered, prune_decayed
from .rowcache import RowCache
from .state import PlanState, prepare
from .templates import find_templates
from .windows import fold_evidence, semantic_windows, session_windows, start_units

__all__ = ["plan", "promotion_rules"]


def plan(
    records: Sequence[MemoryRecord],
    policy: Policy | None = None,
    *,
    now: datetime,
    fieldmap: FieldMap | None = None,
    checkpoint: Mapping[str, str] | None = None,
    candidate_method: str = "auto",
    decisions: StandingDecisions | None = None,
    features: FeatureCache | None = None,
    rows: RowCache | None = None,
) -> Plan:
    """Plan a consolidation pass over ``records`` (the stages: see the module docstring).

    - ``records``: memories with embeddings (``(384,) float32``; rows are re-normalised).
    - ``policy``: thresholds (default :class:`Policy`).
    - ``now``: the clock (aware datetime; naive means UTC) — ages are measured against it.
    - ``fieldmap``: metadata keys (default :class:`FieldMap`).
    - ``checkpoint``: ``{id: content_hash}`` of memories already consolidated; when given,
      only new or changed records are compared with the store (incremental).
    - ``candidate_method``: ``"auto"``, ``"exact"``, ``"split"`` (same pairs, different speed)
      or ``"ann"`` (faiss IVF, approximate; ``"auto"`` picks it for ≥ ``ANN_MIN_ROWS`` rows).
    - ``decisions``: the agent's standing decisions
      (:class:`~consolidation.decisions.StandingDecisions`): kept-apart memories are never
      joined, kept memories never removed, a conflict pick resolves its pair again; what they
      held back is listed in ``plan.context["held_back"]`` (:mod:`.constraints`).
    - ``features``: a :class:`~.features.FeatureCache` kept between passes over one store: the
      per-memory features of every text are read from it (and the new ones kept), so an
      incremental pass reads no stored text again and searches a new row's update partners
      among the marked stored rows only. The plan is the same with or without it.
    - ``rows``: a :class:`~.rowcache.RowCache` kept between passes over one store: an
      incremental pass reads the stored rows' bounding rows from it instead of the vectors
      (and keeps the new rows'). The plan is the same with or without it, with one
      exception: its ``product`` (an :class:`~.quantized.Int8Product`), when it has one, also
      runs a full pass's index (:mod:`.ann`, ≥ ``ANN_MIN_ROWS`` rows) on int8 codes, whose
      cells are then ranked by the codes, so such a pass may find a few other pairs just above
      the threshold (as many: 98.31 against 98.33 % of the 0.78 pairs at 1M).

    Returns a :class:`Plan` whose ``fates`` account for every input id exactly once. Raises
    ``ValueError`` for a duplicate id or a record without an embedding (naming the id).
    Nothing is written anywhere.
    """
    policy = policy or Policy()
    fm = fieldmap or FieldMap()
    if not isinstance(now, datetime):
        raise ValueError(f"now must be a datetime, got {now!r}")
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    with _collector_paused(), parse_scope():
        st = prepare(
            records,
            policy,
            fm,
            now=now,
            checkpoint=checkpoint,
            candidate_method=candidate_method,
            decisions=decisions,
            features=features,
            rows=rows,
        )
        done = _stages(st)
        del st  # its per-memory lists go now, before the collector is back (_collector_paused)
    return done


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the pass, as it was after. The stages make no
    reference cycles, and a full collection walks every object of the process: with a 1M-memory
    snapshot in hand each one took ≈ 0.2 s and found nothing (an incremental 1K into 1M pass:
    2.99 → 2.76 s, ``bench/plan_bench.py``). Process-wide while it runs: a thread beside it
    keeps its cycles until the pass ends. What the pass allocated is still young when the
    collector is back, and the first collection after walks every entry of it, so :func:`plan`
    drops its state (a dozen lists of ``n`` entries) inside the pause: that collection took
    0.24 s after a 1K-into-1M pass with the state alive and 0.07 s without (``gc.callbacks``;
    what is left is the plan's sorted ids and the caller's records)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _stages(st: PlanState) -> Plan:
    """:func:`plan`'s stages after ``prepare``, in order, over its :class:`~.state.PlanState`."""
    lap = st.timer.lap
    lap("prepare")
    prune_decayed(st)
    lap("prune")
    find_templates(st, searched=False)
    lap("templates")
    search_candidates(st)
    lap("candidates")
    find_exact(st)
    find_templates(st, searched=True)
    lap("exact")
    reconcile_contradictions(st)
    lap("contradictions")
    link_groups(st)
    lap("grouping")
    start_units(st)
    fold_evidence(st)
    prune_covered(st)
    session_windows(st)
    semantic_windows(st)
    lap("folds_windows")
    merge_operations(st)
    lap("merge")
    promote_operations(st)
    lap("promote")
    return _finish(st)


def _finish(st: PlanState) -> Plan:
    """Stage ``budget`` and the summary: operations in reconcile, conflict, merge, promote, prune
    order (a conflict removes nothing, so the budget always keeps it),
    trimmed to the guard when ``policy.trim_to_guard``, with the telemetry context."""
    policy, n = st.policy, st.n
    operations = st.ops_reconcile + st.ops_conflict + st.ops_merge + st.ops_promote + st.ops_prune
    trimmed = None
    if policy.trim_to_guard:
        operations, trimmed = trim_to_guard(operations, n, policy.max_loss_fraction, st.fates)
    result = summarize(n, operations)
    timings = st.timer.timings
    timings["total"] = round(sum(timings.values()), 6)
    context: dict[str, Any] = {
        "timings": timings,
        "candidates": st.candidates,
        "contradictions": st.contra_stats,
        "operations": result.context["operations"],
        "reconciled": result.context["reconciled"],
        "conflicts": len(st.ops_conflict),
        "loss_fraction": result.loss_fraction,
        "records": n,
        "candidate_method": st.candidate_method,
        "bounds": st.bounds,
        "bounds_hit": st.bounds_hit,
        "templates": st.templates.telemetry() if st.templates is not None else {},
        "policy": policy.to_dict(),
        "now": st.now.isoformat(),
    }
    if trimmed is not None:
        context["trimmed"] = trimmed
    if st.incremental:
        context["incremental"] = {"new": len(st.new_idx), "store": n}
    context.update(st.decided.telemetry())
    result.context = context
    return Plan(operations=operations, result=result, fates=st.fates, context=context)
