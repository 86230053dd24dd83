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
from memoryadmin.agents.models import Agent
Agent.objects.create(name="Busy", slug="busy", collection_name="busy-memories",
                     schedule_enabled=False)
"""

REQUEST = """
import time
from memoryadmin.core.errors import PassAlreadyActive
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.agents.models import Agent
agent = Agent.objects.get(slug="busy")
time.sleep(max(0.0, {start} - time.time()))
try:
    pass_request(agent=agent, trigger="operator", actor="load-test")
    print("RESULT queued")
except PassAlreadyActive:
    print("RESULT refused")
"""

COUNT = """
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Pass
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


RESTORES = """
import threading
import numpy as np
from django.db import connection
from consolidation import content_hash
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError
from memoryadmin.agents.models import Agent
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.services.rollback import archive_restore

agent = Agent.objects.create(name="Two", slug="two", collection_name="two-memories",
                             schedule_enabled=False)
stores.create_collection(agent.collection_name)
emb = np.full(384, 0.05, dtype=np.float32).tobytes()
versions = [
    ArchivedMemory.objects.create(agent=agent, memory_id="m1", document=doc, metadata={},
                                  embedding=emb, content_hash=content_hash(doc, {}),
                                  action="operator_delete")
    for doc in ("Lives in Berlin", "Lives in Hamburg")
]
barrier = threading.Barrier(8)
results = []

def restore(i):
    barrier.wait()
    try:
        archive_restore(archived=versions[i % 2], user=None)
        results.append("restored")
    except ServiceError:
        results.append("refused")
    finally:
        connection.close()

threads = [threading.Thread(target=restore, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
live = stores.get_live(stores.get_store(agent), ["m1"], include_embeddings=False)
events = AuditEvent.objects.filter(verb="memory_restored")
print("RESULTS", sorted(results))
print("FRESH", sum(1 for e in events if not e.data["already_live"]))
print("ROWS", ArchivedMemory.objects.filter(restored_at__isnull=False).count())
print("LIVE", live["m1"].document)
"""


@pytest.mark.slow
def test_eight_restores_of_two_versions_at_once_restore_one(tmp_path):
    """Four threads restore one archived version of a memory, four the other, at one instant:
    one version goes live, its four restores succeed (one writes, three find it live), the
    other four are refused, and only the winning archive row is marked restored."""
    with fresh_database(tmp_path) as url:
        env = os.environ | {
            "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
            "MEMORYADMIN_VAR_DIR": str(tmp_path),
            "DATABASE_URL": url,
            "Q_SYNC": "1",
            "CHROMA_MODE": "ephemeral",
        }
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
        done = subprocess.run(
            [*manage, "shell", "-c", RESTORES],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        out = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert out["RESULTS"] == str(["refused"] * 4 + ["restored"] * 4)
    assert out["FRESH"] == "1"
    assert out["ROWS"] == "1"
    assert out["LIVE"] in ("Lives in Berlin", "Lives in Hamburg")
