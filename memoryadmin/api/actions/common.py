"""What the API and the MCP tools share: their errors (an HTTP status and a sentence a person
can act on), look-ups of agents and passes, role checks, named policies."""

from __future__ import annotations

from typing import Any

from consolidation import NAMED_POLICIES, Policy
from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import BadField, NotAllowed, StoreUnavailable
from memoryadmin.core.roles import MANAGE, REVIEW, require
from memoryadmin.proposals.models import Pass


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


class TooManyRequests(ActionError):
    """A limit refused the request (dry runs: one per agent, a few per user); try again after
    ``retry_after`` seconds (the API's ``Retry-After``)."""

    status = 429

    def __init__(self, message: str, *, field: str | None = None, retry_after: int = 5) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


class Unavailable(ActionError):
    """The store (Chroma) cannot be reached now; nothing was written."""

    status = 503


def service_error(exc: Exception) -> ActionError:
    """The action error of a service's exception: 403 for a role that does not allow it, 503 for
    a store outage, 422 for bad input (naming the field when the service did), else 409 (a state
    that forbids the action). The message is the service's own."""
    if isinstance(exc, NotAllowed):
        return Forbidden(str(exc))
    if isinstance(exc, StoreUnavailable):
        return Unavailable(str(exc))
    if isinstance(exc, BadField):
        return BadInput(str(exc), field=exc.field)
    if isinstance(exc, ValueError):
        return BadInput(str(exc))
    return Conflict(str(exc))


def echo(value: Any, limit: int = 40) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters (ending "…'"), so
    a refused input of any length is never sent back whole."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 2] + "…'"


# ----- look-ups and roles -------------------------------------------------------------------


def get_agent(slug: str) -> Agent:
    """The agent with this slug; :class:`NotFound` naming the known slugs otherwise."""
    agent = Agent.objects.filter(slug=slug).first()
    if agent is None:
        known = list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:12])
        hint = f" Known agents: {', '.join(known)}." if known else " There are no agents yet."
        raise NotFound(f"Unknown agent {echo(slug, 82)}.{hint}", field="agent")
    return agent


def get_pass(pk: int) -> Pass:
    """The pass with this id (agent and deciders loaded); :class:`NotFound` otherwise."""
    run = Pass.objects.select_related("agent", "requested_by", "decided_by").filter(pk=pk).first()
    if run is None:
        raise NotFound(f"There is no pass #{pk}.", field="pass_id")
    return run


def require_review(user: Any, what: str) -> None:
    """:class:`Forbidden` unless ``user`` is a reviewer or an admin, for an action that looks
    things up before its service checks the role itself (same sentence:
    :func:`memoryadmin.core.roles.require`)."""
    try:
        require(user, REVIEW, what)
    except NotAllowed as exc:
        raise Forbidden(str(exc)) from None


def require_manage(user: Any, what: str) -> None:
    """:class:`Forbidden` unless ``user`` is an admin (the console's "Run now" permission)."""
    try:
        require(user, MANAGE, what)
    except NotAllowed as exc:
        raise Forbidden(str(exc)) from None


def named_policy(name: str | None) -> Policy | None:
    """The named policy, ``None`` for the agent's own; :class:`BadInput` for an unknown name."""
    if name is None:
        return None
    if name not in NAMED_POLICIES:
        raise BadInput(
            f"Unknown policy {echo(name)}; named policies: {', '.join(sorted(NAMED_POLICIES))} "
            "(or null for the agent's own).",
            field="policy",
        )
    return NAMED_POLICIES[name]


# ----- passes -------------------------------------------------------------------------------
