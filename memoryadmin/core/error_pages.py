"""Error pages: a stale CSRF token."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

CSRF_MESSAGE = (
    "This page is out of date (you may have logged in again in another tab), so the action was "
    "not done."
)


@login_not_required
def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: 403 with a message and a reload link, never a silent failure.

    For an htmx request the message alone is sent with ``HX-Retarget: #messages`` and
    ``HX-Reswap: innerHTML`` (static/js/app.js lets htmx swap this 403 into the messages area),
    so the page keeps its place instead of being replaced. ``reason`` is Django's; not shown.
    """
    ctx = {
        "message": CSRF_MESSAGE,
        "reload_url": request.headers.get("HX-Current-URL") or request.get_full_path(),
    }
    if request.headers.get("HX-Request") == "true":
        response = render(request, "403_csrf.html#csrf-message", ctx, status=403)
        response["HX-Retarget"] = "#messages"
        response["HX-Reswap"] = "innerHTML"
        return response
    return render(request, "403_csrf.html", ctx, status=403)
