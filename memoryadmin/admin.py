"""Django admin: console models listed read-only, since edits there would bypass the audit."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from memoryadmin.agents.models import Agent, ProbeQuery, StoreSample
from memoryadmin.core.models import AuditEvent
from memoryadmin.core.roles import can_manage
from memoryadmin.memories.models import ArchivedMemory, ForgetRequest
from memoryadmin.notifications.models import Delivery, Notification, NotificationChannel
from memoryadmin.proposals.models import Decision, Operation, Pass, PassSnapshot


class ReadOnlyAdmin(admin.ModelAdmin):
    """No add, change or delete: every write goes through ``services`` and is audited. A user
    of the admin role (:func:`~memoryadmin.core.roles.can_manage`, staff to log in here)
    may view every console model without the per-model ``view_*`` permissions."""

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        return can_manage(request.user) or super().has_view_permission(request, obj)

    def has_module_permission(self, request: Any) -> bool:
        return can_manage(request.user) or super().has_module_permission(request)

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "slug",
        "collection_name",
        "auto_apply",
        "schedule_cron",
        "schedule_enabled",
    )
    search_fields = ("name", "slug", "collection_name")
    list_filter = ("auto_apply",)


@admin.register(Pass)
class PassAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "agent",
        "status",
        "trigger",
        "loss_fraction",
        "guard_passed",
        "created_at",
    )
    list_filter = ("status", "trigger", "agent")


@admin.register(Operation)
class OperationAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "index", "kind", "rule", "status", "excluded")
    list_filter = ("kind", "status")


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "agent",
        "kind",
        "created_actor",
        "created_at",
        "run",
        "held_back",
        "revoked_at",
    )
    list_filter = ("kind", "agent")


@admin.register(ArchivedMemory)
class ArchivedMemoryAdmin(ReadOnlyAdmin):
    list_display = ("memory_id", "agent", "action", "run", "actor", "archived_at", "restored_at")
    list_filter = ("action", "agent")
    search_fields = ("memory_id", "document")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor", "verb", "agent", "run", "from_status", "to_status")
    list_filter = ("verb", "actor")


@admin.register(ProbeQuery)
class ProbeQueryAdmin(ReadOnlyAdmin):
    list_display = ("id", "agent", "question", "category")


@admin.register(StoreSample)
class StoreSampleAdmin(ReadOnlyAdmin):
    list_display = ("agent", "count", "taken_at")


@admin.register(PassSnapshot)
class PassSnapshotAdmin(ReadOnlyAdmin):
    list_display = ("run",)
    exclude = ("hashes",)  # id → hash of a whole store: too large to render


@admin.register(ForgetRequest)
class ForgetRequestAdmin(ReadOnlyAdmin):
    list_display = ("id", "agent_slug", "status", "kind", "live_count", "archived_count")
    list_filter = ("status", "kind")


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "event", "agent", "run", "summary", "test")
    list_filter = ("event",)


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ("id", "notification", "channel", "status", "attempts", "next_attempt_at")
    list_filter = ("status",)


@admin.register(NotificationChannel)
class NotificationChannelAdmin(ReadOnlyAdmin):
    list_display = ("id", "user", "kind", "target", "enabled", "created_at")
    exclude = ("secret",)  # the webhook's HMAC key stays on its owner's page
