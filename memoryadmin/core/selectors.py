"""Reads every domain's pages share: the operator's time zone (a ``?tz=``, the browser's
``tz`` cookie, else ``settings.TIME_ZONE``)."""

from __future__ import annotations

from urllib.parse import unquote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.http import HttpRequest

__all__ = ["MAX_ZONE_NAME", "TZ_COOKIE", "operator_zone", "request_zone"]

MAX_ZONE_NAME = 64
"""Longest zone name tried; the longest IANA key is 32 characters
("America/Argentina/ComodRivadavia")."""


def operator_zone(name: str | None) -> ZoneInfo:
    """The operator's time zone: ``name`` when it is a valid IANA zone, else ``settings.TIME_ZONE``.

    Anything else falls back, never raises: an unknown key, a path outside the zone database, a
    NUL byte, or a name longer than :data:`MAX_ZONE_NAME` (the OS refuses such file names).
    """
    if name and len(name) <= MAX_ZONE_NAME:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    return ZoneInfo(settings.TIME_ZONE)


TZ_COOKIE = "tz"
"""Cookie where static/js/app.js stores the browser's IANA time zone, URL-encoded
(``America%2FNew_York``: ``encodeURIComponent``, as cookie values must not hold every byte)."""


def request_zone(request: HttpRequest) -> ZoneInfo:
    """The operator's time zone: ``?tz=``, else the ``tz`` cookie (URL-decoded: app.js writes
    ``America%2FNew_York``, and Django hands cookie values over as sent), else
    ``settings.TIME_ZONE``."""
    cookie = request.COOKIES.get(TZ_COOKIE)
    return operator_zone(request.GET.get("tz") or (unquote(cookie) if cookie else None))
