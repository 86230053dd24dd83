"""memoryadmin's pure consolidation engine.

Turns a snapshot of memories into a reviewable :class:`Plan` (merge, promote, prune, reconcile)
with the loss guard of PraisonAI's contract. Never imports Django; chromadb, onnxruntime and
openai are used only by ``consolidation.adapters``.
"""

from __future__ import annotations

from .consolidator import Consolidator, records_from_memory
from .default_embedder import DefaultEmbedder
from .plans import Fate, Fates, Operation, OpKind, Plan, merged_id, summarize
from .policy import NAMED_POLICIES, Policy
from .protocols import (
    AsyncMemoryConsolidationProtocol,
    Embedder,
    MemoryConsolidationProtocol,
    MemoryStore,
    WritableMemoryStore,
)
from .records import (
    EMBEDDING_DIM,
    MAX_DOCUMENT_CHARS,
    FieldMap,
    MemoryRecord,
    content_hash,
    parse_timestamp,
)
from .result import ConsolidationResult, guard_verdict, validate_loss_threshold

__all__ = [
    "EMBEDDING_DIM",
    "MAX_DOCUMENT_CHARS",
    "NAMED_POLICIES",
    "AsyncMemoryConsolidationProtocol",
    "ConsolidationResult",
    "Consolidator",
    "DefaultEmbedder",
    "Embedder",
    "Fate",
    "Fates",
    "FieldMap",
    "MemoryConsolidationProtocol",
    "MemoryRecord",
    "MemoryStore",
    "OpKind",
    "Operation",
    "Plan",
    "Policy",
    "WritableMemoryStore",
    "content_hash",
    "guard_verdict",
    "merged_id",
    "parse_timestamp",
    "records_from_memory",
    "summarize",
    "validate_loss_threshold",
]
