"""Fault injection in a real worker: ``manage.py qcluster`` against a real ``chroma run`` server,
killed with SIGKILL (``$MEMORYADMIN_FAILPOINT``) at each journal step of apply and of rollback,
then restarted with the Procfile's worker line (``recover_passes`` before ``qcluster``).

The agent has 224 memories: 105 pairs of exact duplicates (105 merges: two apply batches, the
worker's ``MEMORYADMIN_APPLY_BATCH`` set to 100 here), a prune, a promote and a reconcile. Each
failpoint fires in the first batch; the first restart keeps the failpoint, so ``recover_passes``
resumes the journal and dies again in the second batch; the second restart (no failpoint)
finishes. After every crash and at the end the census holds: every original is live with its
content or archived whole, no record is duplicated, and the pass ends ``applied`` — then the
same for rollback, ending ``rolled_back`` with the store back to its original content.

Also: a worker whose start-up recovery resumed an apply still imports an upload afterwards (its
forked task processes once hung in the embedder's copied thread pool).

One Chroma server and one SQLite database per module; each failpoint uses its own agent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from django.conf import settings

from tests.conftest import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SEED = """
import json, random
from consolidation import MemoryRecord
from consolidation.adapters.embedder import get_default_embedder
from django.contrib.auth.models import User
from memoryadmin.core import stores
from memoryadmin.agents.services.agents import agent_create
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import pass_approve
from tests.conftest import DISTINCT_FACTS as F, days_ago
slug = "{slug}"
words = ("amber basil cedar delta ember fjord garnet harbor iris juniper kelp lumen maple "
         "nectar onyx pepper quartz raven sable thistle umber violet willow xenon yarrow "
         "zephyr anchor bramble copper dune falcon glacier hazel indigo jasper kestrel lotus "
         "meadow nickel orchid pebble quill ridge saffron tundra velvet walnut").split()
r = random.Random(5)
uniq = [" ".join(r.sample(words, 7)) + f" {{r.randint(1000, 9999)}}" for _ in range(115)]
texts = (uniq[:105] + uniq[:105] + uniq[105:]
         + [F[3], F[4], "Alice likes jazz", "Alice no longer likes jazz"])
metas = [dict(created_at=days_ago(1), importance=0.5) for _ in texts]
metas[220] = dict(created_at=days_ago(400), importance=0.1)
metas[221] = dict(created_at=days_ago(1), importance=0.95)
metas[222] = dict(created_at=days_ago(10), importance=0.5)
metas[223] = dict(created_at=days_ago(2), importance=0.5)
agent = agent_create(name=slug, slug=slug, collection_name="faults-" + slug,
                              schedule_enabled=False, policy=dict(max_loss_fraction=1.0))
vecs = get_default_embedder().embed(texts)
stores.get_store(agent).upsert([MemoryRecord(f"mem-{{i:03d}}", t, v, m)
                                for i, (t, v, m) in enumerate(zip(texts, vecs, metas))])
run = pass_request(agent=agent, trigger="cli", actor="cli", run_inline=True)
run.refresh_from_db()
assert run.status == "proposed", (run.status, run.guard_reason)
user = User.objects.create_user(slug, password="pw-" + slug)
from django.contrib.auth.models import Group
from memoryadmin.core.roles import ensure_roles
ensure_roles()
user.groups.add(Group.objects.get(name="reviewer"))  # approving is a reviewer's action
pass_approve(run=run, user=user)  # enqueues apply_pass for the worker
print(json.dumps(dict(pk=run.pk, kinds=sorted(set(run.operations.values_list("kind", flat=True))),
                      ops=run.operations.count())))
"""

ROLLBACK = """
from django.contrib.auth.models import User
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.rollback import pass_rollback_request
run = pass_rollback_request(run=Pass.objects.get(pk={pk}),
                            user=User.objects.get(username="{slug}"))
print(run.status)
"""

APPLY_STEPS = [
    "apply:archived",
    "apply:written",
    "apply:verified",
    "apply:deleted",
    "apply:applied",
]
ROLLBACK_STEPS = [
    "rollback:restored",
    "rollback:verified",
    "rollback:deleted",
    "rollback:marked",
    "rollback:marked",
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("faults")
    port = free_port()
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
        "MEMORYADMIN_VAR_DIR": str(tmp),
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "MEMORYADMIN_MODEL_DIR": str(settings.MEMORYADMIN_MODEL_DIR),
        "CHROMA_MODE": "http",
        "CHROMA_HOST": "127.0.0.1",
        "CHROMA_PORT": str(port),
        "Q_SYNC": "0",
        "Q_WORKERS": "1",
        "MEMORYADMIN_APPLY_BATCH": "100",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    env.pop("MEMORYADMIN_FAILPOINT", None)
    chroma = subprocess.Popen(
        [
            str(BIN / "chroma"),
            "run",
            "--path",
            str(tmp / "chroma"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat").is_success:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and chroma.poll() is None, "chroma did not start"
            time.sleep(0.3)
        subprocess.run(
            [str(BIN / "python"), "manage.py", "migrate", "-v0"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=120,
        )
        import chromadb

        yield {
            "env": env,
            "db": tmp / "db.sqlite3",
            "chroma": chromadb.HttpClient(host="127.0.0.1", port=port),
            "logs": tmp,
        }
    finally:
        chroma.terminate()
        chroma.wait(timeout=20)


def shell(env: dict, code: str) -> str:
    done = subprocess.run(
        [str(BIN / "python"), "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def rows(db: Path, sql: str, *args: object) -> list[tuple]:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def worker_line() -> str:
    """The Procfile's worker command (what ``make run`` starts)."""
    line = next(
        line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("worker:")
    )
    return line.split(":", 1)[1].strip()


def _dead(pid: int) -> bool:
    """True when ``pid`` is gone or a zombie: the worker's main process (``run_worker``, exec'd
    by ``sh``) is this test's own child, so once killed it stays a zombie until reaped."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def run_worker(stack: dict, pk: int, failpoint: str | None, name: str) -> str:
    """Start the worker as the Procfile does; return "crashed" once a process working on pass
    ``pk`` died (its lease holder is gone) or "done" once the pass settled; the worker is then
    killed with SIGKILL (the whole process group, as a machine crash would)."""
    env = dict(stack["env"])
    if failpoint:
        env["MEMORYADMIN_FAILPOINT"] = failpoint
    log = open(stack["logs"] / f"{name}.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        ["sh", "-c", worker_line()],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    [(stale_owner,)] = rows(stack["db"], "select lease_owner from console_pass where id=?", pk)
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            [(status, owner)] = rows(
                stack["db"], "select status, lease_owner from console_pass where id=?", pk
            )
            if status in ("applied", "partially_applied", "rolled_back", "failed"):
                return "done"
            pid = owner.rpartition(":")[2]
            if owner != stale_owner and pid.isdigit() and _dead(int(pid)):
                return "crashed"
            time.sleep(0.2)
        raise AssertionError(
            f"{name}: pass #{pk} neither settled nor crashed: {status}\n"
            + (stack["logs"] / f"{name}.log").read_text(errors="replace")[-3000:]
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
        log.close()


def census(stack: dict, slug: str, pk: int) -> dict:
    """Live records (id → content hash, from Chroma) and this pass's archive rows."""
    from consolidation.adapters.chroma_store import ChromaMemoryStore

    store = ChromaMemoryStore(stack["chroma"].get_collection(f"faults-{slug}"))
    live = {r.id: r.content_hash for r in store.iter_records(include_embeddings=False)}
    archived = rows(
        stack["db"],
        "select memory_id, content_hash, operation_id, restored_at is not null "
        "from console_archivedmemory where run_id=?",
        pk,
    )
    status = rows(stack["db"], "select status from console_pass where id=?", pk)[0][0]
    ops = dict(
        rows(
            stack["db"],
            "select status, count(*) from console_operation where run_id=? group by status",
            pk,
        )
    )
    return {"live": live, "archived": archived, "status": status, "ops": ops}


def assert_nothing_lost(c: dict, originals: dict[str, str]) -> None:
    seen = set()
    for memory_id, _, op_id, _ in c["archived"]:
        assert (memory_id, op_id) not in seen, f"{memory_id} archived twice for one operation"
        seen.add((memory_id, op_id))
    archived = {(m, h) for m, h, _, _ in c["archived"]}
    for mid, chash in originals.items():
        assert c["live"].get(mid) == chash or (mid, chash) in archived, (
            f"{mid} is neither live nor archived"
        )


@pytest.mark.parametrize(
    "step", range(5), ids=[f"{a}+{b}" for a, b in zip(APPLY_STEPS, ROLLBACK_STEPS, strict=True)]
)
def test_a_worker_killed_at_each_step_is_resumed_at_its_next_start(stack, step):
    apply_fp, rollback_fp = APPLY_STEPS[step], ROLLBACK_STEPS[step]
    slug = f"fp{step}"
    seeded = json.loads(shell(stack["env"], SEED.format(slug=slug)).strip().splitlines()[-1])
    pk = seeded["pk"]
    assert seeded["kinds"] == ["merge", "promote", "prune", "reconcile"] and seeded["ops"] == 108
    from consolidation.adapters.chroma_store import ChromaMemoryStore

    store = ChromaMemoryStore(stack["chroma"].get_collection(f"faults-{slug}"))
    originals = {r.id: r.content_hash for r in store.iter_records(include_embeddings=False)}
    assert len(originals) == 224

    # apply: killed in batch 1, killed again in batch 2 by the restarted worker, then finished
    crashes = crash_until_done(stack, slug, pk, apply_fp, "apply", originals)
    assert crashes >= 2, "the failpoint must fire in both batches"
    final = census(stack, slug, pk)
    assert final["status"] == "applied" and final["ops"] == {"applied": 108}
    assert_nothing_lost(final, originals)
    assert len(final["live"]) == 224 - 210 + 105 - 1 - 1  # merged, pruned, superseded
    assert len(final["archived"]) == 210 + 1 + 1 + 1  # merge sources, prune, loser, promote's prior

    # rollback: the same, ending with the store's original content
    assert shell(stack["env"], ROLLBACK.format(pk=pk, slug=slug)).split()[-1] == "rolling_back"
    assert crash_until_done(stack, slug, pk, rollback_fp, "rollback", originals) >= 1
    final = census(stack, slug, pk)
    assert final["status"] == "rolled_back" and final["ops"] == {"rolled_back": 108}
    assert final["live"] == originals  # every original back, nothing the pass created left
    assert all(restored for *_, restored in final["archived"])


def crash_until_done(
    stack: dict, slug: str, pk: int, failpoint: str, what: str, originals: dict
) -> int:
    """Restart the worker with ``failpoint`` until it no longer fires (at most 3 times), checking
    the census after each crash, then once without it; returns the number of crashes."""
    crashes = 0
    for attempt in range(3):
        outcome = run_worker(stack, pk, failpoint, f"{slug}-{what}-{attempt}")
        c = census(stack, slug, pk)
        assert_nothing_lost(c, originals)
        if outcome == "done":
            return crashes
        crashes += 1
        assert c["status"] in ("applying", "rolling_back"), c["status"]
    assert run_worker(stack, pk, None, f"{slug}-{what}-final") == "done"
    return crashes


IMPORT = """
import json
from django.core.files.uploadedfile import SimpleUploadedFile
from memoryadmin.memories.services.transfer_jobs import import_job_create
from memoryadmin.agents.models import Agent
lines = [json.dumps(dict(id=f"new-{{i}}", document=f"imported note {{i}}: " + "the user asked "
                         "about the weather " * (1 + i % 7))) for i in range(200)]
upload = SimpleUploadedFile("new.jsonl", ("\\n".join(lines) + "\\n").encode())
print(import_job_create(agent=Agent.objects.get(slug="{slug}"), upload=upload,
                        skip_invalid=False, user=None).pk)
"""


@contextlib.contextmanager
def worker(stack: dict, name: str) -> Iterator[Path]:
    """The Procfile's worker line, started and ready ("worker ready" in its log, whose path is
    yielded); killed with SIGKILL (its whole process group) afterwards."""
    log_path = stack["logs"] / f"{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        ["sh", "-c", worker_line()],
        cwd=ROOT,
        env=stack["env"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 150
        while "worker ready" not in log_path.read_text(errors="replace"):
            assert time.monotonic() < deadline and proc.poll() is None, log_path.read_text()
            time.sleep(0.3)
        yield log_path
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
        log.close()


def wait_for(stack: dict, sql: str, pk: int, done: set[str], seconds: float, log: Path) -> tuple:
    """Poll ``sql`` (``status, detail`` of row ``pk``) until the status is in ``done``."""
    deadline = time.monotonic() + seconds
    while True:
        [(status, detail)] = rows(stack["db"], sql, pk)
        if status in done:
            return status, detail
        assert time.monotonic() < deadline, (
            f"#{pk} stuck {status} after {seconds:g} s\n" + log.read_text(errors="replace")[-3000:]
        )
        time.sleep(0.3)


def test_a_worker_that_resumed_an_apply_at_start_still_runs_tasks_that_embed(stack):
    """The fresh-user deadlock: the worker's start-up recovery resumed an apply (using the
    embedder in the main process), then django-q2 forked its task processes; an upload they
    imported (embedding 200 texts) hung forever at 0 % CPU ("stuck importing"). Now it is
    imported. The worker also made its every-minute recovery schedule."""
    slug = "forkres"
    pk = json.loads(shell(stack["env"], SEED.format(slug=slug)).strip().splitlines()[-1])["pk"]
    assert run_worker(stack, pk, "apply:archived", f"{slug}-crash") == "crashed"
    with worker(stack, f"{slug}-restart") as log:
        assert "recovered 1 pass" in log.read_text(errors="replace")
        assert rows(stack["db"], "select status from console_pass where id=?", pk) == [("applied",)]
        job = int(shell(stack["env"], IMPORT.format(slug=slug)).split()[-1])
        sql = "select status, message from console_importjob where id=?"
        status, message = wait_for(stack, sql, job, {"done", "failed", "refused"}, 120, log)
        assert status == "done", message
    assert sorted(rows(stack["db"], "select func, cron from django_q_schedule")) == [
        ("memoryadmin.tasks.notification_checks", "*/5 * * * *"),
        ("memoryadmin.tasks.purge_archives", "17 4 * * *"),
        ("memoryadmin.tasks.recover_passes", "* * * * *"),
    ]


REQUEST = """
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.agents.models import Agent
print(pass_request(agent=Agent.objects.get(slug="{slug}"), trigger="cli", actor="cli").pk)
"""


def test_a_pass_whose_planning_worker_was_killed_is_planned_again_at_the_next_start(stack):
    """The fresh-user report: a worker killed while planning left its pass ``running`` for the
    hour of ``Q_RETRY`` (Run now disabled, nothing to cancel). Planning holds the lease, so the
    next start sees its holder dead and plans the pass again at once."""
    slug = "planfp"
    seeded = json.loads(shell(stack["env"], SEED.format(slug=slug)).strip().splitlines()[-1])
    assert run_worker(stack, seeded["pk"], None, f"{slug}-apply") == "done"  # frees the agent
    pk = int(shell(stack["env"], REQUEST.format(slug=slug)).split()[-1])
    assert run_worker(stack, pk, "plan:started", f"{slug}-crash") == "crashed"
    assert rows(stack["db"], "select status from console_pass where id=?", pk) == [("running",)]
    with worker(stack, f"{slug}-restart") as log:
        sql = "select status, error from console_pass where id=?"
        settled = {"proposed", "rejected_by_guard", "applied", "no_changes", "failed"}
        status, error = wait_for(stack, sql, pk, settled, 120, log)
    assert status != "failed", error  # planned (an empty plan is settled as "no changes")
    notes = rows(stack["db"], "select note from console_auditevent where run_id=?", pk)
    assert any("planned again" in note for (note,) in notes), notes
