"""Reads of a pass: its proposal page (one page of operations per kind), the stale check (I-4),
and convergence (what a pass planned within the loss budget deferred, whether an agent's
scheduled passes have converged).

Nothing here reads every operation of a pass with its sources: the pages read 20 operations per
kind, and the stale check reads only ids and content hashes (the store is read for the sources'
current hashes, which is the check).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db.models import Count, Q
from django.utils import timezone

from consolidation import MemoryRecord
from consolidation.llm_cost import llm_cost_usd
from consolidation.result import loss_budget
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.proposals.models import Operation, OperationSource, Pass
from memoryadmin.proposals.selectors.decisions import active_decisions
from memoryadmin.proposals.selectors.evaluation import KIND_ORDER as SUMMARY_ORDER
from memoryadmin.proposals.selectors.evaluation import (
    Evaluation,
    count_label,
    left_out_words,
    pass_evaluate,
    pass_figures,
)
from memoryadmin.proposals.selectors.review import conflict_view

__all__ = [
    "pass_as_approved",
    "pass_llm_cost",
    "KIND_ORDER",
    "OPS_PER_PAGE",
    "PLANNED",
    "StaleOperation",
    "agent_convergence",
    "convergence_words",
    "operation_view",
    "pass_deferred",
    "pass_kind_rows",
    "pass_operation_pages",
    "pass_policy_note",
    "pass_reviewed",
    "pass_shown_pages",
    "pass_stale_check",
    "pass_stale_operations",
    "pass_summary",
    "stale_reason",
]

OPS_PER_PAGE = 20
"""Operations per kind per page on the proposal page."""

KIND_ORDER = [k.value for k in Operation.Kind]


def pass_operation_pages(
    *, run: Pass, pages: dict[str, Any] | None = None
) -> list[tuple[str, int, Page[Any]]]:
    """Operations of ``run`` grouped by kind: ``[(kind, total, page)]`` in a fixed kind order.

    ``pages`` maps kind → requested page number (default 1); ``OPS_PER_PAGE`` per page. Each
    operation comes with its sources prefetched, ordered by position.
    """
    pages = pages or {}
    counts = dict(run.operations.values_list("kind").annotate(n=Count("id")).order_by())
    out = []
    for kind in KIND_ORDER:
        total = counts.get(kind, 0)
        if not total:
            continue
        qs = run.operations.filter(kind=kind).prefetch_related("sources").order_by("index")
        out.append((kind, total, Paginator(qs, OPS_PER_PAGE).get_page(pages.get(kind, 1))))
    return out


def pass_shown_pages(*, run: Pass, params: Any) -> dict[str, tuple[int, int]]:
    """For each kind ``run`` has: ``(operations, page)``, the page of its group that ``params``
    (``<kind>_page``) asks for, as :func:`pass_operation_pages` resolves it (not a number: 1;
    past the end: the last page). One count query."""
    counts = run.operations.values_list("kind").annotate(n=Count("id")).order_by()
    return {
        kind: (n, Paginator(range(n), OPS_PER_PAGE).get_page(params.get(f"{kind}_page", 1)).number)
        for kind, n in counts
    }


def operation_view(op: Operation) -> dict[str, Any]:
    """Display data for one operation: sources (ordered) and pairwise rows for a merge.

    ``pairwise`` is ``[(source, [cosine or None, ...])]`` from ``scores["pairwise"]`` (cosine in
    [-1, 1]); it is empty when the engine gave no matrix or its shape does not match the sources.
    """
    sources = sorted(op.sources.all(), key=lambda s: s.position)
    matrix = (op.scores or {}).get("pairwise") or []
    pairwise: list[tuple[OperationSource, list[float | None]]] = []
    if (
        isinstance(matrix, list)
        and len(matrix) == len(sources)
        and all(isinstance(r, list) and len(r) == len(sources) for r in matrix)
    ):
        pairwise = [(s, list(row)) for s, row in zip(sources, matrix, strict=True)]
    other_scores = {k: v for k, v in (op.scores or {}).items() if k != "pairwise"}
    return {
        "op": op,
        "sources": sources,
        "pairwise": pairwise,
        "scores": other_scores,
        "conflict": conflict_view(op),
    }


@dataclass(frozen=True)
class StaleOperation:
    """An operation the store has overtaken: its ``pk``, ``kind`` and ``index``, the ``page``
    of its kind's group it is on (:data:`OPS_PER_PAGE` per page, in index order, as
    :func:`pass_operation_pages` pages them) and the ``reason`` in words."""

    pk: int
    kind: str
    index: int
    page: int
    reason: str


@dataclass(frozen=True)
class _Source:
    memory_id: str
    content_hash: str


def pass_stale_check(
    *, run: Pass, operation_ids: Iterable[int] | None = None
) -> list[StaleOperation]:
    """Operations of a proposed (or approved) pass whose sources changed or vanished since it was
    planned, in kind order then index order (empty when none); ``operation_ids`` restricts the
    check to those operations (one page of rows). Operations in conflict or applied are not
    checked. Reads the operations' ids and their sources' ids and planned content hashes (no
    documents, no embeddings) and the store's current records of those sources, in pages of
    1,000 ids. Read-only; the proposal page shows these before anyone approves (I-4), and apply
    checks again. Raises :class:`StoreUnavailable` when Chroma is down."""
    OS = Operation.Status
    wanted = None if operation_ids is None else {int(i) for i in operation_ids}
    rows = run.operations.order_by("index").values_list("pk", "kind", "index", "status")
    place: dict[int, tuple[str, int, int]] = {}
    seen: dict[str, int] = defaultdict(int)
    checked = []
    for pk, kind, index, status in rows:
        place[pk] = (kind, index, seen[kind] // OPS_PER_PAGE + 1)
        seen[kind] += 1
        if status not in (OS.CONFLICT, OS.APPLIED) and (wanted is None or pk in wanted):
            checked.append(pk)
    if not checked:
        return []
    sources = OperationSource.objects.filter(operation__run=run)
    if wanted is not None:
        sources = sources.filter(operation_id__in=checked)
    by_op: dict[int, list[_Source]] = defaultdict(list)
    for op_id, mid, planned in sources.order_by("operation_id", "position").values_list(
        "operation_id", "memory_id", "content_hash"
    ):
        by_op[op_id].append(_Source(mid, planned))
    ids = sorted({s.memory_id for pk in checked for s in by_op[pk]})
    live = stores.get_live(stores.get_store(run.agent), ids, include_embeddings=False)
    out = []
    for pk in checked:
        reason = stale_reason(None, by_op[pk], live, {})
        if reason:
            out.append(StaleOperation(pk, *place[pk], reason))
    out.sort(key=lambda s: (KIND_ORDER.index(s.kind), s.index))
    return out


def pass_stale_operations(*, run: Pass) -> dict[int, str]:
    """:func:`pass_stale_check` as ``{Operation.pk: reason}`` (empty when none). Raises
    :class:`StoreUnavailable` when Chroma is down."""
    return {s.pk: s.reason for s in pass_stale_check(run=run)}


def stale_reason(
    op: Operation | None,
    sources: Iterable[OperationSource | Any],
    live: Mapping[str, MemoryRecord],
    own_writes: Mapping[str, str],
) -> str:
    """Why an operation conflicts with the live store (I-4), or ``""`` when its ``sources`` (its
    ``OperationSource`` rows in position order, or anything with their ``memory_id`` and planned
    ``content_hash``) are unchanged; ``op`` is the operation, when at hand (not needed).

    A source rewritten by an earlier operation of the same pass (``own_writes``: id → the hash
    this pass wrote) is not a conflict.
    """
    for src in sources:
        rec = live.get(src.memory_id)
        if rec is None:
            return f"Memory {src.memory_id} no longer exists in the store."
        current = rec.content_hash
        if current != src.content_hash and own_writes.get(src.memory_id) != current:
            return f"Memory {src.memory_id} changed after the pass was planned."
    return ""


def pass_summary(run: Pass) -> Any:
    """What the pass page's summary shows: the pass's figures over its included operations (the
    same numbers on the summary, the groups and the guard: :func:`pass_figures`, which reads no
    operation); a pass a guard rejected keeps the verdict it was given (its status and
    ``reason``), another settled pass shows the verdict on the figures shown (its threshold
    then). A pass without operations shows its stored figures (the pass itself)."""
    if not run.operations.exists():
        return run
    return _with_verdict(run, pass_figures(run))


def pass_as_approved(run: Pass, summary: Any = None) -> Any:
    """The pass as planned and approved (with the reviewer's exclusions), before apply found
    operations in conflict: :func:`pass_summary`, or for a pass apply found conflicts in, its
    operations evaluated with those counted (:func:`pass_evaluate`, ``conflicts_counted``),
    with the verdict :func:`pass_summary` gives (``summary``, when the caller has it). Derived,
    never stored: the figures of a pass are kept once (``Pass.figures``, what it counts now)."""
    summary = pass_summary(run) if summary is None else summary
    if not getattr(summary, "conflict_ops", 0):
        return summary
    return _with_verdict(run, pass_evaluate(run, conflicts_counted=True))


def _with_verdict(run: Pass, ev: Evaluation) -> Evaluation:
    if run.status in (Pass.Status.PROPOSED, Pass.Status.APPROVED):
        return ev
    if run.status == Pass.Status.REJECTED_BY_GUARD:  # the verdict it was rejected with
        return replace(
            ev,
            guard_passed=False,
            guard_reason=run.guard_reason,
            max_loss_fraction=run.max_loss_fraction,
        )
    # Settled otherwise: the verdict on the figures shown (what it applied, without the
    # operations found in conflict), against the threshold it was held to, so the loss line
    # and the guard's sentence count the same originals.
    return ev.judged(run.max_loss_fraction)


def promoted_counts(summary: Any) -> tuple[int, int]:
    """``(promoted, merged_to_curated)`` from the pass page's summary (:func:`pass_summary`), the
    one source of its "N memories promoted" and of the merge line's curated count: the memories
    the promote operations promote, and the merges written straight to the curated tier (which
    the engine's ``promoted`` total also counts). ``(promoted, 0)`` for a pass without the
    per-kind figures (no operations: the stored total). The same definition for a pass, a
    dry run (:func:`~memoryadmin.proposals.services.passes.pass_dry_run`, on its
    :class:`~.evaluation.Evaluation`) and the API's and CLI's figures of a created pass."""
    kinds = getattr(summary, "kinds", None)
    if kinds is None:
        return int(getattr(summary, "promoted", 0) or 0), 0
    return int(kinds.get("promote", (0, 0))[1]), int(getattr(summary, "merged_promoted", 0) or 0)


def pass_reviewed(run: Pass) -> bool:
    """True when an operator excluded or edited an operation (the stored recall check then
    describes the plan as proposed, not as it stands now; the figures follow every change)."""
    return run.operations.filter(Q(status=Operation.Status.EXCLUDED) | Q(edited=True)).exists()


# ----- convergence ------------------------------------------------------------------------


PLANNED = (
    Pass.Status.PROPOSED,
    Pass.Status.REJECTED_BY_GUARD,
    Pass.Status.APPROVED,
    Pass.Status.APPLYING,
    Pass.Status.APPLIED,
    Pass.Status.PARTIALLY_APPLIED,
    Pass.Status.REJECTED,
    Pass.Status.STALE,
    Pass.Status.ROLLING_BACK,
    Pass.Status.ROLLED_BACK,
    Pass.Status.NO_CHANGES,
)
"""Statuses of a pass that made a plan."""


def pass_deferred(run: Pass) -> dict[str, Any] | None:
    """What a pass planned within the loss budget left for later, from its plan's
    ``telemetry_data.trimmed`` (``consolidation.planning``: budget, kept and deferred removals,
    deferred operations by kind). ``None`` when nothing was deferred.

    Returns ``{"operations", "removals", "by_kind": {kind: n}, "passes", "text", "items",
    "unlisted"}`` (``items``: the deferred operations the plan listed, each ``{"kind", "rule",
    "source_ids", "reason"}``; ``unlisted``: how many more there are); ``passes``
    estimates the passes still needed: deferred removals ÷ the next pass's budget
    (``max_loss_fraction × entries_after``), rounded up.
    """
    info = run.telemetry_data.trimmed or {}
    operations = int(info.get("dropped_operations") or 0)
    if not operations:
        return None
    removals = int(info.get("dropped_removals") or 0)
    by_kind = {k: int(v) for k, v in (info.get("deferred_by_kind") or {}).items() if v}
    budget = max(1, loss_budget(run.max_loss_fraction, max(run.entries_after, 1)))
    passes = max(1, math.ceil(removals / budget))
    kinds = ", ".join(f"{n} {k}" for k, n in by_kind.items())
    text = (
        f"{operations} operation{'s' if operations != 1 else ''} deferred"
        f"{f' ({kinds})' if kinds else ''}: together they would remove {removals} more "
        f"originals, over the loss budget of {run.max_loss_fraction:.0%} "
        f"({int(info.get('budget') or 0)} originals this pass); about {passes} more "
        f"pass{'es' if passes != 1 else ''}."
    )
    items = [
        {
            "kind": str(d.get("kind", "")),
            "rule": str(d.get("rule", "")),
            "source_ids": [str(i) for i in d.get("source_ids") or []],
            "reason": str(d.get("reason", "")),
        }
        for d in info.get("deferred") or []
        if isinstance(d, dict)
    ]
    return {
        "operations": operations,
        "removals": removals,
        "by_kind": by_kind,
        "passes": passes,
        "text": text,
        "items": items,
        "unlisted": max(0, operations - len(items)),
    }


def agent_convergence(agent: Agent) -> str:
    """The agent's convergence in words, from its latest pass that made a plan: "converged"
    (applied, nothing deferred), "N operations deferred, about K more passes", or "" (no plan
    yet, or the plan is waiting, rejected or rolled back: nothing to claim)."""
    last = agent.passes.filter(status__in=PLANNED).order_by("-created_at", "-id").first()
    return convergence_words(last)


def convergence_words(last: Pass | None) -> str:
    """:func:`agent_convergence` from the latest planned pass already loaded (no query), so the
    dashboard reads every agent's in one query."""
    if last is None:
        return ""
    deferred = pass_deferred(last)
    if deferred is None:  # nothing left over: converged once it is applied, not before or after
        done = (Pass.Status.APPLIED, Pass.Status.PARTIALLY_APPLIED, Pass.Status.NO_CHANGES)
        return "converged" if last.status in done else ""
    n, k = deferred["operations"], deferred["passes"]
    return (
        f"{n} operation{'s' if n != 1 else ''} deferred, about {k} more "
        f"pass{'es' if k != 1 else ''}"
    )


def pass_policy_note(run: Pass) -> str:
    """ "" when ``run`` ran with its agent's policy as it is now; otherwise a sentence: the named
    policy it was run with (``consolidate --policy NAME``), or that the agent's policy changed
    since (the figures and the guard on the page are the ones of the policy the pass ran with)."""
    override = run.telemetry_data.policy_override
    if override:
        name = "an explicit" if override == "explicit" else f"the “{override}”"
        return (
            f"This pass ran with {name} policy, not the agent's own "
            f"(loss threshold {run.max_loss_fraction:.0%})."
        )
    if not run.policy or run.status in (Pass.Status.QUEUED, Pass.Status.RUNNING):
        return ""
    try:
        current = run.agent.get_policy().to_dict()
    except ValueError:
        return ""
    changed = sorted(k for k, v in current.items() if k in run.policy and run.policy[k] != v)
    if not changed:
        return ""
    return (
        "The agent's policy changed after this pass ran ("
        + ", ".join(c.replace("_", " ") for c in changed)
        + "); this pass ran with the policy as it was."
    )


def pass_llm_cost(run: Pass) -> float | None:
    """USD the pass's LLM tokens cost (``telemetry_data.llm["totals"]`` at the model's price in
    ``LLM_PRICES``); ``None`` when the model has no (valid) price or nothing was sent."""
    llm = run.telemetry_data.llm or {}
    try:
        return llm_cost_usd(llm.get("totals"), llm.get("model", ""), settings.LLM_PRICES)
    except ValueError:
        return None


def pass_kind_rows(run: Pass, ev: Any) -> list[dict[str, Any]]:
    """One row per kind the pass holds, in the summary's order (``evaluation.KIND_ORDER``):
    ``{"kind", "label", "total", "not_counted", "not_counted_words"}`` — the label of its
    included operations (:func:`count_label`; "0 prune operations · 0 memories pruned" when all
    are excluded), its operations, how many of them are left out and why ("2 excluded, 1 in
    conflict", :func:`left_out_words`). The one source of the
    summary's rows and the groups' headers (both swapped out of band after an exclude). ``[]``
    when ``ev`` has no per-kind figures (a pass without operations). One query."""
    kinds = getattr(ev, "kinds", None)
    if kinds is None:
        return []
    in_conflict = Q(status=Operation.Status.CONFLICT)
    counts = run.operations.values_list("kind").annotate(
        n=Count("id"), conflict=Count("id", filter=in_conflict)
    )
    totals = {kind: (n, conflict) for kind, n, conflict in counts.order_by()}
    rows = []
    for kind in SUMMARY_ORDER:
        total, conflict = totals.get(kind, (0, 0))
        if not total:
            continue
        ops, memories = kinds.get(kind, (0, 0))
        curated = getattr(ev, "merged_promoted", 0) if kind == "merge" else 0
        rows.append(
            {
                "kind": kind,
                "label": count_label(kind, ops, memories, curated=curated),
                "total": total,
                "not_counted": total - ops,
                "not_counted_words": left_out_words(total - ops, conflict),
            }
        )
    return rows


def plan_inputs_digest(
    agent: Agent,
    *,
    hashes: Mapping[str, str],
    policy: Mapping[str, Any],
    now: Any,
    layer: str | None = None,
) -> str:
    """64 hex: SHA-256 over everything a pass of ``agent`` plans from, so two passes with the
    same digest make the same plan (the engine is deterministic; an LLM writer's answers are
    cached per pair).

    The inputs: the store (``hashes``: memory id → content hash, ``consolidation.records``),
    ``policy`` (``Policy.to_dict()``), the auto-apply mode, the active decisions (their ids: a
    new or revoked decision changes it), the probe queries (the recall guard), the checkpoint,
    ``layer``, the LLM endpoint (``MEMORYADMIN_LLM_MODEL``, ``OPENAI_BASE_URL``), and the
    local date of ``now`` (a datetime): stale-memory rules count days, so an unchanged store is
    planned again at least once a day. Used by the schedule to skip a pass that would repeat
    the last one."""
    h = hashlib.sha256()

    def part(value: Any) -> None:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
        h.update(text.encode("utf-8"))
        h.update(b"\x00")

    part(sorted(hashes.items()))
    part(dict(policy))
    llm = [settings.MEMORYADMIN_LLM_MODEL, settings.OPENAI_BASE_URL]
    part([agent.auto_apply, layer or "", *llm])
    part(sorted(active_decisions(agent).values_list("id", flat=True)))
    part(list(agent.probes.order_by("id").values_list("id", "question", "answer")))
    part(sorted((agent.checkpoint or {}).items()))
    part(timezone.localdate(now).isoformat())
    return h.hexdigest()
