"""Reads about convergence: what a pass planned within the loss budget deferred, and whether an
agent's scheduled passes have converged (issue 10). Selectors: no writes."""

from __future__ import annotations

import math
from typing import Any

from .models import Agent, Pass

__all__ = ["PLANNED", "agent_convergence", "convergence_words", "pass_deferred", "pass_policy_note"]


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
)
"""Statuses of a pass that made a plan."""


def pass_deferred(run: Pass) -> dict[str, Any] | None:
    """What a pass planned within the loss budget left for later, from its plan's
    ``telemetry["trimmed"]`` (``consolidation.planning``: budget, kept and deferred removals,
    deferred operations by kind). ``None`` when nothing was deferred.

    Returns ``{"operations", "removals", "by_kind": {kind: n}, "passes", "text"}``; ``passes``
    estimates the passes still needed: deferred removals ÷ the next pass's budget
    (``max_loss_fraction × entries_after``), rounded up.
    """
    info = (run.telemetry or {}).get("trimmed") or {}
    operations = int(info.get("dropped_operations") or 0)
    if not operations:
        return None
    removals = int(info.get("dropped_removals") or 0)
    by_kind = {k: int(v) for k, v in (info.get("deferred_by_kind") or {}).items() if v}
    budget = max(1, math.floor(run.max_loss_fraction * max(run.entries_after, 1) + 1e-9))
    passes = max(1, math.ceil(removals / budget))
    kinds = ", ".join(f"{n} {k}" for k, n in by_kind.items())
    text = (
        f"{operations} operation{'s' if operations != 1 else ''} deferred"
        f"{f' ({kinds})' if kinds else ''}: together they would remove {removals} more "
        f"originals, over the loss budget of {run.max_loss_fraction:.0%} "
        f"({int(info.get('budget') or 0)} originals this pass); about {passes} more "
        f"pass{'es' if passes != 1 else ''}."
    )
    return {
        "operations": operations,
        "removals": removals,
        "by_kind": by_kind,
        "passes": passes,
        "text": text,
    }


def agent_convergence(agent: Agent) -> str:
    """The agent's convergence in words, from its latest pass that made a plan: "converged",
    "N operations deferred, about K more passes", or "" before any plan."""
    last = agent.passes.filter(status__in=PLANNED).order_by("-created_at", "-id").first()
    return convergence_words(last)


def convergence_words(last: Pass | None) -> str:
    """:func:`agent_convergence` from the latest planned pass already loaded (no query), so the
    dashboard reads every agent's in one query."""
    if last is None:
        return ""
    deferred = pass_deferred(last)
    if deferred is None:
        return "converged"
    n, k = deferred["operations"], deferred["passes"]
    return (
        f"{n} operation{'s' if n != 1 else ''} deferred, about {k} more "
        f"pass{'es' if k != 1 else ''}"
    )


def pass_policy_note(run: Pass) -> str:
    """ "" when ``run`` ran with its agent's policy as it is now; otherwise a sentence: the named
    policy it was run with (``consolidate --policy NAME``), or that the agent's policy changed
    since (the figures and the guard on the page are the ones of the policy the pass ran with)."""
    override = (run.telemetry or {}).get("policy_override")
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
