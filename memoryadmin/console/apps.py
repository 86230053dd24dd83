from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The memoryadmin console: agents, passes as proposals, review, apply, audit."""

    name = "memoryadmin.console"
    label = "console"
    verbose_name = "memoryadmin console"
