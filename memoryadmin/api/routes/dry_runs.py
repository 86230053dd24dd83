"""``/api/v1/dry-runs/{id}``: a dry run queued by ``POST /passes {"dry_run": true}``, polled
(``?wait=<s>`` blocks, bounded, until it finishes)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.dry_runs import dry_run_fetch

router = Router(tags=["passes"])


class WaitQuery(Schema):
    wait: float = Field(
        0, ge=0, le=60, description="seconds to wait for it to finish (at most the server's max)"
    )


@router.get(
    "/dry-runs/{dry_run_id}",
    response=s.DryRunOut,
    url_name="dry_run_get",
    summary="A dry run: queued, running, done (with its figures) or failed (with why)",
)
def dry_run_detail(request: HttpRequest, dry_run_id: int, query: Query[WaitQuery]):
    """The dry run; with ``?wait=`` (seconds, at most ``MEMORYADMIN_DRY_RUN_MAX_WAIT``) it
    answers as soon as the dry run finishes, or when the wait is over."""
    return dry_run_fetch(dry_run_id=dry_run_id, wait=query.wait)
