"""What a pass's stored figures mean (``Pass.figures``, the keys of ``Evaluation.figures()``):
the loss guard's verdict on them, made without the pass's operations, for the model's
``guard_passed``/``guard_reason`` and ``Evaluation.judged`` alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from consolidation import ConsolidationResult, guard_verdict

__all__ = ["figures_verdict"]


def figures_verdict(
    figures: Mapping[str, Any], max_loss_fraction: float, entries_before: int
) -> tuple[bool, str]:
    """The loss guard's verdict ``(passed, reason)`` on a pass's figures (``Pass.figures``, the
    keys of ``Evaluation.figures()``: ``entries_after``, ``merged``, ``promoted``, ``pruned``,
    ``removed`` — originals that leave the store) over a store of ``entries_before`` originals
    (the pass's input), against ``max_loss_fraction`` (in [0, 1]): the engine's
    :func:`~consolidation.guard_verdict` on the result they describe. Raises
    ``KeyError``/``TypeError`` for a mapping that is not such figures, ``ValueError`` for an
    invalid threshold (fail closed)."""
    before = int(entries_before)
    result = ConsolidationResult(
        entries_before=before,
        entries_after=int(figures["entries_after"]),
        merged=int(figures.get("merged", 0)),
        promoted=int(figures.get("promoted", 0)),
        pruned=int(figures.get("pruned", 0)),
        retained_originals=before - int(figures["removed"]),
    )
    return guard_verdict(result, max_loss_fraction)
