"""Evaluation of a pass from the operations it currently includes (pure apart from one query).

The summary and loss-guard verdict a reviewer sees are recomputed from the stored operations with
the engine's own maths (:func:`consolidation.summarize`, :meth:`ConsolidationResult.exceeds_loss`),
so excluding an operation or re-checking at apply time gives exactly what the planner would have
given for that set (docs/ARCHITECTURE.md "Loss guard and budget").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from consolidation import ConsolidationResult, OpKind, summarize
from consolidation import Operation as EngineOperation

if TYPE_CHECKING:
    from .models import Operation, Pass

__all__ = [
    "Evaluation",
    "effective_threshold",
    "evaluate",
    "guard_verdict",
    "pass_evaluate",
    "to_engine_operation",
]


@dataclass(frozen=True)
class Evaluation:
    """Summary of a pass over its included operations.

    Counts are memory entries; ``loss_fraction`` and ``max_loss_fraction`` are fractions in
    [0, 1] of the ``entries_before`` originals; ``guard_passed`` is ``not exceeds_loss`` (strict
    ``>``, seed contract); ``guard_reason`` is a sentence for the operator.
    ``included_ops`` / ``excluded_ops`` count operations.
    """

    entries_before: int
    entries_after: int
    merged: int
    promoted: int
    pruned: int
    reconciled: int
    loss_fraction: float
    max_loss_fraction: float
    guard_passed: bool
    guard_reason: str
    included_ops: int
    excluded_ops: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field."""
        return asdict(self)


def guard_verdict(result: ConsolidationResult, max_loss_fraction: float) -> tuple[bool, str]:
    """``(passed, reason)`` of the loss guard for ``result`` at ``max_loss_fraction``.

    ``passed`` is ``not result.exceeds_loss(max_loss_fraction)`` and ``result.rejected`` is false
    (an engine-side rejection, e.g. the recall guard, also fails). Raises ``ValueError`` for an
    invalid threshold (fail closed, seed contract).
    """
    before = result.entries_before
    retained = result.retained_originals if result.retained_originals is not None else result.entries_after
    removed = max(0, before - retained)
    figures = (
        f"loss {result.loss_fraction:.1%} of {before} originals ({removed} removed), "
        f"threshold {max_loss_fraction:.1%}"
    )
    if result.exceeds_loss(max_loss_fraction):
        return False, f"Loss guard tripped: {figures}."
    if result.rejected:
        return False, result.reason or "Rejected by the engine."
    return True, f"Loss guard passed: {figures}."


def to_engine_operation(op: Operation, source_hashes: list[str] | None = None) -> EngineOperation:
    """The engine :class:`consolidation.Operation` equivalent of a stored operation.

    ``source_hashes`` defaults to the stored sources' planned content hashes (one query).
    """
    if source_hashes is None:
        by_id = {s.memory_id: s.content_hash for s in op.sources.all()}
        source_hashes = [by_id.get(sid, "") for sid in op.source_ids]
    return EngineOperation(
        kind=OpKind(op.kind),
        source_ids=list(op.source_ids),
        source_hashes=list(source_hashes),
        removes=list(op.removes),
        reason=op.reason,
        rule=op.rule,
        scores=dict(op.scores or {}),
        result_id=op.result_id or None,
        result_document=op.result_document or None,
        result_metadata=op.result_metadata,
    )


def evaluate(
    *,
    entries_before: int,
    included: Iterable[EngineOperation],
    excluded_count: int,
    max_loss_fraction: float,
) -> Evaluation:
    """Evaluate the operations ``included`` against a store of ``entries_before`` memories."""
    ops = list(included)
    result = summarize(entries_before, ops)
    passed, reason = guard_verdict(result, max_loss_fraction)
    return Evaluation(
        entries_before=result.entries_before,
        entries_after=result.entries_after,
        merged=result.merged,
        promoted=result.promoted,
        pruned=result.pruned,
        reconciled=int((result.context or {}).get("reconciled", 0)),
        loss_fraction=result.loss_fraction,
        max_loss_fraction=float(max_loss_fraction),
        guard_passed=passed,
        guard_reason=reason,
        included_ops=len(ops),
        excluded_ops=excluded_count,
    )


def effective_threshold(run: Pass) -> float:
    """The loss threshold a pass is held to now: the stricter of the one in force at planning
    (``run.max_loss_fraction``) and the agent's current policy (fail closed: tightening an
    agent's threshold also tightens its pending proposals; loosening it does not loosen them).
    A pass run with an explicit policy override (``consolidate --policy NAME``) is held to that
    policy's threshold: the operator chose it for this pass.
    """
    threshold = float(run.max_loss_fraction)
    if (run.telemetry or {}).get("policy_override"):
        return threshold
    try:
        current = run.agent.get_policy().max_loss_fraction
    except ValueError:
        return threshold
    return min(threshold, float(current))


def pass_evaluate(run: Pass) -> Evaluation:
    """Summary + guard of ``run`` over its operations that are not excluded and not in conflict.

    Uses ``run.entries_before`` (the snapshot size) and :func:`effective_threshold`.
    """
    from .models import Operation

    ops = list(run.operations.prefetch_related("sources"))
    counted = [
        op for op in ops
        if not op.excluded and op.status not in (Operation.Status.CONFLICT, Operation.Status.EXCLUDED)
    ]
    return evaluate(
        entries_before=run.entries_before,
        included=[to_engine_operation(op) for op in counted],
        excluded_count=len(ops) - len(counted),
        max_loss_fraction=effective_threshold(run),
    )
