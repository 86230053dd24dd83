"""Fit each request to the model: a group is split until its prompt and reply fit the context."""

from __future__ import annotations

from ..llm_usage import TokenGauge
from ..records import FieldMap
from .groups import DistillGroup
from .prompt import build_messages

__all__ = ["halves", "prompt_tokens", "split_to_fit"]


def prompt_tokens(group: DistillGroup, gauge: TokenGauge, fields: FieldMap | None = None) -> int:
    """Estimated prompt tokens of ``group``'s request (system prompt and quoted data)."""
    system, user = (m["content"] for m in build_messages(group, fields))
    return gauge.estimate(system, user)


def halves(group: DistillGroup) -> list[DistillGroup]:
    """``group`` as two consecutive groups of balanced size (the first one longer), each with
    the same session label and shared metadata; a group of one is returned as it is."""
    n = len(group.records)
    if n < 2:
        return [group]
    cut = (n + 1) // 2
    return [
        DistillGroup(group.session, group.records[:cut], dict(group.shared_metadata)),
        DistillGroup(group.session, group.records[cut:], dict(group.shared_metadata)),
    ]


def split_to_fit(
    group: DistillGroup,
    *,
    gauge: TokenGauge,
    context_tokens: int,
    max_tokens: int,
    fields: FieldMap | None = None,
) -> tuple[list[DistillGroup], list[DistillGroup]]:
    """``(fitting, too_large)``: ``group`` halved (:func:`halves`) until each part's estimated
    prompt plus ``max_tokens`` (the reply) is at most ``context_tokens``; a single memory that
    still does not fit is returned in ``too_large`` (it cannot be sent to this model). Parts
    keep the session's order."""
    fitting: list[DistillGroup] = []
    too_large: list[DistillGroup] = []
    pending = [group]
    while pending:
        part = pending.pop(0)
        if prompt_tokens(part, gauge, fields) + max_tokens <= context_tokens:
            fitting.append(part)
        elif len(part.records) < 2:
            too_large.append(part)
        else:
            pending[:0] = halves(part)
    return fitting, too_large
