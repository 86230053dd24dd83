"""I-5 under real concurrency: ten processes press "Run now" for one agent at the same instant
(on a SQLite file, as web workers would; on PostgreSQL in ``make test-services``); exactly one
pass is queued, nine are refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servicedb import fresh_database

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
from memoryadmin.console.models import Agent
Agent.objects.create(name="Busy", slug="busy", collection_name="busy-memories",
                     schedule_enabled=False)
"""

REQUEST = """
import time
from memoryadmin.console.errors import PassAlreadyActive
from memoryadmin.console.services.passes import pass_request
from memoryadmin.console.models import Agent
agent = Agent.objects.get(slug="busy")
time.sleep(max(0.0, {start} - time.time()))
try:
    pass_request(agent=agent, trigger="operator", actor="load-test")
    print("RESULT queued")
except PassAlreadyActive:
    print("RESULT refused")
"""

COUNT = """
from memoryadmin.console.models import AuditEvent, Pass
print("COUNT", Pass.objects.count(), AuditEvent.objects.filter(verb="refused").count())
"""


@pytest.mark.slow
def test_ten_simultaneous_requests_queue_exactly_one_pass(tmp_path):
    with fresh_database(tmp_path) as url:
        ten_requests_at_once(tmp_path, url)


def ten_requests_at_once(tmp_path: Path, url: str) -> None:
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
        "MEMORYADMIN_VAR_DIR": str(tmp_path),
        "DATABASE_URL": url,
        "Q_SYNC": "0",
    }
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    subprocess.run([*manage, "shell", "-c", SETUP], cwd=ROOT, env=env, check=True, timeout=60)
    start = time.time() + 8  # every process is up and waiting by then
    procs = [
        subprocess.Popen(
            [*manage, "shell", "-c", REQUEST.format(start=start)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(10)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        results += [line.split()[1] for line in out.splitlines() if line.startswith("RESULT")]
    assert sorted(results) == ["queued"] + ["refused"] * 9
    out = subprocess.run(
        [*manage, "shell", "-c", COUNT],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "COUNT 1 9" in out
