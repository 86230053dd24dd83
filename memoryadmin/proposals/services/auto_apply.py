"""Auto-apply of a stored proposal: the part that may apply on its own is approved by the
agent's policy, the part that must wait for a person moves to a proposal of its own.

:func:`pass_auto_apply` is called by :mod:`.passes` once a proposal passed its guards; the
split itself is the engine's :func:`consolidation.review.split_auto_apply`.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django.utils.translation import ngettext

from consolidation import OpKind, Policy
from consolidation.review import Gate, model_author, operation_pairs, split_auto_apply
from consolidation.review.lost import sentences
from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.probes import (
    recall_check,
    recall_check_then,
    recall_drift,
    recall_held,
)
from memoryadmin.core.services import audit, jsonable, notify_after_commit, transition
from memoryadmin.notifications.models import NotificationEvent
from memoryadmin.proposals.models import Operation, Pass, PassSnapshot
from memoryadmin.proposals.selectors.decisions import rejected_index, rejected_joins
from memoryadmin.proposals.selectors.evaluation import pass_evaluate
from memoryadmin.proposals.selectors.guards import content_guard
from memoryadmin.proposals.services.decisions import decisions_count_held_back
from memoryadmin.proposals.services.evaluation import store_figures
from memoryadmin.proposals.telemetry import PassTelemetry, telemetry_save

__all__ = [
    "ROW_BATCH",
    "auto_apply_content_hold",
    "auto_apply_drift_hold",
    "left_by_auto_apply",
    "mark_rejected_before",
    "pass_auto_apply",
]

S = Pass.Status

EDITED = "edited by a reviewer: a person approves the edited text"
"""Why an operation whose text a reviewer edited waits (code ``edited``)."""

ROW_BATCH = 1000
"""Rows per ``INSERT`` when a proposal is stored (``bulk_create``: one statement per batch, not
one per operation: 12,000 operations of a 200K store took ~20 s one ``create`` at a time)."""


def left_by_auto_apply(agent: Agent, pending: Pass) -> bool:
    """Whether ``pending`` is what auto-apply left for a person (the waiting part of a split
    pass, or a pass of which nothing could apply on its own) while the agent still
    auto-applies. An operator who leaves auto-apply on expects the schedule to keep consolidating
    what is not waiting; the waiting part is planned again by the next pass, never applied
    without the guards and the split (an operation a reviewer edited waits for a person again)."""
    return agent.auto_apply != Agent.AutoApply.OFF and pending.telemetry_data.auto_apply is not None


def pass_auto_apply(
    run: Pass,
    planned: Any,
    scored: list[Any],
    policy: Policy,
    actor: str,
    *,
    hold: tuple[str, str] | None = None,
) -> Pass:
    """A proposal that passed its guards, of an agent that auto-applies (``planned``: the
    :class:`~.passes.PassPlan` it was stored from, ``scored``: each operation's ``(loss, risk)``
    as stored): ``approved`` by
    "policy", except what must wait for a person, which moves to a new proposal of the agent
    (``telemetry_data.auto_apply`` of both names the other; the page says "applied automatically:
    N · waiting for review: M").

    - ``safe``: :func:`consolidation.review.split_auto_apply` over the operations as planned,
      their stored risk and loss, the agent's decisions and the signatures of the operations
      reviewers rejected (:func:`~memoryadmin.proposals.selectors.decisions.rejected_index`),
      then again with the operations of that safe part that cost a probe query its answer
      (:func:`~memoryadmin.agents.selectors.probes.recall_held`) held for review;
    - ``all``: only the operations a model wrote or decided
      (:func:`consolidation.review.model_author`) and those matching a rejected plan wait
      (conflicts stay, unapplied, as before) — unless ``hold`` (``(code, reason)``: the
      content guard or the recall drift failed on the whole pass, ``services.evaluation``)
      holds every operation: each is marked with it, beside "rejected before" where that
      applies, and the pass stays a proposal that, like any waiting part, does not stop the
      schedule (:func:`left_by_auto_apply`).

    Each waiting operation keeps its reasons in ``scores["waiting"]`` (``{"codes", "reasons"}``).
    Nothing safe → the pass stays a proposal, its operations annotated the same way. A rejected
    plan's ``held_back`` counts the operations it held.
    """
    mode = run.agent.auto_apply
    ops = planned.plan.operations
    rejected = rejected_index(run.agent)
    joins = rejected_joins(run.agent)
    waiting = _waiting_gates(run, planned, scored, policy, rejected, joins, hold)
    _annotate_waiting(run, waiting, rejected, joins, ops)
    left = run.operations.exclude(index__in=list(waiting)).exclude(kind=OpKind.CONFLICT.value)
    counts = {"mode": mode, "waiting": len(waiting), "reasons": _reason_counts(waiting.values())}
    if not left.exclude(status=Operation.Status.EXCLUDED).exists():
        counts["applied"] = 0
        telemetry = run.telemetry_data.with_(auto_apply=counts).to_json()
        label = "Waiting for review" + (f" ({HOLD_LABELS.get(hold[0], hold[0])})" if hold else "")
        Pass.objects.filter(pk=run.pk).update(telemetry=telemetry, progress_label=label)
        if hold is None:  # a hold was audited with its figures where it was found
            audit(
                actor="policy",
                verb="auto_apply_held",
                run=run,
                agent=run.agent,
                note=f"Auto-apply ({mode}): nothing may apply on its own; "
                f"{len(waiting):,} {ngettext('operation waits', 'operations wait', len(waiting))} "
                "for review.",
                data=counts,
            )
        run.refresh_from_db()
        return run
    first = [
        ops[i]
        for i in left.exclude(status=Operation.Status.EXCLUDED).values_list("index", flat=True)
    ]
    applied = len(first)
    counts["applied"] = applied
    if (run.recall or {}).get("passed", True) is False:
        # The whole plan failed the recall guard (services.proposal.recall_split): what
        # applies on its own is held to the guard by itself, measured on the same snapshot.
        own = recall_check(run.agent, planned.records, first, policy)
        if not own.get("passed", True):
            return _recall_rejected(run, own, counts)
        counts["recall_split"] = True
        Pass.objects.filter(pk=run.pk).update(recall=jsonable(own))
        run.recall = jsonable(own)
    if mode == "all" and isinstance((run.recall or {}).get("ratio"), int | float):
        counts["recall_ratio"] = run.recall["ratio"]  # what selectors.probes.recall_drift sums
    if waiting:
        then = [ops[i] for i in waiting]  # its own recall: from the store the applied part leaves
        recall = recall_check_then(run.agent, planned.records, first, then, policy)
        child = _waiting_part(run, list(waiting), counts, recall)
        counts["waiting_pass"] = child.pk
    telemetry_save(run, run.telemetry_data.with_(auto_apply=counts))
    note = f"Auto-applied by the agent's policy ({mode}): the guards passed."
    if counts.get("recall_split"):
        note += (
            " The whole plan failed the recall guard; the part applied passes it by itself, "
            "and the operations behind the lost answers wait for review."
        )
    if waiting:
        note += (
            f" Applied automatically: {applied:,} · waiting for review: {len(waiting):,} "
            f"(pass #{counts['waiting_pass']})."
        )
    return transition(
        run,
        frm=(S.PROPOSED,),
        to=S.APPROVED,
        actor="policy",
        verb="approved",
        note=note,
        decided_by=None,
        decided_actor="policy",
        decided_at=timezone.now(),
        progress=0.0,
        progress_label="Waiting to apply",
    )


def mark_rejected_before(run: Pass, planned: Any, scored: list[Any], policy: Policy) -> None:
    """With auto-apply off every operation waits for a person anyway; the ones matching a
    rejected plan are still marked "rejected before in pass #N: <note>" (``scores["waiting"]``)
    and counted by that decision, and the ones a model wrote or decided "written by model M"
    / "decided by model M", as under ``safe`` and ``all``. Nothing else changes."""
    rejected, joins = rejected_index(run.agent), rejected_joins(run.agent)
    if not rejected and not joins and not any(map(model_author, planned.plan.operations)):
        return
    split = split_auto_apply(
        planned.plan.operations,
        [risk for _, risk in scored],
        [loss for loss, _ in scored],
        policy,
        store_sentences=0,
        rejected={sig: note for sig, (_, note) in rejected.items()},
        rejected_joins=[(joined, note) for joined, (_, note) in joins],
    )
    waiting = _rejected_gates(split.gates)
    if waiting:
        _annotate_waiting(run, waiting, rejected, joins, planned.plan.operations)


ALWAYS_WAITS = ("model", "rejected")
"""Codes of :func:`consolidation.review.split_auto_apply` that hold an operation under every
mode: a model wrote or decided it (``model``, I-7), or it repeats a rejected plan."""


def _rejected_gates(gates: Any, hold: tuple[str, str] | None = None) -> dict[int, Gate]:
    """``{index: gate}`` of the operations that wait whatever the mode — a model wrote or
    decided it, or a rejected plan holds it (:data:`ALWAYS_WAITS`) — and, with ``hold`` (a
    whole-pass hold of ``all``), every operation but conflicts, each with just those reasons:
    what waits under ``all``, and what is marked with auto-apply off."""
    waiting = {}
    for g in gates:
        codes, why = [], []
        if "model" in g.codes:
            codes.append("model")
            why.append(g.reasons[g.codes.index("model")])
        if "rejected" in g.codes:
            codes.append("rejected")
            why.append(g.reasons[g.codes.index("rejected")])
        if hold is not None and "conflict" not in g.codes:
            codes.append(hold[0])
            why.append(hold[1])
        if codes:
            waiting[g.index] = Gate(g.index, False, g.signature, tuple(codes), tuple(why))
    return waiting


HOLD_LABELS = {"content": "content guard", "drift": "recall drift"}
"""The progress label's words for a whole-pass hold of auto-apply ``all``."""


def _waiting_gates(
    run: Pass,
    planned: Any,
    scored: list[Any],
    policy: Policy,
    rejected: dict[str, Any],
    joins: list[Any],
    hold: tuple[str, str] | None = None,
) -> dict[int, Gate]:
    """``{operation index: gate}`` of the operations of ``run`` that wait for a person under
    the agent's mode (see :func:`pass_auto_apply`; ``hold`` holds every one under ``all``), an
    operation a reviewer edited included."""
    mode = run.agent.auto_apply
    ops = planned.plan.operations
    docs = (r.document for r in planned.records)
    args = (ops, [risk for _, risk in scored], [loss for loss, _ in scored], policy)
    kwargs: dict[str, Any] = {
        "store_sentences": sum(len(sentences(d)) for d in docs),
        "decisions": planned.decisions,
        "rejected": {sig: note for sig, (_, note) in rejected.items()},
        "rejected_joins": [(joined, note) for joined, (_, note) in joins],
    }
    split = split_auto_apply(*args, **kwargs)
    if mode == "safe" and split.safe:
        # What safe would apply, measured on the probes: an operation behind a lost answer
        # waits for a person too, and the rest is split again without it.
        safe = split.safe
        held = recall_held(run.agent, planned.records, [ops[i] for i in safe], policy)
        if held:
            kwargs["recall_held"] = {safe[i]: why for i, why in held.items()}
            split = split_auto_apply(*args, **kwargs)
    if mode == "all":
        waiting = _rejected_gates(split.gates, hold)
    else:
        waiting = {g.index: g for g in split.waiting}
    # An edit a reviewer made on the waiting part (carried over to this pass) is applied only
    # when a person approves it: the split judged the planned text, not the edited one.
    for index in run.operations.filter(edited=True).values_list("index", flat=True):
        if index not in waiting:
            gate = split.gates[index]
            waiting[index] = Gate(index, False, gate.signature, ("edited",), (EDITED,))
    return waiting


def _annotate_waiting(
    run: Pass,
    waiting: dict[int, Gate],
    rejected: dict[str, Any],
    joins: list[Any],
    ops: list[Any],
) -> None:
    """Each waiting operation's reasons into ``scores["waiting"]``; each rejected plan's
    ``held_back`` counts the operations it held (by signature, else by a join it repeats)."""
    held: dict[int, int] = {}
    keys: dict[int, list[str]] = {}
    for g in waiting.values():
        if "rejected" not in g.codes:
            continue
        if g.signature in rejected:
            pk = rejected[g.signature][0]
        else:
            pairs = operation_pairs(ops[g.index])
            pk = next((p for joined, (p, _) in joins if joined <= pairs), None)
        if pk is not None:
            held[pk] = held.get(pk, 0) + 1
            keys.setdefault(pk, []).append(g.signature)
    decisions_count_held_back(agent=run.agent, counts=held, keys=keys)
    rows = {op.index: op for op in run.operations.filter(index__in=list(waiting))}
    for i, g in waiting.items():
        row = rows.get(i)
        if row is not None:
            row.scores = {
                **(row.scores or {}),
                "waiting": {"codes": list(g.codes), "reasons": list(g.reasons)},
            }
    Operation.objects.bulk_update(list(rows.values()), ["scores"], batch_size=ROW_BATCH)


def _recall_rejected(run: Pass, recall: dict[str, Any], counts: dict[str, Any]) -> Pass:
    """``run`` rejected by the recall guard after all: even the part auto-apply ``safe`` would
    apply, with the operations behind the lost answers held, fails it (nothing applies, as for
    any pass rejected by a guard; the next scheduled pass plans again)."""
    reason = (
        "Recall guard tripped on the part auto-apply would apply on its own: "
        f"{recall.get('reason', '')}"
    )
    return transition(
        run,
        frm=(S.PROPOSED,),
        to=S.REJECTED_BY_GUARD,
        actor="policy",
        verb="rejected_by_guard",
        note=reason,
        data=counts,
        reason=reason,
        recall=jsonable(recall),
        telemetry=run.telemetry_data.with_(auto_apply={**counts, "applied": 0}).to_json(),
        finished_at=timezone.now(),
        progress_label="Rejected by the recall guard",
    )


def _reason_counts(gates: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for g in gates:
        for c in g.codes:
            out[c] = out.get(c, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _waiting_part(
    run: Pass, indexes: list[int], counts: dict[str, Any], recall: dict[str, Any]
) -> Pass:
    """Move operations ``indexes`` of ``run`` (with their sources) to a new ``proposed`` pass
    of the agent — the part waiting for review — and re-evaluate both. The waiting part is
    counted from the store the applied part leaves (its ``entries_before`` is the applied
    part's ``entries_after``, e.g. 530 → 519 applied, then 519 → … waiting), so its store
    change and its loss fraction are those of approving it after the applied part; ``recall``
    (:func:`~memoryadmin.agents.selectors.probes.recall_check_then`) is measured the same way."""
    parent = run.telemetry_data
    telemetry = PassTelemetry(now=parent.now, review=parent.review, layer=parent.layer).with_(
        auto_apply={
            "part": "waiting",
            "applied_pass": run.pk,
            "mode": counts["mode"],
            "applied": counts["applied"],
            "waiting": counts["waiting"],
            "reasons": counts["reasons"],
        }
    )
    child = Pass.objects.create(
        agent=run.agent,
        status=S.PROPOSED,
        trigger=Pass.Trigger.POLICY,
        requested_by=run.requested_by,
        policy=run.policy,
        max_loss_fraction=run.max_loss_fraction,
        entries_before=run.entries_before,
        recall=jsonable(recall),
        telemetry=telemetry.to_json(),
        snapshot_hash=run.snapshot_hash,
        started_at=run.started_at,
        planned_at=run.planned_at,
        progress=1.0,
        progress_label="Waiting for review",
    )
    Operation.objects.filter(run=run, index__in=indexes).update(run=child)
    hashes = PassSnapshot.objects.filter(run=run).values_list("hashes", flat=True).first() or {}
    PassSnapshot.objects.create(run=child, hashes=hashes)
    applied = pass_evaluate(run)
    store_figures(run, applied)
    Pass.objects.filter(pk=child.pk).update(entries_before=applied.entries_after)
    child.entries_before = applied.entries_after
    store_figures(child, pass_evaluate(child))
    audit(
        actor="policy",
        verb="proposed",
        run=child,
        agent=run.agent,
        to_status=S.PROPOSED,
        note=f"Waiting for review: {len(indexes):,} "
        f"{ngettext('operation', 'operations', len(indexes))} of pass #{run.pk} that "
        "auto-apply does not apply on its own.",
        data={"operations": len(indexes), "applied_pass": run.pk, "reasons": counts["reasons"]},
    )
    notify_after_commit(child, NotificationEvent.PROPOSAL_WAITING)
    return child


def auto_apply_content_hold(run: Pass) -> str | None:
    """Auto-apply ``all`` needs the content guard to pass as well as the loss guard
    (:func:`~memoryadmin.proposals.selectors.guards.content_guard`). ``None`` when it
    passes; else the guard's reason (the pass stays a proposal for a person, audited
    ``auto_apply_held``; :func:`~.auto_apply.pass_auto_apply` marks every operation with it)."""
    guard = content_guard(run)
    if guard.passed:
        return None
    data = {"content_words": guard.totals.content_words, "sentences": guard.totals.sentences}
    _audit_held(run, guard.reason, data)
    return f"content guard: {guard.reason}"


def _audit_held(run: Pass, reason: str, data: dict[str, Any]) -> None:
    """Audit that auto-apply ``all`` holds ``run`` whole for ``reason`` (the progress label is
    set by :func:`~.auto_apply.pass_auto_apply`, which marks the operations)."""
    audit(
        actor="policy",
        verb="auto_apply_held",
        run=run,
        agent=run.agent,
        note=f"Not applied automatically: {reason}. A person may review and approve it.",
        data=data,
    )


def auto_apply_drift_hold(run: Pass, min_retention: float | None) -> str | None:
    """Auto-apply ``all`` also needs the recall kept since a person last approved a pass: the
    product of the after/before answer-recall ratios of the passes it applied since then
    (:func:`~memoryadmin.agents.selectors.probes.recall_drift`) times this pass's must stay at
    or above ``min_retention`` (the policy's ``min_recall_retention``, the per-pass guard's
    threshold, so five nights of 99.5 % do not add up to 97.5 % unattended). When it would not,
    the pass stays a proposal for a person, audited ``auto_apply_held`` with the figures, and
    the reason is returned (``None`` when it passes, the recall guard is off or the agent has no
    probes); a person's approval starts the count again."""
    recall = run.recall or {}
    ratio = recall.get("ratio")
    if min_retention is None or not isinstance(ratio, int | float) or not recall.get("probes"):
        return None
    drift = recall_drift(run.agent, str(recall.get("probe_set") or ""))
    kept = drift["retention"] * float(ratio)
    if kept >= min_retention - 1e-12:
        return None
    n = len(drift["passes"])
    since = (
        f"since pass #{drift['since']}, the last a person approved,"
        if drift["since"]
        else "kept by the automatic passes on these probe queries"
    )
    reason = (
        f"recall {since} would be {kept:.1%} after this pass "
        f"({n} automatic pass{'es' if n != 1 else ''} kept {drift['retention']:.1%}, this one "
        f"{float(ratio):.1%}), below the recall retention {min_retention:.0%}"
    )
    _audit_held(run, reason, {"recall_drift": kept, "passes": drift["passes"],
                              "since": drift["since"]})  # fmt: skip
    return reason
