"""The review of a proposal for the API and the MCP tools: approve, reject, exclude/include an
operation, decide a conflict, through the console's review services."""

from __future__ import annotations

from typing import Any

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import (
    NotFound,
    get_pass,
    service_error,
)
from memoryadmin.api.present.passes import pass_out
from memoryadmin.core.errors import ServiceError
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.services.review import (
    conflict_resolve,
    operation_set_excluded,
    pass_approve,
    pass_reject,
)


def approve(*, run: Pass, user: Any, note: str, revision: str | None = None) -> s.PassOut:
    """Approve a proposal (reviewers); the guard is re-checked on the included operations, and
    ``revision`` (``PassOut.revision`` as read) when given: 409 when the operations changed."""
    try:
        pass_approve(run=run, user=user, note=note, revision=revision)
    except (ServiceError, ValueError) as exc:
        raise service_error(exc) from None
    return pass_out(get_pass(run.pk))


def reject(*, run: Pass, user: Any, note: str, never_again: bool = False) -> s.PassOut:
    """Reject a proposal with a required note (reviewers); the store is untouched. Recorded
    as a rejected-plan decision (``never_again``: keep-apart and keep decisions too)."""
    try:
        pass_reject(run=run, user=user, note=note, never_again=never_again)
    except (ServiceError, ValueError) as exc:
        raise service_error(exc) from None
    return pass_out(get_pass(run.pk))


def set_excluded(*, run: Pass, index: int, excluded: bool, user: Any) -> s.PassOut:
    """Exclude (or include again) operation ``index`` of a proposal (reviewers)."""
    op = Operation.objects.filter(run=run, index=index).first()
    if op is None:
        raise NotFound(f"Pass #{run.pk} has no operation {index}.", field="index")
    try:
        operation_set_excluded(operation=op, excluded=excluded, user=user)
    except (ServiceError, ValueError) as exc:
        raise service_error(exc) from None
    return pass_out(get_pass(run.pk))


def resolve_conflict(*, run: Pass, index: int, keep: str, user: Any) -> s.PassOut:
    """Decide conflict ``index`` of a proposal (reviewers): keep ``a``, ``b`` or ``both``
    (``conflict_resolve``); 409 when the pass is not proposed or a source changed,
    422 when the operation is not a conflict."""
    op = Operation.objects.filter(run=run, index=index).first()
    if op is None:
        raise NotFound(f"Pass #{run.pk} has no operation {index}.", field="index")
    try:
        conflict_resolve(operation=op, keep=keep, user=user)
    except (ServiceError, ValueError) as exc:
        raise service_error(exc) from None
    return pass_out(get_pass(run.pk))
