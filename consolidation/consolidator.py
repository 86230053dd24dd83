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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from .decisions import StandingDecisions
from .default_embedder import DefaultEmbedder
from .llm_judge import VerdictCache
from .plans import OpKind, Plan
from .policy import Policy
from .protocols import Embedder, JSONWriter, WritableMemoryStore
from .records import FieldMap, MemoryRecord
from .result import ConsolidationResult, guard_verdict, validate_loss_threshold
from .snapshot import embed_missing, plan_snapshot, records_from_memory

__all__ = ["Consolidator", "records_from_memory"]


class Consolidator:
    """Plans and (optionally) applies a consolidation pass; implements both seed protocols.

    - ``policy``: thresholds (default :class:`Policy` with ``trim_to_guard=False``: the seed
      contract's ``consolidate(memory, max_loss_fraction=…)`` judges the whole pass and rejects
      it when it would lose more; pass a policy with the budget option to plan within it).
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
      not written by :meth:`consolidate`, and judged operations are never applied here
      unless the rules agree (``scores["auto_apply"]``).
    - ``verdict_cache``: where the LLM judge keeps its answers between passes.
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
        self.policy = policy or Policy(trim_to_guard=False)
        self.embedder: Embedder = embedder if embedder is not None else DefaultEmbedder()
        self.fieldmap = fieldmap or FieldMap()
        self.dry_run = bool(dry_run)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.decisions = decisions
        self.writer = writer
        self.verdict_cache = verdict_cache

    def snapshot(self, memory: Any) -> list[MemoryRecord]:
        """Records of ``memory`` with every embedding present (computed where missing)."""
        return embed_missing(records_from_memory(memory), self.embedder)

    def plan(self, memory: Any, *, checkpoint: Mapping[str, str] | None = None) -> Plan:
        """The :class:`Plan` for ``memory`` (nothing written): the engine's one snapshot path,
        :func:`consolidation.snapshot.plan_snapshot` (read, embed what is missing, plan with
        ``checkpoint``; operations whose text the store says it cannot write are left out).
        """
        return plan_snapshot(
            memory,
            self.policy,
            now=self.clock(),
            fieldmap=self.fieldmap,
            embedder=self.embedder,
            checkpoint=checkpoint,
            decisions=self.decisions,
            writer=self.writer,
            verdict_cache=self.verdict_cache,
        ).plan

    def consolidate(self, memory: Any, *, max_loss_fraction: float = 0.25) -> ConsolidationResult:
        """Plan, guard, then write (only a writable store, only when not ``dry_run``).

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
        the_plan = self.plan(memory)
        result = replace(the_plan.result, context=dict(the_plan.context))
        result.context["max_loss_fraction"] = threshold
        result.context["dry_run"] = self.dry_run
        passed, reason = guard_verdict(result, threshold)
        if not passed:
            result.rejected = True
            result.reason = reason
            result.context["applied"] = False
            return result
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
        Operations marked ``scores["auto_apply"] = False`` (an LLM judge's decision the rules
        did not agree with) are left for a reviewer."""
        writes: list[MemoryRecord] = []
        # merged memories and summaries of the pyramid: new texts, embedded here; operations the
        # LLM judge made are proposals a person applies (never applied unless the rules agree)
        ops = [op for op in the_plan.operations if op.scores.get("auto_apply", True) is not False]
        merged = [op for op in ops if op.kind in (OpKind.MERGE, OpKind.SUMMARIZE)]
        promoted = [op for op in ops if op.kind == OpKind.PROMOTE]
        if merged:
            vecs = self.embedder.embed([op.result_document or "" for op in merged])
            for op, v in zip(merged, vecs, strict=True):
                writes.append(
                    MemoryRecord(
                        str(op.result_id), op.result_document or "", v, op.result_metadata or {}
                    )
                )
        if promoted:
            current = {r.id: r for r in store.get([str(op.result_id) for op in promoted])}
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
        removes = sorted({rid for op in ops for rid in op.removes})
        if removes:
            store.delete(removes)
