from __future__ import annotations

from django.apps import AppConfig


class ApiConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "memoryadmin.api"
    label = "api"
    verbose_name = "API and MCP"
