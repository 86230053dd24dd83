"""Project middleware: every answer under ``/api/`` is JSON, and an integer past the database's
range is a 400, never a 500.

:class:`ApiJsonErrors` sits outside Django's session and URL layers, so it sees what Django
answers before a route of the JSON API runs (a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, a path
no route matches, a disallowed ``Host``) and turns each into the API's error shape
``{"detail": "…", "errors": []}`` with the same status. Pages keep Django's HTML error pages.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http import HTTPStatus

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.defaults import bad_request

__all__ = ["API_PREFIX", "ApiJsonErrors"]

log = logging.getLogger(__name__)

API_PREFIX = "/api/"
"""Paths whose error answers are JSON (the API mounts at ``/api/v1/``)."""


def _json(status: int, detail: str, source: HttpResponse | None = None) -> HttpResponse:
    response = HttpResponse(
        json.dumps({"detail": detail, "errors": []}),
        status=status,
        content_type="application/json; charset=utf-8",
    )
    for header in ("Allow", "WWW-Authenticate", "Retry-After"):
        if source is not None and header in source:
            response[header] = source[header]
    return response


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class ApiJsonErrors:
    """Error answers under :data:`API_PREFIX` as JSON; ``OverflowError`` anywhere as a 400.

    - a request body over ``settings.DATA_UPLOAD_MAX_MEMORY_SIZE`` → 413 JSON naming the limit;
    - an integer the database cannot hold (``OverflowError`` from the driver) → 400 (JSON under
      the API, Django's 400 page elsewhere), logged as a warning;
    - any other 4xx/5xx under the API that is not JSON (Django's 404 for an unmatched path, its
      400 for a bad ``Host``, its 500 page) → the same status as JSON, ``Allow`` and
      ``WWW-Authenticate`` kept.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith(API_PREFIX) or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        return _json(response.status_code, f"{_phrase(response.status_code)}.", response)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        api = request.path.startswith(API_PREFIX)
        if isinstance(exc, RequestDataTooBig) and api:
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return _json(
                413, f"The request body is larger than the limit of {limit:,} bytes; not read."
            )
        if isinstance(exc, OverflowError):
            log.warning("Integer out of the database's range in %s: %s", request.path, exc)
            detail = "A number in the request is out of range."
            return _json(400, detail) if api else bad_request(request, exc)
        return None
