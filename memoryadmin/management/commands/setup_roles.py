"""``manage.py setup_roles``: create the viewer/reviewer/admin groups with their permissions."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.core.roles import ensure_roles


class Command(BaseCommand):
    help = "Create or update the viewer, reviewer and admin groups (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        counts = ensure_roles()
        summary = ", ".join(
            f"{role} ({n} permission{'s' if n != 1 else ''})" for role, n in counts.items()
        )
        self.stdout.write(f"roles ready: {summary}")
