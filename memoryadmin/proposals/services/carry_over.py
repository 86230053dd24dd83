"""Carrying a reviewer's work over: when a new pass supersedes a pending proposal, each of its
operations identical to one the reviewer excluded, edited or decided (same kind, same sources
with the same content hashes) gets that exclusion, text or decision."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q
from django.utils.translation import ngettext

from memoryadmin.core.services import (
    audit,
)
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.evaluation import pass_evaluate
from memoryadmin.proposals.services.evaluation import store_figures
from memoryadmin.proposals.services.review import REVIEWER_PICK, conflict_origin, decide_conflict

__all__ = ["operations_carry_over"]

OS = Operation.Status


def _identity(op: Operation) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What makes two operations identical across passes: kind + every source id with the
    content hash it had when planned (a source that changed makes it a different operation)."""
    return op.kind, tuple(sorted((s.memory_id, s.content_hash) for s in op.sources.all()))


def _conflict_identity(op: Operation) -> tuple[tuple[str, str], ...]:
    """Both memories of a conflict (decided or not) with their planned content hashes."""
    return tuple(sorted((s.memory_id, s.content_hash) for s in op.sources.all()))


def _carry_decisions(source: Pass, target: Pass) -> int:
    """Each conflict of ``target`` identical to one of ``source`` that a reviewer decided (same
    two memories, same content) gets that decision, in that reviewer's name. Returns how many."""
    decided = {
        _conflict_identity(op): op
        for op in source.operations.filter(
            Q(kind=Operation.Kind.CONFLICT) | Q(kind=Operation.Kind.RECONCILE, rule=REVIEWER_PICK)
        )
        .filter(scores__has_key="decision")
        .prefetch_related("sources")
    }
    n = 0
    # not prefetched: decide_conflict re-reads the sources it has just re-ordered
    for op in target.operations.filter(kind=Operation.Kind.CONFLICT) if decided else ():
        old = decided.get(_conflict_identity(op))
        if old is None:
            continue
        d, ids = old.scores["decision"], conflict_origin(old)["ids"]
        kept = {"a": ids[0], "b": ids[1]}.get(d.get("keep"))
        keep = "both" if kept is None else "ab"[op.source_ids.index(kept)]
        decide_conflict(op, keep, by=str(d.get("by") or ""), at=str(d.get("at") or ""))
        n += 1
    return n


@transaction.atomic
def operations_carry_over(*, source: Pass, target: Pass, actor: str) -> dict[str, int]:
    """Carry a reviewer's work from the pending proposal ``source`` to the new pass ``target``:
    each operation of ``target`` identical to one of ``source`` (same kind, same sources with the
    same content hashes) gets its exclusion and its edited text, and each identical conflict the
    reviewer decided gets the decision. Returns ``{"excluded": n, "edited": m, "decided": k}``;
    audited on ``target`` as ``carried_over`` when any.
    ``target``'s summary is re-evaluated over what it now includes.
    """
    reviewed = {
        _identity(op): op
        for op in source.operations.filter(Q(status=OS.EXCLUDED) | Q(edited=True)).prefetch_related(
            "sources"
        )
    }
    counts = {"excluded": 0, "edited": 0, "decided": _carry_decisions(source, target)}
    if not reviewed and not counts["decided"]:
        return counts
    for op in target.operations.prefetch_related("sources"):
        old = reviewed.get(_identity(op))
        if old is None:
            continue
        if old.excluded:
            op.status = OS.EXCLUDED
            counts["excluded"] += 1
        if old.edited and op.kind == Operation.Kind.MERGE:
            op.result_document, op.edited = old.result_document, True
            counts["edited"] += 1
        op.save(update_fields=["status", "result_document", "edited"])
    if counts["excluded"] or counts["edited"] or counts["decided"]:
        audit(
            actor=actor,
            verb="carried_over",
            run=target,
            agent=target.agent,
            note=f"From pass #{source.pk}: {counts['excluded']} "
            f"{ngettext('exclusion', 'exclusions', counts['excluded'])}, "
            f"{counts['edited']} edited {ngettext('text', 'texts', counts['edited'])} and "
            f"{counts['decided']} conflict "
            f"{ngettext('decision', 'decisions', counts['decided'])} carried over to identical "
            "operations.",
            data={
                "from_pass": source.pk,
                **{k: v for k, v in counts.items() if v or k != "decided"},
            },
        )
        store_figures(target, pass_evaluate(target))
    return counts
