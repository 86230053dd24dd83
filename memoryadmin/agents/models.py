"""Agents (one Chroma collection each, its policy, schedule and field map), their recall probes
and the store-size samples of the dashboard chart."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from consolidation import FieldMap, Policy


class Agent(models.Model):
    """An AI agent whose memory lives in one Chroma collection.

    ``policy`` holds the engine's :class:`consolidation.Policy` fields (validated on save by the
    form/service); ``field_map`` the :class:`consolidation.FieldMap` keys for attached
    collections; ``checkpoint`` maps memory id → content hash of what the last applied pass saw
    (incremental planning).
    """

    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    collection_name = models.CharField(max_length=512, unique=True)
    attached = models.BooleanField(
        default=False, help_text="True when an existing collection was attached (read as is)."
    )
    field_map = models.JSONField(default=dict, blank=True)
    embedder = models.JSONField(
        default=dict,
        blank=True,
        help_text="The attached collection's own embedder, for writing new texts to a collection "
        "of another model's vectors: {base_url, model, api_key_env} of an OpenAI-compatible "
        "endpoint (the key stays in the environment variable named), and optionally "
        "own_vectors (true/false) to overrule detection by width.",
    )
    policy = models.JSONField(default=dict, blank=True)

    class AutoApply(models.TextChoices):
        """What a pass that passes its guards does on its own (docs/OPERATOR.md, "Auto-apply")."""

        OFF = "off"  # every proposal waits for a person
        SAFE = "safe"  # the safe part applies, the rest waits (consolidation.review.auto_apply)
        ALL = "all"  # everything applies, except operations a reviewer rejected before

    auto_apply = models.CharField(max_length=8, choices=AutoApply.choices, default=AutoApply.OFF)
    schedule_cron = models.CharField(max_length=120, default="0 3 * * *")
    schedule_enabled = models.BooleanField(default=True)
    checkpoint = models.JSONField(default=dict, blank=True)
    archive_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Days archived copies are kept; 0 keeps them forever, empty uses the "
        "deployment's ARCHIVE_RETENTION_DAYS. Older copies are purged daily by the worker and "
        "passes applied before then can no longer be undone.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            ("manage_agents", "Create and edit agents, policies and schedules"),
            ("edit_memories", "Pin, edit and delete single memories"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("agent_detail", args=[self.slug])

    def get_policy(self) -> Policy:
        """The agent's validated :class:`Policy` (defaults for missing fields)."""
        return Policy.from_dict(self.policy)

    def get_field_map(self) -> FieldMap:
        """The agent's :class:`FieldMap` (defaults for missing keys)."""
        return FieldMap.from_dict(self.field_map)

    @property
    def archive_retention_days(self) -> int:
        """Days archived copies are kept (0: forever): ``archive_days``, or the setting
        ``ARCHIVE_RETENTION_DAYS`` when it is empty."""
        if self.archive_days is not None:
            return int(self.archive_days)
        return int(getattr(settings, "ARCHIVE_RETENTION_DAYS", 0) or 0)

    def archive_cutoff(self, now: datetime | None = None) -> datetime | None:
        """Archived copies older than this are purged (``None``: kept forever)."""
        days = self.archive_retention_days
        return (now or timezone.now()) - timedelta(days=days) if days > 0 else None

    def get_embedder_config(self) -> dict[str, Any]:
        """The ``embedder`` setting as a dict (empty when none)."""
        return dict(self.embedder) if isinstance(self.embedder, dict) else {}

    @property
    def schedule_name(self) -> str:
        """Name of the django-q2 ``Schedule`` row for this agent (unique, stable)."""
        return f"consolidate:{self.slug}"


class ProbeQuery(models.Model):
    """A recall probe: a question, its expected answer and the evidence that holds it."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="probes")
    question = models.TextField()
    answer = models.TextField()
    evidence_ids = models.JSONField(default=list, blank=True)
    category = models.IntegerField(null=True, blank=True)
    external_key = models.CharField(max_length=200, blank=True, help_text="idempotent import key")

    class Meta:
        ordering = ["agent", "id"]
        verbose_name_plural = "probe queries"
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "external_key"],
                name="probe_key_unique",
                condition=~Q(external_key=""),
            )
        ]

    def __str__(self) -> str:
        return self.question[:80]

    @property
    def number(self) -> int:
        """1-based position among its agent's probes (what the console shows as "#n": per
        agent, not the database id shared by every agent)."""
        return ProbeQuery.objects.filter(agent_id=self.agent_id, id__lte=self.pk).count()


class StoreSample(models.Model):
    """Store size of an agent at a moment (dashboard chart: store size over time)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="samples")
    count = models.IntegerField()
    taken_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent", "taken_at"]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.count} at {self.taken_at:%Y-%m-%d %H:%M}"
