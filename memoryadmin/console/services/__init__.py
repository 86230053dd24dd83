"""Console services: every write (agents, schedules, passes, review, apply, rollback, memories).

Keyword-only ``<entity>_<verb>`` functions (HackSoft style). Errors are exceptions whose message
is shown to the operator as is: :class:`ServiceError` and its subclasses, and ``ValueError`` for
bad input (raised before anything is written).

One module per step of a pass's life, plus its neighbours:

- :mod:`.agents` — ``agent_create`` / ``agent_update`` / ``agent_delete``
- :mod:`.schedules` — ``schedule_sync`` / ``schedules_sync_all`` (django-q2 schedules)
- :mod:`.passes` — ``pass_request`` / ``pass_plan`` (snapshot → plan → guards, no writes) /
  ``pass_run`` (the same, stored as a proposal) /
  ``pass_fail``
- :mod:`.review` — ``operation_set_excluded`` / ``operations_set_excluded`` (bulk) /
  ``operation_edit_text`` / ``conflict_resolve`` / ``pass_approve`` / ``pass_reject`` /
  ``pass_score_operations`` / ``pass_store_figures``
- :mod:`.apply` — ``pass_apply`` (journaled per operation, resumable)
- :mod:`.rollback` — ``pass_rollback_request`` / ``pass_rollback``, ``archive_restore``
- :mod:`.leases` — which process works on a pass (``lease_acquire`` / ``lease_release``)
- :mod:`.recovery` — ``passes_recover`` / ``import_jobs_recover``: resume or re-queue what a
  dead worker or a store outage left
- :mod:`.memories` — ``memory_set_pinned`` / ``memory_edit`` / ``memory_delete``
- :mod:`.journal` — the helpers they share (audited transitions, progress, enqueueing,
  validation, the live-store read, failpoints)

Lifecycle (the full list of transitions is in docs/ARCHITECTURE.md):
``queued → running → proposed | rejected_by_guard | failed``;
``proposed → approved → applying → applied | partially_applied``; ``proposed → rejected | stale``;
``applied | partially_applied → rolling_back → rolled_back``.
Every transition is a conditional ``UPDATE … WHERE status IN (…)`` plus an :class:`AuditEvent`
in one transaction, so two workers can never both move the same pass, and one active pass per
agent is the database constraint ``one_active_pass_per_agent`` (I-5).

The reads that used to live here (``pass_stale_operations``, ``schedule_preview``,
``agent_census``, ``archive_page``) are in :mod:`memoryadmin.console.selectors`; they are
re-exported here so existing callers keep working.
"""

from __future__ import annotations

from .. import stores
from ..errors import (
    GuardRefused,
    PassAlreadyActive,
    ProposalChanged,
    ServiceError,
    StoreUnavailable,
)
from ..selectors.agents import agent_census
from ..selectors.evaluation import Evaluation, pass_evaluate
from ..selectors.passes import pass_stale_operations
from ..selectors.review import pass_revision
from ..selectors.rollback import archive_page
from ..selectors.schedules import schedule_preview
from ..validation import MAX_DOCUMENT_CHARS, MAX_NOTE_CHARS, validate_cron
from .agents import agent_create, agent_delete, agent_update
from .apply import APPLY_BATCH, pass_apply
from .journal import FAILPOINT_ENV
from .leases import lease_acquire, lease_holder, lease_release
from .memories import memory_delete, memory_edit, memory_set_pinned
from .passes import (
    PassPlan,
    pass_dry_run,
    pass_fail,
    pass_plan,
    pass_request,
    pass_request_scheduled,
    pass_run,
)
from .recovery import import_jobs_recover, passes_recover, resume_leased
from .review import (
    conflict_resolve,
    operation_edit_text,
    operation_set_excluded,
    operations_carry_over,
    operations_set_excluded,
    pass_approve,
    pass_reject,
    pass_score_operations,
    pass_store_figures,
)
from .rollback import (
    RollbackBlocked,
    archive_restore,
    pass_rollback,
    pass_rollback_request,
    rollback_blockers,
)
from .schedules import recovery_schedule_ensure, schedule_sync, schedules_sync_all

__all__ = [
    "APPLY_BATCH",
    "FAILPOINT_ENV",
    "MAX_DOCUMENT_CHARS",
    "MAX_NOTE_CHARS",
    "Evaluation",
    "GuardRefused",
    "ProposalChanged",
    "PassAlreadyActive",
    "PassPlan",
    "RollbackBlocked",
    "ServiceError",
    "StoreUnavailable",
    "agent_census",
    "agent_create",
    "agent_delete",
    "agent_update",
    "archive_page",
    "archive_restore",
    "conflict_resolve",
    "import_jobs_recover",
    "lease_acquire",
    "lease_holder",
    "lease_release",
    "memory_delete",
    "memory_edit",
    "memory_set_pinned",
    "operation_edit_text",
    "operation_set_excluded",
    "operations_carry_over",
    "operations_set_excluded",
    "pass_apply",
    "pass_approve",
    "pass_evaluate",
    "pass_fail",
    "pass_dry_run",
    "pass_plan",
    "pass_reject",
    "pass_revision",
    "pass_request",
    "pass_request_scheduled",
    "pass_rollback",
    "pass_rollback_request",
    "pass_run",
    "pass_score_operations",
    "pass_stale_operations",
    "pass_store_figures",
    "passes_recover",
    "recovery_schedule_ensure",
    "resume_leased",
    "rollback_blockers",
    "schedule_preview",
    "schedule_sync",
    "schedules_sync_all",
    "stores",
    "validate_cron",
]
