"""``manage.py recover_passes``: resume passes a dead worker or a store outage left approved,
applying, rolling back or running, and import jobs a dead worker left (recovery).
``run_worker`` runs it at start (with ``--resend-queued``); the worker also runs it every
minute by itself (``tasks.recover_passes``), so running it by hand is rarely needed."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.core import stores
from memoryadmin.ops.services.recovery import passes_recover


class Command(BaseCommand):
    help = (
        "Resume every pass left 'approved', 'applying' or 'rolling_back' (each operation continues "
        "from its journal step, nothing is done twice; one process per pass, by lease) and re-plan "
        "passes and imports whose worker is gone (dead on this host, or its lease expired)."
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
        parser.add_argument(
            "--resend-queued",
            action="store_true",
            help="also send queued passes and imports to the task queue again (worker start: "
            "a dead cluster's messages stay locked in the broker for Q_RETRY seconds)",
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
        runs = passes_recover(stdout=self.stdout.write, resend_queued=options["resend_queued"])
        self.stdout.write(f"recovered {len(runs)} pass{'es' if len(runs) != 1 else ''}")
