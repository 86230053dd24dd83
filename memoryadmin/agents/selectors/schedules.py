"""Reads of the schedules: an agent's next run times and the slot a scheduled run belongs to,
with the cron evaluated exactly as django-q2's scheduler does (in ``settings.TIME_ZONE``)."""

from __future__ import annotations

from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from memoryadmin.core.validation import validate_cron

__all__ = ["next_runs", "schedule_preview", "schedule_slot"]


def next_runs(
    *, cron: str, tz: ZoneInfo, count: int = 5, now: datetime | None = None
) -> list[datetime]:
    """The next ``count`` run times of a 5-field cron, aware datetimes in ``tz``.

    Raises ``ValueError`` for an invalid cron expression (from :func:`schedule_preview`).
    """
    return schedule_preview(cron=cron, tz=tz, count=count, now=now)


def _cron_zone() -> ZoneInfo:
    """The zone django-q2 evaluates cron in (``localtime()``, i.e. ``settings.TIME_ZONE``)."""
    return ZoneInfo(settings.TIME_ZONE)


def schedule_preview(
    *, cron: str, tz: str | tzinfo, count: int = 5, now: datetime | None = None
) -> list[datetime]:
    """The next ``count`` run times of ``cron``, as aware datetimes in the operator's ``tz``.

    The cron expression is evaluated in ``settings.TIME_ZONE``, exactly as django-q2's scheduler
    does, and the instants are shown in ``tz`` (an IANA name or ``tzinfo``). Raises
    ``ValueError`` for a bad cron or an unknown time zone.
    """
    from croniter import CroniterBadDateError, croniter

    cron = validate_cron(cron)
    if isinstance(tz, str):
        try:
            tz = ZoneInfo(tz)
        except Exception as exc:
            raise ValueError(f"Unknown time zone {tz!r}.") from exc
    zone = _cron_zone()
    start = (now or timezone.now()).astimezone(zone)
    it = croniter(cron, start)
    out: list[datetime] = []
    seen: set[datetime] = {start.replace(tzinfo=None)}
    while len(out) < max(0, int(count)):
        try:
            when = it.get_next(datetime)
        except CroniterBadDateError:  # "0 3 30 2 *": a day no month has
            if out:
                break
            raise ValueError(f"The schedule {cron!r} never runs (no such date).") from None
        wall = when.astimezone(zone).replace(tzinfo=None)
        if wall <= max(seen):
            # The autumn clock change repeats a local hour: croniter yields 02:30 CEST and 02:30
            # CET, but a schedule runs once per local slot (pass_request_scheduled skips the
            # repeat), so the preview lists what will really run.
            continue
        seen.add(wall)
        out.append(when.astimezone(tz))
    return out


def schedule_slot(*, cron: str, now: datetime) -> str:
    """The local calendar slot a scheduled run at ``now`` belongs to: the cron's latest
    wall-clock time at or before ``now`` in ``settings.TIME_ZONE``, as ``"YYYY-MM-DDTHH:MM"``.

    Both runs of a ``30 2 * * *`` cron in the night the clocks go back (02:30 CEST, 02:30 CET)
    get the same slot ``"2025-10-26T02:30"``. Raises ``ValueError`` for a bad cron.
    """
    from croniter import croniter

    wall = now.astimezone(_cron_zone()).replace(tzinfo=None, microsecond=0)
    if croniter.match(cron, wall.replace(second=0)):
        return wall.replace(second=0).isoformat(timespec="minutes")
    return croniter(cron, wall).get_prev(datetime).isoformat(timespec="minutes")
