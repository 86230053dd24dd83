"""Helpers shared by the console views (request typing, operator time zone, role decorators)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

from ..selectors import operator_zone


class HtmxHttpRequest(HttpRequest):
    """``HttpRequest`` with django-htmx's ``request.htmx`` (for type checkers)."""

    htmx: HtmxDetails


# Every write is gated by one permission; a user without it gets 403 (never a login redirect:
# LoginRequiredMiddleware has already sent anonymous users to the login page).
can_review = permission_required("console.review_pass", raise_exception=True)
can_manage = permission_required("console.manage_agents", raise_exception=True)
can_edit_memories = permission_required("console.edit_memories", raise_exception=True)

TZ_COOKIE = "tz"
"""Cookie where static/js/app.js stores the browser's IANA time zone."""


def request_zone(request: HttpRequest) -> ZoneInfo:
    """The operator's time zone: ``?tz=``, else the ``tz`` cookie, else ``settings.TIME_ZONE``."""
    return operator_zone(request.GET.get("tz") or request.COOKIES.get(TZ_COOKIE))
