"""The guards beside the Review tab: the content guard's verdict on a pass (beside the loss
guard) and why Approve is disabled while the loss guard fails, from the Review tab's loss totals
(:mod:`.review`) and the pass's figures (:mod:`.evaluation`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.db.models import Q

from consolidation import Policy
from consolidation.result import loss_budget
from consolidation.review import LossTotals, content_verdict
from consolidation.review.lost import sentences
from memoryadmin.proposals.models import Operation, OperationSource, Pass
from memoryadmin.proposals.selectors.scoring import pass_loss_figures, run_settings

__all__ = ["ContentGuard", "approve_blocked", "budget_fix", "content_guard", "content_policy"]


@dataclass(frozen=True)
class ContentGuard:
    """The content guard's verdict on a pass (beside the loss guard): ``passed``, the
    ``reason`` in words (:func:`consolidation.review.content_verdict`), what the operations now
    included lose (``totals``, the Review tab's figures) and ``store_sentences``, the base of
    the sentence fraction. ``overridden`` is ``{"by", "at", "reason"}`` once a person approved
    the pass past a failing content guard (``None`` otherwise)."""

    passed: bool
    reason: str
    totals: LossTotals
    store_sentences: int
    overridden: dict[str, Any] | None = None


def content_policy(run: Pass) -> Policy:
    """The content guard's thresholds a pass is held to now: the stricter of the pass's policy
    and the agent's current one for ``max_lost_content_words`` and
    ``max_lost_sentence_fraction`` (fail closed, as the loss guard's
    :func:`~.evaluation.effective_threshold`); a pass run with an explicit policy override
    keeps that policy's."""
    planned, _ = run_settings(run)
    if run.telemetry_data.policy_override:
        return planned
    try:
        current = run.agent.get_policy()
    except ValueError:
        return planned
    pair = (planned.max_lost_content_words, current.max_lost_content_words)
    caps = [c for c in pair if c is not None]
    return replace(
        planned,
        max_lost_content_words=min(caps) if caps else None,
        max_lost_sentence_fraction=min(
            planned.max_lost_sentence_fraction, current.max_lost_sentence_fraction
        ),
    )


def _store_sentences(run: Pass) -> int:
    """Sentences of the store before ``run``, as planning counted them
    (``telemetry_data.store_sentences``); for a pass stored without that count, the
    distinct sentences of its sources (a lower bound: the fraction fails closed)."""
    counted = run.telemetry_data.store_sentences
    if counted is not None:
        return counted
    docs = OperationSource.objects.filter(operation__run=run).values_list("document", flat=True)
    return len({s for doc in docs for s in sentences(doc)})


def content_guard(run: Pass, totals: LossTotals | None = None) -> ContentGuard:
    """The content guard's verdict on ``run`` over the operations it now includes
    (:func:`pass_loss_figures`, or ``totals`` when given) against :func:`content_policy`:
    what the proposal page, the API, auto-apply and approve read. Auto-apply needs it to pass
    (and the loss guard); a person may approve past it, which is recorded
    (``telemetry_data.content_override``, shown as :attr:`ContentGuard.overridden`)."""
    totals = totals if totals is not None else pass_loss_figures(run)
    base = _store_sentences(run)
    passed, reason = content_verdict(totals, base, content_policy(run))
    override = run.telemetry_data.content_override
    override = override if isinstance(override, dict) else None
    return ContentGuard(passed, reason, totals, base, override)


def approve_blocked(run: Pass, ev: Any) -> str:
    """``""`` when the loss guard passes on what ``run`` now includes (``ev``, its
    :class:`~.evaluation.Evaluation`); else why Approve is disabled and what would make it
    pass: "Loss guard tripped: … Exclude at least 3 operations (they remove 5 more originals
    than the 4 the threshold allows)." — the operations of :func:`budget_fix`, which the page
    offers to exclude in one click."""
    if ev.guard_passed:
        return ""
    allowed = loss_budget(ev.max_loss_fraction, ev.entries_before)
    excess = ev.removed - allowed
    if excess <= 0:  # rejected for another reason than its size
        return ev.guard_reason
    n = len(budget_fix(run, ev)) or _fewest(run, excess)
    ops = f"{n} operation{'s' if n != 1 else ''}"
    more = f"{excess} more original{'s' if excess != 1 else ''}"
    return (
        f"{ev.guard_reason} Exclude at least {ops} to approve (they remove {more} than the "
        f"{allowed} the threshold allows), or raise the agent's loss threshold."
    )


def budget_fix(run: Pass, ev: Any) -> list[int]:
    """The ids of the fewest included operations whose exclusion brings ``run`` back within
    its loss budget (``consolidation.result.loss_budget`` of ``ev``'s threshold and snapshot):
    largest removals first, the riskiest first among equals; a reviewer's conflict pick is
    never one of them (excluding it would undo the decision that pushed the plan over). ``[]``
    when the loss guard passes, the excess is not about size, or the other operations cannot
    cover it. One query over the included operations' removals."""
    if ev.guard_passed:
        return []
    excess = ev.removed - loss_budget(ev.max_loss_fraction, ev.entries_before)
    if excess <= 0:
        return []
    rows = (
        run.operations.filter(_counted_q())
        .exclude(rule="reviewer_pick")
        .values_list("pk", "removes", "risk", "index")
    )
    ranked = sorted(rows, key=lambda r: (-len(r[1]), -r[2], r[3]))
    ids, covered = [], 0
    for pk, removes, _, _ in ranked:
        if covered >= excess:
            break
        if removes:
            ids.append(pk)
            covered += len(removes)
    return ids if covered >= excess else []


def _fewest(run: Pass, excess: int) -> int:
    """How many included operations, largest removals first, remove ``excess`` originals."""
    sizes = sorted(
        (len(r) for r in run.operations.filter(_counted_q()).values_list("removes", flat=True)),
        reverse=True,
    )
    n, covered = 0, 0
    for size in sizes:
        if covered >= excess:
            break
        n, covered = n + 1, covered + size
    return n


def _counted_q() -> Q:
    return ~Q(status__in=[Operation.Status.CONFLICT, Operation.Status.EXCLUDED])
