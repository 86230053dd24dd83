"""Pass services: request a pass, run it (snapshot → plan → stored proposal → guard), fail it.

``queued → running → proposed | rejected_by_guard | failed``; a proposal that passes the guard of
an auto-applying agent goes on to ``approved`` and its apply is enqueued.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from consolidation import Policy
from consolidation.snapshot import llm_brief, plan_snapshot
from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.probes import read_records, recall_check
from memoryadmin.agents.selectors.schedules import schedule_slot
from memoryadmin.agents.services.schedules import (
    schedule_skipped_unchanged,
    schedule_skipped_waiting,
)
from memoryadmin.core import stores
from memoryadmin.core.errors import PassAlreadyActive, ServiceError, StoreUnavailable
from memoryadmin.core.leases import lease_release, lease_seconds, worker_id
from memoryadmin.core.services import (
    SYSTEM_ACTOR,
    TASK_APPLY,
    TASK_RUN,
    actor_name,
    audit,
    enqueue,
    failpoint,
    jsonable,
    set_progress,
    transition,
    user_or_none,
)
from memoryadmin.memories.models import ForgetRequest
from memoryadmin.memories.selectors.forget import last_applied_forget
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.selectors.decisions import standing_decisions
from memoryadmin.proposals.selectors.evaluation import evaluate, plan_verdict
from memoryadmin.proposals.selectors.passes import plan_inputs_digest, promoted_counts
from memoryadmin.proposals.services.apply import pass_apply
from memoryadmin.proposals.services.auto_apply import left_by_auto_apply
from memoryadmin.proposals.services.proposal import PassPlan, proposal_store
from memoryadmin.proposals.telemetry import PassTelemetry

__all__ = [
    "PassPlan",
    "pass_fail",
    "pass_dry_run",
    "pass_plan",
    "pass_request",
    "pass_request_scheduled",
    "pass_run",
]

log = logging.getLogger(__name__)

S = Pass.Status


def pass_request(
    *,
    agent: Agent,
    trigger: str,
    user: Any = None,
    actor: str | None = None,
    run_inline: bool = False,
    policy: Policy | None = None,
    policy_name: str = "",
    slot: str = "",
    layer: str | None = None,
) -> Pass:
    """Queue a pass for ``agent`` and enqueue :func:`tasks.run_pass` when the transaction commits.

    ``trigger`` is a :class:`Pass.Trigger` value; ``actor`` defaults to the user's name, else the
    trigger. ``run_inline`` runs the pass (and an auto-apply) in this process after commit
    instead of on the queue (CLI). ``policy`` overrides the agent's policy for this pass only
    (e.g. ``consolidate --policy aggressive``; ``policy_name`` is recorded with it). Raises
    :class:`PassAlreadyActive` — and records an ``AuditEvent`` with verb ``"refused"`` — when
    another pass of the agent is active (I-5). ``slot`` (scheduled runs) is the local calendar
    slot recorded on the ``requested`` event. ``layer`` restricts the pass to one memory layer
    (``memory_compact``), recorded in ``telemetry_data.layer``. Who may start a pass is checked
    by its callers (the Run now page and the API: admins; the schedule and the shell).
    """
    trigger = Pass.Trigger(trigger).value
    actor = actor or actor_name(user, trigger)
    override = policy is not None
    try:
        with transaction.atomic():
            run = Pass.objects.create(
                agent=agent,
                trigger=trigger,
                requested_by=user_or_none(user),
                policy=policy.to_dict() if policy is not None else agent.policy,
                max_loss_fraction=(policy or agent.get_policy()).max_loss_fraction,
                telemetry=PassTelemetry(
                    policy_override=(policy_name or "explicit") if override else None,
                    layer=layer or None,
                ).to_json(),
            )
            audit(
                actor=actor,
                verb="requested",
                run=run,
                agent=agent,
                user=user,
                to_status=S.QUEUED,
                data={"trigger": trigger, **({"slot": slot} if slot else {})},
            )
    except IntegrityError:
        active = agent.passes.filter(status__in=Pass.ACTIVE).first()
        detail = f"pass #{active.pk} is {active.status}" if active else "another pass is active"
        message = f"{agent.name} already has a pass in progress ({detail}); not queued twice."
        audit(
            actor=actor,
            verb="refused",
            agent=agent,
            user=user,
            note=message,
            data={"trigger": trigger, "active_pass": active.pk if active else None},
        )
        raise PassAlreadyActive(message) from None
    enqueue(TASK_RUN, run.pk, run_here=_run_inline if run_inline else None)
    return run


def pass_request_scheduled(*, agent: Agent, now: datetime | None = None) -> Pass | None:
    """The agent's schedule fired: queue a pass (trigger ``schedule``), unless

    - a proposal of the agent is pending: it is somebody's work, so nothing is planned (a
      ``* * * * *`` schedule stacked a stale proposal every minute, each discarding the
      reviewer's exclusions) — except the part an auto-applying agent left for review
      (:func:`.auto_apply.left_by_auto_apply`): the nightly pass runs on, plans the store
      as it is now (the waiting operations again, with the reviewer's exclusions and edits
      carried over) and its own waiting part replaces the old one; or
    - this local calendar slot already ran: in the autumn daylight-saving change a ``30 2 * * *``
      cron fires twice (02:30 CEST and 02:30 CET); the slot is the cron's latest local wall-clock
      time (``selectors.schedule_slot``); or
    - nothing the pass plans from changed since the agent's latest planned pass (:func:`_repeats`:
      store, policy, auto-apply mode, decisions, probes, checkpoint, day): it would make the
      same plan again, and on a ``* * * * *`` schedule one identical pass a minute replaced the
      waiting part (or recorded "no changes") each time.

    All are audited as ``skipped`` (actor ``schedule``) and return ``None``; the skips while
    one proposal waits, or while nothing changes, fold into one row with a count
    (``data["count"]``, ``data["last_slot"]``). Raises
    :class:`PassAlreadyActive` (audited ``refused``) when a pass is active.
    """
    slot = schedule_slot(cron=agent.schedule_cron, now=now or timezone.now())
    pending = agent.passes.filter(status=S.PROPOSED).order_by("-created_at", "-id").first()
    if pending is not None and not left_by_auto_apply(agent, pending):
        schedule_skipped_waiting(agent, pending, slot)
        return None
    repeat = agent.events.filter(verb="requested", data__slot=slot, data__trigger="schedule")
    if repeat.exists() and not agent.passes.filter(status__in=Pass.ACTIVE).exists():
        audit(
            actor="schedule",
            verb="skipped",
            agent=agent,
            note=f"Scheduled run skipped: the {slot} run already happened (the clock went back "
            "an hour for daylight saving).",
            data={"slot": slot},
        )
        return None
    last = _repeats(agent)
    if last is not None:
        schedule_skipped_unchanged(agent, last, slot)
        return None
    return pass_request(agent=agent, trigger=Pass.Trigger.SCHEDULE, actor="schedule", slot=slot)


def _repeats(agent: Agent) -> Pass | None:
    """The agent's latest planned pass when a pass planned now (the clock the pass plans with,
    not the schedule's slot) would make its plan again (equal
    :func:`~..selectors.passes.plan_inputs_digest`), else ``None``. Reads the store's
    content hashes (no embeddings); when the store cannot be read or the policy is invalid, the
    pass goes ahead and records why it fails."""
    last = agent.passes.filter(planned_at__isnull=False).order_by("-planned_at", "-id").first()
    digest = last.telemetry_data.inputs_digest if last is not None else None
    if last is None or not digest or last.telemetry_data.policy_override:
        return None
    try:
        policy = jsonable(agent.get_policy().to_dict())
        hashes = {r.id: r.content_hash for r in read_records(agent, include_embeddings=False)}
    except (StoreUnavailable, ValueError):
        return None
    now_digest = plan_inputs_digest(agent, hashes=hashes, policy=policy, now=timezone.now())
    return last if now_digest == digest else None


def pass_plan(
    *,
    agent: Agent,
    policy: Policy,
    now: datetime,
    progress: Callable[[float, str], None] | None = None,
    layer: str | None = None,
) -> PassPlan:
    """Snapshot → plan → guards for ``agent``, writing nothing: what :func:`pass_run` stores
    and ``manage.py consolidate --dry-run`` prints, so a dry run previews the pass exactly.

    Runs the engine's one snapshot path (:func:`consolidation.snapshot.plan_snapshot`) over
    the agent's store with its field map, checkpoint (empty: plan the whole store) and standing
    decisions (:func:`~memoryadmin.proposals.selectors.decisions.standing_decisions`), the
    offline embedder, and the LLM writer when one is configured (:func:`stores.llm_writer`;
    none: no network, I-8); then the recall check and the guards. ``progress(fraction,
    label)`` follows it (0..1). ``layer`` restricts the pass to one memory layer
    (``memory_compact``; :func:`consolidation.snapshot.in_layer`). Raises
    :class:`StoreUnavailable` when the store cannot be read, ``ValueError`` for invalid agent
    settings; nothing the LLM endpoint does fails the pass (``plan.context["llm"]`` records it).
    """
    from consolidation.adapters.embedder import get_default_embedder

    progress = progress or (lambda fraction, label: None)
    store = stores.get_store(agent)
    writer = stores.llm_writer()
    decisions = standing_decisions(agent)
    try:
        snap = plan_snapshot(
            store,
            policy,
            now=now,
            fieldmap=agent.get_field_map(),
            embedder=get_default_embedder(),
            checkpoint=agent.checkpoint or None,
            writer=writer,
            progress=lambda f, label: progress(0.85 * f, label),
            layer=layer,
            verdict_cache=stores.verdict_cache() if writer is not None else None,
            decisions=decisions,
            features=stores.feature_cache(),
            rows=stores.row_cache(agent, forgotten=last_applied_forget(agent=agent)),
        )
    finally:
        if writer is not None:
            writer.close()
    progress(0.9, f"Checking recall on {agent.probes.count():,} probe queries")
    recall = recall_check(agent, snap.records, snap.plan, policy)
    ev = evaluate(
        entries_before=len(snap.records),
        included=snap.plan.operations,
        excluded_count=0,
        max_loss_fraction=policy.max_loss_fraction,
    )
    passed, reason = plan_verdict(ev, snap.plan.result, recall)
    progress(1.0, "Planned")
    return PassPlan(snap.records, snap.plan, ev, recall, passed, reason, decisions)


def pass_dry_run(
    *,
    agent: Agent,
    policy: Policy,
    now: datetime,
    progress: Callable[[float, str], None] | None = None,
) -> dict[str, Any]:
    """The figures of the pass :func:`pass_run` would store, with nothing stored: the one dry
    run behind ``consolidate --dry-run`` and the API / MCP ``dry_run``.

    Returns ``entries_before``/``entries_after`` (memories), ``merged``/``promoted``/
    ``merged_to_curated``/``pruned``/``reconciled`` (counts; the pass page's promoted:
    :func:`promoted_counts`), ``loss_fraction``/``max_loss_fraction`` (in [0, 1]),
    ``guard_passed``/``guard_reason`` (the loss guard and an engine rejection; the recall
    guard has its own keys), ``recall_passed``/``recall_reason``/``recall_before``/
    ``recall_after`` (answer recall@k in [0, 1]), ``context_chars_before``/``_after`` and
    ``llm`` (:func:`~consolidation.snapshot.llm_brief`: the model's requests, tokens and
    seconds and one sentence per LLM step; ``None`` when nothing was sent to a model).
    Raises what :func:`pass_plan` raises.
    """
    planned = pass_plan(agent=agent, policy=policy, now=now, progress=progress)
    ev, rc = planned.evaluation, planned.recall or {}
    guard_passed, guard_reason = plan_verdict(ev, planned.plan.result, None)
    return {
        "entries_before": ev.entries_before,
        "entries_after": ev.entries_after,
        "merged": ev.merged,
        "promoted": promoted_counts(ev)[0],
        "merged_to_curated": promoted_counts(ev)[1],
        "pruned": ev.pruned,
        "reconciled": ev.reconciled,
        "loss_fraction": ev.loss_fraction,
        "max_loss_fraction": ev.max_loss_fraction,
        "guard_passed": guard_passed,
        "guard_reason": guard_reason,
        "recall_passed": rc.get("passed"),
        "recall_reason": rc.get("reason"),
        "recall_before": rc.get("answer_recall_before"),
        "recall_after": rc.get("answer_recall_after"),
        "context_chars_before": rc.get("context_chars_before"),
        "context_chars_after": rc.get("context_chars_after"),
        "llm": llm_brief(planned.plan.context, settings.LLM_PRICES),
    }


def pass_fail(*, run: Pass, error: str, actor: str | None = None) -> Pass:
    """Mark a queued or running pass ``failed`` with ``error`` (nothing was written to the
    store)."""
    try:
        return transition(
            run,
            frm=(S.QUEUED, S.RUNNING),
            to=S.FAILED,
            actor=actor or SYSTEM_ACTOR,
            verb="failed",
            note=error[:2000],
            error=error,
            reason=error[:2000],
            finished_at=timezone.now(),
            progress_label="Failed",
        )
    except ServiceError:
        run.refresh_from_db()
        return run


def _run_inline(pk: int) -> None:
    """Plan pass ``pk`` in this process (and apply it here when it is auto-approved)."""
    pass_run(run=Pass.objects.get(pk=pk), inline=True)


def _apply_inline(pk: int) -> None:
    """Apply pass ``pk`` in this process."""
    pass_apply(run=Pass.objects.get(pk=pk))


def pass_run(*, run: Pass, now: datetime | None = None, inline: bool = False) -> Pass:
    """Task body: snapshot → plan → stored proposal → guard → status.

    Only a ``queued`` pass runs (a second call is a no-op). The store is only read. Outcomes:
    ``rejected_by_guard`` (guard trips), ``proposed``, or — guard passes and ``agent.auto_apply``
    — ``approved`` by actor ``"policy"`` with the apply enqueued; ``failed`` with the reason on
    any error (Chroma down, bad policy, engine error). Older ``proposed`` passes of the agent
    become ``stale``. ``now`` (aware) is the planning clock (I-8); default: the current time.
    ``inline`` applies an auto-approved pass in this process instead of on the queue.
    """
    run = Pass.objects.select_related("agent", "requested_by").get(pk=run.pk)
    if run.status != S.QUEUED:
        return run
    agent = run.agent
    actor = SYSTEM_ACTOR
    now = now or timezone.now()
    try:
        # The agent's policy as saved now, unless the request overrode it for this pass.
        override = run.telemetry_data.policy_override
        policy = Policy.from_dict(run.policy) if override else agent.get_policy()
        agent.get_field_map()  # validated before the pass starts: a bad map fails it here
    except ValueError as exc:
        return pass_fail(run=run, error=f"Invalid agent settings: {exc}")
    forgetting = agent.forget_requests.filter(status=ForgetRequest.Status.APPLYING).first()
    if forgetting is not None:  # its snapshot would hold memories being purged (docs: Forget)
        return pass_fail(run=run, error=f"Forget request #{forgetting.pk} is being applied.")
    try:
        run = transition(
            run,
            frm=(S.QUEUED,),
            to=S.RUNNING,
            actor=actor,
            verb="started",
            started_at=timezone.now(),
            policy=policy.to_dict(),
            max_loss_fraction=policy.max_loss_fraction,
            progress=0.0,
            progress_label="Opening the store",
            # Planning holds the lease (see leases): if this process dies, recovery knows.
            lease_owner=worker_id(),
            lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds()),
        )
    except ServiceError:
        return Pass.objects.get(pk=run.pk)
    try:
        run = _plan_and_store(run, agent, policy, actor, now)
    finally:
        lease_release(run)
    if run.status == S.APPROVED:
        enqueue(TASK_APPLY, run.pk, run_here=_apply_inline if inline else None)
    return run


def _plan_and_store(run: Pass, agent: Agent, policy: Policy, actor: str, now: datetime) -> Pass:
    """The body of :func:`pass_run` once the pass is ``running``: never raises."""
    failpoint("plan:started")
    try:
        planned = pass_plan(
            agent=agent,
            policy=policy,
            now=now,
            progress=lambda f, label: set_progress(run, 0.05 + 0.75 * f, label),
            layer=run.telemetry_data.layer,
        )
        set_progress(run, 0.85, f"Storing {len(planned.plan.operations):,} proposed operations")
        run = proposal_store(run, planned, policy, actor, now)
    except Exception as exc:
        if isinstance(exc, ServiceError):  # expected (e.g. Chroma down): one line, no traceback
            log.warning("pass %s failed: %s", run.pk, exc)
        else:
            log.exception("pass %s failed", run.pk)
        message = str(exc) if isinstance(exc, ServiceError) else f"{type(exc).__name__}: {exc}"
        return pass_fail(run=run, error=message)
    return run
