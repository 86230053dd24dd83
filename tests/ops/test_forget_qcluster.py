"""A forget request's purge survives a killed worker: ``manage.py run_worker`` against a real
``chroma run`` server, killed with SIGKILL (``$MEMORYADMIN_FAILPOINT=forget:deleted``) right
after each journaled chunk of deletes, then restarted until it finishes.

The agent has 400 memories: 250 of ``user_id=alice`` (the selection: three chunks of
``DELETE_CHUNK`` = 100) and 150 of bob. The first two starts die after their first chunk (the
start-up recovery resumes the journal each time); the third, without the failpoint, finishes.
After every crash nothing of bob's is touched and the request is still ``applying``; at the end
not one of alice's memories is live and bob's are byte-identical.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.ops import test_faults_qcluster as faults
from tests.ops.test_faults_qcluster import ROOT, rows, shell

stack = faults.stack  # the fixture: a `chroma run` server and a migrated database, per module

pytestmark = pytest.mark.slow

SEED = """
import json
from consolidation import MemoryRecord
from consolidation.adapters.embedder import get_default_embedder
from django.contrib.auth.models import User
from memoryadmin.core import stores
from memoryadmin.agents.services.agents import agent_create
from memoryadmin.memories.selectors.forget import ForgetSelection
from memoryadmin.memories.services.forget import forget_approve, forget_request_create
texts = [f"Note {i}: the {'alice' if i < 250 else 'bob'} ledger line {i * 7919 % 10007}"
         for i in range(400)]
metas = [dict(user_id="alice" if i < 250 else "bob") for i in range(400)]
agent = agent_create(name="forget", slug="forget", collection_name="faults-forget",
                     schedule_enabled=False)
vecs = get_default_embedder().embed(texts)
stores.get_store(agent).upsert([MemoryRecord(f"mem-{i:03d}", t, v, m)
                                for i, (t, v, m) in enumerate(zip(texts, vecs, metas))])
user = User.objects.create_user("forgetter", password="pw-forgetter")
from django.contrib.auth.models import Group
from memoryadmin.core.roles import ensure_roles
ensure_roles()
user.groups.add(Group.objects.get(name="reviewer"))  # forgetting is a reviewer's action
req, plan = forget_request_create(
    agent=agent, selection=ForgetSelection("scope", key="user_id", value="alice"), user=user)
req = forget_approve(request=req, user=user)  # enqueues apply_forget for the worker
print(json.dumps(dict(pk=req.pk, status=req.status, live=len(plan.live))))
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def run_worker(stack: dict, pk: int, failpoint: str | None, name: str) -> str:
    """Start ``run_worker`` (the Procfile's worker: recovery, then the cluster); "crashed" once
    the process holding the request's lease died, "done" once the request settled; the worker's
    process group is then killed with SIGKILL."""
    env = dict(stack["env"])
    if failpoint:
        env["MEMORYADMIN_FAILPOINT"] = failpoint
    log = open(stack["logs"] / f"{name}.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "run_worker", "--wait-for-store", "30"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    sql = "select status, lease_owner from console_forgetrequest where id=?"
    [(_, stale)] = rows(stack["db"], sql, pk)
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            [(status, owner)] = rows(stack["db"], sql, pk)
            if status in ("applied", "failed"):
                return "done"
            pid = owner.rpartition(":")[2]
            if owner and owner != stale and pid.isdigit() and _gone(int(pid)):
                return "crashed"
            time.sleep(0.2)
        raise AssertionError(
            f"{name}: forget request #{pk} neither settled nor crashed: {status}\n"
            + Path(stack["logs"] / f"{name}.log").read_text(errors="replace")[-3000:]
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
        log.close()


def live(stack: dict) -> dict[str, tuple[str, str]]:
    """Live records: id → (user_id, content hash)."""
    from consolidation.adapters.chroma_store import ChromaMemoryStore

    store = ChromaMemoryStore(stack["chroma"].get_collection("faults-forget"))
    return {
        r.id: (r.metadata["user_id"], r.content_hash)
        for r in store.iter_records(include_embeddings=False)
    }


def test_a_worker_killed_mid_purge_is_resumed_until_nothing_selected_survives(stack):
    seeded = json.loads(shell(stack["env"], SEED).strip().splitlines()[-1])
    pk = seeded["pk"]
    assert seeded["status"] == "applying" and seeded["live"] == 250
    before = live(stack)
    bob = {k: v for k, v in before.items() if v[0] == "bob"}
    assert len(bob) == 150

    left = []
    for attempt in range(2):
        assert run_worker(stack, pk, "forget:deleted", f"forget-{attempt}") == "crashed"
        now = live(stack)
        left.append(sum(1 for u, _ in now.values() if u == "alice"))
        assert {k: v for k, v in now.items() if v[0] == "bob"} == bob  # nothing else removed
        [(status, journal)] = rows(
            stack["db"], "select status, journal from console_forgetrequest where id=?", pk
        )
        assert status == "applying"
        assert len(json.loads(journal)["deleted"]) == 250 - left[-1]
    assert left == [150, 50]  # one journaled chunk of 100 per crash, none redone

    assert run_worker(stack, pk, None, "forget-final") == "done"
    [(status, purged)] = rows(
        stack["db"], "select status, purged from console_forgetrequest where id=?", pk
    )
    assert status == "applied" and json.loads(purged)["live"] == 250
    assert live(stack) == bob  # nothing of alice's survives, bob's byte-identical
