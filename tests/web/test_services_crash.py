"""Crash-safe apply (I-1, I-3): a worker killed with SIGKILL at each step of apply leaves a pass
that ``manage.py recover_passes`` finishes, with every original memory live or archived once.

Real processes against a real ``chroma run`` server: the "worker" is a ``manage.py shell``
process applying the pass with ``$MEMORYADMIN_FAILPOINT`` set, so it kills itself at that point.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SEED = """
import json
from consolidation import MemoryRecord
from consolidation.adapters.embedder import get_default_embedder
from django.contrib.auth.models import User
from memoryadmin.console import services, stores
from tests.conftest import DISTINCT_FACTS as F, days_ago
slug = "{slug}"
agent = services.agent_create(name=slug, slug=slug, collection_name="crash-" + slug, schedule_enabled=False)
texts = F[:20] + [F[0], F[1], "Alice likes jazz", "Alice no longer likes jazz"]
metas = [dict(created_at=days_ago(1), importance=0.5) for _ in texts]
metas[3] = dict(created_at=days_ago(400), importance=0.1)
metas[4] = dict(created_at=days_ago(1), importance=0.95)
metas[22] = dict(created_at=days_ago(10), importance=0.5)
metas[23] = dict(created_at=days_ago(2), importance=0.5)
vecs = get_default_embedder().embed(texts)
records = [MemoryRecord(f"mem-{{i:03d}}", t, v, m) for i, (t, v, m) in enumerate(zip(texts, vecs, metas))]
stores.get_store(agent).upsert(records)
originals = {{r.id: r.content_hash for page in stores.get_store(agent).iter_pages() for r in page}}
run = services.pass_request(agent=agent, trigger="cli", actor="cli", run_inline=True)
run.refresh_from_db()
assert run.status == "proposed", (run.status, run.guard_reason)
user = User.objects.create_user(slug, password="pw-" + slug)
services.pass_approve(run=run, user=user)
print(json.dumps(dict(pk=run.pk, originals=originals, kinds=sorted(run.operations.values_list("kind", flat=True)))))
"""

APPLY = """
import os
from memoryadmin.console import services
from memoryadmin.console.models import Pass
os.environ["MEMORYADMIN_FAILPOINT"] = "{failpoint}"
services.pass_apply(run=Pass.objects.get(pk={pk}))
print("survived")
"""

CHECK = """
import json
from memoryadmin.console import services, stores
from memoryadmin.console.models import ArchivedMemory, Pass
run = Pass.objects.get(pk={pk})
live = {{r.id: r.content_hash for page in stores.get_store(run.agent).iter_pages() for r in page}}
archived = list(ArchivedMemory.objects.filter(run=run).values_list("memory_id", "content_hash", "operation_id"))
ops = dict(run.operations.values_list("index", "status"))
print(json.dumps(dict(status=run.status, live=live, archived=archived, ops=ops)))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("crash")
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
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    env.pop("MEMORYADMIN_FAILPOINT", None)
    chroma = subprocess.Popen(
        [str(BIN / "chroma"), "run", "--path", str(tmp / "chroma"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
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
        subprocess.run([str(BIN / "python"), "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                       check=True, timeout=120)
        yield {"env": env}
    finally:
        chroma.terminate()
        chroma.wait(timeout=20)


def shell(env: dict, code: str, *, expect: int = 0) -> str:
    done = subprocess.run([str(BIN / "python"), "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == expect, (done.returncode, done.stderr[-3000:])
    return done.stdout


def last_json(out: str) -> dict:
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


@pytest.mark.parametrize(
    "failpoint", ["apply:archived", "apply:written", "apply:verified", "apply:deleted", "apply:applied"]
)
def test_a_worker_killed_mid_apply_is_recovered_with_nothing_lost(stack, failpoint):
    env = stack["env"]
    slug = failpoint.replace(":", "-")
    seeded = last_json(shell(env, SEED.format(slug=slug)))
    pk, originals = seeded["pk"], seeded["originals"]
    assert seeded["kinds"] == ["merge", "merge", "promote", "prune", "reconcile"]

    shell(env, APPLY.format(failpoint=failpoint, pk=pk), expect=-signal.SIGKILL)
    crashed = last_json(shell(env, CHECK.format(pk=pk)))
    assert crashed["status"] == "applying"
    assert set(originals) <= set(crashed["live"]) | {m for m, _, _ in crashed["archived"]}

    out = subprocess.run([str(BIN / "python"), "manage.py", "recover_passes"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"pass #{pk} of {slug}: applied" in out.stdout

    final = last_json(shell(env, CHECK.format(pk=pk)))
    assert final["status"] == "applied" and set(final["ops"].values()) == {"applied"}
    archived = {}
    for memory_id, chash, op_id in final["archived"]:
        assert (memory_id, op_id) not in archived, "archived twice"
        archived[(memory_id, op_id)] = chash
    archived_ids = {m for m, _ in archived}
    for mid, chash in originals.items():  # every original: live and unchanged, or archived whole
        assert final["live"].get(mid) == chash or mid in archived_ids, mid
        if mid in archived_ids:
            assert chash in {h for (m, _), h in archived.items() if m == mid}
    # 24 originals: 2 merges of 2 (−4, +2), 1 prune, 1 reconcile → 20 live, nothing duplicated
    assert len(final["live"]) == 20
    assert len(archived) == 4 + 1 + 1 + 1  # merge sources, prune, superseded, promote's prior version
