"""API token services (create, revoke) and the one lookup that turns a bearer token into a user.

A token is ``ma_`` + 43 URL-safe characters (32 random bytes); only its SHA-256 is stored, so a
database leak does not leak usable tokens. Creating and revoking a token are audited like every
other write (verbs ``api_token_created`` / ``api_token_revoked``).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from memoryadmin.api.models import ApiToken
from memoryadmin.core.models import AuditEvent

__all__ = ["TOKEN_PREFIX", "hash_token", "token_create", "token_revoke", "token_user", "tokens_of"]

TOKEN_PREFIX = "ma_"
"""Start of every token, so a leaked one is easy to recognise (and to grep for) in logs."""
LAST_USED_RESOLUTION = timedelta(minutes=1)
"""``last_used_at`` is written at most once a minute per token (a busy client is one UPDATE a
minute, not one per request)."""


def hash_token(raw: str) -> str:
    """SHA-256 hex (64 characters) of a raw token."""
    return hashlib.sha256(raw.encode()).hexdigest()


def _actor(user: Any) -> str:
    return user.get_username() if user is not None and user.is_authenticated else "cli"


@transaction.atomic
def token_create(*, user: Any, name: str = "", by: Any = None) -> tuple[ApiToken, str]:
    """Create a token for ``user``; returns the row and the raw token (shown once, never stored).

    ``by`` is who asked (default: ``user``; ``None`` from the CLI is audited as ``"cli"``).
    Raises ``ValueError`` for an inactive user or a name over 100 characters.
    """
    name = (name or "").strip()
    if len(name) > 100:
        raise ValueError("The token name is longer than 100 characters.")
    if not user.is_active:
        raise ValueError(f"User {user.get_username()!r} is inactive; no token was created.")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=raw[:10], token_hash=hash_token(raw)
    )
    AuditEvent.objects.create(
        actor=_actor(by),
        user=by if by is not None else None,
        verb="api_token_created",
        note=f"API token {token.prefix}… ({name or 'unnamed'}) for {user.get_username()}",
        data={"token_id": token.pk, "owner": user.get_username()},
    )
    return token, raw


@transaction.atomic
def token_revoke(*, token: ApiToken, by: Any = None) -> ApiToken:
    """Revoke ``token`` (idempotent: an already revoked token is returned unchanged)."""
    token = ApiToken.objects.select_for_update().select_related("user").get(pk=token.pk)
    if token.revoked_at is not None:
        return token
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    AuditEvent.objects.create(
        actor=_actor(by),
        user=by if by is not None else None,
        verb="api_token_revoked",
        note=(
            f"API token {token.prefix}… ({token.name or 'unnamed'}) of {token.user.get_username()}"
        ),
        data={"token_id": token.pk, "owner": token.user.get_username()},
    )
    return token


def token_user(raw: str) -> Any | None:
    """The active user a raw token belongs to, or ``None`` (unknown, revoked, inactive user)."""
    if not raw or not raw.startswith(TOKEN_PREFIX):
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=hash_token(raw), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return get_user_model().objects.get(pk=token.user_id)  # fresh: no cached permissions


def tokens_of(user: Any) -> list[ApiToken]:
    """Every token of ``user`` (active and revoked), newest first."""
    return list(ApiToken.objects.filter(user=user).order_by("-created_at", "-id"))
