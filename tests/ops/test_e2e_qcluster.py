"""End to end with real processes: `chroma run`, `manage.py qcluster` and `manage.py runserver`.

An operator logs in over HTTP, presses "Run now" (POST /agents/<slug>/run/), and the worker
plans the pass into a proposal. Everything runs on its own SQLite file, Chroma directory and
ports, so it never touches var/.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.conftest import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SEED = """
from django.contrib.auth.models import Group, User
from consolidation import MemoryRecord
from consolidation.adapters.embedder import get_default_embedder
from memoryadmin.core import stores
from memoryadmin.agents.services.agents import agent_create
from memoryadmin.core.roles import ensure_roles
from tests.conftest import DISTINCT_FACTS, days_ago
ensure_roles()
u = User.objects.create_user("alice", "a@example.org", "password")
u.groups.add(Group.objects.get(name="admin"))
agent = agent_create(name="E2E", slug="e2e", collection_name="e2e-memories", user=u)
texts = DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2]
vecs = get_default_embedder().embed(texts)
stores.get_store(agent).upsert([
    MemoryRecord(f"mem-{i:03d}", t, v, {"created_at": days_ago(1), "importance": 0.5})
    for i, (t, v) in enumerate(zip(texts, vecs))
])
print("seeded", stores.get_store(agent).count())
"""


def wait_for(predicate, timeout: float, what: str, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(
                    f"{p.args[:3]} exited with {p.returncode} while waiting for {what}"
                )
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict]:
    chroma_port, web_port = free_port(), free_port()
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
        "MEMORYADMIN_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "MEMORYADMIN_MODEL_DIR": str(settings.MEMORYADMIN_MODEL_DIR),
        "CHROMA_MODE": "http",
        "CHROMA_HOST": "127.0.0.1",
        "CHROMA_PORT": str(chroma_port),
        "Q_SYNC": "0",
        "Q_WORKERS": "1",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    procs: list[subprocess.Popen] = []
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(name: str, *cmd: str) -> subprocess.Popen:
        out = open(logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    def manage(*args: str) -> str:
        done = subprocess.run(
            [str(BIN / "python"), "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    try:
        start(
            "chroma",
            str(BIN / "chroma"),
            "run",
            "--path",
            str(tmp_path / "chroma"),
            "--host",
            "127.0.0.1",
            "--port",
            str(chroma_port),
        )
        wait_for(
            lambda: httpx.get(f"http://127.0.0.1:{chroma_port}/api/v2/heartbeat").is_success,
            60,
            "chroma",
            procs,
        )
        manage("migrate", "--noinput")
        assert "seeded 18" in manage("shell", "-c", SEED)
        start("worker", str(BIN / "python"), "manage.py", "run_worker")
        start(
            "web",
            str(BIN / "python"),
            "manage.py",
            "runserver",
            f"127.0.0.1:{web_port}",
            "--noreload",
        )
        base = f"http://127.0.0.1:{web_port}"
        wait_for(lambda: httpx.get(f"{base}/accounts/login/").status_code == 200, 60, "web", procs)
        yield {"base": base, "db": tmp_path / "db.sqlite3", "procs": procs, "logs": logs}
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def db_rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db, timeout=20)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_run_now_and_approve_over_http_go_through_the_worker(stack):
    base = stack["base"]
    with httpx.Client(base_url=base, follow_redirects=False, timeout=30) as http:
        page = http.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        r = http.post(
            "/accounts/login/",
            data={"username": "alice", "password": "password", "csrfmiddlewaretoken": token},
        )
        assert r.status_code == 302, r.text[:500]
        r = http.post("/agents/e2e/run/", headers={"X-CSRFToken": http.cookies["csrftoken"]})
        assert r.status_code in (200, 302), r.text[:500]

        def proposed() -> bool:
            rows = db_rows(stack["db"], "select status from console_pass")
            return rows and rows[0][0] not in ("queued", "running")

        try:
            wait_for(proposed, 120, "the pass to be planned", stack["procs"])
        except AssertionError:
            for log in stack["logs"].iterdir():
                print(log.name, log.read_text(errors="replace")[-3000:])
            raise
        ((pk, status, merged, loss),) = db_rows(
            stack["db"],
            "select id, status, json_extract(figures, '$.merged'),"
            " json_extract(figures, '$.loss_fraction') from console_pass",
        )
        assert (status, merged) == ("proposed", 4)
        assert abs(loss - 4 / 18) < 1e-9
        detail = http.get(f"/passes/{pk}/")
        assert detail.status_code == 200 and "proposed" in detail.text.lower()
        verbs = db_rows(stack["db"], "select verb from console_auditevent order by id")
        assert [v for (v,) in verbs][-3:] == ["requested", "started", "proposed"]

        r = http.post(
            f"/passes/{pk}/approve/",
            data={"note": "ok from e2e"},
            headers={"X-CSRFToken": http.cookies["csrftoken"]},
        )
        assert r.status_code == 302, r.text[:500]

        def applied() -> bool:
            return db_rows(stack["db"], f"select status from console_pass where id={pk}")[0][0] in (
                "applied",
                "partially_applied",
            )

        wait_for(applied, 120, "the worker to apply the pass", stack["procs"])
        statuses = {
            s
            for (s,) in db_rows(
                stack["db"], f"select status from console_operation where run_id={pk}"
            )
        }
        assert statuses == {"applied"}
        assert db_rows(stack["db"], "select count(*) from console_archivedmemory")[0][0] == 4
