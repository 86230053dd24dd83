"""What the API and the MCP tools do, once: look-ups, role checks and the console's services.

Every write goes through the console's public services (``pass_request``, ``pass_approve``,
``pass_reject``, ``operation_set_excluded``, ``pass_rollback_request``) with the acting user, so
it is audited with that user as the actor and obeys the same constraints as a page: one active
pass per agent (I-5), the guard re-checked on approve, stale operations, rollback blockers.
Roles are the console's (``memoryadmin.console.roles``): viewers read (and may dry-run, which
writes nothing), reviewers also review and roll back, admins also start passes ("Run now").

Errors are :class:`ActionError` subclasses carrying an HTTP status and a sentence a person can
act on; the API turns them into JSON, the MCP server into tool errors.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.utils import timezone

from consolidation import NAMED_POLICIES, Policy
from memoryadmin.console.errors import ServiceError, StoreUnavailable
from memoryadmin.console.models import Agent, Operation, Pass
from memoryadmin.console.roles import can_manage, can_review
from memoryadmin.console.services.passes import pass_dry_run, pass_request
from memoryadmin.console.services.review import (
    conflict_resolve,
    operation_set_excluded,
    pass_approve,
    pass_reject,
)
from memoryadmin.console.services.rollback import pass_rollback_request

from . import schemas as s
from .present import pass_out


class ActionError(Exception):
    """A refused or failed request; ``status`` is the HTTP status the API answers with."""

    status = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotFound(ActionError):
    status = 404


class Forbidden(ActionError):
    status = 403


class Conflict(ActionError):
    """The request is valid but the pass or agent is not in a state that allows it."""

    status = 409


class BadInput(ActionError):
    status = 422


class Unavailable(ActionError):
    """The store (Chroma) cannot be reached now; nothing was written."""

    status = 503


def _service_error(exc: Exception) -> ActionError:
    if isinstance(exc, StoreUnavailable):
        return Unavailable(str(exc))
    if isinstance(exc, ValueError):
        return BadInput(str(exc))
    return Conflict(str(exc))


# ----- look-ups and roles -------------------------------------------------------------------


def get_agent(slug: str) -> Agent:
    """The agent with this slug; :class:`NotFound` naming the known slugs otherwise."""
    agent = Agent.objects.filter(slug=slug).first()
    if agent is None:
        known = list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:12])
        hint = f" Known agents: {', '.join(known)}." if known else " There are no agents yet."
        raise NotFound(f"Unknown agent {slug!r}.{hint}", field="agent")
    return agent


def get_pass(pk: int) -> Pass:
    """The pass with this id (agent and deciders loaded); :class:`NotFound` otherwise."""
    run = Pass.objects.select_related("agent", "requested_by", "decided_by").filter(pk=pk).first()
    if run is None:
        raise NotFound(f"There is no pass #{pk}.", field="pass_id")
    return run


def require_review(user: Any, what: str) -> None:
    """:class:`Forbidden` unless ``user`` is a reviewer or an admin."""
    if not can_review(user):
        raise Forbidden(f"{_who(user)} may not {what}: only reviewers and admins may.")


def require_manage(user: Any, what: str) -> None:
    """:class:`Forbidden` unless ``user`` is an admin (the console's "Run now" permission)."""
    if not can_manage(user):
        raise Forbidden(f"{_who(user)} may not {what}: only admins may.")


def _who(user: Any) -> str:
    groups = ", ".join(g.name for g in user.groups.all()) or "no role"
    return f"{user.get_username()} ({groups})"


def named_policy(name: str | None) -> Policy | None:
    """The named policy, ``None`` for the agent's own; :class:`BadInput` for an unknown name."""
    if name is None:
        return None
    if name not in NAMED_POLICIES:
        raise BadInput(
            f"Unknown policy {name!r}; named policies: {', '.join(sorted(NAMED_POLICIES))} "
            "(or null for the agent's own).",
            field="policy",
        )
    return NAMED_POLICIES[name]


# ----- passes -------------------------------------------------------------------------------


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
    *, agent: Agent, user: Any, dry_run: bool, policy: str | None, replace: bool = False
) -> s.ConsolidateOut:
    """Plan a pass for ``agent`` now.

    ``dry_run``: the ``consolidate --dry-run`` path (plan and measure; nothing stored, no pass
    recorded; any role). Otherwise ``pass_request`` (admins only, like "Run now"): the
    pass is queued and planned by the worker (inline in tests) into a proposal, or auto-applied
    per the agent's policy; the result carries its id and current status. A proposal waiting
    for review is superseded only with ``replace`` (else :class:`Conflict` naming it).
    """
    chosen = named_policy(policy)
    if dry_run:
        return _dry_run(agent, chosen, policy)
    require_manage(user, f"start a pass of {agent.slug}")
    refuse_superseding(agent, replace)
    kwargs: dict[str, Any] = {"policy": chosen, "policy_name": policy} if chosen is not None else {}
    try:
        run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, user=user, **kwargs)
    except ServiceError as exc:
        raise _service_error(exc) from None
    return _created(get_pass(run.pk), policy or "agent")


def compact(*, agent: Agent, user: Any, layer: str, replace: bool = False) -> s.PassOut:
    """A pass that only reconciles contradictions and folds duplicates, as a proposal (admins).

    The agent's policy with promote, prune, evidence folding and session windows switched off
    (seed 003's ``compact(layer=SEMANTIC)``); the loss guard and review are the usual ones.
    ``layer`` (one of :data:`COMPACT_LAYERS`) restricts the pass to that memory layer: only its
    memories are read into the snapshot (:func:`consolidation.snapshot.in_layer`; a memory
    without a layer counts as semantic), so nothing of another layer is compared or touched.
    Recorded with the pass (``telemetry.layer``, ``policy_override = "compact:<layer>"``).
    A proposal waiting for review is superseded only with ``replace`` (else :class:`Conflict`).
    """
    require_manage(user, f"start a pass of {agent.slug}")
    refuse_superseding(agent, replace)
    layer = (layer or "").strip().lower()
    if layer not in COMPACT_LAYERS:
        raise BadInput(
            f"Unknown layer {layer!r}; layers: {', '.join(COMPACT_LAYERS)}.", field="layer"
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
        raise _service_error(exc) from None
    return pass_out(get_pass(run.pk))


COMPACT_LAYERS = ("semantic", "episodic", "procedural", "summary")
"""Layers ``memory_compact`` accepts (FieldMap ``layer`` values; seed 003's memory layers)."""


def _created(run: Pass, policy: str) -> s.ConsolidateOut:
    return s.ConsolidateOut(
        dry_run=False,
        pass_id=run.pk,
        status=run.status,
        agent=run.agent.slug,
        policy=policy,
        entries_before=run.entries_before,
        entries_after=run.entries_after,
        merged=run.merged,
        promoted=run.promoted,
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


def _dry_run(agent: Agent, chosen: Policy | None, policy: str | None) -> s.ConsolidateOut:
    """``pass_dry_run`` (the ``consolidate --dry-run`` path: snapshot → plan → recall
    check, nothing stored) as the API's result."""
    try:
        figures = pass_dry_run(agent=agent, policy=chosen or agent.get_policy(), now=timezone.now())
    except (ServiceError, ValueError) as exc:
        raise _service_error(exc) from None
    fields = s.ConsolidateOut.model_fields
    return s.ConsolidateOut(
        dry_run=True,
        pass_id=None,
        status="dry_run",
        agent=agent.slug,
        policy=policy or "agent",
        **{k: v for k, v in figures.items() if k in fields},
    )


def approve(*, run: Pass, user: Any, note: str, revision: str | None = None) -> s.PassOut:
    """Approve a proposal (reviewers); the guard is re-checked on the included operations, and
    ``revision`` (``PassOut.revision`` as read) when given: 409 when the operations changed."""
    require_review(user, f"approve pass #{run.pk}")
    try:
        pass_approve(run=run, user=user, note=note, revision=revision)
    except (ServiceError, ValueError) as exc:
        raise _service_error(exc) from None
    return pass_out(get_pass(run.pk))


def reject(*, run: Pass, user: Any, note: str) -> s.PassOut:
    """Reject a proposal with a required note (reviewers); the store is untouched."""
    require_review(user, f"reject pass #{run.pk}")
    if not (note or "").strip():
        raise BadInput("Say why the proposal is rejected (a note is required).", field="note")
    try:
        pass_reject(run=run, user=user, note=note)
    except (ServiceError, ValueError) as exc:
        raise _service_error(exc) from None
    return pass_out(get_pass(run.pk))


def set_excluded(*, run: Pass, index: int, excluded: bool, user: Any) -> s.PassOut:
    """Exclude (or include again) operation ``index`` of a proposal (reviewers)."""
    verb = "exclude" if excluded else "include"
    require_review(user, f"{verb} operations of pass #{run.pk}")
    op = Operation.objects.filter(run=run, index=index).first()
    if op is None:
        raise NotFound(f"Pass #{run.pk} has no operation {index}.", field="index")
    try:
        operation_set_excluded(operation=op, excluded=excluded, user=user)
    except (ServiceError, ValueError) as exc:
        raise _service_error(exc) from None
    return pass_out(get_pass(run.pk))


def resolve_conflict(*, run: Pass, index: int, keep: str, user: Any) -> s.PassOut:
    """Decide conflict ``index`` of a proposal (reviewers): keep ``a``, ``b`` or ``both``
    (``conflict_resolve``); 409 when the pass is not proposed or a source changed,
    422 when the operation is not a conflict."""
    require_review(user, f"decide conflicts of pass #{run.pk}")
    op = Operation.objects.filter(run=run, index=index).first()
    if op is None:
        raise NotFound(f"Pass #{run.pk} has no operation {index}.", field="index")
    try:
        conflict_resolve(operation=op, keep=keep, user=user)
    except (ServiceError, ValueError) as exc:
        raise _service_error(exc) from None
    return pass_out(get_pass(run.pk))


def roll_back(*, run: Pass, user: Any, note: str) -> s.PassOut:
    """Start rolling back an applied pass (reviewers); refused naming records changed since, and
    with :class:`Conflict` for a pass in any other state (one rolling or rolled back too)."""
    require_review(user, f"roll back pass #{run.pk}")
    if not run.can_roll_back:
        raise Conflict(
            f"Pass #{run.pk} is {run.status.replace('_', ' ')}. "
            "Only an applied or partially applied pass can be rolled back."
        )
    try:
        pass_rollback_request(run=run, user=user, note=note)
    except (ServiceError, ValueError) as exc:
        raise _service_error(exc) from None
    return pass_out(get_pass(run.pk))
