"""Service-layer exceptions, raised by the services and the stores; their message is shown as is."""

from __future__ import annotations

__all__ = [
    "GuardRefused",
    "PassAlreadyActive",
    "ProposalChanged",
    "ServiceError",
    "StoreUnavailable",
]


class ServiceError(Exception):
    """A refused or failed console action; ``str(error)`` is shown to the operator as is."""


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
