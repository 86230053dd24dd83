"""Helpers shared by the console views: request typing and the role decorators."""

from __future__ import annotations

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """``HttpRequest`` with django-htmx's ``request.htmx`` (for type checkers)."""

    htmx: HtmxDetails


# Every write is gated by one permission; a user without it gets 403 (never a login redirect:
# LoginRequiredMiddleware has already sent anonymous users to the login page).
can_review = permission_required("console.review_pass", raise_exception=True)
can_manage = permission_required("console.manage_agents", raise_exception=True)
can_edit_memories = permission_required("console.edit_memories", raise_exception=True)
