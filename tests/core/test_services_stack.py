"""The scale-out stack with real processes: two ``qcluster`` workers on the Redis broker, the
database of the run (PostgreSQL under ``make test-services``), and a ``chroma run`` server.

- Two agents' passes are requested at the same instant; each worker plans one of them (its log
  says so), and a second request for an agent with an active pass is refused (I-5).
- A worker is killed (SIGKILL, ``$MEMORYADMIN_FAILPOINT``) in the middle of applying one pass;
  the other worker, started with the Procfile's worker line, resumes it with ``recover_passes``
  (the dead holder's lease is taken over) and nothing is lost; then it applies the second pass.

Needs ``Q_REDIS_URL`` (skipped without it: the default ``make test`` needs no Redis). Each run
uses its own queue name (``Q_NAME``), database, Chroma directory and port.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from django.conf import settings

from tests.conftest import free_port
from tests.servicedb import fresh_database, query

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("Q_REDIS_URL"),
        reason="needs the Redis broker (Q_REDIS_URL): run by `make test-services`",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SEED = """
import random
from consolidation import MemoryRecord
from consolidation.adapters.embedder import get_default_embedder
from django.contrib.auth.models import User
from memoryadmin.core import stores
from memoryadmin.agents.services.agents import agent_create
from tests.conftest import days_ago
words = ("amber basil cedar delta ember fjord garnet harbor iris juniper kelp lumen maple nectar "
         "onyx pepper quartz raven sable thistle umber violet willow xenon yarrow zephyr anchor "
         "bramble copper dune falcon glacier hazel indigo jasper kestrel lotus meadow").split()
from django.contrib.auth.models import Group
from memoryadmin.core.roles import ensure_roles
ensure_roles()
User.objects.create_user("ops", password="pw-ops").groups.add(Group.objects.get(name="reviewer"))
emb = get_default_embedder()
for slug, seed in (("north", 1), ("south", 2)):
    r = random.Random(seed)
    uniq = [" ".join(r.sample(words, 7)) + f" {r.randint(1000, 9999)}" for _ in range(130)]
    texts = uniq[:110] + uniq[:110] + uniq[110:]  # 110 exact-duplicate pairs: 110 merges
    agent = agent_create(name=slug, slug=slug, collection_name="stack-" + slug,
                                  schedule_enabled=False, policy=dict(max_loss_fraction=1.0))
    stores.get_store(agent).upsert([
        MemoryRecord(f"mem-{i:03d}", t, v, dict(created_at=days_ago(1), importance=0.5))
        for i, (t, v) in enumerate(zip(texts, emb.embed(texts)))])
print("seeded")
"""

REQUEST_BOTH = """
from memoryadmin.core.errors import PassAlreadyActive
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.agents.models import Agent
runs = [pass_request(agent=Agent.objects.get(slug=s), trigger="operator", actor="ops")
        for s in ("north", "south")]
try:
    pass_request(agent=Agent.objects.get(slug="north"), trigger="operator", actor="ops")
    print("SECOND queued")
except PassAlreadyActive:
    print("SECOND refused")
print("PKS", *[r.pk for r in runs])
"""

APPROVE = """
from django.contrib.auth.models import User
from memoryadmin.proposals.services.review import pass_approve
from memoryadmin.proposals.models import Pass
pass_approve(run=Pass.objects.get(pk={pk}), user=User.objects.get(username="ops"))
print("approved")
"""


def wait_until(predicate, timeout: float, what: str, logs: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    tails = "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}" for p in sorted(logs.glob("*.log"))
    )
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{tails}")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict]:
    port = free_port()
    logs = tmp_path / "logs"
    logs.mkdir()
    with fresh_database(tmp_path) as db_url:
        env = os.environ | {
            "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
            "MEMORYADMIN_VAR_DIR": str(tmp_path),
            "DATABASE_URL": db_url,
            "MEMORYADMIN_MODEL_DIR": str(settings.MEMORYADMIN_MODEL_DIR),
            "CHROMA_MODE": "http",
            "CHROMA_HOST": "127.0.0.1",
            "CHROMA_PORT": str(port),
            "Q_SYNC": "0",
            "Q_WORKERS": "1",
            "Q_NAME": f"stack-{uuid.uuid4().hex[:10]}",
            "LIBS_LOG_LEVEL": "INFO",  # django-q2 logs "processing <task>" (who ran what)
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        }
        env.pop("MEMORYADMIN_FAILPOINT", None)
        chroma_log = open(logs / "chroma.log", "wb")  # noqa: SIM115 - closed below
        chroma = subprocess.Popen(
            [
                str(BIN / "chroma"),
                "run",
                "--path",
                str(tmp_path / "chroma"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=chroma_log,
            stderr=subprocess.STDOUT,
        )
        workers: list[subprocess.Popen] = []
        try:

            def up() -> bool:
                try:
                    return httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat").is_success
                except httpx.HTTPError:
                    return False

            wait_until(up, 60, "chroma", logs)
            shell(env, None, "migrate", "-v0")
            assert "seeded" in shell(env, SEED)
            yield {"env": env, "db": db_url, "logs": logs, "workers": workers, "port": port}
        finally:
            for w in workers:
                stop(w, signal.SIGKILL)
            chroma.terminate()
            chroma.wait(timeout=20)
            chroma_log.close()


def shell(env: dict, code: str | None, *args: str) -> str:
    cmd = [str(BIN / "python"), "manage.py", *(args or ("shell", "-c", code or ""))]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def start_worker(stack: dict, name: str, *, failpoint: str = "") -> subprocess.Popen:
    """The Procfile's worker line (``recover_passes`` then ``qcluster``) in its own group."""
    line = next(x for x in (ROOT / "Procfile").read_text().splitlines() if x.startswith("worker:"))
    env = dict(stack["env"]) | ({"MEMORYADMIN_FAILPOINT": failpoint} if failpoint else {})
    log = open(stack["logs"] / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen(
        ["sh", "-c", line.split(":", 1)[1].strip()],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    stack["workers"].append(proc)
    return proc


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def status(stack: dict, pk: int) -> str:
    return query(stack["db"], "select status from console_pass where id = %s", pk)[0][0]


def live_count(stack: dict, slug: str) -> int:
    import chromadb

    client = chromadb.HttpClient(host="127.0.0.1", port=stack["port"])
    return client.get_collection(f"stack-{slug}").count()


def test_two_workers_on_redis_plan_two_agents_at_once_and_recover_a_killed_apply(stack):
    logs = stack["logs"]
    w1, w2 = start_worker(stack, "w1"), start_worker(stack, "w2")
    # Each cluster's pusher says "pushing tasks" just before its first pull from the Redis list:
    # a fixed sleep after recover_passes was not enough on a loaded CI box (one worker's
    # qcluster was not yet up, and the other took both passes).
    wait_until(
        lambda: all(
            "pushing tasks" in (logs / f"{n}.log").read_text(errors="replace") for n in ("w1", "w2")
        ),
        90,
        "both workers' clusters to pull from the broker",
        logs,
    )
    time.sleep(1)  # the pusher's first BLPOP follows its log line
    out = shell(stack["env"], REQUEST_BOTH)
    assert "SECOND refused" in out  # one pass per agent (I-5), on this database
    north, south = (int(x) for x in out.split("PKS", 1)[1].split())
    wait_until(
        lambda: {status(stack, north), status(stack, south)} == {"proposed"},
        180,
        "both passes to be planned",
        logs,
    )
    planned_by = {
        n: sum(
            "processing run_pass:" in line
            for line in (logs / f"{n}.log").read_text(errors="replace").splitlines()
        )
        for n in ("w1", "w2")
    }
    assert planned_by == {"w1": 1, "w2": 1}, planned_by  # each worker planned one pass

    # w2 leaves; w1 restarts with a failpoint and dies in the middle of applying north's pass
    stop(w2)
    stop(w1)
    w1 = start_worker(stack, "w1-fail", failpoint="apply:written")
    wait_until(
        lambda: "recovered" in (logs / "w1-fail.log").read_text(errors="replace"),
        90,
        "the failing worker to start",
        logs,
    )
    assert "approved" in shell(stack["env"], APPROVE.format(pk=north))

    def crashed() -> bool:
        ((st, owner),) = query(
            stack["db"], "select status, lease_owner from console_pass where id = %s", north
        )
        pid = owner.rpartition(":")[2]
        return st == "applying" and pid.isdigit() and not psutil.pid_exists(int(pid))

    wait_until(crashed, 120, "the worker to die mid-apply", logs)
    stop(w1, signal.SIGKILL)
    assert status(stack, north) == "applying"

    # the other worker's start resumes it from the journal, then applies south's pass too
    start_worker(stack, "w2-again")
    wait_until(lambda: status(stack, north) == "applied", 180, "recover_passes to finish", logs)
    # the command's report line reaches the log just after the status is committed
    wait_until(
        lambda: f"pass #{north} of north: applied" in (logs / "w2-again.log").read_text(),
        30,
        "recover_passes to report the resumed pass",
        logs,
    )
    assert "approved" in shell(stack["env"], APPROVE.format(pk=south))
    wait_until(lambda: status(stack, south) == "applied", 180, "the second apply", logs)

    for pk, slug in ((north, "north"), (south, "south")):
        ops = dict(
            query(
                stack["db"],
                "select status, count(*) from console_operation where run_id = %s group by status",
                pk,
            )
        )
        assert ops == {"applied": 110}, (slug, ops)
        archived = query(
            stack["db"],
            "select count(*), count(distinct memory_id) from "
            "console_archivedmemory where run_id = %s",
            pk,
        )[0]
        assert archived == (220, 220), (slug, archived)  # each source archived once
        assert live_count(stack, slug) == 240 - 220 + 110  # merged into 110, 20 singles kept
    events = json.dumps(query(stack["db"], "select verb from console_auditevent"))
    assert events.count('"refused"') == 1
