"""Standing decisions: record what a reviewer decided so every later pass plans with it; revoke.

Where decisions come from (docs/OPERATOR.md, "Standing decisions"):

- excluding a merge or a reconcile (folds and windows are merges) → ``keep_apart`` of its
  sources; including it again revokes that decision;
- restoring an archived memory → ``keep`` of it;
- a conflict: keep A / keep B → ``conflict_pick``; keep both → ``keep`` of both, kept apart;
  deciding the same conflict again replaces the earlier decision;
- rejecting a pass → ``rejected_plan`` (the signatures of its included operations); with
  "never propose these again" also ``keep_apart`` for each merge and reconcile and ``keep``
  for each prune.

Every decision and every revocation is audited (``decision_set`` / ``decision_revoked``).
Revoking takes the decision's memories out of the agent's checkpoint, so the next pass judges
them again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from consolidation.decisions import operation_signature
from consolidation.review import JOINING_KINDS
from memoryadmin.agents.models import Agent
from memoryadmin.core.roles import REVIEW, require
from memoryadmin.core.services import actor_name, audit, user_or_none
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Decision, Operation, Pass
from memoryadmin.proposals.selectors.decisions import decision_constraints, decision_label
from memoryadmin.proposals.selectors.evaluation import to_engine_operation

__all__ = [
    "APART_KINDS",
    "decision_create",
    "decision_for_conflict",
    "decision_for_restore",
    "decision_revoke",
    "decisions_count_held_back",
    "decisions_for_exclusion",
    "decisions_for_inclusion",
    "decisions_for_rejection",
    "stored_signature",
]

K = Decision.Kind

APART_KINDS = (Operation.Kind.MERGE, Operation.Kind.RECONCILE)
"""Operation kinds whose exclusion keeps their memories apart (a reviewer's pick on a conflict
is a reconcile too, but it is recorded as a conflict pick instead)."""


def stored_signature(op: Operation) -> str:
    """The operation's signature as planned (``Operation.signature``, else computed from the
    stored row with its planned text: for operations stored before signatures were kept)."""
    if op.signature:
        return op.signature
    engine = to_engine_operation(op)
    engine.result_document = op.planned_document or None
    return operation_signature(engine)


def _memories(op: Operation) -> list[list[str]]:
    by_id = {s.memory_id: s.content_hash for s in op.sources.all()}
    return [[mid, by_id.get(mid, "")] for mid in op.source_ids]


def decision_create(
    *,
    agent: Agent,
    kind: str,
    memories: Iterable[Iterable[str]],
    user: Any = None,
    actor: str | None = None,
    payload: dict[str, Any] | None = None,
    note: str = "",
    run: Pass | None = None,
    operation: Operation | None = None,
) -> Decision:
    """Record one decision of ``agent`` (audited ``decision_set``) and return it.

    ``kind`` a :class:`Decision.Kind` value; ``memories`` ``[(memory id, content hash), ...]``;
    ``payload`` as :class:`Decision` documents it; ``run``/``operation`` where it was made.
    The engine's own checks run first (``consolidation.decisions.Constraint``). Raises
    ``ValueError`` for an unknown kind or a decision the engine refuses, :class:`ServiceError`
    when ``user`` is not a reviewer.
    """
    require(user, REVIEW, "set decisions")
    kind = Decision.Kind(kind).value
    d = Decision(
        agent=agent,
        kind=kind,
        memories=[[str(m), str(h)] for m, h in (tuple(x) for x in memories)],
        payload=dict(payload or {}),
        note=(note or "").strip()[:2000],
        created_by=user_or_none(user),
        created_actor=actor or actor_name(user, "cli"),
        run=run,
        operation=operation,
    )
    decision_constraints(d)  # the engine's checks (ids, hashes, pick) before anything is saved
    with transaction.atomic():
        d.save()
        audit(
            actor=d.created_actor,
            verb="decision_set",
            agent=agent,
            user=user,
            note=f"{decision_label(d).capitalize()}: {', '.join(d.memory_ids[:6])}"
            + (" …" if len(d.memory_ids) > 6 else ""),
            data={
                "decision": d.pk,
                "kind": kind,
                "memory_ids": d.memory_ids[:50],
                **({"pass": run.pk} if run is not None else {}),
            },
        )
    return d


def decision_revoke(*, decision: Decision, user: Any, note: str = "") -> Decision:
    """Revoke ``decision`` (audited ``decision_revoked``): later passes no longer plan with it,
    and its memories leave the agent's checkpoint so the next pass judges them again. Revoking
    a revoked decision changes nothing. Raises :class:`ServiceError` when ``user`` is not a
    reviewer."""
    require(user, REVIEW, f"revoke decisions of {decision.agent.name}")
    actor = actor_name(user, "cli")
    with transaction.atomic():
        d = (
            Decision.objects.select_for_update(of=("self",))
            .select_related("agent", "run")
            .get(pk=decision.pk)
        )
        if d.revoked_at is not None:
            return d
        d.revoked_at = timezone.now()
        d.revoked_by = user_or_none(user)
        d.revoked_actor = actor
        d.revoke_note = (note or "").strip()[:2000]
        d.save(update_fields=["revoked_at", "revoked_by", "revoked_actor", "revoke_note"])
        agent = Agent.objects.select_for_update().get(pk=d.agent_id)
        checkpoint = dict(agent.checkpoint or {})
        ids = set(d.memory_ids)
        if d.kind == K.REJECTED_PLAN:
            ids = set()  # a rejected plan held nothing out of the plan
        if ids & checkpoint.keys():
            for mid in ids:
                checkpoint.pop(mid, None)
            Agent.objects.filter(pk=agent.pk).update(checkpoint=checkpoint)
        audit(
            actor=actor,
            verb="decision_revoked",
            agent=d.agent,
            user=user,
            note=f"Revoked {decision_label(d)}" + (f": {d.revoke_note}" if d.revoke_note else ""),
            data={"decision": d.pk, "kind": d.kind, "pass": d.run_id},
        )
    decision.revoked_at, decision.revoked_actor = d.revoked_at, d.revoked_actor
    return d


def decisions_for_exclusion(
    *, run: Pass, operations: Iterable[Operation], user: Any
) -> list[Decision]:
    """A ``keep_apart`` decision for each excluded merge or reconcile of ``run`` (not a
    reviewer's pick) and a ``keep`` decision for each excluded prune (its memory is not
    pruned again, and the next pass says so, until the decision is revoked or the prune
    included again), each that has none yet; returns the new ones."""
    out = []
    for op in operations:
        prune = op.kind == Operation.Kind.PRUNE
        apart = op.kind in APART_KINDS and op.rule != "reviewer_pick" and len(op.source_ids) > 1
        if not (prune or apart):
            continue
        kind = K.KEEP if prune else K.KEEP_APART
        if op.decisions.filter(kind=kind, revoked_at__isnull=True).exists():
            continue
        out.append(
            decision_create(
                agent=run.agent,
                kind=kind,
                memories=_memories(op),
                user=user,
                run=run,
                operation=op,
                note=f"excluded {op.kind} #{op.index}",
            )
        )
    return out


def decisions_for_inclusion(*, operations: Iterable[Operation], user: Any) -> int:
    """Revoke the keep-apart (merge, reconcile) and keep (prune) decisions made by excluding
    these operations (they are included again); returns how many."""
    n = 0
    for op in operations:
        kind = K.KEEP if op.kind == Operation.Kind.PRUNE else K.KEEP_APART
        for d in op.decisions.filter(kind=kind, revoked_at__isnull=True):
            decision_revoke(decision=d, user=user, note=f"operation #{op.index} included again")
            n += 1
    return n


def decision_for_conflict(*, run: Pass, operation: Operation, keep: str, user: Any) -> Decision:
    """The decision of a conflict: keep ``"a"`` / ``"b"`` → ``conflict_pick``, ``"both"`` →
    ``keep`` of both memories, kept apart. An earlier decision on the same operation is
    revoked first (the reviewer changed their mind)."""
    for d in operation.decisions.filter(revoked_at__isnull=True):
        decision_revoke(decision=d, user=user, note="the conflict was decided again")
    origin = (operation.scores or {}).get("conflict") or {}
    a_id, b_id = (origin.get("ids") or operation.source_ids)[:2]
    hashes = {s.memory_id: s.content_hash for s in operation.sources.all()}
    mems = [[a_id, hashes.get(a_id, "")], [b_id, hashes.get(b_id, "")]]
    common = {"agent": run.agent, "memories": mems, "user": user, "run": run}
    if keep == "both":
        return decision_create(
            kind=K.KEEP,
            payload={"apart": True},
            operation=operation,
            note=f"kept both of conflict #{operation.index}",
            **common,
        )
    kept = a_id if keep == "a" else b_id
    return decision_create(
        kind=K.CONFLICT_PICK,
        payload={"keep": kept},
        operation=operation,
        note=f"kept {keep.upper()} of conflict #{operation.index}",
        **common,
    )


def decision_for_restore(*, archived: ArchivedMemory, agent: Agent, user: Any) -> Decision:
    """A ``keep`` decision on ``agent`` (the archive row's) for a memory restored from the
    archive: no later pass removes it again until revoked (its source pass: the pass that
    archived it)."""
    run = Pass.objects.filter(pk=archived.run_id).first() if archived.run_id else None
    return decision_create(
        agent=agent,
        kind=K.KEEP,
        memories=[[archived.memory_id, archived.content_hash]],
        user=user,
        run=run,
        note="restored from the archive",
    )


def decisions_for_rejection(
    *, run: Pass, user: Any, note: str, never_again: bool = False, actor: str | None = None
) -> list[Decision]:
    """The decisions of rejecting ``run``: one ``rejected_plan`` with the signatures of its
    included operations (conflicts aside: they never apply on their own) and the memories each
    of its merges and reconciles joined (``payload["joins"]``), and with
    ``never_again`` a ``keep_apart`` per merge and reconcile and a ``keep`` per prune.
    ``actor`` (with ``user`` ``None``) records them in that name without the reviewer check:
    a rollback's rejected plan, which whoever may roll back may record."""
    ops = list(
        run.operations.exclude(status=Operation.Status.EXCLUDED)
        .exclude(kind=Operation.Kind.CONFLICT)
        .prefetch_related("sources")
        .order_by("index")
    )
    if not ops:
        return []
    sigs = sorted({stored_signature(op) for op in ops})
    seen: dict[str, str] = {}
    for op in ops:
        for mid, h in _memories(op):
            seen.setdefault(mid, h)
    out = [
        decision_create(
            agent=run.agent,
            kind=K.REJECTED_PLAN,
            memories=[[m, h] for m, h in seen.items()],
            payload={
                "signatures": sigs,
                "operations": len(ops),
                # what each merge and reconcile joined: a later one joining all of the same
                # memories waits too, whatever else it joins (selectors.decisions.rejected_joins)
                "joins": [_memories(op) for op in ops if op.kind in JOINING_KINDS],
            },
            user=user,
            actor=actor,
            run=run,
            note=note,
        )
    ]
    if never_again:
        apart = [op for op in ops if op.kind != Operation.Kind.PRUNE]
        out += decisions_for_exclusion(run=run, operations=apart, user=user)
        for op in ops:
            if op.kind == Operation.Kind.PRUNE:
                out.append(
                    decision_create(
                        agent=run.agent,
                        kind=K.KEEP,
                        memories=_memories(op),
                        user=user,
                        run=run,
                        operation=op,
                        note=f"rejected prune #{op.index}, never again",
                    )
                )
    return out


def decisions_count_held_back(
    *, agent: Agent, counts: dict[Any, int], keys: dict[Any, list[str]] | None = None
) -> None:
    """Add what a pass held back to the decisions' ``held_back``: for a decision with ``keys``
    (``{decision id: [operation key]}``, a plan's ``held_back_keys`` or a rejected plan's
    signatures) the keys it has not held back before, so an operation planned again is counted
    once (at most :data:`HELD_KEYS_MAX` keys are kept per decision; past them each is
    counted); else ``counts`` (``{decision id: operations}``, a plan's
    ``held_back_by_decision``)."""
    keys = keys or {}
    for pk, n in counts.items():
        try:
            pk, n = int(pk), int(n)
        except (TypeError, ValueError):
            continue
        wanted = keys.get(str(pk), keys.get(pk))
        if isinstance(wanted, list):
            d = Decision.objects.select_for_update().filter(pk=pk, agent=agent).first()
            if d is None:
                continue
            seen = set(d.held_keys or [])
            new = sorted({str(k) for k in wanted} - seen)
            d.held_keys = (list(d.held_keys or []) + new)[:HELD_KEYS_MAX]
            d.held_back += len(new) if len(seen) < HELD_KEYS_MAX else n
            d.save(update_fields=["held_keys", "held_back"])
        elif n > 0:
            Decision.objects.filter(pk=pk, agent=agent).update(held_back=F("held_back") + n)


HELD_KEYS_MAX = 10_000
"""Operation keys a decision keeps to count what it held back once (16 hex each: ~200 kB)."""
