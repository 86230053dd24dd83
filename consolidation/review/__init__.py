"""Review aids over a plan: what each operation would lose, and how risky it is.

Pure functions over operations as the console stores them (:class:`OperationText`): the console
computes both at proposal time and recomputes the loss after an edit without reading the store.
:func:`content_loss` measures any set of operations (a pass, or the part auto-apply would
apply); :func:`split_auto_apply` splits a pass into what may apply on its own and what waits
for a person.
"""

from __future__ import annotations

from .auto_apply import (
    CODES,
    JOINING_KINDS,
    AutoApplySplit,
    Gate,
    joins_rejected,
    model_author,
    model_note,
    operation_pairs,
    split_auto_apply,
)
from .content import (
    ContentLoss,
    LossTotals,
    content_loss,
    content_verdict,
    loss_totals,
    pass_losses,
)
from .lost import (
    LostSentence,
    OperationLoss,
    OperationText,
    SentenceIndex,
    SourceText,
    operation_loss,
    operation_text,
)
from .risk import NEAR_MARGIN, RISK_LINE, Risk, operation_risk, review_operations
from .segments import Segment, lost_segments, source_segments
from .terms import code_term

__all__ = [
    "CODES",
    "JOINING_KINDS",
    "NEAR_MARGIN",
    "RISK_LINE",
    "AutoApplySplit",
    "ContentLoss",
    "Gate",
    "LossTotals",
    "LostSentence",
    "OperationLoss",
    "OperationText",
    "Risk",
    "Segment",
    "SentenceIndex",
    "SourceText",
    "code_term",
    "content_loss",
    "content_verdict",
    "loss_totals",
    "lost_segments",
    "operation_loss",
    "operation_text",
    "operation_risk",
    "pass_losses",
    "review_operations",
    "source_segments",
    "joins_rejected",
    "model_author",
    "model_note",
    "operation_pairs",
    "split_auto_apply",
]
