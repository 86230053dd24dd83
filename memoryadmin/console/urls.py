"""Console URLs. Memory ids travel as ``?id=`` (query string or form field), never in the path:
ids written by other tools may contain "/" or other characters a path segment cannot hold."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from . import views


class FaviconRedirect(RedirectView):
    """``/favicon.ico`` (asked for by every browser) → the SVG icon in static/, no login needed."""

    permanent = True

    def get_redirect_url(self, *args: Any, **kwargs: Any) -> str:
        return static("favicon.svg")


urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("favicon.ico", login_not_required(FaviconRedirect.as_view()), name="favicon"),
    path("agents/", views.agent_list, name="agent_list"),
    path("agents/new/", views.agent_create, name="agent_create"),
    path("agents/schedule-preview/", views.schedule_preview, name="schedule_preview"),
    path("agents/<slug:slug>/", views.agent_detail, name="agent_detail"),
    path("agents/<slug:slug>/edit/", views.agent_edit, name="agent_edit"),
    path("agents/<slug:slug>/delete/", views.agent_delete, name="agent_delete"),
    path("agents/<slug:slug>/run/", views.agent_run, name="agent_run"),
    path("agents/<slug:slug>/memories/", views.memory_list, name="memory_list"),
    path("agents/<slug:slug>/memory/", views.memory_detail, name="memory_detail"),
    path("agents/<slug:slug>/memory/pin/", views.memory_pin, name="memory_pin"),
    path("agents/<slug:slug>/memory/edit/", views.memory_edit, name="memory_edit"),
    path("agents/<slug:slug>/memory/delete/", views.memory_delete, name="memory_delete"),
    path("agents/<slug:slug>/archive/", views.archive_list, name="archive_list"),
    path(
        "agents/<slug:slug>/archive/<int:pk>/restore/",
        views.archive_restore,
        name="archive_restore",
    ),
    path("agents/<slug:slug>/import/", views.memories_import, name="memories_import"),
    path(
        "agents/<slug:slug>/imports/<int:pk>/",
        views.memories_import_status,
        name="memories_import_status",
    ),
    path("agents/<slug:slug>/export.jsonl", views.memories_export, name="memories_export"),
    path("agents/<slug:slug>/probes/", views.probe_list, name="probe_list"),
    path("agents/<slug:slug>/probes/new/", views.probe_create, name="probe_create"),
    path("agents/<slug:slug>/probes/recall/", views.probe_recall, name="probe_recall"),
    path("agents/<slug:slug>/probes/<int:pk>/edit/", views.probe_edit, name="probe_edit"),
    path("agents/<slug:slug>/probes/<int:pk>/delete/", views.probe_delete, name="probe_delete"),
    path("passes/<int:pk>/", views.pass_detail, name="pass_detail"),
    path("passes/<int:pk>/progress/", views.pass_progress, name="pass_progress"),
    path("passes/<int:pk>/stale/", views.pass_stale, name="pass_stale"),
    path("passes/<int:pk>/approve/", views.pass_approve, name="pass_approve"),
    path("passes/<int:pk>/reject/", views.pass_reject, name="pass_reject"),
    path("passes/<int:pk>/rollback/", views.pass_rollback, name="pass_rollback"),
    path("passes/<int:pk>/review/", views.pass_review, name="pass_review"),
    path("passes/<int:pk>/review/bulk/", views.review_bulk, name="review_bulk"),
    path(
        "passes/<int:pk>/ops/<int:op_id>/exclude/",
        views.operation_exclude,
        name="operation_exclude",
    ),
    path("passes/<int:pk>/ops/<int:op_id>/edit/", views.operation_edit, name="operation_edit"),
    path(
        "passes/<int:pk>/ops/<int:op_id>/resolve/", views.conflict_resolve, name="conflict_resolve"
    ),
    path("audit/", views.audit, name="audit"),
    path("audit/export.csv", views.audit_csv, name="audit_csv"),
    path("audit/events/", views.audit_event_list, name="audit_events"),
    path("audit/events/export.csv", views.audit_event_csv, name="audit_events_csv"),
]
