"""`manage.py run_worker` (the Procfile's worker) stops cleanly on SIGTERM sent to its process
group, as honcho does on Ctrl-C, within honcho's 5 s grace period (``qcluster`` alone deadlocked
and was SIGKILLed); while it runs it writes the heartbeat ``/healthz`` reads."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_worker_stops_within_the_grace_period_on_sigterm_to_its_group(tmp_path: Path):
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
        "MEMORYADMIN_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "MEMORYADMIN_MODEL_DIR": str(settings.MEMORYADMIN_MODEL_DIR),
        "CHROMA_MODE": "ephemeral",
        "Q_SYNC": "0",
        "Q_WORKERS": "1",
    }
    subprocess.run(
        [str(BIN / "python"), "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        p = subprocess.Popen(
            [str(BIN / "python"), "manage.py", "run_worker"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while b"worker ready" not in log.read_bytes():
                assert p.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            # the heartbeat /healthz reads: written as soon as the cluster runs (polled, not a
            # fixed sleep: a loaded CI box may take longer than a second to write it)
            beats: list = []
            while not beats:
                assert p.poll() is None and time.monotonic() < deadline + 30, log.read_text()
                time.sleep(0.2)
                with sqlite3.connect(tmp_path / "db.sqlite3") as db:
                    beats = db.execute("SELECT worker FROM console_workerheartbeat").fetchall()
            assert [w.rsplit(":", 1)[1] for (w,) in beats] == [str(p.pid)]
            t0 = time.monotonic()
            os.killpg(p.pid, signal.SIGTERM)
            assert p.wait(timeout=5) == 0
            assert time.monotonic() - t0 < 5
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    text = log.read_text()
    assert "worker stopped" in text and "Traceback" not in text
    assert "Q Cluster" not in text  # django-q2's INFO chatter ("Q Cluster … starting") is off
