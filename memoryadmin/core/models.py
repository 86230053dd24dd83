"""The audit trail every domain writes to (:class:`AuditEvent`), and the one conversion of an
embedding to the bytes a ``BinaryField`` stores."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditEvent(models.Model):
    """One audited event: a pass transition, a review action or an operator's memory change."""

    agent = models.ForeignKey(
        "console.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    # SET_NULL: the audit trail outlives a deleted agent and its passes.
    run = models.ForeignKey(
        "console.Pass", null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor = models.CharField(max_length=150, help_text='username, "schedule", "policy" or "cli"')
    verb = models.CharField(max_length=40)
    from_status = models.CharField(max_length=24, blank=True)
    to_status = models.CharField(max_length=24, blank=True)
    note = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.actor} {self.verb} at {self.created_at:%Y-%m-%d %H:%M}"


def embedding_to_bytes(embedding: Any) -> bytes | None:
    """``(384,) float32`` array (or list) → raw bytes for a ``BinaryField``; ``None`` passes
    through."""
    if embedding is None:
        return None
    return np.asarray(embedding, dtype=np.float32).reshape(-1).tobytes()
