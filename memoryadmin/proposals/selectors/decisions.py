"""Reads of standing decisions: what every pass of an agent plans with, and the Decisions tab.

A :class:`~memoryadmin.proposals.models.Decision` reaches the engine as
:class:`consolidation.decisions.Constraint` objects (:func:`standing_decisions`) or, for a
rejected plan, as operation signatures (:func:`rejected_signatures`). Only decisions not
revoked count.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from consolidation.decisions import Constraint, DecisionKind, StandingDecisions
from consolidation.review import CODES
from memoryadmin.agents.models import Agent
from memoryadmin.proposals.models import Decision, Pass

__all__ = [
    "DECISIONS_PER_PAGE",
    "active_decisions",
    "decision_constraints",
    "decision_label",
    "decision_page",
    "decisions_of_pass",
    "pass_decision_notes",
    "rejected_index",
    "rejected_joins",
    "rejected_signatures",
    "standing_decisions",
]

log = logging.getLogger(__name__)

DECISIONS_PER_PAGE = 50
"""Decisions per page of the Decisions tab."""

K = Decision.Kind


def active_decisions(agent: Agent) -> QuerySet[Decision]:
    """The agent's decisions that are not revoked, newest first."""
    return Decision.objects.filter(agent=agent, revoked_at__isnull=True).order_by("-created_at")


def decision_label(d: Decision) -> str:
    """``"decision #12, keep apart, set by alice on pass #4"``."""
    return f"decision #{d.pk}, {d.kind_label}, {d.origin}"


def decision_constraints(d: Decision) -> list[Constraint]:
    """The engine constraints of one decision (``[]`` for a rejected plan). A "keep both" on a
    conflict (``payload["apart"]``) is a keep of both memories and a keep-apart of the pair, so
    the conflict is not asked again. Raises ``ValueError`` for a decision the engine refuses."""
    mems = tuple((str(m[0]), str(m[1] if len(m) > 1 else "")) for m in d.memories or [])
    payload = d.payload or {}
    pk = d.pk if d.pk is not None else "new"  # checked before it is saved
    if d.kind == K.REJECTED_PLAN:
        return []
    if d.kind == K.KEEP:
        out = [Constraint(decision=pk, kind=DecisionKind.KEEP, memories=mems, note=d.origin)]
        if payload.get("apart") and len(mems) >= 2:
            out.append(
                Constraint(decision=pk, kind=DecisionKind.KEEP_APART, memories=mems, note=d.origin)
            )
        return out
    if d.kind == K.CONFLICT_PICK:
        return [
            Constraint(
                decision=pk,
                kind=DecisionKind.CONFLICT_PICK,
                memories=mems,
                keep=str(payload.get("keep") or ""),
                note=d.origin,
            )
        ]
    return [Constraint(decision=pk, kind=DecisionKind(d.kind), memories=mems, note=d.origin)]


def standing_decisions(agent: Agent) -> StandingDecisions:
    """Every planning constraint of the agent's active decisions, oldest first (when two cover
    the same memory the older wins), for ``plan_snapshot(decisions=...)``. A decision the
    engine refuses (it cannot be made through the console) is logged and skipped."""
    out: list[Constraint] = []
    for d in active_decisions(agent).exclude(kind=K.REJECTED_PLAN).order_by("created_at", "id"):
        try:
            out.extend(decision_constraints(d))
        except ValueError as exc:
            log.warning("decision %s of agent %s skipped: %s", d.pk, agent.pk, exc)
    return StandingDecisions(out)


def _rejection_note(d: Decision) -> str:
    """``"in pass #4 by alice: too aggressive"``: where and by whom a plan was rejected."""
    where = f"in pass #{d.run_id}" if d.run_id else "earlier"
    return f"{where} by {d.created_actor or 'unknown'}" + (f": {d.note}" if d.note else "")


def rejected_index(agent: Agent) -> dict[str, tuple[int, str]]:
    """``{operation signature: (decision id, "in pass #4 by alice: too aggressive")}`` over
    the agent's active rejected plans (the newest rejection of a signature wins)."""
    out: dict[str, tuple[int, str]] = {}
    for d in active_decisions(agent).filter(kind=K.REJECTED_PLAN).order_by("created_at", "id"):
        note = _rejection_note(d)
        for sig in (d.payload or {}).get("signatures") or []:
            out[str(sig)] = (d.pk, note)
    return out


def rejected_joins(agent: Agent) -> list[tuple[frozenset[tuple[str, str]], tuple[int, str]]]:
    """``[(frozenset of (memory id, content hash), (decision id, note))]``: what each merge and
    reconcile of the agent's active rejected plans joined (``payload["joins"]``; rejections
    recorded before it was kept have none), the note as :func:`rejected_index` words it. A
    later merge or reconcile joining all of one of them waits as rejected
    (:func:`consolidation.review.joins_rejected`)."""
    out: list[tuple[frozenset[tuple[str, str]], tuple[int, str]]] = []
    for d in active_decisions(agent).filter(kind=K.REJECTED_PLAN).order_by("-created_at", "-id"):
        note = _rejection_note(d)
        for pairs in (d.payload or {}).get("joins") or []:
            joined = frozenset((str(m), str(h)) for m, h in pairs)
            if len(joined) >= 2:
                out.append((joined, (d.pk, note)))
    return out


def rejected_signatures(agent: Agent) -> dict[str, str]:
    """``{operation signature: "in pass #4 by alice: too aggressive"}`` of the operations of
    the agent's rejected passes (what ``split_auto_apply(rejected=...)`` takes)."""
    return {sig: note for sig, (_, note) in rejected_index(agent).items()}


def decision_page(*, agent: Agent, state: str = "active", page: int | str = 1) -> Page[Any]:
    """A page of the agent's decisions, newest first: ``state`` ``"active"``, ``"revoked"`` or
    ``"all"`` (anything else: active), :data:`DECISIONS_PER_PAGE` a page."""
    qs = Decision.objects.filter(agent=agent).select_related("run", "created_by", "revoked_by")
    if state == "revoked":
        qs = qs.filter(revoked_at__isnull=False)
    elif state != "all":
        qs = qs.filter(revoked_at__isnull=True)
    return Paginator(qs.order_by("-created_at", "-id"), DECISIONS_PER_PAGE).get_page(page)


def decisions_of_pass(run: Any) -> QuerySet[Decision]:
    """The active decisions made on pass ``run`` (what its rollback offers to revoke)."""
    return Decision.objects.filter(run=run, revoked_at__isnull=True).order_by("created_at", "id")


def pass_decision_notes(run: Any) -> dict[str, Any]:
    """What the pass page says about decisions and auto-apply:

    - ``auto``: ``None``, or ``{"part": "applied" | "waiting", "mode", "applied", "waiting",
      "other": the other part's pass id, "other_status": its status now, "reasons": [(what it
      means, count)]}`` from
      ``telemetry_data.auto_apply`` (the part auto-apply applied, or the part waiting for review);
    - ``held_back``: the plan's ``held_back`` entries (``reason``, ``memory_ids``,
      ``would_have``, ``decision``), ``held_back_count`` all of them;
    - ``made``: the active decisions made on this pass.
    """
    tel = run.telemetry_data
    auto = tel.auto_apply if isinstance(tel.auto_apply, dict) else None
    if auto is not None:
        waiting_part = auto.get("part") == "waiting"
        auto = {
            "part": "waiting" if waiting_part else "applied",
            "mode": auto.get("mode", ""),
            "applied": int(auto.get("applied") or 0),
            "waiting": int(auto.get("waiting") or 0),
            "other": auto.get("applied_pass") if waiting_part else auto.get("waiting_pass"),
            "other_status": "",
            "reasons": [
                (CODES.get(code, code), n) for code, n in (auto.get("reasons") or {}).items()
            ],
        }
    if auto is not None and auto["other"]:
        other = Pass.objects.filter(pk=auto["other"]).values_list("status", flat=True).first()
        auto["other_status"] = other or ""
    held = [h for h in tel.context.get("held_back") or [] if isinstance(h, dict)]
    return {
        "auto": auto,
        "held_back": held,
        "held_back_count": int(tel.context.get("held_back_count") or len(held)),
        "made": list(decisions_of_pass(run)) if run.pk else [],
    }
