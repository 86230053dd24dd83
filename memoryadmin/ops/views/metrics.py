"""``GET /metrics``: the console's figures in the Prometheus text format
(:class:`~memoryadmin.ops.selectors.metrics.ConsoleCollector`)."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from memoryadmin.api.tokens import token_user
from memoryadmin.core.roles import has_role
from memoryadmin.ops.selectors.metrics import ConsoleCollector
from memoryadmin.ops.services.accounts import client_ip


def _within(ip: str, allowed: str) -> bool:
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(allowed, strict=False)
    except ValueError:
        return False


def metrics_allowed(request: HttpRequest) -> bool:
    """True for a client address in ``MEMORYADMIN_METRICS_ALLOW`` (addresses or networks such
    as ``10.0.0.0/8``; the address Django
    sees, or the forwarded one behind ``TRUSTED_PROXIES``) or a request with
    ``Authorization: Bearer <API token>`` of an active user with a role (viewer at least,
    :func:`~memoryadmin.core.roles.has_role`)."""
    ip = client_ip(request)
    if ip and any(_within(ip, allowed) for allowed in settings.MEMORYADMIN_METRICS_ALLOW):
        return True
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and has_role(token_user(raw.strip()))


@login_not_required
@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The metrics, read from the database at this request (a fresh registry each time: no
    counter lives in the process); 403 for a client neither allowed nor holding a token of a
    user with a role."""
    if not metrics_allowed(request):
        return HttpResponse(
            "Forbidden: /metrics answers MEMORYADMIN_METRICS_ALLOW or an API bearer token of a "
            "user with a role (viewer at least).\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConsoleCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
