"""A model's verdict on an unsure pair → the operation a reviewer decides on.

- ``same`` (keep a|b) → a MERGE of the two into the kept text, metadata united;
- ``supersedes`` (keep a|b) → a RECONCILE: the kept memory stays, the other is superseded;
- ``conflict`` / ``distinct`` / unsure → the conflict item stays (both kept), annotated with
  what the model said or why it could not be asked.

A judged operation says so in its reason ("judged by model M"), carries the model, its verdict,
its explanation and its tokens in ``scores["llm_judge"]``, and ``scores["auto_apply"] = False``
unless the rules agree: the rules left the pair unsure, so an auto-applying agent never applies
it without a reviewer (the console reads that flag). The judge never removes a pinned or
curated memory (I-6), decides at most once per memory and pass, and never takes the plan past
the loss budget: in each of those cases the conflict item stays, with the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..planning.metadata import merge_metadata
from ..plans import Fate, Operation, OpKind, Plan, merge_result_id, summarize
from ..policy import Policy
from ..records import FieldMap, MemoryRecord
from ..result import loss_budget
from .run import Judgment

__all__ = ["JUDGE_RULE", "apply_judgments"]

JUDGE_RULE = "llm_judge"
"""``Operation.rule`` of an operation the model decided."""


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _protected(record: MemoryRecord, fm: FieldMap, policy: Policy) -> bool:
    return fm.is_pinned(record.metadata) or fm.get_tier(record.metadata) == policy.curated_tier


def _figures(j: Judgment, model: str) -> dict[str, Any]:
    v = j.verdict
    return {
        "model": model,
        "verdict": v.verdict if v else "unsure",
        "keep": v.keep if v else "both",
        "why": v.why if v else "",
        "reason": j.reason,
        "detail": j.detail[:300],
        "cached": j.cached,
        "prompt_tokens": j.prompt_tokens,
        "completion_tokens": j.completion_tokens,
        "seconds": round(j.seconds, 2),
        "rules_verdict": j.pair.rules,
    }


def _annotate(op: Operation, j: Judgment, model: str, why_kept: str) -> None:
    """The conflict item stays; say what the model said (or why it was not asked)."""
    op.scores["llm_judge"] = _figures(j, model)
    op.scores["auto_apply"] = False
    if j.verdict is not None:
        op.reason += (
            f"; judged by model {model}: {j.verdict.verdict} — {_short(j.verdict.why, 160)}"
        )
    elif j.reason:
        op.reason += f"; not judged by model {model} ({j.reason})"
    if why_kept:
        op.reason += f"; kept as a conflict: {why_kept}"


def _decided(
    op: Operation, j: Judgment, model: str, fm: FieldMap, policy: Policy
) -> Operation | None:
    """The MERGE or RECONCILE the model's verdict asks for, or ``None`` (keep the conflict)."""
    v = j.verdict
    if v is None or v.verdict not in ("same", "supersedes"):
        return None
    keep, other = (j.pair.a, j.pair.b) if v.keep == "a" else (j.pair.b, j.pair.a)
    hashes = {j.pair.a.id: op.source_hashes[0], j.pair.b.id: op.source_hashes[1]}
    ids = [keep.id, other.id]
    src_hashes = [hashes[keep.id], hashes[other.id]]
    rules_agree = j.pair.rules == v.verdict
    scores: dict[str, Any] = {
        "cosine": op.scores.get("cosine"),
        "llm_judge": _figures(j, model),
        "auto_apply": rules_agree,
        "judged_by": model,
    }
    said = f"judged by model {model}: {v.verdict} — {_short(v.why, 160)}"
    unsure = "the rules were unsure" if not rules_agree else "the rules agree"
    if v.verdict == "same":
        cos = op.scores.get("cosine")
        if isinstance(cos, int | float):
            scores["pairwise"] = [[1.0, float(cos)], [float(cos), 1.0]]
            scores["min_cosine"] = scores["mean_cosine"] = float(cos)
        meta = merge_metadata(
            [keep.metadata, other.metadata], ids, fieldmap=fm, curated_tier=policy.curated_tier
        )
        return Operation(
            kind=OpKind.MERGE,
            source_ids=ids,
            source_hashes=src_hashes,
            removes=list(ids),
            rule=JUDGE_RULE,
            reason=f"{said}; keeps “{_short(keep.document)}” ({unsure}; review before applying)",
            scores=scores,
            result_id=merge_result_id(
                ids, src_hashes, [keep.document, other.document], keep.document
            ),
            result_document=keep.document,
            result_metadata=meta,
        )
    return Operation(
        kind=OpKind.RECONCILE,
        source_ids=ids,
        source_hashes=src_hashes,
        removes=[other.id],
        rule=JUDGE_RULE,
        reason=(
            f"{said}: “{_short(keep.document)}” supersedes “{_short(other.document)}” "
            f"({unsure}; review before applying)"
        ),
        scores=scores,
    )


def apply_judgments(
    plan: Plan,
    judgments: Sequence[Judgment],
    *,
    model: str,
    entries_before: int,
    policy: Policy | None = None,
    fieldmap: FieldMap | None = None,
) -> dict[str, int]:
    """Replace the plan's conflict items the model settled (module docstring), in place.

    ``judgments`` come from :func:`~.run.judge_pairs` over :func:`~.run.unsure_pairs` of this
    plan (``pair.index`` is the conflict operation's position). ``plan.result`` is recomputed
    over ``entries_before`` memories and ``plan.fates`` updated for what a judged operation
    removes. Returns counts: ``merge``, ``reconcile`` (operations made), ``kept_conflict``,
    ``blocked_protected``, ``blocked_taken`` (a memory already decided this pass),
    ``blocked_budget`` (the loss budget), by ``verdict``.
    """
    policy = policy or Policy()
    fm = fieldmap or FieldMap()
    counts: Counter[str] = Counter()
    others = [op for op in plan.operations if op.kind != OpKind.CONFLICT]
    taken = {sid for op in others for sid in op.source_ids}
    removed = len({rid for op in others for rid in op.removes})
    allowed = loss_budget(policy.max_loss_fraction, entries_before)
    for j in judgments:
        op = plan.operations[j.pair.index]
        counts[f"verdict_{j.verdict.verdict if j.verdict else 'unsure'}"] += 1
        new = _decided(op, j, model, fm, policy)
        code, why = _blocked(new, j, taken, removed, allowed, fm, policy)
        if new is None or why:
            if code:
                counts[code] += 1
            _annotate(op, j, model, why)
            counts["kept_conflict"] += 1
            continue
        plan.operations[j.pair.index] = new
        taken.update(new.source_ids)
        removed += len(new.removes)
        fate = Fate.MERGED if new.kind == OpKind.MERGE else Fate.SUPERSEDED
        for rid in new.removes:
            if rid in plan.fates:
                plan.fates[rid] = fate
        counts[new.kind.value] += 1
    plan.result = summarize(entries_before, plan.operations)
    return dict(counts)


def _blocked(
    new: Operation | None,
    j: Judgment,
    taken: set[str],
    removed: int,
    allowed: int,
    fm: FieldMap,
    policy: Policy,
) -> tuple[str, str]:
    """``(count key, reason)`` when the model's operation may not be proposed, else empty."""
    if new is None:
        return "", ""
    if any(_protected(r, fm, policy) for r in (j.pair.a, j.pair.b) if r.id in new.removes):
        return "blocked_protected", "a pinned or curated memory is never removed"
    if set(new.source_ids) & taken:
        return "blocked_taken", "one of them is already decided in this pass"
    if removed + len(new.removes) > allowed:
        return "blocked_budget", "no loss budget left in this pass"
    return "", ""
