"""Console models: agents, passes (proposals), operations with their originals, archive, audit
(:mod:`.core`), reviewers' standing decisions (:mod:`.decisions`), imports, dry runs and the
worker's heartbeat (:mod:`.jobs`).

Domain behaviour lives in small model methods; writes go through ``services``; reads through
``selectors``. State names follow docs/ARCHITECTURE.md "The pass lifecycle".
"""

from .core import (
    Agent,
    ArchivedMemory,
    AuditEvent,
    Operation,
    OperationSource,
    Pass,
    PassSnapshot,
    ProbeQuery,
    StoreSample,
    embedding_to_bytes,
)
from .decisions import Decision
from .jobs import DryRun, ImportJob, WorkerHeartbeat

__all__ = [
    "Agent",
    "ArchivedMemory",
    "AuditEvent",
    "Decision",
    "DryRun",
    "ImportJob",
    "Operation",
    "OperationSource",
    "Pass",
    "PassSnapshot",
    "ProbeQuery",
    "StoreSample",
    "WorkerHeartbeat",
    "embedding_to_bytes",
]
