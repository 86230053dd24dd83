"""``manage.py recover_passes``: resume passes a dead worker left approved, applying, rolling
back or running. Run at every worker start (Procfile) before ``qcluster``."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.console import services, stores


class Command(BaseCommand):
    help = (
        "Resume every pass left 'approved', 'applying' or 'rolling_back' (each operation continues "
        "from its journal step, nothing is done twice; one process per pass, by lease) and re-plan "
        "passes left 'running' past the task timeout."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--wait-for-store",
            type=float,
            default=0.0,
            metavar="SECONDS",
            help="wait up to SECONDS for the Chroma server to answer first (worker start under "
            "honcho, where Chroma starts at the same time)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        deadline = time.monotonic() + max(0.0, options["wait_for_store"])
        while True:
            try:
                stores.get_client()
                break
            except stores.StoreUnavailable as exc:
                if time.monotonic() >= deadline:
                    if options["wait_for_store"]:
                        self.stderr.write(f"{exc} — recovering anyway")
                    break
                time.sleep(0.5)
        runs = services.passes_recover(stdout=self.stdout.write)
        self.stdout.write(f"recovered {len(runs)} pass{'es' if len(runs) != 1 else ''}")
