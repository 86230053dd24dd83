"""Console models: agents, passes (proposals), operations with their originals, archive, audit
(:mod:`.core`), reviewers' standing decisions (:mod:`.decisions`), forget requests and their
tombstones (:mod:`.forget`), imports, dry runs and the worker's heartbeat (:mod:`.jobs`),
notifications: channels, subscriptions, defaults, deliveries (:mod:`.notifications`).

Domain behaviour lives in small model methods; writes go through ``services``; reads through
``selectors``. State names follow docs/ARCHITECTURE.md "The pass lifecycle".
"""

from memoryadmin.console.models.core import (
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
from memoryadmin.console.models.decisions import Decision
from memoryadmin.console.models.forget import ForgetRequest
from memoryadmin.console.models.jobs import DryRun, ImportJob, WorkerHeartbeat
from memoryadmin.console.models.notifications import (
    ALL_EVENTS,
    Delivery,
    Notification,
    NotificationChannel,
    NotificationDefaults,
    NotificationEvent,
    Subscription,
)

__all__ = [
    "ALL_EVENTS",
    "Agent",
    "ArchivedMemory",
    "AuditEvent",
    "Decision",
    "DryRun",
    "ForgetRequest",
    "Delivery",
    "ImportJob",
    "Notification",
    "NotificationChannel",
    "NotificationDefaults",
    "NotificationEvent",
    "Operation",
    "OperationSource",
    "Pass",
    "PassSnapshot",
    "ProbeQuery",
    "StoreSample",
    "Subscription",
    "WorkerHeartbeat",
    "embedding_to_bytes",
]
