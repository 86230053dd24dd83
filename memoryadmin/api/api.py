"""The JSON API at ``/api/v1/`` (django-ninja; OpenAPI and Swagger UI at ``/api/v1/docs``, for
a signed-in user or a token: :func:`signed_in_or_token`).

Auth is ``Authorization: Bearer <token>`` (``manage.py create_api_token``); the token's user is
``request.user`` for the request, so every write is audited with that user as the actor. Every
error is JSON ``{"detail": "<sentence>", "errors": [{"field", "message"}]}``: 401 without a
valid token, 403 for a role that may not, 404 unknown agent/pass, 409 a state that forbids the
action (another pass active, not proposed, guard refused), 422 invalid input (naming the field),
429 a limit (dry runs; with ``Retry-After``), 503 store unavailable.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer

from memoryadmin.api.actions.common import ActionError, TooManyRequests
from memoryadmin.api.routes import (
    agents,
    audit,
    decisions,
    dry_runs,
    forget,
    memories,
    passes,
    review,
    rollback,
)
from memoryadmin.api.tokens import token_user


class BearerToken(HttpBearer):
    """An active API token → its user (also set as ``request.user``); anything else → 401."""

    def authenticate(self, request: HttpRequest, token: str) -> Any | None:
        user = token_user(token.strip())
        if user is not None:
            request.user = user
        return user


def signed_in_or_token(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The reference (``/api/v1/docs``) and its schema (``/api/v1/openapi.json``) for a
    signed-in user (the browser's session) or a request with an active API token, as every
    other page and endpoint: anonymous, the schema answers 401 JSON like the API and the
    docs page redirects to the login page (302)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            user = token_user(token.strip()) if scheme.lower() == "bearer" else None
            if user is None:
                if request.path.endswith(".json"):
                    return _unauthorized(request, AuthenticationError())
                return redirect_to_login(request.get_full_path())
            request.user = user
        return view(request, *args, **kwargs)

    return wrapped


api = NinjaAPI(
    title="memoryadmin API",
    version="1",
    urls_namespace="api-v1",
    auth=BearerToken(),
    docs_decorator=signed_in_or_token,
    description="Agents, memories, consolidation passes (proposals) and the audit trail. "
    "A token acts with its user's role: viewer (read, dry run), reviewer (+ review, roll back), "
    "admin (+ start passes).",
)


def _error(
    request: HttpRequest, status: int, detail: str, errors: list[dict[str, str]] | None = None
) -> HttpResponse:
    return api.create_response(request, {"detail": detail, "errors": errors or []}, status=status)


@api.exception_handler(ActionError)
def _action_error(request: HttpRequest, exc: ActionError) -> HttpResponse:
    errors = [{"field": exc.field, "message": exc.message}] if exc.field else []
    response = _error(request, exc.status, exc.message, errors)
    if isinstance(exc, TooManyRequests):
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(AuthenticationError)
def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = _error(
        request,
        401,
        (
            "Authentication required: send 'Authorization: Bearer <token>' with an active API "
            "token "
            "(manage.py create_api_token USERNAME). This token is missing, unknown or revoked."
        ),
    )
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return _error(request, exc.status_code, exc.message)


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = []
    for err in exc.errors:
        loc = [
            str(p)
            for p in err.get("loc", ())
            if p not in ("body", "query", "path", "payload", "filters")
        ]
        field = ".".join(loc) or "body"
        errors.append({"field": field, "message": str(err.get("msg", "invalid"))})
    detail = "Invalid input: " + "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return _error(request, 422, detail, errors)


for routes in (agents, memories, audit, passes, dry_runs, review, rollback, decisions, forget):
    api.add_router("/", routes.router)


def urls() -> tuple[list[Any], str, str]:
    """``api.urls`` for ``include()``-style mounting, every view exempt from the console's login
    redirect (the API answers 401 JSON itself; ``LoginRequiredMiddleware`` would send HTML)."""
    patterns, app_name, namespace = api.urls
    for p in patterns:
        login_not_required(p.callback)
    return patterns, app_name, namespace
