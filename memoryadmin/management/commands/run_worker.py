"""``manage.py run_worker``: the Procfile's worker — recover interrupted passes, then run the
django-q2 cluster until SIGTERM or SIGINT, and exit within honcho's 5 s grace period.

Recovery at start resumes applies in this (main) process; the cluster then forks its task
processes from it. Everything the resume cached per process (the embedder's thread pool and
onnxruntime session, the vector cache's SQLite connection, Chroma clients) is rebuilt in a
forked child (``consolidation.adapters.forking``): a copied thread pool has no threads, and
tasks waited on it forever. Re-planning and re-importing are sent to the queue, not done here.
Afterwards the cluster itself runs recovery every minute
(``services.schedules.recovery_schedule_ensure``), so an apply cut short by a Chroma outage
resumes once the store answers.

Why not ``qcluster`` directly: on SIGTERM ``qcluster`` stops its cluster from inside the signal
handler while the interpreter is already joining the cluster's processes at exit; under honcho
(which signals the whole process group) the main process then deadlocks on a lock and is killed
after the grace period (measured: still running 15 s after SIGTERM). Here the handler only sets
a flag; the main loop stops the cluster with a deadline. A task cut short is safe: apply and
rollback are journaled per operation and resumed by ``recover_passes`` at the next start.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from memoryadmin.agents.services.schedules import (
    notify_schedule_ensure,
    purge_schedule_ensure,
    recovery_schedule_ensure,
)
from memoryadmin.core.stores import warm_up
from memoryadmin.ops.services.health import HEARTBEAT_SECONDS, worker_heartbeat_beat

STOP_GRACE_SECONDS = 3.0
"""How long the cluster may take to stop before its processes are terminated (honcho sends
SIGKILL 5 s after SIGTERM: ``honcho.manager.KILL_WAIT``)."""


class Command(BaseCommand):
    help = (
        "Recover passes a dead worker left behind, then run the task cluster (django-q2) until "
        "SIGTERM/SIGINT; stops within a few seconds."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--wait-for-store",
            type=float,
            default=0.0,
            metavar="SECONDS",
            help="wait up to SECONDS for the Chroma server before recovering (see recover_passes)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from django_q.cluster import Cluster

        stopping: list[int] = []

        def on_signal(signum: int, _frame: Any) -> None:
            stopping.append(signum)  # only a flag: no locks, no logging inside the handler

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        call_command(
            "recover_passes",
            wait_for_store=options["wait_for_store"],
            resend_queued=True,
            stdout=self.stdout,
        )
        if stopping:
            return
        warm_up()  # imports and model files loaded once here (a forked task rebuilds its session)
        recovery_schedule_ensure()
        purge_schedule_ensure()
        notify_schedule_ensure()
        cluster = Cluster()
        # Cluster() installs its own handlers (the deadlock above); ours take over again.
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        cluster.start()
        self.stdout.write("worker ready (stop with Ctrl-C or SIGTERM)")
        next_beat = 0.0
        while not stopping:
            if cluster.sentinel is not None and not cluster.sentinel.is_alive():
                self.stderr.write("the task cluster stopped on its own; exiting")
                break
            if time.monotonic() >= next_beat:
                self._beat()
                next_beat = time.monotonic() + HEARTBEAT_SECONDS
            time.sleep(0.2)
        self._stop(cluster)
        self.stdout.write("worker stopped")

    def _beat(self) -> None:
        """The heartbeat ``/healthz`` reads, only while the cluster runs; a failed write is
        reported and retried at the next beat (the worker keeps running)."""
        try:
            worker_heartbeat_beat()
        except Exception as exc:
            self.stderr.write(f"heartbeat not written: {exc}")
        finally:
            close_old_connections()

    def _stop(self, cluster: Any) -> None:
        """Stop the cluster within :data:`STOP_GRACE_SECONDS`, then terminate what is left (and
        say so: the log ends with "worker stopped" on both paths)."""
        stopper = threading.Thread(target=cluster.stop, daemon=True)
        stopper.start()
        stopper.join(STOP_GRACE_SECONDS)
        if not stopper.is_alive():
            return
        for child in multiprocessing.active_children():
            child.terminate()
        self.stdout.write(f"worker stopped (cluster terminated after {STOP_GRACE_SECONDS:g} s)")
        self.stdout.flush()
        os._exit(0)  # the stopper thread still waits on a dead sentinel: leave without joining
