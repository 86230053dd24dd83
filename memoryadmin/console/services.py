"""Console services: every write (agents, schedules, passes, review, apply, single memories).

Keyword-only ``<entity>_<verb>`` functions (HackSoft style). Errors are exceptions whose message
is shown to the operator as is: :class:`ServiceError` and its subclasses, and ``ValueError`` for
bad input (raised before anything is written).

Lifecycle (ARCHITECTURE.md): ``queued → running → proposed | rejected_by_guard | failed``;
``proposed → approved → applying → applied | partially_applied``; ``proposed → dismissed | stale``.
Every transition is a conditional ``UPDATE … WHERE status IN (…)`` plus an :class:`AuditEvent`
in one transaction, so two workers can never both move the same pass, and one active pass per
agent is the database constraint ``one_active_pass_per_agent`` (I-5).

Apply (I-1…I-4) journals each operation in ``Operation.status``:
``pending → archived → written → verified → applied`` (or ``conflict`` / ``failed``). Each step
is idempotent (archive rows are unique per operation+memory, merged ids are deterministic and
written with upsert, deletes ignore missing ids) and the journal is saved after each step, so
re-running :func:`pass_apply` on an ``applying`` pass resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from consolidation import FieldMap, MemoryRecord, Policy, content_hash, summarize

from . import stores, triage
from .errors import GuardRefused, PassAlreadyActive, ServiceError, StoreUnavailable
from .models import (
    Agent,
    ArchivedMemory,
    AuditEvent,
    Operation,
    OperationSource,
    Pass,
    PassSnapshot,
    StoreSample,
    embedding_to_bytes,
)
from .review import Evaluation, effective_threshold, evaluate, pass_evaluate, to_engine_operation

__all__ = [
    "MAX_DOCUMENT_CHARS",
    "Evaluation",
    "GuardRefused",
    "PassAlreadyActive",
    "ServiceError",
    "StoreUnavailable",
    "agent_census",
    "agent_create",
    "agent_delete",
    "agent_update",
    "memory_delete",
    "memory_edit",
    "memory_set_pinned",
    "operation_edit_text",
    "operation_set_excluded",
    "operations_set_excluded",
    "pass_apply",
    "pass_approve",
    "pass_evaluate",
    "pass_fail",
    "pass_reject",
    "pass_request",
    "pass_run",
    "pass_score_operations",
    "pass_stale_operations",
    "schedule_preview",
    "schedule_sync",
    "schedules_sync_all",
]

log = logging.getLogger(__name__)

S = Pass.Status
OS = Operation.Status

MAX_DOCUMENT_CHARS = 20_000
"""Longest memory text an operator may write (characters). MiniLM reads only the first 256 tokens
(~1,000 characters), so longer texts are almost certainly pasted by mistake; a 1 MB document is
refused with this limit in the message."""

TASK_RUN = "memoryadmin.console.tasks.run_pass"
TASK_APPLY = "memoryadmin.console.tasks.apply_pass"
TASK_SCHEDULED = "memoryadmin.console.tasks.scheduled_pass"

_ARCHIVE_ACTION = {
    Operation.Kind.MERGE: ArchivedMemory.Action.MERGE,
    Operation.Kind.PRUNE: ArchivedMemory.Action.PRUNE,
    Operation.Kind.RECONCILE: ArchivedMemory.Action.RECONCILE,
    Operation.Kind.PROMOTE: ArchivedMemory.Action.PROMOTE,
    Operation.Kind.DISTILL: ArchivedMemory.Action.MERGE,
}

_AGENT_FIELDS = {
    "name", "slug", "description", "field_map", "policy", "auto_apply", "schedule_cron",
    "schedule_enabled",
}


# ---------------------------------------------------------------------------------------------
# helpers


def _actor(user: Any, default: str) -> str:
    if user is not None and getattr(user, "is_authenticated", False):
        return user.get_username()
    return default


def _user_or_none(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def _run_actor(run: Pass) -> str:
    """Who a pass acts for: its requester's username, else its trigger ("schedule", "cli", …)."""
    if run.requested_by_id:
        return run.requested_by.get_username()
    return run.trigger


def _audit(
    *,
    actor: str,
    verb: str,
    agent: Agent | None = None,
    run: Pass | None = None,
    user: Any = None,
    from_status: str = "",
    to_status: str = "",
    note: str = "",
    data: Mapping[str, Any] | None = None,
) -> AuditEvent:
    if agent is None and run is not None:
        agent = run.agent
    return AuditEvent.objects.create(
        agent=agent, run=run, user=_user_or_none(user), actor=actor, verb=verb,
        from_status=from_status, to_status=to_status, note=note, data=_jsonable(data or {}),
    )


def _jsonable(value: Any) -> Any:
    """``value`` round-tripped through JSON (numpy scalars/arrays, sets, datetimes made plain)."""

    def default(o: Any) -> Any:
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, set | frozenset | tuple):
            return list(o)
        if isinstance(o, datetime):
            return o.isoformat()
        return str(o)

    return json.loads(json.dumps(value, default=default, allow_nan=False) if value is not None else "null")


def _transition(
    run: Pass,
    *,
    frm: Iterable[str],
    to: str,
    actor: str,
    verb: str,
    user: Any = None,
    note: str = "",
    data: Mapping[str, Any] | None = None,
    pass_note: str | None = None,
    **fields: Any,
) -> Pass:
    """Move ``run`` from one of ``frm`` to ``to`` (conditional UPDATE) and audit it, atomically.

    Raises :class:`ServiceError` when the pass is no longer in one of ``frm`` (someone else moved
    it first) and lets ``IntegrityError`` through when ``to`` is active and another pass of the
    agent is (I-5). ``note`` goes to the audit event; ``pass_note`` (when given) is also saved
    as the pass's own note (the reviewer's note). Returns the refreshed pass.
    """
    frm = tuple(frm)
    if pass_note is not None:
        fields["note"] = pass_note
    with transaction.atomic():
        current = Pass.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        updated = Pass.objects.filter(pk=run.pk, status__in=frm).update(status=to, **fields)
        if not updated:
            raise ServiceError(
                f"Pass #{run.pk} is {current or 'gone'}; it can only be {verb.replace('_', ' ')} "
                f"when {' or '.join(frm)}."
            )
        _audit(
            actor=actor, verb=verb, run=run, agent=run.agent, user=user, from_status=current or "",
            to_status=to, note=note, data=data,
        )
    run.refresh_from_db()
    return run


def _set_progress(run: Pass, fraction: float, label: str) -> None:
    """Save progress (0..1) and a label at once, so a polling page sees it (own statement)."""
    fraction = max(0.0, min(1.0, float(fraction)))
    Pass.objects.filter(pk=run.pk).update(progress=fraction, progress_label=label[:200])
    run.progress, run.progress_label = fraction, label[:200]


def _enqueue(func: str, pk: int, *, inline: bool = False) -> None:
    """Run ``func(pk)`` after the surrounding transaction commits: a django-q2 task, or — with
    ``inline`` (CLI, demo seeding) — the service itself in this process."""
    if inline:

        def run_here() -> None:
            if func == TASK_RUN:
                pass_run(run=Pass.objects.get(pk=pk), inline=True)
            else:
                pass_apply(run=Pass.objects.get(pk=pk))

        transaction.on_commit(run_here)
        return

    def send() -> None:
        from django_q.tasks import async_task

        async_task(func, pk, task_name=f"{func.rsplit('.', 1)[-1]}:{pk}")

    transaction.on_commit(send)


def _validate_document(document: Any, *, limit: int = MAX_DOCUMENT_CHARS) -> str:
    if not isinstance(document, str):
        raise ValueError("The memory text must be a string.")
    text = document.strip()
    if not text:
        raise ValueError("The memory text cannot be empty.")
    if len(text) > limit:
        raise ValueError(f"The memory text is {len(text):,} characters; the limit is {limit:,}.")
    return text


def _embed(texts: list[str]) -> np.ndarray:
    from consolidation.adapters.embedder import get_default_embedder

    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return np.asarray(get_default_embedder().embed(texts), dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# agents


def _validate_policy(policy: Policy | Mapping[str, Any] | None) -> dict[str, Any]:
    if isinstance(policy, Policy):
        return policy.to_dict()
    try:
        return Policy.from_dict(dict(policy or {})).to_dict()
    except TypeError as exc:
        raise ValueError(f"Invalid policy: {exc}") from exc


def _validate_field_map(field_map: FieldMap | Mapping[str, Any] | None) -> dict[str, str]:
    if isinstance(field_map, FieldMap):
        return field_map.to_dict()
    fm = FieldMap.from_dict(dict(field_map or {}))
    return {k: v for k, v in fm.to_dict().items() if v != getattr(FieldMap(), k)}


def validate_cron(cron: Any) -> str:
    """Return a 5-field cron expression stripped, or raise ``ValueError`` (validated with croniter)."""
    from croniter import croniter

    if not isinstance(cron, str) or len(cron.split()) != 5:
        raise ValueError(f"A schedule is a 5-field cron expression like '0 3 * * *' (got {cron!r}).")
    cron = " ".join(cron.split())
    if not croniter.is_valid(cron):
        raise ValueError(f"Not a valid cron expression: {cron!r}.")
    return cron


@transaction.atomic
def agent_create(
    *,
    name: str,
    slug: str,
    collection_name: str,
    attach: bool = False,
    field_map: FieldMap | Mapping[str, Any] | None = None,
    policy: Policy | Mapping[str, Any] | None = None,
    auto_apply: bool = False,
    schedule_cron: str = "0 3 * * *",
    schedule_enabled: bool = True,
    description: str = "",
    user: Any = None,
) -> Agent:
    """Create an agent, its collection (or attach an existing one) and its schedule.

    Raises ``ValueError`` for a blank name, a bad slug, a collection name Chroma refuses, an
    invalid policy/field map/cron, a slug or collection already used by an agent, attaching a
    collection that does not exist or creating one that does; :class:`StoreUnavailable` when
    Chroma is down. Nothing is written on error.
    """
    name = (name or "").strip()
    if not name:
        raise ValueError("An agent needs a name.")
    slug = (slug or "").strip()
    if not slug or slugify(slug) != slug:
        raise ValueError(f"The slug must be lowercase letters, digits and hyphens (got {slug!r}).")
    collection_name = stores.validate_collection_name(collection_name)
    policy_d = _validate_policy(policy)
    fm_d = _validate_field_map(field_map)
    cron = validate_cron(schedule_cron)
    if Agent.objects.filter(slug=slug).exists():
        raise ValueError(f"An agent with the slug {slug!r} already exists.")
    if Agent.objects.filter(collection_name=collection_name).exists():
        raise ValueError(f"Collection {collection_name!r} already belongs to an agent.")
    exists = stores.collection_exists(collection_name)
    if attach and not exists:
        raise ValueError(f"There is no collection named {collection_name!r} to attach.")
    if not attach and exists:
        raise ValueError(
            f"A collection named {collection_name!r} already exists; attach it instead."
        )
    agent = Agent.objects.create(
        name=name, slug=slug, description=description or "", collection_name=collection_name,
        attached=bool(attach), field_map=fm_d, policy=policy_d, auto_apply=bool(auto_apply),
        schedule_cron=cron, schedule_enabled=bool(schedule_enabled),
    )
    _audit(actor=_actor(user, "cli"), verb="agent_created", agent=agent, user=user,
           data={"collection": collection_name, "attached": bool(attach)})
    schedule_sync(agent=agent)
    if not attach:
        stores.create_collection(collection_name)
    return agent


@transaction.atomic
def agent_update(*, agent: Agent, user: Any = None, **fields: Any) -> Agent:
    """Change an agent's name, slug, description, field map, policy, auto-apply or schedule.

    Validates like :func:`agent_create` (``ValueError``; unknown fields and a collection change
    are refused) and re-syncs the django-q2 schedule. Audited with the changed fields.
    """
    unknown = set(fields) - _AGENT_FIELDS
    if unknown:
        raise ValueError(f"Cannot change {', '.join(sorted(unknown))} of an agent here.")
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    old_schedule_name = agent.schedule_name
    clean: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "name":
            value = (value or "").strip()
            if not value:
                raise ValueError("An agent needs a name.")
        elif key == "slug":
            value = (value or "").strip()
            if not value or slugify(value) != value:
                raise ValueError(f"The slug must be lowercase letters, digits and hyphens (got {value!r}).")
            if Agent.objects.filter(slug=value).exclude(pk=agent.pk).exists():
                raise ValueError(f"An agent with the slug {value!r} already exists.")
        elif key == "policy":
            value = _validate_policy(value)
        elif key == "field_map":
            value = _validate_field_map(value)
        elif key == "schedule_cron":
            value = validate_cron(value)
        elif key in ("auto_apply", "schedule_enabled"):
            value = bool(value)
        elif key == "description":
            value = value or ""
        clean[key] = value
    changed = {k: v for k, v in clean.items() if getattr(agent, k) != v}
    for key, value in changed.items():
        setattr(agent, key, value)
    agent.save()
    if changed:
        _audit(actor=_actor(user, "cli"), verb="agent_updated", agent=agent, user=user,
               data={"changed": sorted(changed)})
    if agent.schedule_name != old_schedule_name:
        from django_q.models import Schedule

        Schedule.objects.filter(name=old_schedule_name).delete()
    schedule_sync(agent=agent)
    return agent


@transaction.atomic
def agent_delete(*, agent: Agent, user: Any = None) -> None:
    """Delete an agent and its schedule; its Chroma collection is kept (data is never dropped).

    Refuses (:class:`ServiceError`) while a pass of the agent is active.
    """
    from django_q.models import Schedule

    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    active = agent.passes.filter(status__in=Pass.ACTIVE).first()
    if active is not None:
        raise ServiceError(f"Pass #{active.pk} of {agent.name} is {active.status}; wait for it to finish.")
    Schedule.objects.filter(name=agent.schedule_name).delete()
    _audit(actor=_actor(user, "cli"), verb="agent_deleted", agent=agent, user=user,
           data={"slug": agent.slug, "collection": agent.collection_name})
    agent.delete()


# ---------------------------------------------------------------------------------------------
# schedules


def _cron_zone() -> ZoneInfo:
    """The zone django-q2 evaluates cron in (``localtime()``, i.e. ``settings.TIME_ZONE``)."""
    return ZoneInfo(settings.TIME_ZONE)


def schedule_preview(
    *, cron: str, tz: str | tzinfo, count: int = 5, now: datetime | None = None
) -> list[datetime]:
    """The next ``count`` run times of ``cron``, as aware datetimes in the operator's ``tz``.

    The cron expression is evaluated in ``settings.TIME_ZONE``, exactly as django-q2's scheduler
    does, and the instants are shown in ``tz`` (an IANA name or ``tzinfo``). Raises
    ``ValueError`` for a bad cron or an unknown time zone.
    """
    from croniter import croniter

    cron = validate_cron(cron)
    if isinstance(tz, str):
        try:
            tz = ZoneInfo(tz)
        except Exception as exc:
            raise ValueError(f"Unknown time zone {tz!r}.") from exc
    start = (now or timezone.now()).astimezone(_cron_zone())
    it = croniter(cron, start)
    return [it.get_next(datetime).astimezone(tz) for _ in range(max(0, int(count)))]


def schedule_sync(*, agent: Agent) -> None:
    """Create/update (idempotent) or remove the agent's django-q2 ``Schedule``.

    django-q2 1.11's ``Schedule`` has no enabled flag, so a paused agent has no schedule row; it
    is recreated on resume. ``next_run`` is the cron's next time after now (``settings.TIME_ZONE``).
    """
    from django_q.models import Schedule

    if not agent.schedule_enabled:
        Schedule.objects.filter(name=agent.schedule_name).delete()
        return
    next_run = schedule_preview(cron=agent.schedule_cron, tz=ZoneInfo("UTC"), count=1)[0]
    existing = Schedule.objects.filter(name=agent.schedule_name).first()
    if (
        existing is not None and existing.cron == agent.schedule_cron
        and existing.func == TASK_SCHEDULED and existing.args == repr(agent.pk)
        and existing.schedule_type == Schedule.CRON
    ):
        return  # unchanged: keep next_run as the scheduler left it
    Schedule.objects.update_or_create(
        name=agent.schedule_name,
        defaults={
            "func": TASK_SCHEDULED,
            "args": repr(agent.pk),
            "kwargs": None,
            "schedule_type": Schedule.CRON,
            "cron": agent.schedule_cron,
            "repeats": -1,
            "next_run": next_run,
        },
    )


def schedules_sync_all() -> int:
    """Sync every agent's schedule and delete schedules of agents that no longer exist.

    Returns the number of enabled agent schedules.
    """
    from django_q.models import Schedule

    names = set()
    for agent in Agent.objects.all():
        schedule_sync(agent=agent)
        if agent.schedule_enabled:
            names.add(agent.schedule_name)
    Schedule.objects.filter(name__startswith="consolidate:", func=TASK_SCHEDULED).exclude(
        name__in=names
    ).delete()
    return len(names)


# ---------------------------------------------------------------------------------------------
# passes: request and run


def pass_request(
    *,
    agent: Agent,
    trigger: str,
    user: Any = None,
    actor: str | None = None,
    run_inline: bool = False,
    policy: Policy | None = None,
    policy_name: str = "",
) -> Pass:
    """Queue a pass for ``agent`` and enqueue :func:`tasks.run_pass` when the transaction commits.

    ``trigger`` is a :class:`Pass.Trigger` value; ``actor`` defaults to the user's name, else the
    trigger. ``run_inline`` runs the pass (and an auto-apply) in this process after commit
    instead of on the queue (CLI). ``policy`` overrides the agent's policy for this pass only
    (e.g. ``consolidate --policy aggressive``; ``policy_name`` is recorded with it). Raises
    :class:`PassAlreadyActive` — and records an ``AuditEvent`` with verb ``"refused"`` — when
    another pass of the agent is active (I-5).
    """
    trigger = Pass.Trigger(trigger).value
    actor = actor or _actor(user, trigger)
    override = policy is not None
    try:
        with transaction.atomic():
            run = Pass.objects.create(
                agent=agent, trigger=trigger, requested_by=_user_or_none(user),
                policy=policy.to_dict() if override else agent.policy,
                max_loss_fraction=(policy or agent.get_policy()).max_loss_fraction,
                telemetry={"policy_override": policy_name or "explicit"} if override else {},
            )
            _audit(actor=actor, verb="requested", run=run, agent=agent, user=user,
                   to_status=S.QUEUED, data={"trigger": trigger})
    except IntegrityError:
        active = agent.passes.filter(status__in=Pass.ACTIVE).first()
        detail = f"pass #{active.pk} is {active.status}" if active else "another pass is active"
        message = f"{agent.name} already has a pass in progress ({detail}); not queued twice."
        _audit(actor=actor, verb="refused", agent=agent, user=user, note=message,
               data={"trigger": trigger, "active_pass": active.pk if active else None})
        raise PassAlreadyActive(message) from None
    _enqueue(TASK_RUN, run.pk, inline=run_inline)
    return run


def _snapshot(store: Any, run: Pass) -> list[MemoryRecord]:
    """Every record of the store, with embeddings (reused; computed when missing)."""
    records: list[MemoryRecord] = []
    total = max(1, store.count())
    for page in store.iter_pages(page_size=5000, include_embeddings=True):
        records.extend(page)
        _set_progress(run, 0.05 + 0.25 * min(1.0, len(records) / total),
                      f"Reading the store: {len(records):,} of {total:,} memories")
    missing = [i for i, r in enumerate(records) if r.embedding is None]
    if missing:
        _set_progress(run, 0.32, f"Embedding {len(missing):,} memories without embeddings")
        vectors = _embed([records[i].document for i in missing])
        for i, vec in zip(missing, vectors, strict=True):
            records[i] = records[i].with_embedding(vec)
    return records


def _snapshot_hash(records: Iterable[MemoryRecord]) -> str:
    h = hashlib.sha256()
    for rid, ch in sorted((r.id, r.content_hash) for r in records):
        h.update(f"{rid}\x00{ch}\x01".encode())
    return h.hexdigest()


def pass_fail(*, run: Pass, error: str, actor: str | None = None) -> Pass:
    """Mark a queued or running pass ``failed`` with ``error`` (nothing was written to the store)."""
    try:
        return _transition(
            run, frm=(S.QUEUED, S.RUNNING), to=S.FAILED, actor=actor or _run_actor(run),
            verb="failed", note=error[:2000], error=error, reason=error[:2000],
            finished_at=timezone.now(), progress_label="Failed",
        )
    except ServiceError:
        run.refresh_from_db()
        return run


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
    actor = _run_actor(run)
    now = now or timezone.now()
    try:
        # The agent's policy as saved now, unless the request overrode it for this pass.
        override = (run.telemetry or {}).get("policy_override")
        policy = Policy.from_dict(run.policy) if override else agent.get_policy()
        field_map = agent.get_field_map()
    except ValueError as exc:
        return pass_fail(run=run, error=f"Invalid agent settings: {exc}")
    try:
        run = _transition(
            run, frm=(S.QUEUED,), to=S.RUNNING, actor=actor, verb="started",
            started_at=timezone.now(), policy=policy.to_dict(),
            max_loss_fraction=policy.max_loss_fraction, progress=0.0,
            progress_label="Opening the store",
        )
    except ServiceError:
        return Pass.objects.get(pk=run.pk)
    try:
        store = stores.get_store(agent)
        records = _snapshot(store, run)
        _set_progress(run, 0.4, f"Planning over {len(records):,} memories")
        from consolidation.planning import plan as plan_records

        # An empty checkpoint means "never consolidated": plan over the whole store.
        checkpoint = dict(agent.checkpoint) if agent.checkpoint else None
        plan = plan_records(records, policy, now=now, fieldmap=field_map, checkpoint=checkpoint)
        plan = _add_distillation(run, records, plan, field_map)
        _set_progress(run, 0.75, f"Checking recall on {run.agent.probes.count():,} probe queries")
        from .recall import recall_check

        recall = recall_check(agent, records, plan, policy)
        _set_progress(run, 0.85, f"Storing {len(plan.operations):,} proposed operations")
        run = _store_proposal(run, records, plan, policy, actor, now, recall=recall)
    except Exception as exc:
        if isinstance(exc, ServiceError):  # expected (e.g. Chroma down): one line, no traceback
            log.warning("pass %s failed: %s", run.pk, exc)
        else:
            log.exception("pass %s failed", run.pk)
        message = str(exc) if isinstance(exc, ServiceError) else f"{type(exc).__name__}: {exc}"
        return pass_fail(run=run, error=message)
    if run.status == S.APPROVED:
        _enqueue(TASK_APPLY, run.pk, inline=inline)
    return run


def _add_distillation(run: Pass, records: list[MemoryRecord], plan: Any, field_map: FieldMap) -> Any:
    """Append LLM ``distill`` operations to ``plan`` when an LLM endpoint is configured.

    Offline (no ``MEMORYADMIN_LLM_MODEL``) this returns ``plan`` unchanged and touches no network
    (I-8). Episodic memories already distilled are skipped: the checkpoint is every id named in a
    live memory's ``derived_from``. Distillations only add memories (loss unchanged). Raises
    ``LLMUnavailable`` / ``LLMOutputError`` (the pass then fails with the reason, nothing written).
    """
    from consolidation.adapters.llm import llm_from_env

    writer = llm_from_env()
    if writer is None:
        return plan
    from consolidation.distill import distill

    _set_progress(run, 0.6, f"Distilling episodic memories with {writer.model}")
    done = {i for r in records for i in field_map.get_list(r.metadata, "derived_from")}
    try:
        res = distill(records, writer, fields=field_map, checkpoint=done)
    finally:
        writer.close()
    if not res.operations:
        plan.context["distill"] = res.to_context()
        return plan
    plan.operations.extend(res.operations)
    plan.result = summarize(len(records), plan.operations)
    plan.context["distill"] = res.to_context()
    return plan


def _store_proposal(
    run: Pass, records: list[MemoryRecord], plan: Any, policy: Policy, actor: str, now: datetime,
    *, recall: dict[str, Any] | None = None,
) -> Pass:
    by_id = {r.id: r for r in records}
    ev = evaluate(
        entries_before=len(records), included=plan.operations, excluded_count=0,
        max_loss_fraction=policy.max_loss_fraction,
    )
    guard_passed, guard_reason = ev.guard_passed, ev.guard_reason
    if guard_passed and getattr(plan.result, "rejected", False):
        guard_passed, guard_reason = False, plan.result.reason or "Rejected by the engine."
    if guard_passed and recall is not None and not recall.get("passed", True):
        guard_passed, guard_reason = False, f"Recall guard tripped: {recall.get('reason')}"
    telemetry = _jsonable(dict(plan.context or {}))
    if (run.telemetry or {}).get("policy_override"):
        telemetry["policy_override"] = run.telemetry["policy_override"]
    telemetry["planned"] = ev.to_dict()
    telemetry["now"] = now.isoformat()
    scored = triage.plan_scores(
        agent=run.agent, records=records, operations=plan.operations, policy=policy,
        fieldmap=run.agent.get_field_map(), now=now,
    )
    telemetry["review"] = {"scored": True, "risk_line": triage.RISK_LINE}
    with transaction.atomic():
        StoreSample.objects.create(agent=run.agent, count=len(records))  # dashboard: size over time
        PassSnapshot.objects.create(run=run, hashes={r.id: r.content_hash for r in records})
        for index, (op, (loss, risk)) in enumerate(zip(plan.operations, scored, strict=True)):
            row = Operation.objects.create(
                run=run, index=index, kind=op.kind.value, rule=op.rule or "", reason=op.reason or "",
                scores=_jsonable(op.scores or {}), source_ids=list(op.source_ids),
                removes=list(op.removes), result_id=op.result_id or "",
                result_document=op.result_document or "", planned_document=op.result_document or "",
                result_metadata=_jsonable(op.result_metadata) if op.result_metadata is not None else None,
                risk=risk.score, risk_reasons=list(risk.reasons), lost=loss.to_dict(),
                lost_sentences=len(loss.sentences),
            )
            sources = []
            for position, sid in enumerate(op.source_ids):
                rec = by_id[sid]
                sources.append(OperationSource(
                    operation=row, position=position, memory_id=sid, document=rec.document,
                    metadata=_jsonable(rec.metadata), content_hash=rec.content_hash,
                    embedding=embedding_to_bytes(rec.embedding), removed=sid in op.removes,
                ))
            OperationSource.objects.bulk_create(sources)
        for old in Pass.objects.filter(agent=run.agent, status=S.PROPOSED).exclude(pk=run.pk):
            why = f"Superseded by the newer pass #{run.pk}."
            _transition(old, frm=(S.PROPOSED,), to=S.STALE, actor=actor, verb="stale", note=why,
                        reason=why, finished_at=timezone.now())
        to = S.PROPOSED if guard_passed else S.REJECTED_BY_GUARD
        fields: dict[str, Any] = {
            "entries_before": ev.entries_before, "entries_after": ev.entries_after,
            "merged": ev.merged, "promoted": ev.promoted, "pruned": ev.pruned,
            "reconciled": ev.reconciled, "loss_fraction": ev.loss_fraction,
            "guard_passed": guard_passed, "guard_reason": guard_reason, "telemetry": telemetry,
            "recall": _jsonable(recall or {}),
            "snapshot_hash": _snapshot_hash(records), "planned_at": timezone.now(), "progress": 1.0,
            "progress_label": "Proposal ready" if guard_passed else "Rejected by the loss guard",
        }
        if not guard_passed:
            fields.update(reason=guard_reason, finished_at=timezone.now())
        run = _transition(
            run, frm=(S.RUNNING,), to=to, actor=actor,
            verb="proposed" if guard_passed else "rejected_by_guard",
            note="" if guard_passed else guard_reason,
            data={"operations": len(plan.operations), "loss_fraction": ev.loss_fraction}, **fields,
        )
        if guard_passed and not plan.operations:
            # Nothing to review and nothing to write: settle it instead of leaving an empty
            # "pending" proposal for an operator to approve (a fresh-user finding).
            run = _transition(
                run, frm=(S.PROPOSED,), to=S.APPLIED, actor="policy", verb="nothing_to_apply",
                note="Nothing to consolidate: the plan has no operations; nothing was written.",
                decided_by=None, decided_actor="policy", decided_at=timezone.now(),
                finished_at=timezone.now(), progress_label="Nothing to consolidate",
            )
        elif guard_passed and run.agent.auto_apply:
            run = _transition(
                run, frm=(S.PROPOSED,), to=S.APPROVED, actor="policy", verb="approved",
                note="Auto-applied by the agent's policy: the loss guard passed.",
                decided_by=None, decided_actor="policy", decided_at=timezone.now(),
                progress=0.0, progress_label="Waiting to apply",
            )
    return run


# ---------------------------------------------------------------------------------------------
# review


def _reviewable(run: Pass) -> Pass:
    run = Pass.objects.select_related("agent").get(pk=run.pk)
    if not run.is_reviewable:
        raise ServiceError(f"Pass #{run.pk} is {run.status}; only a proposed pass can be reviewed.")
    return run


def _save_evaluation(run: Pass, ev: Evaluation) -> None:
    Pass.objects.filter(pk=run.pk).update(
        entries_after=ev.entries_after, merged=ev.merged, promoted=ev.promoted, pruned=ev.pruned,
        reconciled=ev.reconciled, loss_fraction=ev.loss_fraction, guard_passed=ev.guard_passed,
        guard_reason=ev.guard_reason,
    )


@transaction.atomic
def operation_set_excluded(*, operation: Operation, excluded: bool, user: Any) -> Evaluation:
    """Exclude (or include again) one operation of a proposed pass; returns the new evaluation.

    The pass's summary fields are updated to the new evaluation; the event is audited.
    Raises :class:`ServiceError` when the pass is no longer proposed.
    """
    run = _reviewable(operation.run)
    op = Operation.objects.select_for_update().get(pk=operation.pk)
    excluded = bool(excluded)
    if op.excluded != excluded:
        op.excluded = excluded
        op.status = OS.EXCLUDED if excluded else OS.PENDING
        op.save(update_fields=["excluded", "status"])
        _audit(actor=_actor(user, "cli"), verb="excluded" if excluded else "included", run=run,
               user=user, data={"operation": op.index, "kind": op.kind})
    ev = pass_evaluate(run)
    _save_evaluation(run, ev)
    operation.excluded, operation.status = op.excluded, op.status
    return ev


@transaction.atomic
def operation_edit_text(*, operation: Operation, document: str, user: Any) -> Evaluation:
    """Replace the merged text of a merge operation of a proposed pass (audited).

    Raises ``ValueError`` for a non-merge operation, an empty text or one longer than the
    policy's ``max_merged_chars``; :class:`ServiceError` when the pass is no longer proposed.
    """
    run = _reviewable(operation.run)
    op = Operation.objects.select_for_update().get(pk=operation.pk)
    if op.kind != Operation.Kind.MERGE:
        raise ValueError("Only the text of a merge can be edited.")
    limit = Policy.from_dict(run.policy or {}).max_merged_chars
    text = _validate_document(document, limit=limit)
    if text != op.result_document:
        before = op.result_document
        op.result_document = text
        op.edited = text != op.planned_document
        loss, risk = triage.rescore_operation(op)
        op.lost, op.lost_sentences = loss.to_dict(), len(loss.sentences)
        op.risk, op.risk_reasons = risk.score, list(risk.reasons)
        op.save(update_fields=["result_document", "edited", "lost", "lost_sentences", "risk",
                               "risk_reasons"])
        _audit(actor=_actor(user, "cli"), verb="edited", run=run, user=user,
               data={"operation": op.index, "before": before, "after": text})
    operation.result_document, operation.edited = op.result_document, op.edited
    return pass_evaluate(run)


MAX_BULK_OPERATIONS = 100_000
"""Upper bound on the operations one bulk review action may name (a pass is far smaller)."""


@transaction.atomic
def operations_set_excluded(
    *, run: Pass, operation_ids: Iterable[int], excluded: bool, user: Any, scope: str = ""
) -> tuple[Evaluation, list[int]]:
    """Exclude (or include again) many operations of a proposed pass in one action.

    ``operation_ids`` are ``Operation`` primary keys of ``run`` (others are ignored); ``scope``
    says in words how they were chosen (``"all of rule decay below confidence 0.9"``). Only the
    operations whose state changes are written; the action is audited as ONE event listing their
    indexes, and the pass's summary is re-evaluated once. Returns ``(evaluation, changed
    indexes)``. Raises :class:`ServiceError` when the pass is no longer proposed, ``ValueError``
    for more than :data:`MAX_BULK_OPERATIONS` ids.
    """
    ids = {int(i) for i in operation_ids}
    if len(ids) > MAX_BULK_OPERATIONS:
        raise ValueError(f"Choose at most {MAX_BULK_OPERATIONS:,} operations at once.")
    run = _reviewable(run)
    excluded = bool(excluded)
    rows = (
        Operation.objects.select_for_update()
        .filter(run=run, pk__in=ids, excluded=not excluded)
        .exclude(status=OS.CONFLICT)
        .order_by("index")
    )
    changed = list(rows.values_list("pk", "index", "kind"))
    indexes = [index for _, index, _ in changed]
    if len(changed) == 1 and not scope:  # one operation: the same event as a single toggle
        _audit(actor=_actor(user, "cli"), verb="excluded" if excluded else "included", run=run,
               user=user, data={"operation": indexes[0], "kind": changed[0][2]})
    elif changed:
        shown = ", ".join(f"#{i}" for i in indexes[:50]) + (" …" if len(indexes) > 50 else "")
        note = f"{len(indexes):,} operations: {shown}"
        _audit(actor=_actor(user, "cli"), verb="bulk_excluded" if excluded else "bulk_included",
               run=run, user=user, note=f"{scope} — {note}" if scope else note,
               data={"operations": indexes, "scope": scope})
    if changed:
        Operation.objects.filter(pk__in=[pk for pk, _, _ in changed]).update(
            excluded=excluded, status=OS.EXCLUDED if excluded else OS.PENDING
        )
    ev = pass_evaluate(run)
    _save_evaluation(run, ev)
    return ev, indexes


@transaction.atomic
def pass_score_operations(*, run: Pass) -> int:
    """Compute the risk and lost content of every operation of ``run`` from its stored rows
    (for a pass planned before scoring existed, or built row by row). Without the store, a
    sentence counts as kept elsewhere only when another operation of the pass keeps it.
    Returns the number of operations scored."""
    ops = list(run.operations.prefetch_related("sources").order_by("index"))
    for op, (loss, risk) in zip(ops, triage.stored_scores(run, ops), strict=True):
        op.risk, op.risk_reasons = risk.score, list(risk.reasons)
        op.lost, op.lost_sentences = loss.to_dict(), len(loss.sentences)
    Operation.objects.bulk_update(ops, ["risk", "risk_reasons", "lost", "lost_sentences"],
                                  batch_size=500)
    telemetry = dict(run.telemetry or {})
    telemetry["review"] = {"scored": True, "risk_line": triage.RISK_LINE, "from": "stored rows"}
    Pass.objects.filter(pk=run.pk).update(telemetry=telemetry)
    return len(ops)


def pass_approve(*, run: Pass, user: Any, note: str = "") -> Pass:
    """Approve a proposed pass and enqueue its apply after commit.

    Raises :class:`GuardRefused` (with the guard's reason, audited as ``approve_refused``) when
    the loss guard fails on the operations now included, :class:`ServiceError` when the pass is
    not proposed or another pass of the agent is active.
    """
    actor = _actor(user, "cli")
    with transaction.atomic():
        run = _reviewable(run)
        ev = pass_evaluate(run)
        if not ev.guard_passed:
            _audit(actor=actor, verb="approve_refused", run=run, user=user, note=ev.guard_reason)
            refused = ev.guard_reason
        else:
            refused = ""
    if refused:
        raise GuardRefused(refused)
    try:
        with transaction.atomic():
            run = _transition(
                run, frm=(S.PROPOSED,), to=S.APPROVED, actor=actor, verb="approved", user=user,
                note=note or "", pass_note=note or "", decided_by=_user_or_none(user),
                decided_actor=actor, decided_at=timezone.now(), progress=0.0,
                progress_label="Waiting to apply",
            )
            _enqueue(TASK_APPLY, run.pk)
    except IntegrityError:
        raise ServiceError(
            f"Another pass of {run.agent.name} is in progress; approve this one when it is done."
        ) from None
    return run


def pass_reject(*, run: Pass, user: Any, note: str) -> Pass:
    """Dismiss a proposed pass; ``note`` (why) is required (``ValueError`` when blank)."""
    note = (note or "").strip()
    if not note:
        raise ValueError("Say why the proposal is rejected (a note is required).")
    actor = _actor(user, "cli")
    run = _reviewable(run)
    return _transition(
        run, frm=(S.PROPOSED,), to=S.DISMISSED, actor=actor, verb="dismissed", user=user, note=note,
        pass_note=note, decided_by=_user_or_none(user), decided_actor=actor,
        decided_at=timezone.now(), finished_at=timezone.now(),
    )


# ---------------------------------------------------------------------------------------------
# apply (I-1 … I-4)


FAILPOINT_ENV = "MEMORYADMIN_FAILPOINT"


def _failpoint(name: str) -> None:
    """Fault injection for the crash tests: when ``$MEMORYADMIN_FAILPOINT`` equals ``name`` the
    process kills itself with SIGKILL right here, as a worker dying mid-apply would. Points:
    ``apply:archived``, ``apply:written``, ``apply:verified``, ``apply:deleted`` (sources deleted,
    journal not yet updated) and ``apply:applied`` (journal updated, pass not yet finished)."""
    if os.environ.get(FAILPOINT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


class _Interrupted(Exception):
    """Chroma went away mid-apply: the pass stays ``applying`` for a later resume."""


def _stale_reason(
    op: Operation, sources: list[OperationSource], live: Mapping[str, MemoryRecord],
    own_writes: Mapping[str, str],
) -> str:
    """Why ``op`` conflicts with the live store (I-4), or ``""`` when its sources are unchanged.

    A source rewritten by an earlier operation of the same pass (``own_writes``: id → the hash
    this pass wrote) is not a conflict.
    """
    for src in sources:
        rec = live.get(src.memory_id)
        if rec is None:
            return f"Memory {src.memory_id} no longer exists in the store."
        current = rec.content_hash
        if current != src.content_hash and own_writes.get(src.memory_id) != current:
            return f"Memory {src.memory_id} changed after the pass was planned."
    return ""


def _get_live(store: Any, ids: list[str], *, include_embeddings: bool) -> dict[str, MemoryRecord]:
    out: dict[str, MemoryRecord] = {}
    for start in range(0, len(ids), 1000):
        for rec in store.get(ids[start:start + 1000], include_embeddings=include_embeddings):
            out[rec.id] = rec
    return out


def _archived_sources(op: Operation, sources: list[OperationSource]) -> list[OperationSource]:
    """Sources whose current version is archived: the removed ones, and a rewritten one."""
    return [s for s in sources if s.removed or s.memory_id == op.result_id]


APPLY_BATCH = 100
"""Operations per apply batch: one Chroma read, archive transaction, upsert, read-back and delete
per stage and batch (a per-operation round trip costs ~16–25 ms in Chroma per call)."""


def _result_records(ops: list[Operation]) -> list[MemoryRecord]:
    """The records ``ops`` write (one each). A text equal to the rewritten source's keeps that
    source's embedding; any other text (a merge, an edit, a distillation) is embedded, in one call."""
    prior = {
        (a.operation_id, a.memory_id): a
        for a in ArchivedMemory.objects.filter(operation__in=ops)
    }
    docs: list[str] = []
    embeddings: list[np.ndarray | None] = []
    for op in ops:
        by_id = {s.memory_id: s for s in op.sources.all()}
        base = prior.get((op.pk, op.result_id)) or by_id.get(op.result_id)
        document = op.result_document or (base.document if base is not None else "")
        if not document:
            raise ServiceError(f"Operation #{op.index} has no text to write.")
        docs.append(document)
        embeddings.append(base.get_embedding() if base is not None and base.document == document else None)
    missing = [i for i, e in enumerate(embeddings) if e is None]
    for i, vec in zip(missing, _embed([docs[i] for i in missing]), strict=True):
        embeddings[i] = vec
    return [
        MemoryRecord(op.result_id, doc, emb, dict(op.result_metadata or {}))
        for op, doc, emb in zip(ops, docs, embeddings, strict=True)
    ]


def _batches(ops: list[Operation]) -> list[list[Operation]]:
    """Contiguous batches (plan order kept) in which no memory is touched by two operations, so a
    batch's stale check, read before any of its writes, stays valid for every operation in it."""
    out: list[list[Operation]] = []
    batch: list[Operation] = []
    touched: set[str] = set()
    for op in ops:
        ids = set(op.source_ids) | ({op.result_id} if op.result_id else set())
        if batch and (len(batch) >= APPLY_BATCH or ids & touched):
            out.append(batch)
            batch, touched = [], set()
        batch.append(op)
        touched |= ids
    if batch:
        out.append(batch)
    return out


def _mark(ops: Iterable[Operation], status: str, detail: str = "") -> None:
    """Journal: move ``ops`` to ``status`` in one statement (committed on its own)."""
    ops = list(ops)
    if ops:
        Operation.objects.filter(pk__in=[op.pk for op in ops]).update(status=status, status_detail=detail)
        for op in ops:
            op.status, op.status_detail = status, detail


def _fail_op(run: Pass, op: Operation, detail: str, actor: str, verb: str = "operation_failed") -> None:
    status = OS.CONFLICT if verb == "conflict" else OS.FAILED
    _mark([op], status, detail)
    _audit(actor=actor, verb=verb, run=run, note=detail, data={"operation": op.index, "kind": op.kind})


def _per_op(
    run: Pass, ops: list[Operation], actor: str, call: Callable[[list[Operation]], None]
) -> list[Operation]:
    """``call(ops)`` at once; when that fails for a reason other than Chroma being down, retry
    one operation at a time and mark those that still fail ``failed``. Returns those that passed.
    Raises :class:`_Interrupted` when Chroma is down."""
    try:
        call(ops)
        return ops
    except (StoreUnavailable, _Interrupted):
        raise
    except Exception as exc:
        if _looks_unavailable(exc):
            raise _Interrupted(f"{type(exc).__name__}: {exc}") from exc
        if len(ops) == 1:
            log.warning("operation %s of pass %s failed: %s", ops[0].index, run.pk, exc)
            detail = str(exc) if isinstance(exc, ServiceError) else f"{type(exc).__name__}: {exc}"
            _fail_op(run, ops[0], detail, actor)
            return []
    ok: list[Operation] = []
    for op in ops:
        ok.extend(_per_op(run, [op], actor, call))
    return ok


def _apply_batch(run: Pass, batch: list[Operation], store: Any, own_writes: dict[str, str], actor: str) -> None:
    """Take a batch through the journal stages its operations have not done yet (I-3):
    ``pending`` → (stale check) → ``archived`` → ``written`` → ``verified`` → ``applied``."""
    try:
        _apply_batch_stages(run, batch, store, own_writes, actor)
    except StoreUnavailable as exc:
        raise _Interrupted(str(exc)) from exc
    except _Interrupted:
        raise
    except Exception as exc:
        if _looks_unavailable(exc):
            raise _Interrupted(f"{type(exc).__name__}: {exc}") from exc
        raise


def _apply_batch_stages(
    run: Pass, batch: list[Operation], store: Any, own_writes: dict[str, str], actor: str
) -> None:
    # 1. stale check (I-4) and archive, committed before anything changes (I-1)
    pending = [op for op in batch if op.status == OS.PENDING]
    if pending:
        ids = sorted({sid for op in pending for sid in op.source_ids})
        live = _get_live(store, ids, include_embeddings=True)
        fresh = []
        for op in pending:
            reason = _stale_reason(op, list(op.sources.all()), live, own_writes)
            if reason:
                _fail_op(run, op, reason, actor, verb="conflict")
            else:
                fresh.append(op)
        with transaction.atomic():
            for op in fresh:
                for src in _archived_sources(op, list(op.sources.all())):
                    rec = live[src.memory_id]
                    emb = rec.embedding if rec.embedding is not None else src.get_embedding()
                    ArchivedMemory.objects.get_or_create(
                        operation=op, memory_id=src.memory_id,
                        defaults={
                            "agent": run.agent, "document": rec.document,
                            "metadata": _jsonable(rec.metadata), "embedding": embedding_to_bytes(emb),
                            "content_hash": rec.content_hash, "action": _ARCHIVE_ACTION[op.kind],
                            "run": run, "actor": actor,
                        },
                    )
            _mark(fresh, OS.ARCHIVED)
        _failpoint("apply:archived")
    # 2. write merged/promoted/new records: deterministic ids, upsert (a retry is idempotent)
    archived = [op for op in batch if op.status == OS.ARCHIVED]
    if archived:
        writers = [op for op in archived if op.result_id]
        ok = _per_op(run, writers, actor, lambda ops: store.upsert(_result_records(ops))) if writers else []
        refused = [op for op in writers if op not in ok]
        if refused:  # nothing was written and nothing leaves the store: no archive copy needed
            ArchivedMemory.objects.filter(operation__in=refused).delete()
        _mark([op for op in archived if not op.result_id] + ok, OS.WRITTEN)
        _failpoint("apply:written")
    # 3. verify the written records are readable
    written = [op for op in batch if op.status == OS.WRITTEN]
    if written:
        got = _get_live(store, [op.result_id for op in written if op.result_id], include_embeddings=False)
        verified = []
        for op in written:
            if op.result_id:
                rec = got.get(op.result_id)
                if rec is None or (op.result_document and rec.document != op.result_document):
                    _fail_op(run, op, f"Written memory {op.result_id} could not be read back; "
                                      "its sources were kept.", actor)
                    continue
                own_writes[op.result_id] = rec.content_hash
            verified.append(op)
        _mark(verified, OS.VERIFIED)
        _failpoint("apply:verified")
    # 4. delete the removed sources, then the operation is applied
    verified = [op for op in batch if op.status == OS.VERIFIED]
    if verified:
        def delete(ops: list[Operation]) -> None:
            doomed = sorted({i for op in ops for i in op.removes if i != op.result_id})
            if doomed:
                store.delete(doomed)
            _failpoint("apply:deleted")

        _mark(_per_op(run, verified, actor, delete), OS.APPLIED)
        _failpoint("apply:applied")


def _looks_unavailable(exc: BaseException) -> bool:
    """True for errors that mean "Chroma is not answering" (connection refused, timeouts)."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(k in text for k in ("connect", "timeout", "timed out", "unavailable", "unreachable", "refused"))


def pass_apply(*, run: Pass) -> Pass:
    """Task body: apply an approved pass, or resume an ``applying`` one.

    Operations go in plan order, in batches of :data:`APPLY_BATCH` (no memory touched twice in a
    batch); each stage is journaled per operation in ``Operation.status``. Order per operation
    (I-3): stale check against the live store (I-4: changed or vanished
    source → ``conflict``, skipped) → archive the originals in a committed transaction (I-1) →
    upsert the merged/promoted record (deterministic id; a merge's embedding is the embedding of
    its merged text) → read it back → delete the removed sources → ``applied``.

    Guard re-check (design choice): on a fresh apply, every operation is stale-checked first and
    the loss guard re-evaluated on the operations that will really be applied, against the live
    store size. If it trips, nothing is written: the pass ends ``rejected_by_guard`` with the
    reason. Operations that conflict later only lower the loss, so the check cannot newly trip.

    Ends ``applied``, or ``partially_applied`` when any operation conflicted or failed. If Chroma
    is unreachable before any operation started, the pass goes back to ``proposed`` (store
    untouched, exclusions and edits kept, audited as ``apply_postponed``);
    after that it stays ``applying`` with the error and is resumed by running this again
    (``tasks.apply_pass`` / ``manage.py recover_passes``); no step is done twice. Afterwards the
    agent's checkpoint is refreshed and a :class:`StoreSample` is recorded.
    """
    run = Pass.objects.select_related("agent", "decided_by").get(pk=run.pk)
    actor = run.decided_actor or _run_actor(run)
    if run.status == S.APPROVED:
        try:
            run = _transition(run, frm=(S.APPROVED,), to=S.APPLYING, actor=actor, verb="applying",
                              progress=0.0, progress_label="Checking the store")
        except ServiceError:
            return Pass.objects.get(pk=run.pk)
    elif run.status != S.APPLYING:
        return run
    agent = run.agent
    ops = list(
        run.operations.filter(excluded=False).exclude(status=OS.EXCLUDED)
        .prefetch_related("sources").order_by("index")
    )
    # The guard re-check runs until its verdict is recorded (also after a crash in between).
    fresh = "apply_guard" not in (run.telemetry or {}) and all(
        op.status in (OS.PENDING, OS.CONFLICT) for op in ops
    )
    try:
        store = stores.get_store(agent)
        if fresh:
            verdict = _apply_precheck(run, ops, store, actor)
            if verdict is not None:
                return verdict
    except (StoreUnavailable, _Interrupted) as exc:
        return _apply_interrupted(run, ops, str(exc), actor)
    own_writes: dict[str, str] = {}
    for op in ops:  # on resume: what earlier operations of this pass already wrote
        if op.status in (OS.WRITTEN, OS.VERIFIED, OS.APPLIED) and op.result_id:
            own_writes[op.result_id] = content_hash(op.result_document, op.result_metadata or {})
    todo = [op for op in ops if op.status not in (OS.APPLIED, OS.CONFLICT, OS.FAILED)]
    done = len(ops) - len(todo)
    for batch in _batches(todo):
        _set_progress(run, 0.05 + 0.9 * done / max(1, len(ops)),
                      f"Applying operations {done + 1}–{done + len(batch)} of {len(ops)}")
        try:
            _apply_batch(run, batch, store, own_writes, actor)
        except _Interrupted as exc:
            return _apply_interrupted(run, ops, str(exc), actor)
        done += len(batch)
    return _apply_finish(run, ops, store, actor)


def pass_stale_operations(*, run: Pass) -> dict[int, str]:
    """Operations of a proposed (or approved) pass whose sources changed or vanished since it was
    planned: ``{Operation.pk: reason}`` (empty when none). Read-only; the proposal page shows
    these before anyone approves (I-4). Raises :class:`StoreUnavailable` when Chroma is down."""
    ops = list(run.operations.exclude(status__in=[OS.CONFLICT, OS.APPLIED]).prefetch_related("sources"))
    if not ops:
        return {}
    store = stores.get_store(run.agent)
    live = _get_live(store, sorted({sid for op in ops for sid in op.source_ids}), include_embeddings=False)
    out = {}
    for op in ops:
        reason = _stale_reason(op, list(op.sources.all()), live, {})
        if reason:
            out[op.pk] = reason
    return out


def _apply_precheck(run: Pass, ops: list[Operation], store: Any, actor: str) -> Pass | None:
    """Stale-check all operations and re-check the guard; a ``Pass`` when apply must stop."""
    _set_progress(run, 0.02, "Checking the operations against the live store")
    ids = sorted({sid for op in ops for sid in op.source_ids})
    live = _get_live(store, ids, include_embeddings=False)
    keep = []
    for op in ops:
        if op.status == OS.CONFLICT:
            continue
        reason = _stale_reason(op, list(op.sources.all()), live, {})
        if reason:
            op.status, op.status_detail = OS.CONFLICT, reason
            op.save(update_fields=["status", "status_detail"])
            _audit(actor=actor, verb="conflict", run=run, note=reason,
                   data={"operation": op.index, "kind": op.kind})
        else:
            keep.append(op)
    live_count = store.count()
    ev = evaluate(
        entries_before=live_count, included=[to_engine_operation(op) for op in keep],
        excluded_count=len(ops) - len(keep), max_loss_fraction=effective_threshold(run),
    )
    telemetry = dict(run.telemetry or {})
    telemetry["apply_guard"] = ev.to_dict()
    if ev.guard_passed:  # recorded verdict: a resumed apply does not check again
        Pass.objects.filter(pk=run.pk).update(telemetry=telemetry)
        run.telemetry = telemetry
        return None
    reason = f"At apply time, after {len(ops) - len(keep)} conflicting operation(s): {ev.guard_reason}"
    return _transition(
        run, frm=(S.APPLYING,), to=S.REJECTED_BY_GUARD, actor=actor, verb="rejected_by_guard",
        note=reason, reason=reason, guard_passed=False, guard_reason=ev.guard_reason, telemetry=telemetry,
        finished_at=timezone.now(), progress=1.0, progress_label="Rejected by the loss guard at apply time",
    )


def _apply_interrupted(run: Pass, ops: list[Operation], error: str, actor: str) -> Pass:
    started = any(
        op.status not in (OS.PENDING, OS.CONFLICT, OS.EXCLUDED) for op in run.operations.all()
    )
    if not started:
        # Nothing was archived, written or deleted (store untouched, I-2): the proposal goes back
        # to review with the reviewers' exclusions and edits intact, to be approved again once
        # the store answers (a fresh-user test lost a reviewed proposal to a "failed" here).
        Operation.objects.filter(run=run, status=OS.CONFLICT).update(status=OS.PENDING, status_detail="")
        note = f"Not applied, nothing was written: {error.rstrip('. ')}. Approve again when the store is back."
        return _transition(
            run, frm=(S.APPLYING,), to=S.PROPOSED, actor=actor, verb="apply_postponed", note=note,
            error=note, decided_by=None, decided_actor="", decided_at=None, progress=0.0,
            progress_label="Not applied: the store was unreachable",
        )
    Pass.objects.filter(pk=run.pk).update(
        error=error, progress_label="Interrupted: the store is unreachable; resume with recover_passes"
    )
    _audit(actor=actor, verb="apply_interrupted", run=run, note=error)
    run.refresh_from_db()
    return run


def _apply_finish(run: Pass, ops: list[Operation], store: Any, actor: str) -> Pass:
    statuses = [op.status for op in ops]
    conflicts = statuses.count(OS.CONFLICT)
    failed = statuses.count(OS.FAILED)
    applied_ops = [op for op in ops if op.status == OS.APPLIED]
    ev = evaluate(
        entries_before=run.entries_before, included=[to_engine_operation(op) for op in applied_ops],
        excluded_count=len(ops) - len(applied_ops), max_loss_fraction=run.max_loss_fraction,
    )
    telemetry = dict(run.telemetry or {})
    telemetry["applied"] = ev.to_dict() | {"conflicts": conflicts, "failed": failed}
    to = S.PARTIALLY_APPLIED if conflicts or failed else S.APPLIED
    note = (
        f"{len(applied_ops)} operation(s) applied, {conflicts} conflict(s), {failed} failed."
    )
    run = _transition(
        run, frm=(S.APPLYING,), to=to, actor=actor, verb=to, note=note, telemetry=telemetry,
        error="", reason="" if to == S.APPLIED else note, finished_at=timezone.now(), progress=1.0,
        progress_label="Applied" if to == S.APPLIED else "Partially applied",
    )
    try:
        _refresh_checkpoint(run, ops, store)
    except Exception:  # the pass is applied; a missing sample or checkpoint is only a cost
        log.exception("could not refresh the checkpoint of agent %s", run.agent_id)
    return run


def _refresh_checkpoint(run: Pass, ops: list[Operation], store: Any) -> None:
    """The agent's checkpoint := what this pass saw (its snapshot), minus the memories it removed
    and the sources of operations that failed (to be tried again), plus what it wrote; and a
    :class:`StoreSample` of the store's size.

    Memories written to the store after planning are not in the snapshot, so the next
    incremental pass still treats them as new.
    """
    snapshot = PassSnapshot.objects.filter(run=run).values_list("hashes", flat=True).first()
    if snapshot is None:  # planned before snapshots were kept: fall back to the live store
        snapshot = {
            rec.id: rec.content_hash
            for page in store.iter_pages(page_size=5000, include_embeddings=False) for rec in page
        }
    checkpoint = dict(snapshot)
    written: dict[str, str] = {}
    for op in ops:
        if op.status == OS.APPLIED:
            for mid in op.removes:
                checkpoint.pop(mid, None)
            if op.result_id:
                written[op.result_id] = content_hash(op.result_document, op.result_metadata or {})
        elif op.status == OS.FAILED:
            for mid in op.source_ids:
                checkpoint.pop(mid, None)
    if written:
        live = _get_live(store, sorted(written), include_embeddings=False)
        checkpoint.update({mid: rec.content_hash for mid, rec in live.items()})
    Agent.objects.filter(pk=run.agent_id).update(checkpoint=checkpoint)
    run.agent.checkpoint = checkpoint
    StoreSample.objects.create(agent=run.agent, count=store.count())


# ---------------------------------------------------------------------------------------------
# single memories (operator actions)


def _memory_guard(agent: Agent) -> None:
    busy = agent.passes.filter(status__in=[S.APPLYING, S.ROLLING_BACK]).first()
    if busy is not None:
        raise ServiceError(f"Pass #{busy.pk} is {busy.status}; edit memories when it is done.")


def _memory_get(agent: Agent, memory_id: str) -> tuple[Any, MemoryRecord]:
    store = stores.get_store(agent)
    found = _get_live(store, [memory_id], include_embeddings=True).get(memory_id)
    if found is None:
        raise ServiceError(f"Memory {memory_id!r} is not in {agent.name}'s store.")
    return store, found


def _archive_operator(agent: Agent, rec: MemoryRecord, action: str, user: Any) -> ArchivedMemory:
    with transaction.atomic():
        return ArchivedMemory.objects.create(
            agent=agent, memory_id=rec.id, document=rec.document, metadata=_jsonable(rec.metadata),
            embedding=embedding_to_bytes(rec.embedding), content_hash=rec.content_hash,
            action=action, actor=_actor(user, "cli"),
        )


def memory_set_pinned(*, agent: Agent, memory_id: str, pinned: bool, user: Any) -> MemoryRecord:
    """Pin or unpin one memory (the agent's field-map ``pinned`` key); prior version archived.

    Returns the record as written. Raises :class:`ServiceError` for an unknown memory or while a
    pass is applying, :class:`StoreUnavailable` when Chroma is down.
    """
    _memory_guard(agent)
    fm = agent.get_field_map()
    store, rec = _memory_get(agent, memory_id)
    if fm.is_pinned(rec.metadata) == bool(pinned):
        return rec
    _archive_operator(agent, rec, ArchivedMemory.Action.OPERATOR_PIN, user)
    new = MemoryRecord(rec.id, rec.document, rec.embedding, {**rec.metadata, fm.pinned: bool(pinned)})
    store.upsert([new])
    _audit(actor=_actor(user, "cli"), verb="memory_pinned" if pinned else "memory_unpinned",
           agent=agent, user=user, data={"memory_id": memory_id})
    return new


def memory_edit(*, agent: Agent, memory_id: str, document: str, user: Any) -> MemoryRecord:
    """Replace one memory's text (re-embedded); prior version archived, change audited.

    Raises ``ValueError`` for an empty text or one over :data:`MAX_DOCUMENT_CHARS`, otherwise as
    :func:`memory_set_pinned`.
    """
    text = _validate_document(document)
    _memory_guard(agent)
    store, rec = _memory_get(agent, memory_id)
    if text == rec.document:
        return rec
    _archive_operator(agent, rec, ArchivedMemory.Action.OPERATOR_EDIT, user)
    new = MemoryRecord(rec.id, text, _embed([text])[0], rec.metadata)
    store.upsert([new])
    _audit(actor=_actor(user, "cli"), verb="memory_edited", agent=agent, user=user,
           data={"memory_id": memory_id, "before": rec.document, "after": text})
    return new


def memory_delete(*, agent: Agent, memory_id: str, user: Any) -> None:
    """Delete one memory after archiving it (restorable); audited. Errors as :func:`memory_set_pinned`."""
    _memory_guard(agent)
    store, rec = _memory_get(agent, memory_id)
    _archive_operator(agent, rec, ArchivedMemory.Action.OPERATOR_DELETE, user)
    store.delete([memory_id])
    _audit(actor=_actor(user, "cli"), verb="memory_deleted", agent=agent, user=user,
           data={"memory_id": memory_id})


# ---------------------------------------------------------------------------------------------
# census


def agent_census(*, agent: Agent) -> dict[str, Any]:
    """The store's and the archive's count + SHA-256 (used by tests and ``manage.py census``).

    ``{"agent": slug, "store": {"count", "sha256"}, "archive": {"count", "sha256"}}``; the archive
    hash covers memory id, document, metadata, embedding and action of every archived row.
    """
    store = stores.get_store(agent)
    h = hashlib.sha256()
    rows = ArchivedMemory.objects.filter(agent=agent).order_by("memory_id", "archived_at", "id")
    count = 0
    for a in rows.iterator():
        count += 1
        meta = json.dumps(a.metadata, sort_keys=True, ensure_ascii=False, default=str)
        for part in (a.memory_id.encode(), a.document.encode(), meta.encode(),
                     bytes(a.embedding or b""), a.action.encode()):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
    return {
        "agent": agent.slug,
        "store": stores.store_census(store),
        "archive": {"count": count, "sha256": h.hexdigest()},
    }
