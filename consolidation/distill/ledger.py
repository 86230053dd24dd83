"""The account of a distillation: every group done, skipped or failed, with its reason and cost.

A pass shows it on the proposal (``plan.context["llm"]["distill"]``, :meth:`Ledger.to_context`)
and says in one sentence how far it got (:meth:`Ledger.summary`): "distilled 4 of 25
sessions; budget 300 s spent; 21 left for later passes". Groups that were not done stay out of
the distillation checkpoint, so a later pass sends them again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..llm_usage import Usage
from .groups import DistillGroup

__all__ = ["DONE", "FAILED", "GROUP_LOG_LIMIT", "REASON_TEXT", "SKIPPED", "GroupOutcome", "Ledger"]

DONE, SKIPPED, FAILED = "done", "skipped", "failed"
"""A group's outcome: answered and validated; never sent; sent without a usable reply."""

GROUP_LOG_LIMIT = 500
"""Groups listed one by one in the figures; past this only the counts grow (a store of 10,000
sessions would otherwise store a 10,000-row log with every proposal)."""

REASON_TEXT = {
    "budget": "the time budget was spent",
    "timeout": "timed out",
    "rate_limited": "rate limited",
    "server_error": "server error",
    "unreachable": "endpoint unreachable",
    "auth": "API key rejected",
    "not_found": "model or route not found",
    "refused": "request refused",
    "too_large": "too large for the model's context",
    "truncated": "reply cut at the token limit",
    "not_json": "reply not JSON",
    "schema": "reply not of the facts schema",
    "echoed_input": "reply echoed the input",
    "empty": "empty reply",
    "invalid_reply": "invalid reply",
    "endpoint_failing": "the endpoint kept failing",
    "unavailable": "endpoint unavailable",
}
"""Readable words for each reason code (``LLMUnavailable.reason``, ``LLMOutputError.reason``,
and the distillation's own ``budget`` / ``endpoint_failing``)."""


@dataclass
class GroupOutcome:
    """One group's line in the account: its ``session`` label and ``memories`` count, the
    ``outcome`` (:data:`DONE`, :data:`SKIPPED`, :data:`FAILED`), a ``reason`` code and
    ``detail`` (the error's own words, ≤ 300 chars), and what it cost: ``requests``,
    ``prompt_tokens``, ``completion_tokens``, ``seconds``; ``facts`` proposed from it."""

    session: str
    memories: int
    outcome: str
    reason: str = ""
    detail: str = ""
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    facts: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (seconds rounded to 0.01)."""
        return {
            "session": self.session,
            "memories": self.memories,
            "outcome": self.outcome,
            "reason": self.reason,
            "detail": self.detail[:300],
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 2),
            "facts": self.facts,
        }


class Ledger:
    """Collects :class:`GroupOutcome` rows and the pass's :class:`Usage`.

    ``sessions`` (constructor) is every session label that has a group to send, so a session
    counts as distilled only when all its groups are done.
    """

    def __init__(self, sessions: list[str], budget_seconds: float) -> None:
        self.sessions = list(dict.fromkeys(sessions))
        self.budget_seconds = budget_seconds
        self.rows: list[GroupOutcome] = []
        self.usage = Usage()
        self.stopped: str = ""  # reason code when the distillation stopped sending
        self.stopped_detail: str = ""
        self.response_format: str = ""

    def add(self, group: DistillGroup, outcome: str, reason: str = "", **cost: Any) -> None:
        """Record ``group``'s outcome (``cost``: the :class:`GroupOutcome` figures)."""
        self.rows.append(GroupOutcome(group.session, len(group.records), outcome, reason, **cost))

    def stop(self, reason: str, detail: str = "") -> None:
        """Remember that no further request is sent, and why (the first reason wins)."""
        if not self.stopped:
            self.stopped, self.stopped_detail = reason, detail[:300]

    def sessions_done(self) -> list[str]:
        """Sessions whose every group is done, in order."""
        bad = {r.session for r in self.rows if r.outcome != DONE}
        seen = {r.session for r in self.rows}
        return [s for s in self.sessions if s in seen and s not in bad]

    def summary(self) -> str:
        """One sentence for the proposal, e.g. "distilled 4 of 25 sessions; budget 300 s
        spent; 21 left for later passes"."""
        total, done = len(self.sessions), len(self.sessions_done())
        if total == 0:
            return "nothing to distil: no session with two or more new episodic memories"
        parts = [f"distilled {done} of {total} session{'s' if total != 1 else ''}"]
        if self.stopped == "budget":
            parts.append(f"budget {self.budget_seconds:g} s spent")
        elif self.stopped:
            why = REASON_TEXT.get(self.stopped, self.stopped)
            parts.append(
                f"stopped: {why}" + (f" ({self.stopped_detail})" if self.stopped_detail else "")
            )
        # The reason the distillation stopped is said once, above: the request it cut short
        # and the groups it left are in the counts of to_context(), not repeated here.
        failed = Counter(
            r.reason for r in self.rows if r.outcome == FAILED and r.reason != self.stopped
        )
        skipped = Counter(
            r.reason for r in self.rows if r.outcome == SKIPPED and r.reason != self.stopped
        )
        for label, counts in (("failed", failed), ("skipped", skipped)):
            if counts:
                n = sum(counts.values())
                shown = ", ".join(f"{REASON_TEXT.get(k, k)} {v}" for k, v in counts.most_common())
                parts.append(f"{n} group{'s' if n != 1 else ''} {label} ({shown})")
        if done < total:
            parts.append(f"{total - done} left for later passes")
        return "; ".join(parts)

    def to_context(self) -> dict[str, Any]:
        """JSON-ready figures for ``plan.context["llm"]["distill"]`` (module docstring)."""
        by = Counter(r.outcome for r in self.rows)
        reasons: dict[str, dict[str, int]] = {SKIPPED: {}, FAILED: {}}
        for r in self.rows:
            if r.outcome in reasons:
                reasons[r.outcome][r.reason] = reasons[r.outcome].get(r.reason, 0) + 1
        done = len(self.sessions_done())
        return {
            "summary": self.summary(),
            "budget_seconds": self.budget_seconds,
            "budget_spent": self.stopped == "budget",
            "stopped": self.stopped,
            "stopped_detail": self.stopped_detail,
            "response_format": self.response_format,
            "sessions": {
                "total": len(self.sessions),
                "done": done,
                "left": len(self.sessions) - done,
            },
            "groups": {
                "total": len(self.rows),
                DONE: by.get(DONE, 0),
                SKIPPED: by.get(SKIPPED, 0),
                FAILED: by.get(FAILED, 0),
            },
            "reasons": reasons,
            **self.usage.to_dict(),
            "facts": sum(r.facts for r in self.rows),
            "group_log": [r.to_dict() for r in self.rows[:GROUP_LOG_LIMIT]],
            "group_log_omitted": max(0, len(self.rows) - GROUP_LOG_LIMIT),
        }
