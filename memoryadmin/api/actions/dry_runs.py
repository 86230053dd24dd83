"""Dry runs for the API and the MCP tools: queue one for the worker, read one (waiting, bounded).

Any role may dry-run (nothing is written), within the console's limits
(:mod:`memoryadmin.proposals.services.dry_runs`): one queued or running per agent — the same
request again gets that one back, another policy is refused with 429 — and
``MEMORYADMIN_DRY_RUNS_PER_USER`` per user (429, ``Retry-After``).
"""

from __future__ import annotations

from typing import Any

from memoryadmin.agents.models import Agent
from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import NotFound, TooManyRequests, named_policy, service_error
from memoryadmin.api.present.dry_runs import dry_run_out
from memoryadmin.core.errors import DryRunLimit, ServiceError
from memoryadmin.proposals.selectors.dry_runs import dry_run_get, dry_run_wait
from memoryadmin.proposals.services.dry_runs import dry_run_request


def dry_run_submit(*, agent: Agent, user: Any, policy: str | None, wait: float) -> s.DryRunOut:
    """Queue a dry run of ``agent`` with the named ``policy`` (``None``: the agent's own) and
    wait up to ``wait`` seconds (bounded by ``MEMORYADMIN_DRY_RUN_MAX_WAIT``) for its result.

    :class:`TooManyRequests` for a limit, :class:`BadInput` for an unknown policy or an invalid
    agent policy. The planning is the worker's; this process only reads the row.
    """
    chosen = named_policy(policy)
    try:
        dry, _created = dry_run_request(
            agent=agent, user=user, policy=chosen, policy_name=policy or ""
        )
    except DryRunLimit as exc:
        raise TooManyRequests(str(exc), retry_after=exc.retry_after) from None
    except (ServiceError, ValueError) as exc:
        raise service_error(exc) from None
    return dry_run_out(dry_run_wait(dry, wait) if wait else dry)


def dry_run_fetch(*, dry_run_id: int, wait: float = 0) -> s.DryRunOut:
    """Dry run ``dry_run_id``, after waiting up to ``wait`` seconds (bounded) for it to finish;
    :class:`NotFound` when there is none (finished dry runs are kept
    ``MEMORYADMIN_DRY_RUN_KEEP_HOURS``)."""
    dry = dry_run_get(dry_run_id)
    if dry is None:
        raise NotFound(
            f"There is no dry run #{dry_run_id} (results are kept for a limited time).",
            field="dry_run_id",
        )
    return dry_run_out(dry_run_wait(dry, wait) if wait else dry)
