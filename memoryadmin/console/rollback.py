"""Compatibility name: rollback and archive restore live in
:mod:`memoryadmin.console.services.rollback`, leases and recovery in ``services.leases`` and
``services.recovery``; the archive browser's read is
:func:`memoryadmin.console.selectors.archive_page`. Kept because tests import this module."""

from __future__ import annotations

from .selectors import ARCHIVE_PAGE_SIZE, archive_page
from .services.journal import TASK_ROLLBACK
from .services.leases import lease_acquire, lease_holder, lease_release
from .services.recovery import passes_recover, resume_leased
from .services.rollback import (
    RollbackBlocked,
    archive_restore,
    pass_rollback,
    pass_rollback_request,
    rollback_blockers,
)

__all__ = [
    "ARCHIVE_PAGE_SIZE",
    "TASK_ROLLBACK",
    "RollbackBlocked",
    "archive_page",
    "archive_restore",
    "lease_acquire",
    "lease_holder",
    "lease_release",
    "pass_rollback",
    "pass_rollback_request",
    "passes_recover",
    "resume_leased",
    "rollback_blockers",
]
