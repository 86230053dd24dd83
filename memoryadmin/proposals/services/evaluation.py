"""Keeping the evaluation of a pass: its figures (``Pass.figures``, what the pages show) written
after every change of what the pass includes, removes or loses.

The evaluation itself is a read (:mod:`memoryadmin.proposals.selectors.evaluation`); these are the
writes that keep it with the pass, with the Review tab's loss totals and the revision that
approve checks.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.db import transaction
from django.utils import timezone

from consolidation.review import LossTotals, operation_risk
from memoryadmin.core.services import audit
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.evaluation import Evaluation, pass_evaluate
from memoryadmin.proposals.selectors.guards import content_guard
from memoryadmin.proposals.selectors.scoring import pass_content, recent_writes, run_settings
from memoryadmin.proposals.telemetry import telemetry_save

__all__ = [
    "content_override_record",
    "operations_store_loss",
    "pass_store_figures",
    "store_figures",
]


def operations_store_loss(run: Pass) -> LossTotals:
    """Keep each included operation's lost content (``lost``, ``lost_sentences``) and, where it
    changed, its risk as :func:`~memoryadmin.proposals.selectors.scoring.pass_content` measures
    them with the pass as it now stands, so every operation's figure uses the pass's definition
    (a word is lost only when no memory keeps it after the pass; counted under one operation)
    and they add up to the pass's totals, which it returns. An excluded operation keeps what it
    would lose in the pass as planned, counted under no other. Writes only the rows that
    changed."""
    active, texts, loss = pass_content(run)
    ids = {op.pk for op in active}
    policy, fieldmap = run_settings(run)
    recent = recent_writes(run.agent, now=run.planned_at or run.created_at)
    changed = []
    for op, text, new in zip(active, texts, loss.operations, strict=True):
        if new.to_dict() != (op.lost or {}):
            op.lost, op.lost_sentences = new.to_dict(), len(new.sentences)
            if not (op.kind == Operation.Kind.CONFLICT and "decision" in (op.scores or {})):
                risk = operation_risk(text, new, policy=policy, fieldmap=fieldmap, recent=recent)
                op.risk, op.risk_reasons = risk.score, list(risk.reasons)
            changed.append(op)
    for op in run.operations.exclude(pk__in=ids).filter(lost__has_key="shared"):
        if (op.lost or {}).get("shared"):
            op.lost = {**op.lost, "shared": []}
            changed.append(op)
    Operation.objects.bulk_update(
        changed, ["lost", "lost_sentences", "risk", "risk_reasons"], batch_size=500
    )
    return loss.totals


def store_figures(run: Pass, ev: Evaluation | None = None) -> Evaluation:
    """Keep ``ev`` (default: :func:`pass_evaluate` now) and the loss totals
    (:func:`~memoryadmin.proposals.selectors.scoring.pass_loss_totals`, under ``"loss"``) as
    ``run.figures``, what the pages show
    (:func:`~memoryadmin.proposals.selectors.evaluation.pass_figures`,
    :func:`~memoryadmin.proposals.selectors.scoring.pass_loss_figures`). Every service that changes
    which operations a pass includes, what they remove or what they lose calls this after the
    change, in its transaction; ``ev`` must be :func:`pass_evaluate` of the pass as it now
    stands. Each call also bumps ``figures["revision"]`` (read by
    :func:`~memoryadmin.proposals.selectors.review.pass_revision`: approve refuses a revision that
    is no longer current). Returns it."""
    ev = ev if ev is not None else pass_evaluate(run)
    # the pass row locked: two concurrent changes never give the same revision
    before = Pass.objects.select_for_update().filter(pk=run.pk).values_list("figures", flat=True)
    revision = int((before.first() or {}).get("revision", 0)) + 1
    figures = ev.figures() | {
        "loss": asdict(operations_store_loss(run)),
        "revision": revision,
    }
    Pass.objects.filter(pk=run.pk).update(figures=figures)
    run.figures = figures
    return ev


@transaction.atomic
def pass_store_figures(*, run: Pass) -> Evaluation:
    """Evaluate ``run`` afresh and keep the figures its pages show (``Pass.figures``); for a
    pass whose operations were written outside these services (the bench, test helpers, a
    repair). Returns the evaluation."""
    return store_figures(run)


def content_override_record(run: Pass, actor: str, user: Any) -> None:
    """When the content guard fails on what ``run`` now includes, record that ``actor``
    approved past it (audit event + ``telemetry_data.content_override``)."""
    guard = content_guard(run)
    if guard.passed:
        return
    override = {"by": actor, "at": timezone.now().isoformat(), "reason": guard.reason}
    audit(
        actor=actor,
        verb="approved_past_content_guard",
        run=run,
        user=user,
        note=f"Approved past the content guard: {guard.reason}.",
        data={"content_words": guard.totals.content_words, "sentences": guard.totals.sentences},
    )
    telemetry_save(run, run.telemetry_data.with_(content_override=override))
