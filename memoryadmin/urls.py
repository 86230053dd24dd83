"""Root URL configuration: the admin, accounts, the JSON API, then the console's pages.

Memory ids travel as ``?id=`` (query string or form field), never in the path: ids written by
other tools may contain "/" or other characters a path segment cannot hold."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from memoryadmin.agents.views import agents, probes, schedules
from memoryadmin.memories.views import forget, memories, transfer
from memoryadmin.notifications import views as notifications
from memoryadmin.ops.views import audit, dashboard, health, metrics
from memoryadmin.ops.views.accounts import (
    PasswordChangeView,
    PasswordResetConfirmView,
    password_reset,
)
from memoryadmin.proposals.views import decisions, dry_runs, passes, review, rollback


class FaviconRedirect(RedirectView):
    """``/favicon.ico`` (asked for by every browser) → the SVG icon in static/, no login needed."""

    permanent = True

    def get_redirect_url(self, *args: Any, **kwargs: Any) -> str:
        return static("favicon.svg")


console_patterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("healthz", health.healthz, name="healthz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("favicon.ico", login_not_required(FaviconRedirect.as_view()), name="favicon"),
    path("agents/", agents.agent_list, name="agent_list"),
    path("agents/new/", agents.agent_create, name="agent_create"),
    path("agents/schedule-preview/", schedules.schedule_preview, name="schedule_preview"),
    path("agents/<slug:slug>/", agents.agent_detail, name="agent_detail"),
    path("agents/<slug:slug>/edit/", agents.agent_edit, name="agent_edit"),
    path("agents/<slug:slug>/delete/", agents.agent_delete, name="agent_delete"),
    path("agents/<slug:slug>/run/", agents.agent_run, name="agent_run"),
    path("agents/<slug:slug>/dry-run/", dry_runs.agent_dry_run, name="agent_dry_run"),
    path("dry-runs/<int:pk>/", dry_runs.dry_run_detail, name="dry_run_detail"),
    path("agents/<slug:slug>/memories/", memories.memory_list, name="memory_list"),
    path("agents/<slug:slug>/memory/", memories.memory_detail, name="memory_detail"),
    path("agents/<slug:slug>/memory/pin/", memories.memory_pin, name="memory_pin"),
    path("agents/<slug:slug>/memory/edit/", memories.memory_edit, name="memory_edit"),
    path("agents/<slug:slug>/memory/delete/", memories.memory_delete, name="memory_delete"),
    path("agents/<slug:slug>/archive/", rollback.archive_list, name="archive_list"),
    path("agents/<slug:slug>/forget/", forget.forget_page, name="forget_page"),
    path("agents/<slug:slug>/forget/new/", forget.forget_create, name="forget_create"),
    path("forget/<int:pk>/", forget.forget_detail, name="forget_detail"),
    path("forget/<int:pk>/approve/", forget.forget_approve, name="forget_approve"),
    path("forget/<int:pk>/reject/", forget.forget_reject, name="forget_reject"),
    path("agents/<slug:slug>/decisions/", decisions.decision_list, name="decision_list"),
    path(
        "agents/<slug:slug>/decisions/<int:pk>/revoke/",
        decisions.decision_revoke,
        name="decision_revoke",
    ),
    path(
        "agents/<slug:slug>/archive/<int:pk>/restore/",
        rollback.archive_restore,
        name="archive_restore",
    ),
    path("agents/<slug:slug>/import/", transfer.memories_import, name="memories_import"),
    path(
        "agents/<slug:slug>/imports/<int:pk>/",
        transfer.memories_import_status,
        name="memories_import_status",
    ),
    path("agents/<slug:slug>/export.jsonl", transfer.memories_export, name="memories_export"),
    path("agents/<slug:slug>/probes/", probes.probe_list, name="probe_list"),
    path("agents/<slug:slug>/probes/new/", probes.probe_create, name="probe_create"),
    path("agents/<slug:slug>/probes/recall/", probes.probe_recall, name="probe_recall"),
    path("agents/<slug:slug>/probes/<int:pk>/edit/", probes.probe_edit, name="probe_edit"),
    path("agents/<slug:slug>/probes/<int:pk>/delete/", probes.probe_delete, name="probe_delete"),
    path("passes/<int:pk>/", passes.pass_detail, name="pass_detail"),
    path("passes/<int:pk>/progress/", passes.pass_progress, name="pass_progress"),
    path("passes/<int:pk>/stale/", passes.pass_stale, name="pass_stale"),
    path("passes/<int:pk>/approve/", review.pass_approve, name="pass_approve"),
    path("passes/<int:pk>/reject/", review.pass_reject, name="pass_reject"),
    path("passes/<int:pk>/rollback/", rollback.pass_rollback, name="pass_rollback"),
    path("passes/<int:pk>/review/", review.pass_review, name="pass_review"),
    path("passes/<int:pk>/review/bulk/", review.review_bulk, name="review_bulk"),
    path(
        "passes/<int:pk>/ops/<int:op_id>/exclude/",
        review.operation_exclude,
        name="operation_exclude",
    ),
    path("passes/<int:pk>/ops/<int:op_id>/edit/", review.operation_edit, name="operation_edit"),
    path(
        "passes/<int:pk>/ops/<int:op_id>/resolve/", review.conflict_resolve, name="conflict_resolve"
    ),
    path("notifications/", notifications.notifications, name="notifications"),
    path("notifications/channels/", notifications.channel_add, name="notification_channel_add"),
    path(
        "notifications/channels/<int:pk>/delete/",
        notifications.channel_delete,
        name="notification_channel_delete",
    ),
    path(
        "notifications/channels/<int:pk>/test/",
        notifications.channel_test,
        name="notification_channel_test",
    ),
    path(
        "notifications/agents/<slug:slug>/",
        notifications.subscription_save,
        name="notification_subscription_save",
    ),
    path("notifications/defaults/", notifications.defaults_save, name="notification_defaults"),
    path("audit/", audit.audit, name="audit"),
    path("audit/export.csv", audit.audit_csv, name="audit_csv"),
    path("audit/operations.csv", audit.audit_operations_csv, name="audit_operations_csv"),
    path("audit/events/", audit.audit_event_list, name="audit_events"),
    path("audit/events/export.csv", audit.audit_event_csv, name="audit_events_csv"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    # Before Django's auth URLs: without EMAIL_HOST it says an administrator resets passwords.
    path("accounts/password_reset/", password_reset, name="password_reset"),
    # Before Django's too: a new password lifts a lockout; a wrong old one counts as a failure.
    path(
        "accounts/reset/<uidb64>/<token>/",
        PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path("accounts/password_change/", PasswordChangeView.as_view(), name="password_change"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("memoryadmin.api.urls")),
    *console_patterns,
]
