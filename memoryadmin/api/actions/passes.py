"""Starting a pass for the API and the MCP tools: consolidate (run now or dry run) and compact
(one memory layer), through the console's pass services."""

from __future__ import annotations

import dataclasses
from typing import Any

from memoryadmin.agents.models import Agent
from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import (
    BadInput,
    Conflict,
    echo,
    get_pass,
    named_policy,
    require_manage,
    service_error,
)
from memoryadmin.api.actions.dry_runs import dry_run_submit
from memoryadmin.api.present.passes import pass_out
from memoryadmin.core.errors import ServiceError
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.selectors.passes import pass_summary, promoted_counts
from memoryadmin.proposals.services.passes import pass_request


def refuse_superseding(agent: Agent, replace: bool) -> None:
    """:class:`Conflict` naming the proposal of ``agent`` waiting for review, unless ``replace``
    (a new pass marks it stale, as the console's "Run now" does only after asking)."""
    pending = agent.passes.filter(status=Pass.Status.PROPOSED).order_by("-created_at").first()
    if pending is not None and not replace:
        raise Conflict(
            f"Pass #{pending.pk} of {agent.slug} is waiting for review; a new pass would "
            "supersede it (marked stale, its exclusions and edits carried over). Review it "
            "first, or send replace=true to replace it.",
            field="replace",
        )


def consolidate(
    *,
    agent: Agent,
    user: Any,
    dry_run: bool,
    policy: str | None,
    replace: bool = False,
    wait: float = 0,
) -> s.ConsolidateOut | s.DryRunOut:
    """Plan a pass for ``agent`` now.

    ``dry_run``: a dry run queued for the worker (:func:`~.dry_runs.dry_run_submit`: the
    ``consolidate --dry-run`` figures, nothing stored, no pass recorded; any role, within the
    dry-run limits), waiting up to ``wait`` seconds for it. Otherwise ``pass_request`` (admins only,
    like "Run now"): the pass is queued and planned by the worker (inline in tests) into a proposal,
    or auto-applied per the agent's policy; the result carries its id and current status. A proposal
    waiting for review is superseded only with ``replace`` (else :class:`Conflict` naming it).
    """
    chosen = named_policy(policy)
    if dry_run:
        return dry_run_submit(agent=agent, user=user, policy=policy, wait=wait)
    require_manage(user, f"start a pass of {agent.slug}")
    refuse_superseding(agent, replace)
    kwargs: dict[str, Any] = {"policy": chosen, "policy_name": policy} if chosen is not None else {}
    try:
        run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, user=user, **kwargs)
    except ServiceError as exc:
        raise service_error(exc) from None
    return _created(get_pass(run.pk), policy or "agent")


def compact(*, agent: Agent, user: Any, layer: str, replace: bool = False) -> s.PassOut:
    """A pass that only reconciles contradictions and folds duplicates, as a proposal (admins).

    The agent's policy with promote, prune, evidence folding and session windows switched off
    (seed 003's ``compact(layer=SEMANTIC)``); the loss guard and review are the usual ones.
    ``layer`` (one of :data:`COMPACT_LAYERS`) restricts the pass to that memory layer: only its
    memories are read into the snapshot (:func:`consolidation.snapshot.in_layer`; a memory
    without a layer counts as semantic), so nothing of another layer is compared or touched.
    Recorded with the pass (``telemetry_data.layer``, ``policy_override = "compact:<layer>"``).
    A proposal waiting for review is superseded only with ``replace`` (else :class:`Conflict`).
    """
    require_manage(user, f"start a pass of {agent.slug}")
    refuse_superseding(agent, replace)
    layer = (layer or "").strip().lower()
    if layer not in COMPACT_LAYERS:
        raise BadInput(
            f"Unknown layer {echo(layer)}; layers: {', '.join(COMPACT_LAYERS)}.", field="layer"
        )
    try:
        base = agent.get_policy()
    except ValueError as exc:
        raise Conflict(f"Agent {agent.slug!r} has an invalid policy: {exc}") from None
    policy = dataclasses.replace(
        base,
        promote=False,
        prune=False,
        fold_evidence=False,
        window_max_size=1,
        semantic_window_size=1,
        reconcile=True,
        merge_exact=True,
        merge_near=True,
    )
    try:
        run = pass_request(
            agent=agent,
            trigger=Pass.Trigger.OPERATOR,
            user=user,
            policy=policy,
            policy_name=f"compact:{layer}",
            layer=layer,
        )
    except ServiceError as exc:
        raise service_error(exc) from None
    return pass_out(get_pass(run.pk))


COMPACT_LAYERS = ("semantic", "episodic", "procedural", "summary")
"""Layers ``memory_compact`` accepts (FieldMap ``layer`` values; seed 003's memory layers)."""


def _created(run: Pass, policy: str) -> s.ConsolidateOut:
    promoted, curated = promoted_counts(pass_summary(run))  # what the pass page says
    return s.ConsolidateOut(
        dry_run=False,
        pass_id=run.pk,
        status=run.status,
        agent=run.agent.slug,
        policy=policy,
        entries_before=run.entries_before,
        entries_after=run.entries_after,
        merged=run.merged,
        promoted=promoted,
        merged_to_curated=curated,
        pruned=run.pruned,
        reconciled=run.reconciled,
        loss_fraction=run.loss_fraction,
        max_loss_fraction=run.max_loss_fraction,
        guard_passed=run.guard_passed,
        guard_reason=run.guard_reason or run.reason or run.error,
        recall_passed=(run.recall or {}).get("passed"),
        recall_reason=(run.recall or {}).get("reason"),
        recall_before=(run.recall or {}).get("answer_recall_before"),
        recall_after=(run.recall or {}).get("answer_recall_after"),
        url=run.get_absolute_url(),
    )
