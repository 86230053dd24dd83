"""`Consolidator`: PraisonAI's consolidation protocols over any memory source.

``Consolidator().consolidate(memory, max_loss_fraction=0.25)`` reads a snapshot and plans
(:func:`consolidation.snapshot.plan_snapshot`, the path every pass takes), applies the loss guard
(:func:`consolidation.result.guard_verdict`), and only then — and only when
``memory`` is a :class:`~consolidation.protocols.WritableMemoryStore` and ``dry_run`` is off —
writes through the store protocol in the I-3 order: upsert merged/promoted records → verify they
are readable → delete removed ids. A rejected pass (invalid or tripped guard) writes nothing
(I-2). Archiving originals (I-1) is the console's job: it applies stored proposals with an
archive in the database; this class is the library entry point PraisonAI users call directly.

Without an ``embedder`` it uses :class:`~consolidation.default_embedder.DefaultEmbedder`, the
offline all-MiniLM-L6-v2 loaded from ``consolidation.adapters`` at its first use, so the seed's
quick start ``Consolidator().consolidate(agent._memory_instance)`` works on PraisonAI's
memories (which carry no embeddings) while importing the engine still loads no onnxruntime.
A memory object of another library is written through the store adapter its integration
declares (:mod:`consolidation.store_adapters`: PraisonAI's ``FileMemory`` → its two JSON
files); a store whose library keeps several copies of one memory (``library_copies()``) is
guarded with each such memory counted as one original (:func:`consolidation.plans.count_copies`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from .decisions import StandingDecisions
from .default_embedder import DefaultEmbedder
from .llm_judge import VerdictCache
from .planning import FeatureCache, RowCache
from .planning.operations import trim_order
from .plans import Fate, Operation, OpKind, Plan, summarize
from .policy import Policy
from .protocols import Embedder, JSONWriter, WritableMemoryStore
from .records import FieldMap, MemoryRecord
from .result import ConsolidationResult, guard_verdict, validate_loss_threshold
from .review import model_author
from .snapshot import embed_missing, plan_snapshot, records_from_memory
from .store_adapters import adapt

__all__ = ["Consolidator", "records_from_memory"]


class Consolidator:
    """Plans and (optionally) applies a consolidation pass; implements both seed protocols.

    - ``policy``: thresholds (default :class:`Policy`, which plans within the loss budget:
      ``consolidate(memory, max_loss_fraction=…)`` applies the most certain operations that
      fit that guard and defers the rest to the next passes, ``result.reason`` saying how many;
      a policy with ``trim_to_guard=False`` judges the whole pass and rejects it when it would
      lose more).
    - ``embedder``: the :class:`Embedder` that embeds memories stored without an embedding and
      the merged memories it writes. Default (``None``): :class:`DefaultEmbedder`, the offline
      all-MiniLM-L6-v2 of :func:`consolidation.adapters.get_default_embedder`, loaded at the
      first text it embeds — a store whose memories all carry embeddings and a pass with
      nothing to write never load it (nor onnxruntime).
    - ``fieldmap``: metadata keys (default :class:`FieldMap`).
    - ``dry_run``: plan and guard only, never write.
    - ``clock``: ``() -> datetime`` for ``now`` (default: UTC wall clock; pass one for
      deterministic runs, I-8).
    - ``decisions``: standing decisions every plan keeps
      (:class:`~consolidation.decisions.StandingDecisions`: keep apart, keep, conflict picks).
    - ``writer``: an LLM writer (:class:`~consolidation.protocols.JSONWriter`, e.g.
      ``consolidation.adapters.llm.llm_from_env()``): distillation, and the LLM judge when
      the policy asks for it, within the policy's budgets; ``None`` (default): no network.
      Whatever the endpoint does, the pass goes on (``result.context["llm"]`` says what the
      LLM steps did). Distilled facts are proposals a reviewer applies through the console,
      not written by :meth:`consolidate`, and neither are the LLM judge's operations nor
      summaries an LLM wrote (:func:`consolidation.review.model_author`).
    - ``verdict_cache``: where the LLM judge keeps its answers between passes.

    Each instance keeps the per-memory features of the texts it planned
    (:class:`~consolidation.planning.FeatureCache`, ``self.features``) and the bounding rows of
    the memories its incremental passes searched (:class:`~consolidation.planning.RowCache`,
    ``self.rows``: use one instance per store), so a later pass of the same instance reads no
    unchanged text or vector again; the plans are the same as a fresh instance's.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        embedder: Embedder | None = None,
        fieldmap: FieldMap | None = None,
        dry_run: bool = False,
        clock: Callable[[], datetime] | None = None,
        decisions: StandingDecisions | None = None,
        writer: JSONWriter | None = None,
        verdict_cache: VerdictCache | None = None,
    ) -> None:
        self.policy = policy or Policy()
        self.embedder: Embedder = embedder if embedder is not None else DefaultEmbedder()
        self.fieldmap = fieldmap or FieldMap()
        self._fieldmap_given = fieldmap is not None
        self.dry_run = bool(dry_run)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.decisions = decisions
        self.writer = writer
        self.verdict_cache = verdict_cache
        self.features = FeatureCache()
        self.rows = RowCache()

    def snapshot(self, memory: Any) -> list[MemoryRecord]:
        """Records of ``memory`` with every embedding present (computed where missing)."""
        return embed_missing(records_from_memory(adapt(memory)[0]), self.embedder)

    def plan(self, memory: Any, *, checkpoint: Mapping[str, str] | None = None) -> Plan:
        """The :class:`Plan` for ``memory`` (nothing written): the engine's one snapshot path,
        :func:`consolidation.snapshot.plan_snapshot` (read, embed what is missing, plan with
        ``checkpoint``; operations whose text the store says it cannot write are left out),
        within the policy's loss budget when it plans within it (library copies counted as one
        original, :func:`trim_with_copies`). ``memory`` goes through its store adapter
        (:func:`consolidation.store_adapters.adapt`) first.
        """
        return self._planned(memory, self.policy.max_loss_fraction, checkpoint)[1]

    def _planned(
        self, memory: Any, threshold: float, checkpoint: Mapping[str, str] | None = None
    ) -> tuple[Any, Plan]:
        store, fieldmap = adapt(memory)
        if self._fieldmap_given or fieldmap is None:
            fieldmap = self.fieldmap
        policy, limit = self.policy, threshold
        getter = getattr(store, "library_copies", None)
        copies = dict(getter()) if callable(getter) else {}
        if policy.trim_to_guard:
            # the planner trims counting stored entries; with library copies it is done below
            policy = replace(policy, max_loss_fraction=limit, trim_to_guard=not copies)
        snapshot = plan_snapshot(
            store,
            policy,
            now=self.clock(),
            fieldmap=fieldmap,
            embedder=self.embedder,
            checkpoint=checkpoint,
            decisions=self.decisions,
            writer=self.writer,
            verdict_cache=self.verdict_cache,
            features=self.features,
            rows=self.rows,
        )
        the_plan = snapshot.plan
        if copies:
            spare_copies(the_plan, snapshot.records, copies, fieldmap, policy.curated_tier)
            trim_with_copies(the_plan, copies, limit if self.policy.trim_to_guard else None)
        return store, the_plan

    def consolidate(self, memory: Any, *, max_loss_fraction: float = 0.25) -> ConsolidationResult:
        """Plan, guard, then write (only a writable store, only when not ``dry_run``).

        ``memory`` goes through the store adapter its library's integration declares
        (:mod:`consolidation.store_adapters`; PraisonAI's ``FileMemory`` is written in its own
        files). With a policy that plans within the loss budget (the default) the plan keeps
        the most certain operations that fit ``max_loss_fraction`` (the guard, not the
        policy's own ``max_loss_fraction``, which only :meth:`plan` uses) and
        ``result.reason`` says how many were deferred to the next passes.
        Returns the pass's :class:`ConsolidationResult`; ``rejected=True`` with a reason when
        ``max_loss_fraction`` is invalid (bool, non-number, NaN, ±inf, outside [0, 1]) or the
        plan's ``loss_fraction`` exceeds it — in both cases nothing is written. ``context``
        holds the plan's telemetry, operation counts and ``"applied"`` (whether it wrote).
        Raises ``RuntimeError`` if a written record cannot be read back (sources are then not
        deleted), ``TypeError``/``ValueError`` for an unusable ``memory``, and
        ``EmbedderUnavailable`` when an embedding is needed and the default embedder's model
        files are not installed — before anything is written.
        """
        try:
            threshold = validate_loss_threshold(max_loss_fraction)
        except ValueError as exc:
            return ConsolidationResult(
                rejected=True,
                reason=f"invalid loss threshold: {exc}",
                context={"applied": False},
            )
        memory, the_plan = self._planned(memory, threshold)
        result = replace(the_plan.result, context=dict(the_plan.context))
        result.context["max_loss_fraction"] = threshold
        result.context["dry_run"] = self.dry_run
        passed, reason = guard_verdict(result, threshold)
        if not passed:
            result.rejected = True
            result.reason = reason
            result.context["applied"] = False
            return result
        result.reason = deferred_reason(the_plan)
        writable = isinstance(memory, WritableMemoryStore)
        if self.dry_run or not writable or not the_plan.operations:
            result.context["applied"] = False
            result.context["write_skipped"] = (
                "dry_run"
                if self.dry_run
                else "read-only memory"
                if not writable
                else "nothing to do"
            )
            return result
        self._apply(memory, the_plan)
        result.context["applied"] = True
        return result

    async def aconsolidate(
        self, memory: Any, *, max_loss_fraction: float = 0.25
    ) -> ConsolidationResult:
        """:meth:`consolidate` in a worker thread (the embedder and planner are CPU-bound)."""
        return await asyncio.to_thread(
            self.consolidate, memory, max_loss_fraction=max_loss_fraction
        )

    def _apply(self, store: WritableMemoryStore, the_plan: Plan) -> None:
        """Write in the I-3 order: upsert results → verify readable → delete removed ids.
        Operations a model wrote or decided (:func:`consolidation.review.model_author`: the LLM
        judge's merges and reconciles, summaries an LLM wrote) and those marked
        ``scores["auto_apply"] = False`` are left for a reviewer (I-7)."""
        writes: list[MemoryRecord] = []
        # merged memories and summaries of the pyramid: a new text is embedded here, a merge
        # that keeps one source's text keeps its record and vector; what a model wrote or
        # decided is a proposal a person applies, never applied here (I-7)
        ops = [
            op
            for op in the_plan.operations
            if model_author(op) is None and op.scores.get("auto_apply", True) is not False
        ]
        merged = [op for op in ops if op.kind in (OpKind.MERGE, OpKind.SUMMARIZE)]
        promoted = [op for op in ops if op.kind == OpKind.PROMOTE]
        # a result written under a source's id (a promote, a merge that keeps one source's
        # text, a rewritten summary): that record's vector is kept when its text is the result's
        kept_ids = [str(op.result_id) for op in ops if op.result_id in op.source_ids]
        current = {r.id: r for r in store.get(kept_ids)} if kept_ids else {}
        if merged:
            kept = [current.get(str(op.result_id)) for op in merged]
            same = [
                k is not None and k.embedding is not None and k.document == op.result_document
                for k, op in zip(kept, merged, strict=True)
            ]
            fresh = [op.result_document or "" for op, s in zip(merged, same, strict=True) if not s]
            vecs = iter(self.embedder.embed(fresh) if fresh else [])
            for op, k, s in zip(merged, kept, same, strict=True):
                v = k.embedding if s and k is not None else next(vecs)
                writes.append(
                    MemoryRecord(
                        str(op.result_id), op.result_document or "", v, op.result_metadata or {}
                    )
                )
        if promoted:
            for op in promoted:
                src = current.get(str(op.result_id))
                if src is None:
                    continue  # vanished since the snapshot: nothing to promote
                writes.append(
                    MemoryRecord(
                        src.id,
                        op.result_document or src.document,
                        src.embedding,
                        op.result_metadata or {},
                    )
                )
        if writes:
            store.upsert(writes)
            readable = {r.id for r in store.get([w.id for w in writes], include_embeddings=False)}
            missing = sorted({w.id for w in writes} - readable)
            if missing:
                raise RuntimeError(
                    f"written records not readable, sources kept: {', '.join(missing[:5])}"
                )
        written = {w.id for w in writes}  # a source rewritten under its own id stays
        removes = sorted({rid for op in ops for rid in op.removes} - written)
        if removes:
            store.delete(removes)


def spare_copies(
    the_plan: Plan,
    records: Sequence[MemoryRecord],
    copies: Mapping[str, str],
    fieldmap: FieldMap,
    curated_tier: str,
) -> None:
    """Add to ``the_plan``, in place, a ``prune`` (rule ``library_copy``) of every spare copy
    of a memory its library stored several times (``copies``: extra copy id → the id standing
    for the original) when the plan leaves all of its copies alone — typically one copy was
    promoted to the curated tier, which is never merged (I-6), so the planner cannot merge the
    two. The copy kept is a pinned or curated one, else the original's; a pinned or curated
    copy is never removed, and copies whose texts differ are left as they are. Removing a
    spare copy loses no original (:func:`consolidation.plans.count_copies`)."""
    by_id = {r.id: r for r in records}
    busy = {i for op in the_plan.operations for i in (*op.source_ids, op.result_id) if i}
    groups: dict[str, list[str]] = {}
    for copy_id, original in copies.items():
        groups.setdefault(original, [original]).append(copy_id)

    def protected(rid: str) -> bool:
        meta = by_id[rid].metadata
        return fieldmap.is_pinned(meta) or fieldmap.get_tier(meta) == curated_tier

    for original, members in sorted(groups.items()):
        if busy & set(members) or not all(m in by_id for m in members):
            continue
        if len({by_id[m].document for m in members}) != 1:
            continue
        keep = next((m for m in members if protected(m)), original)
        for rid in members:
            if rid == keep or protected(rid):
                continue
            the_plan.operations.append(
                Operation(
                    OpKind.PRUNE,
                    [rid],
                    [by_id[rid].content_hash],
                    [rid],
                    f"a spare copy its library stored of memory {keep} (the same text), "
                    "which stays",
                    "library_copy",
                    scores={"confidence": 1.0, "kept_copy": keep},
                )
            )
            the_plan.fates[rid] = Fate.PRUNED


def trim_with_copies(the_plan: Plan, copies: Mapping[str, str], limit: float | None) -> None:
    """``the_plan`` accounted with library ``copies`` (extra copy id → the id standing for its
    original: :func:`consolidation.plans.summarize`), in place; with a ``limit`` (a loss
    fraction in [0, 1]) first trimmed to it: the removing operations are taken in the
    planner's order (:func:`~consolidation.planning.operations.trim_order`: rule, confidence,
    then key) and each is kept when the plan with it still loses at most ``limit`` of the
    originals; the others are deferred to the next passes (their sources ``KEPT`` again;
    ``context["trimmed"]`` counts and lists them as the planner's budget stage does). Merging
    the copies of one memory loses nothing, so those merges always fit."""
    n = len(the_plan.fates)
    copies = {c: o for c, o in copies.items() if c in the_plan.fates and o in the_plan.fates}
    ops = the_plan.operations
    dropped: list[Operation] = []
    if limit is not None and summarize(n, ops, copies).exceeds_loss(limit):
        ranked = sorted((op for op in ops if op.removes), key=trim_order)
        kept = [op for op in ops if not op.removes]
        for op in ranked:
            if summarize(n, [*kept, op], copies).exceeds_loss(limit):
                dropped.append(op)
            else:
                kept.append(op)
        gone = {id(op) for op in dropped}
        the_plan.operations = [op for op in ops if id(op) not in gone]
        still = {rid for op in the_plan.operations for rid in op.removes}
        for op in dropped:
            for rid in op.removes:
                if rid not in still:
                    the_plan.fates[rid] = Fate.KEPT
        by_kind: dict[str, int] = {}
        for op in dropped:
            by_kind[op.kind.value] = by_kind.get(op.kind.value, 0) + 1
        the_plan.context["trimmed"] = {
            "dropped_operations": len(dropped),
            "deferred_by_kind": by_kind,
            "deferred_ids": sorted({s for op in dropped for s in op.source_ids}),
            "deferred": [
                {
                    "kind": op.kind.value,
                    "rule": op.rule,
                    "source_ids": list(op.source_ids),
                    "reason": op.reason,
                }
                for op in dropped[:20]
            ],
        }
    result = summarize(n, the_plan.operations, copies)
    ctx = the_plan.context
    ctx.update(
        operations=result.context["operations"],
        reconciled=result.context["reconciled"],
        loss_fraction=result.loss_fraction,
        stored=result.context["stored"],
        library_copies=result.context["library_copies"],
    )
    result.context = ctx
    the_plan.result = result


def deferred_reason(the_plan: Plan) -> str | None:
    """The sentence a pass that deferred operations answers with (``None`` when it deferred
    none): how many, of which kinds, and why — they do not fit the loss budget."""
    trimmed = the_plan.context.get("trimmed") or {}
    count = int(trimmed.get("dropped_operations") or 0)
    if not count:
        return None
    kinds = ", ".join(
        f"{k} {v}" for k, v in sorted((trimmed.get("deferred_by_kind") or {}).items())
    )
    return (
        f"{count} operation{'s' if count != 1 else ''} ({kinds}) deferred to the next passes: "
        "they do not fit the loss budget"
    )
