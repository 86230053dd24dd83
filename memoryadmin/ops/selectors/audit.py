"""Selectors of the audit page: passes by status group, agent and dates, audit events, and who
rolled a pass back. Reads only (services write)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db.models import QuerySet

from memoryadmin.core.models import AuditEvent
from memoryadmin.core.selectors import operator_zone
from memoryadmin.proposals.models import Operation, Pass

AUDIT_PAGE_SIZE = 50
"""Passes per page on the audit page."""

AUDIT_FILTERS: dict[str, tuple[str, ...]] = {
    "all": (),
    "rejected_by_guard": (Pass.Status.REJECTED_BY_GUARD,),
    "rejected": (Pass.Status.REJECTED,),
    "failed": (Pass.Status.FAILED,),
    "stale": (Pass.Status.STALE,),
    "applied": (Pass.Status.APPLIED, Pass.Status.PARTIALLY_APPLIED),
    "rolled_back": (Pass.Status.ROLLED_BACK, Pass.Status.ROLLING_BACK),
    "proposed": (Pass.Status.PROPOSED,),
    "active": tuple(Pass.ACTIVE),
}
"""Audit page status filters: name → statuses (empty tuple = every pass)."""

AUDIT_FILTER_ALIASES: dict[str, str] = {"dismissed": "rejected"}
"""Old filter names that links and bookmarks still use (``?status=dismissed``, the word a rejected
pass had before)."""


# ----- audit -------------------------------------------------------------------------------


@dataclass
class AuditQuery:
    """Audit filters: status group (key of ``AUDIT_FILTERS``), agent slug, inclusive date range."""

    status: str = "all"
    agent: str = ""
    since: date | None = None
    until: date | None = None


def audit_passes(*, query: AuditQuery, tz: ZoneInfo | None = None) -> QuerySet[Pass]:
    """Passes matching ``query``, newest first, with agent and decider loaded.

    Dates are whole days in ``tz`` (default ``settings.TIME_ZONE``); ``until`` is inclusive.
    """
    tz = tz or operator_zone(None)
    qs = Pass.objects.select_related("agent", "decided_by", "requested_by").order_by(
        "-created_at", "-id"
    )
    if query.status not in AUDIT_FILTERS:
        return qs.none()
    statuses = AUDIT_FILTERS[query.status]
    if statuses:
        qs = qs.filter(status__in=statuses)
    if query.agent:
        qs = qs.filter(agent__slug=query.agent)
    if query.since:
        qs = qs.filter(created_at__gte=datetime.combine(query.since, time.min, tzinfo=tz))
    if query.until:
        qs = qs.filter(
            created_at__lt=datetime.combine(query.until + timedelta(days=1), time.min, tzinfo=tz)
        )
    return qs


def audit_operations(*, passes: QuerySet[Pass], run: int | None = None) -> QuerySet[Operation]:
    """The operations of ``passes`` (``audit_passes``' answer), or of the one pass ``run`` among
    them, in pass order (newest first) then plan order, with their pass, agent and source
    memories loaded (for the operations CSV)."""
    if run is not None:
        passes = passes.filter(pk=run)
    return (
        Operation.objects.filter(run__in=passes.values("pk"))
        .select_related("run__agent")
        .prefetch_related("sources")
        .order_by("-run__created_at", "-run_id", "index")
    )


EVENT_PAGE_SIZE = 50
"""Audit events per page on the audit page's "Events" tab."""


def audit_events(*, agent: str = "", verb: str = "") -> QuerySet[AuditEvent]:
    """Audit events (every transition, review action and memory change), newest first, with
    agent, user and pass loaded; ``agent`` is a slug and ``verb`` an exact verb ("" = any)."""
    qs = AuditEvent.objects.select_related("agent", "user", "run").order_by("-created_at", "-id")
    if agent:
        qs = qs.filter(agent__slug=agent)
    if verb:
        qs = qs.filter(verb=verb)
    return qs


def audit_verbs() -> list[str]:
    """Every verb recorded so far, sorted (the Events tab's verb filter)."""
    return sorted(AuditEvent.objects.values_list("verb", flat=True).distinct().order_by())


def rolled_back_by(passes: Iterable[Pass]) -> dict[int, AuditEvent]:
    """Pass id → the ``rollback_requested`` event (who asked, when, note) of the given passes."""
    ids = [p.pk for p in passes if p.status in (Pass.Status.ROLLED_BACK, Pass.Status.ROLLING_BACK)]
    out: dict[int, AuditEvent] = {}
    for e in (
        AuditEvent.objects.filter(run_id__in=ids, verb="rollback_requested")
        .select_related("user")
        .order_by("created_at")
    ):
        if e.run_id is not None:  # always: filtered by run
            out[e.run_id] = e
    return out
