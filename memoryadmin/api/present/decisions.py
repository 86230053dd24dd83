"""Standing decisions as the API and the MCP tools show them (model → schema, reads only)."""

from __future__ import annotations

from memoryadmin.api import schemas as s
from memoryadmin.proposals.models import Decision
from memoryadmin.proposals.selectors.decisions import decision_label


def decision_out(d: Decision, *, agent_slug: str) -> s.DecisionOut:
    """One decision of the agent ``agent_slug``."""
    return s.DecisionOut(
        id=d.pk,
        agent=agent_slug,
        kind=d.kind,
        label=decision_label(d),
        memories=[[str(x) for x in m] for m in d.memories or []],
        payload=d.payload or {},
        note=d.note,
        created_by=d.created_actor,
        created_at=d.created_at,
        pass_id=d.run_id,
        held_back=d.held_back,
        active=d.revoked_at is None,
        revoked_at=d.revoked_at,
        revoked_by=d.revoked_actor,
        revoke_note=d.revoke_note,
    )
