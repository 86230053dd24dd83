"""`ConsolidationResult` and the loss-guard maths.

Source: PraisonAI's memory-consolidation contract (seeds/000, quoted in ``docs/SOURCES.md``),
kept exactly, with the fail-closed superset ``docs/ARCHITECTURE.md`` asks for (``None`` is also
refused, ``retained_originals`` is clamped to ``[0, entries_before]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

__all__ = ["ConsolidationResult", "guard_verdict", "loss_budget", "validate_loss_threshold"]


def validate_loss_threshold(max_loss_fraction: Any) -> float:
    """Return ``max_loss_fraction`` as a float in [0, 1] or raise ``ValueError``.

    Fail-closed (seed contract): a bool, a non-number (``"x"``, ``None``), NaN, ±inf or a value
    outside [0, 1] raises ``ValueError``, so an invalid threshold can never permit a rewrite.
    """
    if isinstance(max_loss_fraction, bool) or not isinstance(max_loss_fraction, Real):
        raise ValueError(f"max_loss_fraction must be a number in [0, 1], got {max_loss_fraction!r}")
    value = float(max_loss_fraction)
    if not math.isfinite(value) or value < 0.0 or value > 1.0:
        raise ValueError(f"max_loss_fraction must be a number in [0, 1], got {max_loss_fraction!r}")
    return value


def loss_budget(max_loss_fraction: float, entries_before: int) -> int:
    """The most originals a pass over ``entries_before`` memories may remove and still pass
    the loss guard: the largest ``k`` in ``[0, entries_before]`` with ``k / entries_before <=
    max_loss_fraction`` — exactly the complement of :meth:`ConsolidationResult.exceeds_loss`
    (strict ``>``, seed contract), so a plan trimmed to the budget always passes the guard.

    ``floor(f × n)`` computed in floating point is not enough on its own (0.29 × 100 is
    28.999…, which ``int()`` truncates to 28 where the guard allows 29), so the estimate is
    corrected against the guard's own division. 0 for an empty store. Raises ``ValueError``
    for an invalid threshold (:func:`validate_loss_threshold`) or a negative ``entries_before``.
    The one place the budget is computed: the planner's trim, the LLM judge, the review page's
    "exclude at least" hint and the deferred-work estimate all call it.
    """
    f = validate_loss_threshold(max_loss_fraction)
    n = int(entries_before)
    if n < 0:
        raise ValueError(f"entries_before must be >= 0, got {entries_before!r}")
    if n == 0:
        return 0
    k = max(0, min(n, math.floor(f * n + 1e-9)))
    while k > 0 and k / n > f:
        k -= 1
    while k < n and (k + 1) / n <= f:
        k += 1
    return k


@dataclass
class ConsolidationResult:
    """What a consolidation pass did (or would do), plus the loss guard.

    Counts are numbers of memory entries. ``merged`` counts original entries folded into merged
    memories, ``promoted`` entries moved to the curated tier, ``pruned`` entries removed as stale.
    ``retained_originals`` is how many original entries survive unchanged in identity (a merge
    source is *not* retained, docs/ARCHITECTURE.md "Loss guard and budget"); it is clamped to
    ``[0, entries_before]``. ``context`` holds telemetry (``None`` becomes ``{}``).
    """

    entries_before: int = 0
    entries_after: int = 0
    merged: int = 0
    promoted: int = 0
    pruned: int = 0
    rejected: bool = False
    reason: str | None = None
    retained_originals: int | None = None
    context: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.context is None:
            self.context = {}
        if self.retained_originals is not None:
            self.retained_originals = max(0, min(int(self.retained_originals), self.entries_before))

    @property
    def loss_fraction(self) -> float:
        """Fraction of original entries removed, in [0, 1].

        ``(entries_before - retained_originals) / entries_before`` when ``retained_originals``
        is set, else the net drop ``(entries_before - entries_after) / entries_before``; 0.0 for
        an empty store; growth is 0.0, never negative (seed contract).
        """
        if self.entries_before <= 0:
            return 0.0
        if self.retained_originals is not None:
            lost = self.entries_before - self.retained_originals
        else:
            lost = self.entries_before - self.entries_after
        return max(0.0, min(1.0, lost / self.entries_before))

    def exceeds_loss(self, max_loss_fraction: float) -> bool:
        """``True`` when ``loss_fraction > max_loss_fraction`` (strict).

        Raises ``ValueError`` for a bool, a non-number, NaN, ±inf or a value outside [0, 1].
        """
        return self.loss_fraction > validate_loss_threshold(max_loss_fraction)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the fields plus ``loss_fraction``."""
        return {
            "entries_before": self.entries_before,
            "entries_after": self.entries_after,
            "merged": self.merged,
            "promoted": self.promoted,
            "pruned": self.pruned,
            "rejected": self.rejected,
            "reason": self.reason,
            "retained_originals": self.retained_originals,
            "loss_fraction": self.loss_fraction,
            "context": self.context,
        }


def guard_verdict(result: ConsolidationResult, max_loss_fraction: float) -> tuple[bool, str]:
    """The loss guard's verdict on ``result``: ``(passed, reason)`` — the one place it is made.

    ``passed`` is ``not result.exceeds_loss(max_loss_fraction)`` (strict ``>``, seed contract)
    and ``result.rejected`` false (an engine-side rejection also fails). ``reason`` is one
    sentence for the operator with the figures: loss as a percentage of ``entries_before``
    originals, how many were removed, the threshold. Used by the console's evaluation of a pass
    (planning, review, apply), ``manage.py consolidate`` and the :class:`Consolidator`. Raises
    ``ValueError`` for an invalid threshold (fail closed, seed contract).
    """
    before = result.entries_before
    retained = (
        result.retained_originals if result.retained_originals is not None else result.entries_after
    )
    removed = max(0, before - retained)
    figures = (
        f"loss {result.loss_fraction:.1%} of {before} originals ({removed} removed), "
        f"threshold {validate_loss_threshold(max_loss_fraction):.1%}"
    )
    if result.exceeds_loss(max_loss_fraction):
        return False, f"Loss guard tripped: {figures}."
    if result.rejected:
        return False, result.reason or "Rejected by the engine."
    return True, f"Loss guard passed: {figures}."
