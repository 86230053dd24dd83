"""Audit events as the API and the MCP tools show them (model → schema, reads only)."""

from __future__ import annotations

from memoryadmin.api import schemas as s
from memoryadmin.core.models import AuditEvent


def event_out(e: AuditEvent) -> s.EventOut:
    """One audit event."""
    return s.EventOut(
        id=e.pk,
        created_at=e.created_at,
        actor=e.actor,
        verb=e.verb,
        agent=e.agent.slug if e.agent else None,
        pass_id=e.run_id,
        from_status=e.from_status,
        to_status=e.to_status,
        note=e.note,
        data=e.data or {},
    )
