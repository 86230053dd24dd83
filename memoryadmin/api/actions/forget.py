"""Forget requests for the API and the MCP tools, through the console's forget services:
request (or dry run), show, approve, reject. Reviewers and admins only (a viewer may not even
dry-run: the list shows the texts a forget is about)."""

from __future__ import annotations

from typing import Any

from memoryadmin.agents.models import Agent
from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import NotFound, require_review, service_error
from memoryadmin.api.present.forget import forget_out, plan_out
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.memories.models import ForgetRequest
from memoryadmin.memories.selectors.forget import ForgetSelection, forget_plan
from memoryadmin.memories.services.forget import (
    forget_approve,
    forget_reject,
    forget_request_create,
)


def get_forget(pk: int) -> ForgetRequest:
    """The forget request with this id; :class:`NotFound` otherwise."""
    req = ForgetRequest.objects.select_related("agent").filter(pk=pk).first()
    if req is None:
        raise NotFound(f"There is no forget request #{pk}.", field="forget_id")
    return req


def forget(*, agent: Agent, payload: s.ForgetIn, user: Any) -> s.ForgetOut:
    """Dry run (``payload.dry_run``: listed, nothing stored) or store a proposed request."""
    require_review(user, f"forget memories of {agent.slug}")
    selection = ForgetSelection(
        payload.kind,
        key=payload.key,
        value=payload.value.strip(),
        ids=tuple(dict.fromkeys(i for i in payload.ids if i.strip())),
        text=payload.text.strip(),
        similarity=payload.similarity,
        max_count=payload.max_count,
    )
    try:
        if payload.dry_run:
            plan = forget_plan(agent=agent, selection=selection)
            return plan_out(agent_slug=agent.slug, plan=plan)
        req, _plan = forget_request_create(
            agent=agent, selection=selection, user=user, reason=payload.reason
        )
    except (ServiceError, StoreUnavailable, ValueError) as exc:
        raise service_error(exc) from None
    return forget_out(req)


def show(*, req: ForgetRequest) -> s.ForgetOut:
    """A stored request (its list while proposed, its tombstone afterwards)."""
    try:
        return forget_out(req)
    except StoreUnavailable as exc:
        raise service_error(exc) from None


def approve(*, req: ForgetRequest, user: Any, note: str) -> s.ForgetOut:
    """Approve (reviewers; the worker purges it: ``applying`` until it is done); 409 while a
    pass of the agent is active."""
    try:
        req = forget_approve(request=req, user=user, note=note)
    except (ServiceError, StoreUnavailable, ValueError) as exc:
        raise service_error(exc) from None
    return forget_out(req)


def reject(*, req: ForgetRequest, user: Any, note: str) -> s.ForgetOut:
    """Reject (reviewers): nothing removed."""
    try:
        req = forget_reject(request=req, user=user, note=note)
    except ServiceError as exc:
        raise service_error(exc) from None
    return forget_out(req)
