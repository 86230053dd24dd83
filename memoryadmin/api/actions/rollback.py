"""Rolling a pass back for the API and the MCP tools, through the console's rollback service."""

from __future__ import annotations

from typing import Any

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import (
    get_pass,
    service_error,
)
from memoryadmin.api.present.passes import pass_out
from memoryadmin.core.errors import ServiceError
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.rollback import pass_rollback_request


def roll_back(*, run: Pass, user: Any, note: str) -> s.PassOut:
    """Start rolling back an applied pass (reviewers); refused naming records changed since, and
    with :class:`Conflict` for a pass in any other state (one rolling or rolled back too)."""
    try:
        pass_rollback_request(run=run, user=user, note=note)
    except (ServiceError, ValueError) as exc:
        raise service_error(exc) from None
    return pass_out(get_pass(run.pk))
