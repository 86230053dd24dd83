"""The standing decisions of reviewers (see :class:`Decision`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from memoryadmin.console.models.core import Agent


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
    ``held_back`` counts the later operations it has left out (or, for a rejected plan, held
    for review). A revoked decision (``revoked_at``) no longer applies; it is kept for the
    audit trail.
    """

    class Kind(models.TextChoices):
        KEEP_APART = "keep_apart"
        KEEP = "keep"
        REJECTED_PLAN = "rejected_plan"
        CONFLICT_PICK = "conflict_pick"

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="decisions")
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
