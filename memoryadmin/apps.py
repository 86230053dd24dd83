from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks


class ConsoleConfig(AppConfig):
    """The memoryadmin console: agents, passes as proposals, review, apply, audit."""

    name = "memoryadmin"
    label = "console"
    verbose_name = "memoryadmin console"

    def ready(self) -> None:
        checks.register(check_allowed_hosts, checks.Tags.security)


def check_allowed_hosts(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Error ``memoryadmin.E001`` when ``DEBUG`` is off and ``ALLOWED_HOSTS`` holds ``"*"``.

    A wildcard lets any ``Host`` header through, so password-reset links and absolute URLs can
    name an attacker's host; Django's own deploy checks do not refuse it. Every ``manage.py``
    command (migrate, the worker, ``check --deploy``) then stops until the hosts are named.
    """
    if settings.DEBUG or "*" not in settings.ALLOWED_HOSTS:
        return []
    return [
        checks.Error(
            "ALLOWED_HOSTS contains '*' while DEBUG is off: any Host header would be accepted.",
            hint="Name the console's host names, e.g. ALLOWED_HOSTS=console.example.org.",
            id="memoryadmin.E001",
        )
    ]
