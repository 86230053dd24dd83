"""``manage.py recover_passes``: resume passes a dead worker left approved, applying or running."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.console import services


class Command(BaseCommand):
    help = (
        "Resume every pass left 'approved' or 'applying' (each operation continues from its "
        "journal step, nothing is done twice) and re-plan passes left 'running'."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        runs = services.passes_recover(stdout=self.stdout.write)
        self.stdout.write(f"recovered {len(runs)} pass{'es' if len(runs) != 1 else ''}")
