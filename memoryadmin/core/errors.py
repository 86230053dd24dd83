"""Service-layer exceptions, raised by the services and the stores; their message is shown as is."""

from __future__ import annotations

__all__ = [
    "AlreadyDone",
    "BadField",
    "DryRunLimit",
    "GuardRefused",
    "NotAllowed",
    "PassAlreadyActive",
    "ProposalChanged",
    "ServiceError",
    "StoreUnavailable",
]


class ServiceError(Exception):
    """A refused or failed console action; ``str(error)`` is shown to the operator as is."""


class AlreadyDone(ServiceError):
    """The action was already taken (a second click, a retried request): nothing was done. The
    pages say so as information, the API answers 409 with the message."""


class NotAllowed(ServiceError):
    """The user's role does not allow the action (:func:`memoryadmin.core.roles.require`); the
    message names the user, their roles and the roles that may. The pages answer 403, the API
    403, MCP a tool error, each with this one message."""


class BadField(ValueError):
    """A value the action needs is missing or wrong; ``field`` names it (a form's field, the
    API's ``field``). A ``ValueError``, so callers that catch bad input catch it too."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class PassAlreadyActive(ServiceError):
    """Another pass of the same agent is queued, running, approved, applying or rolling back
    (I-5)."""


class GuardRefused(ServiceError):
    """Approving was refused because the loss guard fails on the operations now included."""


class ProposalChanged(ServiceError):
    """Approving was refused because the operations it would apply are no longer the ones the
    reviewer saw (another reviewer or tab excluded, included, edited or decided some since)."""


class StoreUnavailable(ServiceError):
    """The agent's Chroma store cannot be reached or opened (server down, collection missing)."""


class DryRunLimit(ServiceError):
    """A dry run was refused by a limit: the agent already has one queued or running with another
    policy, or the user has ``MEMORYADMIN_DRY_RUNS_PER_USER`` queued or running. ``active`` is
    the dry run in the way (its id is in the message) and ``retry_after`` the seconds to wait."""

    def __init__(self, message: str, *, active: object = None, retry_after: int = 5) -> None:
        super().__init__(message)
        self.active = active
        self.retry_after = retry_after
