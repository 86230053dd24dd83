"""``/api/v1/audit/events``: the audit events, newest first (reads)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import get_agent
from memoryadmin.api.paging import paginate
from memoryadmin.api.present.audit import event_out
from memoryadmin.core.validation import DB_INT_MAX
from memoryadmin.ops.selectors.audit import audit_events

router = Router(tags=["agents"])


EVENTS_PER_PAGE = 50


class EventFilters(Schema):
    agent: str = ""
    verb: str = Field("", max_length=40)
    pass_id: int | None = Field(None, ge=1, le=DB_INT_MAX)
    page: int = Field(1, ge=1, le=DB_INT_MAX)


@router.get(
    "/audit/events",
    response=s.EventPage,
    tags=["audit"],
    summary="Audit events, newest first; filter by agent, verb, pass",
)
def audit_event_list(request: HttpRequest, filters: Query[EventFilters]):
    """Audit events (every transition, review action, memory change, token change), newest
    first, 50 a page."""
    if filters.agent:
        get_agent(filters.agent)
    qs = audit_events(agent=filters.agent, verb=filters.verb)
    if filters.pass_id is not None:
        qs = qs.filter(run_id=filters.pass_id)
    page, count, pages = paginate(qs, filters.page, EVENTS_PER_PAGE)
    return s.EventPage(
        count=count, page=page.number, pages=pages, items=[event_out(e) for e in page]
    )
