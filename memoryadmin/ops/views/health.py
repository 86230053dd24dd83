"""``GET /healthz``: one ok/failing per dependency, for a load balancer or an orchestrator."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from memoryadmin.ops.selectors.health import health_checks


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """``{"status": "ok" | "failing", "checks": {name: "ok" | "failing"}}`` with HTTP 200 when
    every check is ok, else 503 (checks: :mod:`memoryadmin.ops.selectors.health`). No
    login, and nothing else in the body: why a check fails is in the log."""
    checks = health_checks()
    ok = all(checks.values())
    return JsonResponse(
        {
            "status": "ok" if ok else "failing",
            "checks": {name: "ok" if passed else "failing" for name, passed in checks.items()},
        },
        status=200 if ok else 503,
    )
