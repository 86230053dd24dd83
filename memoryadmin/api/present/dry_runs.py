"""Dry runs as the API and the MCP tools show them (model → schema, reads only)."""

from __future__ import annotations

from django.urls import reverse

from memoryadmin.api import schemas as s
from memoryadmin.proposals.models import DryRun


def dry_run_out(dry: DryRun) -> s.DryRunOut:
    """``dry`` with its result, once done, as the :class:`~..schemas.ConsolidateOut` the
    synchronous dry run returned (``pass_id`` ``None``, ``status`` ``"dry_run"``)."""
    policy = dry.policy_name or "agent"
    result = None
    if dry.status == DryRun.Status.DONE and dry.result:
        fields = s.ConsolidateOut.model_fields
        result = s.ConsolidateOut(
            dry_run=True,
            pass_id=None,
            status="dry_run",
            agent=dry.agent.slug,
            policy=policy,
            **{k: v for k, v in dry.result.items() if k in fields},
        )
    return s.DryRunOut(
        dry_run_id=dry.pk,
        status=dry.status,
        agent=dry.agent.slug,
        policy=policy,
        progress=dry.progress,
        progress_label=dry.progress_label,
        created_at=dry.created_at,
        started_at=dry.started_at,
        finished_at=dry.finished_at,
        seconds=dry.seconds,
        error=dry.error,
        result=result,
        poll_url=reverse("api-v1:dry_run_get", args=[dry.pk]),
        url=dry.get_absolute_url(),
    )
