"""Evaluation of a pass from the operations it currently includes.

The summary and loss-guard verdict a reviewer sees are recomputed from the stored operations with
the engine's own maths (:func:`consolidation.summarize`, :meth:`ConsolidationResult.exceeds_loss`),
so excluding an operation or re-checking at apply time gives exactly what the planner would have
given for that set (docs/ARCHITECTURE.md "Loss guard and budget"). :func:`pass_evaluate` reads
every operation (approve and apply use it); the pages read :func:`pass_figures`, the same
figures kept on the pass by every service that changes what it includes, with the verdict
made at read time against the threshold in force now.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, NamedTuple

from django.db.models import Count, Q

from consolidation import Operation as EngineOperation
from consolidation import OpKind, guard_verdict, summarize
from memoryadmin.proposals.figures import figures_verdict
from memoryadmin.proposals.models import Operation, OperationSource, Pass

__all__ = [
    "KIND_ORDER",
    "Evaluation",
    "applies_words",
    "count_label",
    "effective_threshold",
    "evaluate",
    "figures_current",
    "guard_verdict",
    "pass_evaluate",
    "pass_figures",
    "plan_verdict",
    "to_engine_operation",
]


@dataclass(frozen=True)
class Evaluation:
    """Summary of a pass over its included operations.

    Counts are memory entries; ``loss_fraction`` and ``max_loss_fraction`` are fractions in
    [0, 1] of the ``entries_before`` originals; ``guard_passed`` is ``not exceeds_loss`` (strict
    ``>``, seed contract); ``guard_reason`` is a sentence for the operator.
    ``included_ops`` / ``excluded_ops`` count operations. ``removed`` is the number of
    originals that leave the store, ``written`` the number of new memories (merged or
    distilled): ``entries_after = entries_before − removed + written``. ``kinds`` maps each
    operation kind to ``(operations, memories)`` over the included operations (memories: merged
    sources, promoted memories, pruned, superseded, new memories); ``merged_promoted`` counts
    merges whose result is written straight into the curated tier (counted in ``promoted``).
    ``conflict_ops`` are the left-out operations found in conflict (not excluded): the rest of
    ``excluded_ops`` a reviewer excluded.
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
    removed: int = 0
    written: int = 0
    merged_promoted: int = 0
    kinds: dict[str, tuple[int, int]] = field(default_factory=dict)
    conflict_ops: int = 0

    @property
    def left_out(self) -> str:
        """The operations left out, by why: "2 excluded, 1 in conflict" (:func:`left_out_words`)."""
        return left_out_words(self.excluded_ops, self.conflict_ops)

    @property
    def loss_arithmetic(self) -> str:
        """The loss fraction's arithmetic: "118 originals removed ÷ 630 originals before"."""
        removed = _n(self.removed, "original", "originals")
        return f"{removed} removed ÷ {_n(self.entries_before, 'original', 'originals')} before"

    @property
    def net_change(self) -> str:
        """The store's change in words, e.g.
        "118 originals removed, 25 memories written: 93 fewer" (not "new": a merge whose text
        is one source's is written in that source's record, which counts among the originals
        removed — its earlier version is archived)."""
        diff = self.entries_before - self.entries_after
        tail = f"{diff} fewer" if diff >= 0 else f"{-diff} more"
        removed = _n(self.removed, "original", "originals")
        written = _n(self.written, "memory", "memories")
        return f"{removed} removed, {written} written: {tail}"

    def labels(self) -> list[tuple[str, str]]:
        """``[(kind, label)]`` for every kind with included operations, in :data:`KIND_ORDER`."""
        return [
            (k, count_label(k, *self.kinds[k], curated=self.merged_promoted if k == "merge" else 0))
            for k in KIND_ORDER
            if self.kinds.get(k, (0, 0))[0]
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field."""
        return asdict(self)

    VERDICT = ("max_loss_fraction", "guard_passed", "guard_reason")
    """The fields that depend on the threshold (:meth:`judged` makes them)."""

    INPUTS = ("entries_before",)
    """The fields the pass keeps as its inputs (``Pass.entries_before``), not in its figures."""

    def figures(self) -> dict[str, Any]:
        """JSON-ready dict of what the evaluation counts: the fields that are neither the
        threshold's verdict nor the pass's inputs (what a pass keeps in ``Pass.figures``;
        :meth:`from_figures` reads it back)."""
        left = set(self.VERDICT) | set(self.INPUTS)
        return {k: v for k, v in asdict(self).items() if k not in left}

    @classmethod
    def from_figures(
        cls, data: dict[str, Any], max_loss_fraction: float, entries_before: int
    ) -> Evaluation:
        """The evaluation whose :meth:`figures` are ``data`` (other keys are ignored) over a
        store of ``entries_before`` originals, judged against ``max_loss_fraction``
        (:meth:`judged`). Raises ``KeyError``/``TypeError`` for a dict that is not such
        figures, ``ValueError`` for an invalid threshold."""
        names = {f.name for f in fields(cls)} - set(cls.VERDICT) - set(cls.INPUTS)
        values = {k: v for k, v in data.items() if k in names}
        values["kinds"] = {k: (int(v[0]), int(v[1])) for k, v in values["kinds"].items()}
        base = cls(
            **values,
            entries_before=int(entries_before),
            max_loss_fraction=0.0,
            guard_passed=True,
            guard_reason="",
        )
        return base.judged(max_loss_fraction)

    def judged(self, max_loss_fraction: float) -> Evaluation:
        """These figures with the loss guard's verdict against ``max_loss_fraction``: the
        engine's :func:`~consolidation.guard_verdict` on the result they describe (the
        ``removed`` originals are the ones not retained), so the verdict is the one
        :func:`evaluate` gives. Raises ``ValueError`` for an invalid threshold (fail closed)."""
        passed, reason = figures_verdict(self.figures(), max_loss_fraction, self.entries_before)
        return replace(
            self,
            max_loss_fraction=float(max_loss_fraction),
            guard_passed=passed,
            guard_reason=reason,
        )


KIND_ORDER = ("merge", "promote", "prune", "reconcile", "distill", "summarize")
"""Order of kinds on the summary and the proposal page."""


def _n(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def left_out_words(left_out: int, conflict: int) -> str:
    """The operations a pass leaves out, by why: ``left_out_words(5, 0)`` → "5 excluded",
    ``(3, 1)`` → "2 excluded, 1 in conflict" (``conflict`` of the ``left_out``, found in
    conflict with the store; the others a reviewer excluded); ``""`` for none."""
    conflict = min(max(conflict, 0), left_out)
    parts = [f"{left_out - conflict:,} excluded"] if left_out > conflict else []
    return ", ".join(parts + ([f"{conflict:,} in conflict"] if conflict else []))


def applies_words(ev: Evaluation) -> str:
    """What approving ``ev`` applies, in the one wording the approve line and a refused approve
    share: "101 of 102 operations (1 excluded)"; "6 operations" when none is left out."""
    total = ev.included_ops + ev.excluded_ops
    if not ev.excluded_ops:
        return _n(total, "operation", "operations")
    return (
        f"{ev.included_ops:,} of {_n(total, 'operation', 'operations')} "
        f"({left_out_words(ev.excluded_ops, ev.conflict_ops)})"
    )


def count_label(kind: str, operations: int, memories: int, curated: int = 0) -> str:
    """What a kind's figures count, in words — the one wording of the summary, the groups and
    the tests: ``count_label("merge", 25, 50)`` → "25 merge operations · 50 memories merged into
    25", plus "(1 written to the curated tier)" for ``curated`` promoted merges (they count in
    the pass's ``promoted``, so a pass can promote without promote operations); promote:
    "… · 10 memories promoted"; prune: "… memories pruned"; reconcile: "… memories superseded
    (older side)"; distill: "… memories written (distilled)";
    summarize: "… memories summarised" (the children the summaries cover; nothing removed)."""
    ops = _n(operations, f"{kind} operation", f"{kind} operations")
    if kind == "merge":
        text = f"{ops} · {_n(memories, 'memory', 'memories')} merged into {operations}"
        return text + (f" ({curated} written to the curated tier)" if curated else "")
    words = {
        "promote": "promoted",
        "prune": "pruned",
        "reconcile": "superseded (older side)",
        "distill": "written (distilled)",
        "summarize": "summarised",
    }.get(kind, kind)
    return f"{ops} · {_n(memories, 'memory', 'memories')} {words}"


def to_engine_operation(
    op: Operation | Any, source_hashes: list[str] | None = None
) -> EngineOperation:
    """The engine :class:`consolidation.Operation` equivalent of a stored operation (an
    ``Operation``, or a row of its columns with ``source_hashes`` given).

    ``source_hashes`` defaults to the stored sources' planned content hashes (one query).
    """
    if source_hashes is None:
        by_id = {s.memory_id: s.content_hash for s in op.source_list}
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
    kinds: dict[str, list[int]] = {}
    merged_promoted = 0
    for op in ops:
        k = kinds.setdefault(op.kind.value, [0, 0])
        k[0] += 1
        if op.kind in (OpKind.MERGE, OpKind.PRUNE, OpKind.RECONCILE):
            k[1] += len(op.removes)
        elif op.kind == OpKind.SUMMARIZE:  # the children the summary covers
            k[1] += len(op.source_ids)
        else:  # promote: the memory itself; distill: the new memory
            k[1] += 1
        if op.kind == OpKind.MERGE and op.scores.get("promoted"):
            merged_promoted += 1
    retained = (
        result.retained_originals if result.retained_originals is not None else result.entries_after
    )
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
        removed=max(0, result.entries_before - retained),
        written=result.entries_after - retained,
        merged_promoted=merged_promoted,
        kinds={k: (v[0], v[1]) for k, v in kinds.items()},
    )


def plan_verdict(ev: Evaluation, result: Any, recall: dict[str, Any] | None) -> tuple[bool, str]:
    """All the guards of a freshly planned pass: ``(passed, reason)`` as the pass records it.

    The loss guard (``ev``, from :func:`evaluate`), then an engine-side rejection
    (``result.rejected`` of the plan's :class:`~consolidation.ConsolidationResult`), then the
    recall guard (``recall["passed"]`` from
    :func:`memoryadmin.agents.selectors.probes.recall_check`);
    the first that fails gives the reason.
    """
    if not ev.guard_passed:
        return False, ev.guard_reason
    if getattr(result, "rejected", False):
        return False, getattr(result, "reason", None) or "Rejected by the engine."
    if recall is not None and not recall.get("passed", True):
        return False, f"Recall guard tripped: {recall.get('reason')}"
    return True, ev.guard_reason


def effective_threshold(run: Pass) -> float:
    """The loss threshold a pass is held to now: the stricter of the one in force at planning
    (``run.max_loss_fraction``) and the agent's current policy (fail closed: tightening an
    agent's threshold also tightens its pending proposals; loosening it does not loosen them).
    A pass run with an explicit policy override (``consolidate --policy NAME``) is held to that
    policy's threshold: the operator chose it for this pass.
    """
    threshold = float(run.max_loss_fraction)
    if run.telemetry_data.policy_override:
        return threshold
    try:
        current = run.agent.get_policy().max_loss_fraction
    except ValueError:
        return threshold
    return min(threshold, float(current))


def pass_evaluate(run: Pass, *, conflicts_counted: bool = False) -> Evaluation:
    """Summary + guard of ``run`` over its operations that are not excluded and not in conflict
    (with ``conflicts_counted``, also those apply found in conflict: the pass as approved).

    Uses ``run.entries_before`` (the snapshot size) and :func:`effective_threshold`.
    """
    # Rows, not model instances, and only what the evaluation reads (5,000 operations: ~0.2 s).
    hashes: dict[int, dict[str, str]] = defaultdict(dict)
    sources = OperationSource.objects.filter(operation__run=run).order_by("operation", "position")
    for op_id, memory_id, planned in sources.values_list(
        "operation_id", "memory_id", "content_hash"
    ):
        hashes[op_id][memory_id] = planned
    left_out: tuple[str, ...] = (Operation.Status.CONFLICT, Operation.Status.EXCLUDED)
    if conflicts_counted:
        left_out = (Operation.Status.EXCLUDED,)
    total, counted, conflict = 0, [], 0
    for pk, status, *values in run.operations.values_list(
        "pk", "status", *_StoredOperation._fields
    ):
        total += 1
        if status in left_out:  # the rows _counted() leaves out
            conflict += status == Operation.Status.CONFLICT
            continue
        row = _StoredOperation(*values)
        by_id = hashes.get(pk, {})
        counted.append(to_engine_operation(row, [by_id.get(sid, "") for sid in row.source_ids]))
    ev = evaluate(
        entries_before=run.entries_before,
        included=counted,
        excluded_count=total - len(counted),
        max_loss_fraction=effective_threshold(run),
    )
    return replace(ev, conflict_ops=conflict)


class _StoredOperation(NamedTuple):
    """The columns of an ``Operation`` row :func:`to_engine_operation` reads."""

    kind: str
    source_ids: list[str]
    removes: list[str]
    reason: str
    rule: str
    scores: dict[str, Any]
    result_id: str
    result_document: str
    result_metadata: dict[str, Any] | None


def _counted() -> Any:
    """The operations an evaluation counts: not excluded, not in conflict (a ``Q``)."""
    return ~Q(status__in=[Operation.Status.CONFLICT, Operation.Status.EXCLUDED])


def _describes(ev: Evaluation, run: Pass) -> bool:
    """True when ``ev`` counts what ``run``'s operations count now: the same counted operations
    of each kind and the same number left out (one aggregate query).
    A backstop: every service that changes an operation stores new figures."""
    rows = (
        run.operations.order_by()
        .values_list("kind")
        .annotate(
            total=Count("id"),
            counted=Count("id", filter=_counted()),
            conflict=Count("id", filter=_IN_CONFLICT),
        )
    )
    counted = {kind: n for kind, _, n, _ in rows if n}
    left_out = sum(total - n for _, total, n, _ in rows)
    return (
        counted == {k: v[0] for k, v in ev.kinds.items()}
        and left_out == ev.excluded_ops
        and sum(c for *_, c in rows) == ev.conflict_ops
    )


_IN_CONFLICT = Q(status=Operation.Status.CONFLICT)
"""Left out because found in conflict with the store, not excluded by a reviewer."""


def _stored(run: Pass, max_loss_fraction: float) -> Evaluation | None:
    """``run.figures`` judged against ``max_loss_fraction``; ``None`` when the pass keeps none
    (planned before they were kept) or they no longer describe its operations
    (:func:`_describes`)."""
    data = run.figures if isinstance(run.figures, dict) else {}
    try:
        ev = Evaluation.from_figures(data, max_loss_fraction, run.entries_before) if data else None
    except (KeyError, TypeError, ValueError, IndexError):  # not figures
        return None
    if ev is None:
        return None
    # One check per loaded figures: a page reads them twice (summary, loss totals).
    checked = run.__dict__.get("_figures_checked")
    if checked is None or checked[0] is not data:
        checked = (data, _describes(ev, run))
        run.__dict__["_figures_checked"] = checked
    return ev if checked[1] else None


def figures_current(run: Pass) -> bool:
    """True when ``run.figures`` still describe the pass's operations (one aggregate query):
    what else the services keep there with them (the loss totals) is then current too."""
    return _stored(run, 1.0) is not None


def pass_figures(run: Pass) -> Evaluation:
    """What :func:`pass_evaluate` gives for ``run``, without reading its operations: the
    figures the services kept in ``run.figures`` when they last changed what the pass includes,
    judged against :func:`effective_threshold` now (so tightening the agent's policy shows at
    once). Falls back to :func:`pass_evaluate` when the pass has no stored figures (planned
    before they were kept) or they no longer describe its operations (:func:`_describes`).
    Two queries (the operations' counts by kind, the agent's policy) whatever the pass's size.
    Raises ``ValueError`` for an invalid threshold, as :func:`pass_evaluate` does.
    """
    return _stored(run, effective_threshold(run)) or pass_evaluate(run)
