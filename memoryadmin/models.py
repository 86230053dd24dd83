"""The app's model registry: Django imports this module to find every model, so it imports each
domain's ``models``. Code imports a model from its domain (``memoryadmin.proposals.models``),
never from here.

Every model keeps the app label ``console`` (``apps.ConsoleConfig``): one migration chain
(``memoryadmin/migrations/``) and the tables the console has always had.
"""

from __future__ import annotations

from memoryadmin.agents.models import Agent, ProbeQuery, StoreSample
from memoryadmin.core.models import AuditEvent
from memoryadmin.memories.models import ArchivedMemory, ForgetRequest, ImportJob
from memoryadmin.notifications.models import (
    Delivery,
    Notification,
    NotificationChannel,
    NotificationDefaults,
    Subscription,
)
from memoryadmin.ops.models import WorkerHeartbeat
from memoryadmin.proposals.models import (
    Decision,
    DryRun,
    Operation,
    OperationSource,
    Pass,
    PassSnapshot,
)

__all__ = [
    "Agent",
    "ArchivedMemory",
    "AuditEvent",
    "Decision",
    "Delivery",
    "DryRun",
    "ForgetRequest",
    "ImportJob",
    "Notification",
    "NotificationChannel",
    "NotificationDefaults",
    "Operation",
    "OperationSource",
    "Pass",
    "PassSnapshot",
    "ProbeQuery",
    "StoreSample",
    "Subscription",
    "WorkerHeartbeat",
]
