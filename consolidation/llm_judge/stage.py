"""The LLM judge as one step of a pass: unsure pairs → model → operations → figures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..plans import Plan
from ..policy import Policy
from ..protocols import JSONWriter
from ..records import FieldMap, MemoryRecord
from .operations import apply_judgments
from .run import Judgment, VerdictCache, judge_pairs, unsure_pairs

__all__ = ["JUDGE_LOG_LIMIT", "judge_unsure"]

JUDGE_LOG_LIMIT = 200
"""Pairs listed one by one in the figures (the counts cover every pair)."""


def _summary(judgments: Sequence[Judgment], stopped: str, detail: str, model: str) -> str:
    total = len(judgments)
    if total == 0:
        return "no unsure pair to judge"
    answered = [j for j in judgments if j.verdict is not None]
    cached = sum(j.cached for j in answered)
    verdicts = Counter(j.verdict.verdict for j in answered if j.verdict)
    text = f"judged {len(answered)} of {total} unsure pair{'s' if total != 1 else ''} with {model}"
    if cached:
        text += f" ({cached} from the cache)"
    if verdicts:
        text += ": " + ", ".join(f"{n} {v}" for v, n in verdicts.most_common())
    left = total - len(answered)
    if left:
        why = Counter(j.reason for j in judgments if j.verdict is None)
        text += f"; {left} still unsure (" + ", ".join(f"{k} {n}" for k, n in why.most_common())
        text += ")"
    if stopped == "budget":
        text += f"; {detail}"
    return text


def judge_unsure(
    plan: Plan,
    records: Sequence[MemoryRecord],
    writer: JSONWriter,
    *,
    policy: Policy | None = None,
    fieldmap: FieldMap | None = None,
    cache: VerdictCache | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Send ``plan``'s unsure pairs (its conflict items) to ``writer`` and propose what the
    model settles (:func:`~.operations.apply_judgments`), in place; returns the figures for
    ``plan.context["llm"]["judge"]``: ``summary`` (one sentence), ``pairs``, ``judged``,
    ``cached``, ``unsure`` (count by reason), ``verdicts``, ``operations`` (counts from
    :func:`apply_judgments`), ``stopped``, the budget and the :class:`Usage` figures, and
    ``pair_log`` (the first :data:`JUDGE_LOG_LIMIT` pairs: ids, verdict, reason, tokens).
    Never raises for what the endpoint does."""
    policy = policy or Policy()
    model = str(getattr(writer, "model", "") or "LLM")
    pairs = unsure_pairs(plan, records)
    judgments, usage, stopped = judge_pairs(
        pairs, writer, policy=policy, fieldmap=fieldmap, cache=cache, progress=progress
    )
    counts = apply_judgments(
        plan,
        judgments,
        model=model,
        entries_before=len(records),
        policy=policy,
        fieldmap=fieldmap,
    )
    detail = next((j.detail for j in judgments if j.reason == stopped and stopped), "")
    answered = [j for j in judgments if j.verdict is not None]
    return {
        "summary": _summary(judgments, stopped, detail, model),
        "model": model,
        "pairs": len(pairs),
        "judged": len(answered),
        "cached": sum(j.cached for j in answered),
        "unsure": dict(Counter(j.reason for j in judgments if j.verdict is None)),
        "verdicts": dict(Counter(j.verdict.verdict for j in answered if j.verdict)),
        "operations": counts,
        "stopped": stopped,
        "budget_seconds": policy.judge_budget_seconds,
        "max_pairs": policy.judge_max_pairs,
        **usage.to_dict(),
        "pair_log": [
            {
                "ids": [j.pair.a.id, j.pair.b.id],
                "verdict": j.verdict.verdict if j.verdict else "unsure",
                "keep": j.verdict.keep if j.verdict else "both",
                "reason": j.reason,
                "cached": j.cached,
                "prompt_tokens": j.prompt_tokens,
                "completion_tokens": j.completion_tokens,
                "seconds": round(j.seconds, 2),
            }
            for j in judgments[:JUDGE_LOG_LIMIT]
        ],
    }
