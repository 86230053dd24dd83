"""A dry run with a real worker: requested with django-q2 as deployed (not
sync), it waits on the broker, unplanned, until ``manage.py run_worker`` plans it; the worker
stores its figures, and a worker given a 1 MB memory budget stops it with the reason."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from tests.api.mcp_helpers import locomo_file
from tests.conftest import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

REQUEST = """
from django.contrib.auth.models import Group, User
from django_q.models import OrmQ
from memoryadmin.agents.models import Agent
from memoryadmin.core.roles import ensure_roles
from memoryadmin.proposals.services.dry_runs import dry_run_request
ensure_roles()
carol, new = User.objects.get_or_create(username="carol")
carol.groups.add(Group.objects.get(name="viewer"))
dry, created = dry_run_request(agent=Agent.objects.get(slug="locomo-conv-30"), user=carol)
dry.refresh_from_db()
print("dry", dry.pk, dry.status, created, OrmQ.objects.count())
"""


CONCURRENT = """
import threading
from django.contrib.auth.models import User
from django.db import connection
from django_q.models import OrmQ
from memoryadmin.agents.models import Agent
from memoryadmin.proposals.models import DryRun
from memoryadmin.proposals.services.dry_runs import dry_run_request
agent, carol = Agent.objects.get(slug="locomo-conv-30"), User.objects.get(username="carol")
barrier, ids = threading.Barrier(6), []
def ask():
    try:
        barrier.wait()
        ids.append(dry_run_request(agent=agent, user=carol)[0].pk)
    finally:
        connection.close()
threads = [threading.Thread(target=ask) for _ in range(6)]
for t in threads: t.start()
for t in threads: t.join()
print("shared", len(ids), len(set(ids)), DryRun.objects.filter(status="queued").count(),
      OrmQ.objects.count())
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("dry-run-worker")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")} | {
        "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
        "MEMORYADMIN_VAR_DIR": str(tmp),
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "MEMORYADMIN_MODEL_DIR": str(settings.MEMORYADMIN_MODEL_DIR),
        "CHROMA_MODE": "http",
        "CHROMA_HOST": "127.0.0.1",
        "CHROMA_PORT": str(port),
        "Q_SYNC": "0",
        "Q_WORKERS": "1",
    }
    log = open(tmp / "chroma.log", "wb")  # noqa: SIM115 - closed below
    chroma = subprocess.Popen(
        [str(BIN / "chroma"), "run", "--path", str(tmp / "chroma"), "--host", "127.0.0.1"]
        + ["--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert chroma.poll() is None, "chroma exited"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat").is_success:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "chroma did not start"
            time.sleep(0.3)
        manage(env, "migrate", "--noinput")
        manage(env, "import_locomo", str(locomo_file()), "--conversation", "conv-30")
        yield {"env": env, "db": tmp / "db.sqlite3", "tmp": tmp}
    finally:
        chroma.terminate()
        chroma.wait(20)
        log.close()


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(BIN / "python"), "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def request_dry_run(env: dict[str, str]) -> int:
    """A dry run requested as the web process does: queued on the broker, not planned.

    The broker is emptied first. A worker the test stopped may have left tasks on it: its own
    scheduled ones (recovery, notify, purge), or a finished dry run's task whose acknowledgement
    the stop cut short (django-q2 hands it out again after ``Q_RETRY`` seconds, and
    ``run_dry_run`` does nothing for a dry run that is not queued). Neither is this request's."""
    with sqlite3.connect(env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
        db.execute("DELETE FROM django_q_ormq")
    out = manage(env, "shell", "-c", REQUEST).split()
    _, pk, status, created, on_broker = out[out.index("dry") :]
    assert (status, created, on_broker) == ("queued", "True", "1")
    return int(pk)


def worker_until_finished(stack: dict[str, Any], pk: int, **extra: str) -> tuple[str, Any, str]:
    """Run ``manage.py run_worker`` until dry run ``pk`` finishes; its status, result, error."""
    log = stack["tmp"] / f"worker-{pk}.log"
    with open(log, "wb") as out:
        p = subprocess.Popen(
            [str(BIN / "python"), "manage.py", "run_worker"],
            cwd=ROOT,
            env=stack["env"] | extra,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 240
            while True:
                with sqlite3.connect(stack["db"]) as db:
                    row = db.execute(
                        "SELECT status, result, error FROM console_dryrun WHERE id = ?", (pk,)
                    ).fetchone()
                if row[0] in ("done", "failed"):
                    break
                assert p.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.5)
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
    status, result, error = row
    return status, json.loads(result) if result else None, error


def test_the_worker_plans_a_queued_dry_run_and_stores_its_figures(stack) -> None:
    pk = request_dry_run(stack["env"])
    status, result, error = worker_until_finished(stack, pk)
    assert (status, error) == ("done", "")
    assert result["entries_before"] == 557 and result["entries_after"] <= 557
    assert result["recall_before"] is not None and isinstance(result["guard_passed"], bool)
    with sqlite3.connect(stack["db"]) as db:
        assert db.execute("SELECT count(*) FROM console_pass").fetchone() == (0,)


def test_a_worker_stops_a_dry_run_at_its_memory_budget(stack) -> None:
    pk = request_dry_run(stack["env"])
    status, result, error = worker_until_finished(stack, pk, MEMORYADMIN_DRY_RUN_MAX_MB="1")
    assert status == "failed" and result is None
    assert error.startswith("Stopped at its memory budget of 1 MB (MEMORYADMIN_DRY_RUN_MAX_MB)")


def test_six_concurrent_identical_requests_share_one_dry_run(stack) -> None:
    """The reported attack (six clients at once) on the deployed database (SQLite file, WAL):
    six answers, one dry run queued, one task on the broker."""
    request_dry_run(stack["env"])  # carol exists; her first dry run is queued
    clear(stack)
    out = manage(stack["env"], "shell", "-c", CONCURRENT).split()
    clear(stack)  # the other tests start with no dry run queued
    assert out[out.index("shared") :] == ["shared", "6", "1", "1", "1"]


def clear(stack: dict[str, Any]) -> None:
    with sqlite3.connect(stack["db"]) as db:
        db.execute("DELETE FROM console_dryrun")
        db.execute("DELETE FROM django_q_ormq")
