"""API tokens: a user's bearer credentials for the JSON API and the MCP server over HTTP.

Only the SHA-256 of a token is stored; the token itself is shown once, when it is created.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """One bearer token of one user; it acts with its user's role until revoked."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, help_text="what the token is for")
    prefix = models.CharField(max_length=16, help_text="first characters, to recognise a token")
    token_hash = models.CharField(max_length=64, unique=True, help_text="SHA-256 hex of the token")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'}) of {self.user}"

    @property
    def is_active(self) -> bool:
        """True until the token is revoked."""
        return self.revoked_at is None
