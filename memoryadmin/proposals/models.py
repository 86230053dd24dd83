"""Passes (proposals) and their state machine, operations with their originals, the snapshot a
pass planned from, reviewers' standing decisions and dry runs.

State names follow docs/ARCHITECTURE.md "The pass lifecycle"."""

from __future__ import annotations

import numpy as np
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property

from consolidation import OpKind
from consolidation.review import OperationLoss, model_author, model_note
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.figures import figures_verdict
from memoryadmin.proposals.telemetry import PassTelemetry


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

    agent = models.ForeignKey("console.Agent", on_delete=models.CASCADE, related_name="passes")
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
    entries_before = models.IntegerField(
        default=0, help_text="originals in the store the pass was planned from (its input)"
    )
    figures = models.JSONField(
        default=dict,
        blank=True,
        help_text="Evaluation.figures() and the loss totals (\"loss\") of the operations the "
        "pass includes now, kept by every service that changes them: the one record of what "
        "the pass counts (the pages read them; approve and apply evaluate afresh)",
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

    # What the pass counts now, from its one record (``figures``; 0 before it is planned):
    # the lists, the CSV, the CLI and the API read these; the pages read ``pass_figures``.
    @property
    def entries_after(self) -> int:
        """Memories in the store after the pass."""
        return self._figure("entries_after")

    @property
    def merged(self) -> int:
        """Memories merged away."""
        return self._figure("merged")

    @property
    def promoted(self) -> int:
        """The engine's promoted total (promote operations, merges to the curated tier)."""
        return self._figure("promoted")

    @property
    def pruned(self) -> int:
        """Memories pruned."""
        return self._figure("pruned")

    @property
    def reconciled(self) -> int:
        """Memories superseded."""
        return self._figure("reconciled")

    def _figure(self, name: str) -> int:
        value = (self.figures or {}).get(name) if isinstance(self.figures, dict) else None
        return int(value) if isinstance(value, int | float) else 0

    @property
    def loss_fraction(self) -> float:
        """The loss fraction (in [0, 1] of ``entries_before``) over the operations the pass
        counts now (``figures``: for a partly applied pass, what it applied); 0.0 before it is
        planned."""
        value = (
            (self.figures or {}).get("loss_fraction") if isinstance(self.figures, dict) else None
        )
        return float(value) if isinstance(value, int | float) else 0.0

    @property
    def guard_passed(self) -> bool | None:
        """The loss guard's verdict as recorded, without a query: ``None`` before the pass is
        planned (no ``figures``), ``False`` for a pass a guard rejected (its status), else the
        verdict on ``figures`` against the threshold it was planned with
        (:func:`figures_verdict`). The pages judge against the threshold in force now
        (:func:`~memoryadmin.proposals.selectors.evaluation.pass_figures`)."""
        if self.status == self.Status.REJECTED_BY_GUARD:
            return False
        verdict = self._verdict()
        return None if verdict is None else verdict[0]

    @property
    def guard_reason(self) -> str:
        """The sentence of :attr:`guard_passed`: for a pass a guard rejected, the reason it
        was rejected with (``reason``); ``""`` before the pass is planned."""
        if self.status == self.Status.REJECTED_BY_GUARD:
            return self.reason
        verdict = self._verdict()
        return "" if verdict is None else verdict[1]

    def _verdict(self) -> tuple[bool, str] | None:
        if not isinstance(self.figures, dict) or "loss_fraction" not in self.figures:
            return None
        try:
            return figures_verdict(self.figures, float(self.max_loss_fraction), self.entries_before)
        except (KeyError, TypeError, ValueError):  # not figures, or a bad threshold: fail closed
            return False, "Loss guard: the recorded figures or threshold are invalid."

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
    def telemetry_data(self) -> PassTelemetry:
        """``telemetry`` typed (:class:`~memoryadmin.proposals.telemetry.PassTelemetry`): how
        every module reads it; :func:`~memoryadmin.proposals.telemetry.telemetry_save` writes."""
        return PassTelemetry.from_json(self.telemetry)

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
        (``telemetry_data.forgotten_by``: "purged by forget request #N")."""
        if self.status not in self.ROLLBACKABLE:
            return ""
        forgotten = self.telemetry_data.forgotten_by
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

    #: The engine's operation kinds (:class:`consolidation.OpKind`), as Django choices: a new
    #: kind is added to the engine only (and a migration for the choices).
    Kind = models.TextChoices("Kind", [(k.name, k.value) for k in OpKind])

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
                    "edited",
                    "risk",
                    "lost_sentences",
                ],
                name="op_run_counts",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.index} of pass {self.run_id}"

    @property
    def written_by(self) -> str | None:
        """The model whose text or verdict this operation carries
        (:func:`consolidation.review.model_author`), else ``None``: such an operation waits
        for a person under every auto-apply mode."""
        return model_author(self)

    @property
    def model_note(self) -> str | None:
        """``"written by model M"`` / ``"decided by model M"``
        (:func:`consolidation.review.model_note`), else ``None``: what its card says."""
        return model_note(self)

    @cached_property
    def source_list(self) -> list[OperationSource]:
        """The operation's sources (prefetched or one query), read once per instance: each
        ``self.sources`` builds a related manager (≈ 17 µs; an apply read them ~7 times an
        operation). Stale when sources are added later to the same instance (never done)."""
        return list(self.sources.all())

    @property
    def excluded(self) -> bool:
        """A reviewer left this operation out of the pass: ``status`` is ``excluded`` (the one
        flag; including it again sets ``pending``)."""
        return self.status == self.Status.EXCLUDED

    def lost_words(self) -> int:
        """How many lost content words are counted under this operation (its stored
        ``lost``: the pass's definition, each word counted under one operation of the pass;
        kept by :func:`~memoryadmin.proposals.services.evaluation.store_figures`)."""
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


class Decision(models.Model):
    """A reviewer's standing decision on an agent's memories, which every later pass plans with.

    ``kind`` (``consolidation.decisions.DecisionKind``): ``keep_apart`` (from excluding a merge,
    reconcile or fold: these memories are not joined again), ``keep`` (from restoring an
    archived memory, or "keep both" on a conflict: not removed), ``conflict_pick`` (keep A /
    keep B: the same pair resolves the same way) and ``rejected_plan`` (from rejecting a pass:
    its operations never apply on their own). ``memories`` is ``[[memory id, content hash],
    ...]`` as the reviewer saw them; ``payload`` holds the rest: ``{"keep": id}`` of a pick,
    ``{"apart": true}`` of a "keep both" (the pair is also kept apart: not asked again),
    ``{"signatures": [...]}`` of a rejected plan (``consolidation.decisions.signature``).
    ``held_back`` counts the distinct later operations it has left out (or, for a rejected
    plan, held for review): an operation planned again by a later pass is counted once, by its
    key in ``held_keys`` (``consolidation.planning.constraints.held_key``, or the operation's
    signature for a rejected plan). A revoked decision (``revoked_at``) no longer applies; it
    is kept for the audit trail.
    """

    class Kind(models.TextChoices):
        KEEP_APART = "keep_apart"
        KEEP = "keep"
        REJECTED_PLAN = "rejected_plan"
        CONFLICT_PICK = "conflict_pick"

    agent = models.ForeignKey("console.Agent", on_delete=models.CASCADE, related_name="decisions")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    memories = models.JSONField(default=list, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_actor = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    run = models.ForeignKey(
        "Pass", null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    operation = models.ForeignKey(
        "Operation", null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_actor = models.CharField(max_length=150, blank=True)
    revoke_note = models.TextField(blank=True)
    held_back = models.PositiveIntegerField(default=0)
    held_keys = models.JSONField(
        default=list, blank=True, help_text="keys of the distinct operations it held back"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["agent", "revoked_at"])]

    def __str__(self) -> str:
        return f"decision #{self.pk} ({self.kind}) of {self.agent_id}"

    @property
    def is_active(self) -> bool:
        """True until revoked."""
        return self.revoked_at is None

    @property
    def kind_label(self) -> str:
        """``"keep apart"``, ``"keep"``, ``"rejected plan"``, ``"conflict pick"``."""
        return self.kind.replace("_", " ")

    @property
    def memory_ids(self) -> list[str]:
        """The memory ids the decision covers, in its order."""
        return [str(m[0]) for m in self.memories or []]

    @property
    def origin(self) -> str:
        """``"set by alice on pass #4"`` (who, and from which pass when known)."""
        who = self.created_actor or "unknown"
        return f"set by {who}" + (f" on pass #{self.run_id}" if self.run_id else "")


class DryRun(models.Model):
    """A dry run planned by the worker (``tasks.run_dry_run``), its result kept for polling.

    ``queued → running → done | failed``. ``result`` is the dict
    :func:`memoryadmin.proposals.services.passes.pass_dry_run` returns (the figures of the pass
    that would be stored; nothing is written to the store). ``policy`` is the policy dict
    planned with (``policy_name`` the named policy asked for, ``""`` = the agent's own).
    At most one queued or running dry run per agent, enforced by the database
    (``dry_run_active_per_agent``); results are deleted ``MEMORYADMIN_DRY_RUN_KEEP_HOURS`` after
    they finish (:func:`memoryadmin.proposals.services.dry_runs.dry_runs_purge`).
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    agent = models.ForeignKey("console.Agent", on_delete=models.CASCADE, related_name="dry_runs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor = models.CharField(max_length=150, default="web")
    policy = models.JSONField(default=dict, blank=True)
    policy_name = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    progress_label = models.CharField(max_length=200, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # "host:pid" of the worker process planning it.
    worker = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Peak resident memory of the planning process while it ran (bytes; 0 = unknown).
    peak_rss = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent"],
                condition=Q(status__in=["queued", "running"]),
                name="dry_run_active_per_agent",
            )
        ]
        indexes = [models.Index(fields=["created_by", "status"], name="dry_run_user_status")]

    def __str__(self) -> str:
        return f"dry run #{self.pk} of {self.agent_id}: {self.status}"

    def get_absolute_url(self) -> str:
        return reverse("dry_run_detail", args=[self.pk])

    @property
    def is_active(self) -> bool:
        """True while queued or running."""
        return self.status in self.ACTIVE

    @property
    def seconds(self) -> float | None:
        """Seconds from start to finish (or to now while running); ``None`` before it starts."""
        if self.started_at is None:
            return None
        end = self.finished_at or timezone.now()
        return max(0.0, (end - self.started_at).total_seconds())
