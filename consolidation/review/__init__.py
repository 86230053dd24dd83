"""Review aids over a plan: what each operation would lose, and how risky it is.

Pure functions over operations as the console stores them (:class:`OperationText`): the console
computes both at proposal time and recomputes the loss after an edit without reading the store.
"""

from __future__ import annotations

from .lost import (
    LossTotals,
    LostSentence,
    OperationLoss,
    OperationText,
    Segment,
    SentenceIndex,
    SourceText,
    loss_totals,
    lost_segments,
    operation_loss,
    operation_text,
    pass_losses,
    source_segments,
)
from .risk import NEAR_MARGIN, RISK_LINE, Risk, operation_risk, review_operations

__all__ = [
    "NEAR_MARGIN",
    "RISK_LINE",
    "LossTotals",
    "LostSentence",
    "OperationLoss",
    "OperationText",
    "Risk",
    "Segment",
    "SentenceIndex",
    "SourceText",
    "loss_totals",
    "lost_segments",
    "operation_loss",
    "operation_text",
    "operation_risk",
    "pass_losses",
    "review_operations",
    "source_segments",
]
