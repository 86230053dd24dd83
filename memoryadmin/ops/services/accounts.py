"""Account security: the client's address behind a proxy, lockouts, and password-reset throttling.

- :func:`client_ip` is django-axes' ``AXES_CLIENT_IP_CALLABLE``: the peer's address
  (``REMOTE_ADDR``), or — only when that peer is one of ``settings.TRUSTED_PROXIES`` — the
  right-most address of ``X-Forwarded-For`` that is not itself a trusted proxy (the one our own
  proxy saw; anything left of it the client may have written). Without trusted proxies the
  header is ignored, so no client can choose its address.
- :func:`lockout_clear` forgets django-axes' failed logins of a user (a password reset proves
  the mailbox, so it lifts a lockout).
- :func:`password_reset_throttled` records each "Forgot your password?" request as an audit
  event and says whether one more mail would exceed ``settings.PASSWORD_RESET_LIMITS`` (per
  address and per e-mail address, an hour): counted in the database, so every web process
  shares the count without a shared cache (django-ratelimit needs memcached or Redis).
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from datetime import timedelta
from typing import Any

from axes.utils import reset as axes_reset
from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from memoryadmin.core.models import AuditEvent
from memoryadmin.core.services import audit

__all__ = ["client_ip", "lockout_clear", "password_reset_throttled"]

log = logging.getLogger(__name__)

VERB_RESET_REQUESTED = "password_reset_requested"
VERB_RESET_THROTTLED = "password_reset_throttled"


def _networks(values: Any) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    nets = []
    for value in values or ():
        try:
            nets.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError:
            log.warning("TRUSTED_PROXIES: %r is not an address or network; ignored", value)
    return nets


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # "[::1]:443"
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # "203.0.113.7:5123"
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def client_ip(request: HttpRequest) -> str:
    """The client's address as a string (module docstring); ``""`` when there is none."""
    peer = _address(request.META.get("REMOTE_ADDR", "") or "")
    if peer is None:
        return ""
    trusted = _networks(getattr(settings, "TRUSTED_PROXIES", ()))
    if not trusted or not any(peer in net for net in trusted):
        return str(peer)
    chain = [a for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
    for raw in reversed(chain):
        addr = _address(raw)
        if addr is None:
            break  # a garbled entry: trust nothing left of it
        if not any(addr in net for net in trusted):
            return str(addr)
    return str(peer)


def lockout_clear(*, user: Any) -> int:
    """Forget django-axes' failed attempts of ``user``'s username (every address); returns how
    many records were removed."""
    return int(axes_reset(username=user.get_username()) or 0)


def _email_key(email: str) -> str:
    return hashlib.sha256(email.strip().lower().encode("utf-8")).hexdigest()[:24]


def password_reset_throttled(*, request: HttpRequest, email: str) -> bool:
    """Record one password-reset request; True when it must send no mail.

    Limits: ``settings.PASSWORD_RESET_LIMITS = {"per_address": n, "per_email": m}`` requests in
    the last hour (default 10 and 3). A throttled request is audited
    (``password_reset_throttled``) and answered like any other, so the page tells nobody which
    addresses exist. The e-mail address is stored only as a SHA-256 prefix.
    """
    limits = {"per_address": 10, "per_email": 3, **getattr(settings, "PASSWORD_RESET_LIMITS", {})}
    ip, key = client_ip(request), _email_key(email)
    since = timezone.now() - timedelta(hours=1)
    recent = AuditEvent.objects.filter(verb=VERB_RESET_REQUESTED, created_at__gte=since)
    over = recent.filter(data__ip=ip).count() >= int(limits["per_address"]) or recent.filter(
        data__email=key
    ).count() >= int(limits["per_email"])
    data = {"ip": ip, "email": key}
    if over:
        log.warning("Password reset throttled for %s", ip)
        audit(actor="anonymous", verb=VERB_RESET_THROTTLED, data=data)
        return True
    audit(actor="anonymous", verb=VERB_RESET_REQUESTED, data=data)
    return False
