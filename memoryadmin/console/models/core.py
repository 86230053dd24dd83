"""Console models, the core: agents, passes (proposals), operations with their originals,
archive, audit, probes, store samples.

Domain behaviour lives in small model methods; writes go through ``services``; reads through
``selectors``. State names follow docs/ARCHITECTURE.md "The pass lifecycle".
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property

from consolidation import FieldMap, Policy
from consolidation.review import OperationLoss


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
        """What a pass that passes its guards does on its own (README "Auto-apply")."""

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


class Pass(models.Model):
    """One consolidation pass of one agent, and the proposal it produced."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        PROPOSED = "proposed"
        REJECTED_BY_GUARD = "rejected_by_guard"
        FAILED = "failed"
        APPROVED = "approved"
        APPLYING = "applying"
        APPLIED = "applied"
        PARTIALLY_APPLIED = "partially_applied"
        # "Reject" leads to "rejected" (one word for the button, the status and the audit verb; was
        # "dismissed", migration 0007).
        REJECTED = "rejected"
        STALE = "stale"
        ROLLING_BACK = "rolling_back"
        ROLLED_BACK = "rolled_back"
        # A pass that wrote nothing (no operations, or every one in conflict): nothing to undo.
        NO_CHANGES = "no_changes"

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule"
        OPERATOR = "operator"
        POLICY = "policy"
        CLI = "cli"

    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.APPROVED, Status.APPLYING, Status.ROLLING_BACK)
    TERMINAL = (
        Status.REJECTED_BY_GUARD,
        Status.FAILED,
        Status.APPLIED,
        Status.PARTIALLY_APPLIED,
        Status.REJECTED,
        Status.STALE,
        Status.ROLLED_BACK,
        Status.NO_CHANGES,
    )

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="passes")
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=12, choices=Trigger.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_actor = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)
    reason = models.TextField(blank=True)
    error = models.TextField(blank=True)

    policy = models.JSONField(default=dict)
    max_loss_fraction = models.FloatField(default=0.25)
    entries_before = models.IntegerField(default=0)
    entries_after = models.IntegerField(default=0)
    merged = models.IntegerField(default=0)
    promoted = models.IntegerField(default=0)
    pruned = models.IntegerField(default=0)
    reconciled = models.IntegerField(default=0)
    loss_fraction = models.FloatField(default=0.0)
    guard_passed = models.BooleanField(null=True)
    guard_reason = models.TextField(blank=True)
    figures = models.JSONField(
        default=dict,
        blank=True,
        help_text="Evaluation.figures() and the loss totals (\"loss\") of the operations the "
        "pass includes now, kept by every service that changes them (the pages read them; "
        "approve and apply evaluate afresh)",
    )
    recall = models.JSONField(default=dict, blank=True)
    telemetry = models.JSONField(default=dict, blank=True)

    snapshot_hash = models.CharField(max_length=64, blank=True)

    lease_owner = models.CharField(
        max_length=200, blank=True, help_text='"host:pid" of the process applying or rolling back'
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    progress = models.FloatField(default=0.0, help_text="0..1 while running or applying")
    progress_label = models.CharField(max_length=200, blank=True)

    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    planned_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "passes"
        permissions = [("review_pass", "Approve, reject, exclude and edit proposals")]
        constraints = [
            # I-5: one pass at a time per agent, enforced by the database.
            models.UniqueConstraint(
                fields=["agent"],
                condition=Q(
                    status__in=["queued", "running", "approved", "applying", "rolling_back"]
                ),
                name="one_active_pass_per_agent",
            )
        ]
        indexes = [models.Index(fields=["agent", "status"]), models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"pass #{self.pk} of {self.agent} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("pass_detail", args=[self.pk])

    @property
    def shown_loss_fraction(self) -> float:
        """The loss fraction (in [0, 1]) the pass page shows: over the operations the pass
        counts now (``figures``: a partly applied pass, what it applied), else as planned."""
        value = (
            (self.figures or {}).get("loss_fraction") if isinstance(self.figures, dict) else None
        )
        return float(value) if isinstance(value, int | float) else float(self.loss_fraction)

    TRIGGER_ACTORS = frozenset({"schedule", "policy", "cli", "operator", "system"})
    """Actors that name a trigger, not who asked (the header words the trigger instead)."""

    @cached_property
    def requester(self) -> str | None:
        """Who asked for this pass, the one answer the page header, the History's first row and
        the API's ``requested_by`` give: the requesting user's username, else the actor of the
        pass's ``requested`` audit event (e.g. "demo" for the demo's passes) unless that actor
        only names the trigger (:data:`TRIGGER_ACTORS`); ``None`` when nobody in particular
        asked. One query when no user is linked."""
        if self.requested_by_id:
            return self.requested_by.get_username()
        actor = (
            AuditEvent.objects.filter(run_id=self.pk, verb="requested")
            .order_by("id")
            .values_list("actor", flat=True)
            .first()
        )
        return actor if actor and actor not in self.TRIGGER_ACTORS else None

    @property
    def is_active(self) -> bool:
        """True while queued, running, approved (waiting to apply), applying or rolling back."""
        return self.status in self.ACTIVE

    ROLLBACKABLE = (Status.APPLIED, Status.PARTIALLY_APPLIED)
    """Statuses a pass can be rolled back from (see :attr:`can_roll_back`)."""

    @property
    def outcome_reason(self) -> str:
        """Why the pass stands where it does, for the audit list's Reason column: its
        ``reason`` or ``error``; for a pass a reviewer rejected or a newer pass superseded,
        nothing more (the note says why: a guard's "passed" would read as the reason it was
        rejected); otherwise the guard's verdict."""
        if self.reason or self.error:
            return self.reason or self.error
        if self.status in (self.Status.REJECTED, self.Status.STALE):
            return ""
        return self.guard_reason

    @property
    def can_roll_back(self) -> bool:
        """True when the pass is applied or partially applied and its archived copies are still
        kept (:attr:`undo_expired` is empty): a rollback may be requested (it can still be
        refused when records the pass wrote were changed since)."""
        return self.status in self.ROLLBACKABLE and not self.undo_expired

    @property
    def undo_expired(self) -> str:
        """Why this applied pass can no longer be undone, or ``""``: it finished before the
        agent's archive retention (:meth:`Agent.archive_cutoff`), so its archived copies are
        (or are about to be) purged; or a forget request purged memories it held
        (``telemetry["forgotten_by"]``: "purged by forget request #N")."""
        if self.status not in self.ROLLBACKABLE:
            return ""
        forgotten = (self.telemetry or {}).get("forgotten_by") or []
        if forgotten:
            return (
                "Undo impossible: memories this pass held were purged by forget request "
                + ", ".join(f"#{n}" for n in forgotten)
                + "."
            )
        if self.finished_at is None:
            return ""
        cutoff = self.agent.archive_cutoff()
        if cutoff is None or self.finished_at >= cutoff:
            return ""
        days = self.agent.archive_retention_days
        return (
            f"Undo expired: {self.agent.name} keeps archived copies for {days} "
            f"day{'s' if days != 1 else ''}, and this pass was applied on "
            f"{self.finished_at:%Y-%m-%d}."
        )

    @property
    def is_reviewable(self) -> bool:
        """True when an operator can still approve, reject, exclude or edit."""
        return self.status == self.Status.PROPOSED


class Operation(models.Model):
    """One operation of a pass (merge/promote/prune/reconcile/distill/conflict) and its apply
    state. A ``conflict`` removes nothing and is never applied: it waits for a reviewer."""

    class Kind(models.TextChoices):
        MERGE = "merge"
        PROMOTE = "promote"
        PRUNE = "prune"
        RECONCILE = "reconcile"
        DISTILL = "distill"
        CONFLICT = "conflict"
        SUMMARIZE = "summarize"  # one summary memory over a cluster; removes nothing

    class Status(models.TextChoices):
        PENDING = "pending"
        EXCLUDED = "excluded"
        ARCHIVED = "archived"  # I-3 step 1 done
        WRITTEN = "written"  # step 2 done
        VERIFIED = "verified"  # step 3 done
        APPLIED = "applied"  # sources deleted, done
        CONFLICT = "conflict"
        FAILED = "failed"
        ROLLED_BACK = "rolled_back"

    run = models.ForeignKey(Pass, on_delete=models.CASCADE, related_name="operations")
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=12, choices=Kind.choices)
    rule = models.CharField(max_length=60, blank=True)
    reason = models.TextField(blank=True)
    scores = models.JSONField(default=dict, blank=True)
    source_ids = models.JSONField(default=list)
    removes = models.JSONField(default=list)
    result_id = models.CharField(max_length=512, blank=True)
    result_document = models.TextField(blank=True)
    planned_document = models.TextField(blank=True, help_text="the engine's text, before edits")
    result_metadata = models.JSONField(null=True, blank=True)
    excluded = models.BooleanField(default=False)
    edited = models.BooleanField(default=False)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    status_detail = models.TextField(blank=True)
    # Review aids (consolidation.review), computed when the proposal is stored.
    risk = models.FloatField(default=0.0, help_text="0..1, higher = review first")
    risk_reasons = models.JSONField(default=list, blank=True)
    lost = models.JSONField(default=dict, blank=True, help_text="OperationLoss.to_dict()")
    lost_sentences = models.PositiveIntegerField(default=0)
    signature = models.CharField(
        max_length=64,
        blank=True,
        help_text="consolidation.decisions.operation_signature as planned (before edits): the "
        "same operation in a later pass has the same one",
    )

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="op_index_unique")]
        indexes = [
            models.Index(fields=["run", "kind"]),
            models.Index(fields=["run", "-risk"], name="op_run_risk"),
            # Covers the proposal page's aggregates (counts by kind and state, rules, the rest
            # below the risk line), so they read this index and not the wide rows.
            models.Index(
                fields=[
                    "run",
                    "kind",
                    "rule",
                    "status",
                    "excluded",
                    "edited",
                    "risk",
                    "lost_sentences",
                ],
                name="op_run_counts",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.index} of pass {self.run_id}"

    def lost_words(self) -> int:
        """How many lost content words are counted under this operation (its stored
        ``lost``: the pass's definition, each word counted under one operation of the pass;
        kept by :func:`~memoryadmin.console.services.evaluation.store_figures`)."""
        return len(OperationLoss.from_dict(self.lost).counted_words)


class OperationSource(models.Model):
    """An original memory an operation reads, frozen at planning time (review never needs the
    store)."""

    operation = models.ForeignKey(Operation, on_delete=models.CASCADE, related_name="sources")
    position = models.PositiveIntegerField()
    memory_id = models.CharField(max_length=512)
    document = models.TextField()
    metadata = models.JSONField(default=dict)
    content_hash = models.CharField(max_length=64)
    embedding = models.BinaryField(null=True, blank=True, help_text="(384,) float32 bytes")
    removed = models.BooleanField(default=False, help_text="leaves the store when applied")

    class Meta:
        ordering = ["operation", "position"]

    def __str__(self) -> str:
        return f"{self.memory_id} (source of operation {self.operation_id})"

    def get_embedding(self) -> np.ndarray | None:
        """The embedding as ``(384,) float32``, or ``None``."""
        return (
            None
            if self.embedding is None
            else np.frombuffer(bytes(self.embedding), dtype=np.float32)
        )


class ArchivedMemory(models.Model):
    """A memory removed from a store, kept whole so it can be restored (I-1)."""

    class Action(models.TextChoices):
        MERGE = "merge"
        PRUNE = "prune"
        RECONCILE = "reconcile"
        PROMOTE = "promote"  # prior version of a metadata change
        SUMMARIZE = "summarize"  # prior version of a pyramid summary its pass rewrote
        OPERATOR_EDIT = "operator_edit"
        OPERATOR_DELETE = "operator_delete"
        OPERATOR_PIN = "operator_pin"

    # SET_NULL, not CASCADE: deleting an agent (its collection is kept) must not delete the
    # archived originals (I-1); orphaned rows stay restorable by id from the admin or a shell.
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="archive"
    )
    memory_id = models.CharField(max_length=512)
    document = models.TextField()
    metadata = models.JSONField(default=dict)
    embedding = models.BinaryField(null=True, blank=True, help_text="(384,) float32 bytes")
    content_hash = models.CharField(max_length=64)
    action = models.CharField(max_length=20, choices=Action.choices)
    run = models.ForeignKey(
        Pass, null=True, blank=True, on_delete=models.SET_NULL, related_name="archived"
    )
    operation = models.ForeignKey(
        Operation, null=True, blank=True, on_delete=models.SET_NULL, related_name="archived"
    )
    actor = models.CharField(max_length=150, blank=True)
    archived_at = models.DateTimeField(default=timezone.now)
    restored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-archived_at", "-id"]
        verbose_name_plural = "archived memories"
        indexes = [models.Index(fields=["agent", "memory_id"])]
        constraints = [
            # Archiving the same original twice for one operation is a no-op (idempotent apply).
            models.UniqueConstraint(
                fields=["operation", "memory_id"],
                name="archive_once_per_operation",
                condition=Q(operation__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return f"{self.memory_id} archived by {self.action}"

    @property
    def action_label(self) -> str:
        """What archived it and who, as the archive page says it: ``Operator Delete · operator``."""
        return f"{self.get_action_display()} · {self.actor or '—'}"

    def get_embedding(self) -> np.ndarray | None:
        """The embedding as ``(384,) float32``, or ``None``."""
        return (
            None
            if self.embedding is None
            else np.frombuffer(bytes(self.embedding), dtype=np.float32)
        )


class AuditEvent(models.Model):
    """One audited event: a pass transition, a review action or an operator's memory change."""

    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    # SET_NULL: the audit trail outlives a deleted agent and its passes.
    run = models.ForeignKey(
        Pass, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
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


class PassSnapshot(models.Model):
    """What a pass's planner saw: memory id → content hash of every record in its snapshot,
    except the sources of operations the loss budget deferred (so the next pass plans them again).

    Kept apart from :class:`Pass` so listing passes never loads it. After apply it becomes the
    agent's checkpoint (minus what the pass removed, plus what it wrote), so memories written
    to the store between planning and apply are still new to the next incremental pass.
    """

    run = models.OneToOneField(Pass, on_delete=models.CASCADE, related_name="snapshot")
    hashes = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"snapshot of pass {self.run_id} ({len(self.hashes)} memories)"


def embedding_to_bytes(embedding: Any) -> bytes | None:
    """``(384,) float32`` array (or list) → raw bytes for a ``BinaryField``; ``None`` passes
    through."""
    if embedding is None:
        return None
    return np.asarray(embedding, dtype=np.float32).reshape(-1).tobytes()
