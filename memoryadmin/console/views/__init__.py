"""Console views: small function views that validate a form, call one service or selector, render.

Pages and their htmx fragments live in one template each; a fragment is a
``{% partialdef name inline %}`` rendered as ``"page.html#name"`` when ``request.htmx``.
"""

from __future__ import annotations

from .agents import (
    agent_create,
    agent_delete,
    agent_detail,
    agent_edit,
    agent_list,
    agent_run,
    schedule_preview,
)
from .archive import archive_list, archive_restore, pass_rollback
from .audit import audit, audit_csv, audit_event_csv, audit_event_list
from .dashboard import dashboard
from .memories import memory_delete, memory_detail, memory_edit, memory_list, memory_pin
from .passes import (
    conflict_resolve,
    operation_edit,
    operation_exclude,
    pass_approve,
    pass_detail,
    pass_progress,
    pass_reject,
    pass_stale,
)
from .probes import probe_create, probe_delete, probe_edit, probe_list, probe_recall
from .review import pass_review, review_bulk
from .transfer import memories_export, memories_import, memories_import_status

__all__ = [
    "archive_list",
    "archive_restore",
    "pass_rollback",
    "agent_create",
    "agent_delete",
    "agent_detail",
    "agent_edit",
    "agent_list",
    "agent_run",
    "audit",
    "audit_csv",
    "audit_event_csv",
    "audit_event_list",
    "dashboard",
    "memory_delete",
    "memory_detail",
    "memory_edit",
    "memory_list",
    "memory_pin",
    "operation_edit",
    "operation_exclude",
    "pass_approve",
    "pass_detail",
    "pass_progress",
    "pass_reject",
    "pass_stale",
    "schedule_preview",
    "memories_export",
    "memories_import",
    "memories_import_status",
    "probe_create",
    "probe_delete",
    "probe_edit",
    "probe_list",
    "probe_recall",
    "pass_review",
    "review_bulk",
    "conflict_resolve",
]
