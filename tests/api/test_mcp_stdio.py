"""MCP over stdio: ``manage.py mcp_server --user USERNAME`` in a subprocess, driven by the SDK's
own client, against a real ``chroma run`` server and its own SQLite file (never var/)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from django.conf import settings
from mcp import Client, StdioServerParameters

from tests.api.mcp_helpers import TOOLS, error, free_port, locomo_file, result

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(Path(sys.executable).parent / "python")

SEED = """
from django.contrib.auth.models import Group, User
from memoryadmin.agents.models import Agent
from memoryadmin.core.roles import ensure_roles
from tests.proposals.make import make_proposal
ensure_roles()
for name, role in (("carol", "viewer"), ("bob", "reviewer")):
    User.objects.create_user(name, f"{name}@example.org", "password").groups.add(
        Group.objects.get(name=role))
print("proposal", make_proposal(Agent.objects.get(slug="locomo-conv-30"), entries_before=557).pk)
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("mcp-stdio")
    data = locomo_file()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")} | {
        "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
        "MEMORYADMIN_VAR_DIR": str(tmp),
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "MEMORYADMIN_MODEL_DIR": str(settings.MEMORYADMIN_MODEL_DIR),
        "CHROMA_MODE": "http",
        "CHROMA_HOST": "127.0.0.1",
        "CHROMA_PORT": str(port),
        "Q_SYNC": "1",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    log = open(tmp / "chroma.log", "wb")  # noqa: SIM115 - closed below
    chroma = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "chroma"),
            "run",
            "--path",
            str(tmp / "chroma"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=log,
    )

    def manage(*args: str) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

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
        manage("migrate", "--noinput")
        manage("import_locomo", str(data), "--conversation", "conv-30")
        proposal = int(manage("shell", "-c", SEED).split("proposal")[1])
        yield {"env": env, "proposal": proposal}
    finally:
        chroma.terminate()
        chroma.wait(20)
        log.close()


def session(stack: dict[str, Any], user: str, *steps: tuple[str, dict[str, Any]]) -> list[Any]:
    params = StdioServerParameters(
        command=PYTHON,
        args=["manage.py", "mcp_server", "--user", user],
        env=stack["env"],
        cwd=str(ROOT),
    )

    async def run() -> list[Any]:
        async with Client(params, read_timeout_seconds=180) as client:
            return [
                await client.list_tools()
                if name == "tools/list"
                else await client.call_tool(name, args)
                for name, args in steps
            ]

    return anyio.run(run)


def test_a_viewer_over_stdio(stack) -> None:
    listing, dry, hits, refused, unknown = session(
        stack,
        "carol",
        ("tools/list", {}),
        ("memory_consolidate", {"agent": "locomo-conv-30", "dry_run": True}),
        ("search_memories", {"agent": "locomo-conv-30", "query": "adopting a dog", "k": 3}),
        ("approve_pass", {"pass_id": stack["proposal"], "note": "looks fine"}),
        ("memory_consolidate", {"agent": "nobody", "dry_run": True}),
    )
    assert {t.name for t in listing.tools} == TOOLS
    queued = result(dry)  # planned by the server's task queue (Q_SYNC here), polled by the tool
    assert queued["status"] == "done" and queued["dry_run_id"] >= 1
    d = queued["result"]
    assert d["dry_run"] is True and d["entries_before"] == 557 and d["pass_id"] is None
    assert d["recall_before"] is not None
    assert len(result(hits)) == 3
    assert "carol (viewer) may not approve" in error(refused)
    assert "Unknown agent 'nobody'. Known agents: locomo-conv-30." in error(unknown)


def test_an_unknown_user_is_refused_before_serving(stack) -> None:
    done = subprocess.run(
        [PYTHON, "manage.py", "mcp_server", "--user", "mallory"],
        cwd=ROOT,
        env=stack["env"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "mallory" in done.stderr and done.stdout == ""
