"""Archived memories (kept whole so they can be restored, I-1), forget requests and their
tombstones (docs/ARCHITECTURE.md "Forget requests"), and JSONL/LoCoMo import jobs."""

from __future__ import annotations

import numpy as np
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone


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
        "console.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="archive"
    )
    memory_id = models.CharField(max_length=512)
    document = models.TextField()
    metadata = models.JSONField(default=dict)
    embedding = models.BinaryField(null=True, blank=True, help_text="(384,) float32 bytes")
    content_hash = models.CharField(max_length=64)
    action = models.CharField(max_length=20, choices=Action.choices)
    run = models.ForeignKey(
        "console.Pass", null=True, blank=True, on_delete=models.SET_NULL, related_name="archived"
    )
    operation = models.ForeignKey(
        "console.Operation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="archived",
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


class ForgetRequest(models.Model):
    """A request to forget memories of one agent for good: planned as a proposal that lists
    every memory it would remove (live and archived), approved by a reviewer, then applied.

    While ``proposed`` it holds the memory ids it would remove (``items``: ``{"live": [ids],
    "archived": [ArchivedMemory pks], "related": [ids], "planned": {id: {"scope": [...],
    "hash": content hash}}}``) and ``display``, the selection as the requester typed it (for
    the reviewer). Approval moves it to ``applying`` and the worker purges it under a lease,
    keeping its progress in ``journal`` (``targets``, ``skipped``, ``texts``, ``deleted``), so
    a purge cut short resumes (recovery). Once applied (or rejected) both are emptied:
    what remains is the tombstone — who asked, who approved, when, how many (``live_count``,
    ``archived_count``, ``purged``) and ``selection`` with its scope value, ids and query
    hashed (SHA-256), never the text. It cannot be rolled back.
    """

    NOT_UNDOABLE = (
        "A forget request cannot be rolled back: the memories, their archived copies and every "
        "text of them in proposals and the audit are deleted for good."
    )
    """Said before approval (page, API, MCP, command)."""

    class Status(models.TextChoices):
        PROPOSED = "proposed"
        APPLYING = "applying"  # approved; the worker purges it (a dead worker's: recovery)
        APPLIED = "applied"
        REJECTED = "rejected"
        FAILED = "failed"  # the store stopped answering: approve again to finish

    class Kind(models.TextChoices):
        SCOPE = "scope"  # a field-map scope key = value (user_id, agent_id, run_id …)
        IDS = "ids"  # memory ids
        CONTAINS = "contains"  # text contains (case-insensitive)
        SIMILAR = "similar"  # semantic search above a similarity, at most max_count

    # SET_NULL: the tombstone outlives the agent (agent_slug keeps its name).
    agent = models.ForeignKey(
        "console.Agent",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="forget_requests",
    )
    agent_slug = models.CharField(max_length=80)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PROPOSED)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    selection = models.JSONField(
        default=dict, help_text="the selection, hashed: kind, key, value_sha256, ids_sha256 …"
    )
    display = models.TextField(blank=True, help_text="the selection as typed; emptied on apply")
    items = models.JSONField(default=dict, blank=True, help_text="ids while proposed; emptied")
    live_count = models.PositiveIntegerField(default=0)
    archived_count = models.PositiveIntegerField(default=0)
    related_count = models.PositiveIntegerField(default=0)
    purged = models.JSONField(default=dict, blank=True, help_text="what apply purged, counted")
    journal = models.JSONField(
        default=dict,
        blank=True,
        help_text="the purge's progress: targets, skipped, texts, deleted; only skipped is kept",
    )
    # The worker purging it ("host:pid") and until when (memoryadmin/core/leases.py): recovery
    # resumes a request whose holder is gone.
    lease_owner = models.CharField(max_length=255, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, help_text="the requester's reason")
    note = models.TextField(blank=True, help_text="the reviewer's note")
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_actor = models.CharField(max_length=150)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_actor = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["agent", "status"])]

    def __str__(self) -> str:
        return f"forget request #{self.pk} of {self.agent_slug} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("forget_detail", args=[self.pk])

    @property
    def is_reviewable(self) -> bool:
        """True while a reviewer may approve or reject it (``failed`` may be approved again)."""
        return self.status in (self.Status.PROPOSED, self.Status.FAILED)

    @property
    def total(self) -> int:
        """Memories it removes: live plus archived copies."""
        return self.live_count + self.archived_count

    @property
    def selection_summary(self) -> str:
        """The stored (hashed) selection in words, e.g. ``user_id = a value, SHA-256 3f2a9c…``:
        what the tombstone keeps, never the value itself."""
        sel = self.selection or {}

        def short(key: str) -> str:
            return f"SHA-256 {str(sel.get(key, ''))[:12]}…"

        if sel.get("kind") == self.Kind.SCOPE:
            return f"{sel.get('key', '?')} = a value, {short('value_sha256')}"
        if sel.get("kind") == self.Kind.IDS:
            return f"{sel.get('ids', 0)} memory ids, {short('ids_sha256')}"
        what = "text contains" if sel.get("kind") == self.Kind.CONTAINS else "similar to"
        extra = f", similarity ≥ {sel['similarity']}" if "similarity" in sel else ""
        return f"{what} a text, {short('text_sha256')}, at most {sel.get('max_count', '?')}{extra}"

    @property
    def skipped(self) -> list[dict[str, str]]:
        """The listed memories left alone because they changed since planning: ``[{"id",
        "why"}]`` (another scope, or another text or metadata: not what the reviewer saw)."""
        return list((self.journal or {}).get("skipped", []))

    @property
    def purged_items(self) -> list[tuple[str, int]]:
        """What apply purged as ``[(label, count)]``: ``"vector_cache_rows"`` reads "vector cache
        rows"."""
        return [(key.replace("_", " "), n) for key, n in (self.purged or {}).items()]


class ImportJob(models.Model):
    """A JSONL upload imported by the worker (``tasks.import_memories``), with its progress.

    The file is saved under ``var/imports/`` until the job ends (done, refused, failed with
    nothing left written); an ``interrupted`` job keeps it for recovery to import again.
    ``done`` of ``total`` valid memories have been handled; ``report`` is
    ``ImportReport.to_dict()`` once done; ``errors`` holds the first
    :data:`memoryadmin.memories.services.transfer_jobs.MAX_JOB_ERRORS` invalid lines as
    ``[line, message]`` pairs and ``error_count`` all of them.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        VALIDATING = "validating"
        IMPORTING = "importing"
        # The store failed part-way and what was written could not be taken back: the file is
        # kept and recovery imports it again once the store answers (an upsert completes it).
        INTERRUPTED = "interrupted"
        DONE = "done"
        REFUSED = "refused"
        FAILED = "failed"

    ACTIVE = (Status.QUEUED, Status.VALIDATING, Status.IMPORTING, Status.INTERRUPTED)

    agent = models.ForeignKey("console.Agent", on_delete=models.CASCADE, related_name="import_jobs")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor = models.CharField(max_length=150, default="web")
    file_name = models.CharField(max_length=255)
    path = models.CharField(max_length=1024)
    size = models.BigIntegerField(default=0)
    skip_invalid = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    report = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    error_count = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # "host:pid" of the worker process importing the file, and when it claimed the job:
    # recovery re-queues a job whose worker died (services.recovery).
    worker = models.CharField(max_length=255, blank=True)
    resumes = models.PositiveIntegerField(
        default=0, help_text="times recovery imported it again after an interruption"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import #{self.pk} of {self.file_name} into {self.agent_id}: {self.status}"

    @property
    def is_active(self) -> bool:
        """True while queued, validating, importing or interrupted (waiting to resume)."""
        return self.status in self.ACTIVE

    @property
    def progress(self) -> float:
        """Fraction in [0, 1] of the valid memories handled so far (0 while validating)."""
        return min(1.0, self.done / self.total) if self.total else 0.0
