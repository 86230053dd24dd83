"""A Chroma server that requires a token, the way docs/PRODUCTION.md deploys chromadb 1.x: a
``chroma run`` on a private port and nginx in front of it with ``deploy/nginx-chroma.conf``
(placeholders filled in), the console pointed at nginx with ``CHROMA_TOKEN``.

chromadb 1.x's own server ignores ``CHROMA_SERVER_AUTHN_*`` (chroma-core/chroma#4965), so the
proxy checks the token. Through it, the console creates an agent, writes memories, runs a pass,
applies it and reads the store back; a full write batch (2.1 MB) passes; requests without the
token or with a wrong one get 401; a console with a wrong ``CHROMA_TOKEN`` shows the store as
unavailable, saying why.

nginx comes from Debian (``make test`` installs it, like chromium). Without it the tests skip,
or fail when ``CI`` is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.core import stores
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import pass_approve
from tests.conftest import DISTINCT_FACTS, free_port
from tests.core.test_services_stack import wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CONF = ROOT / "deploy" / "nginx-chroma.conf"
# as an operator makes one (`openssl rand -hex 32`), with the other characters the file allows
TOKEN = "Tok3n_for-tests_9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
TEXTS = DISTINCT_FACTS[:8] + DISTINCT_FACTS[:2]  # two exact duplicate pairs: 2 merges
COLLECTIONS = "/api/v2/tenants/default_tenant/databases/default_database/collections"


def nginx_binary() -> str:
    """Debian's nginx (in /usr/sbin, off a non-root PATH); skip without it, fail under CI."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if found:
        return found
    message = "nginx is not installed (`make test` installs Debian's: apt-get install nginx)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def nginx_conf(*, listen: int, upstream: int) -> str:
    """The repository's template with its three placeholders filled in (docs/PRODUCTION.md)."""
    text = CONF.read_text()
    for placeholder in ("__CHROMA_TOKEN__", "__LISTEN__", "__CHROMA_UPSTREAM__"):
        assert placeholder in text, f"{placeholder} missing from {CONF}"
    text = (
        text.replace("__CHROMA_TOKEN__", TOKEN)
        .replace("__LISTEN__", f"127.0.0.1:{listen}")
        .replace("__CHROMA_UPSTREAM__", f"127.0.0.1:{upstream}")
    )
    assert not re.search(r"__[A-Z_]+__", text), "a placeholder docs/PRODUCTION.md does not fill in"
    return text


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).is_success
    except httpx.HTTPError:
        return False


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``chroma run`` on one free port, nginx (the repo's config) on another; yields
    ``{"port": nginx's, "chroma_port": ..., "logs": dir}`` and stops both afterwards."""
    nginx = nginx_binary()
    tmp = tmp_path_factory.mktemp("chroma-token")
    logs = tmp / "logs"  # nginx's prefix/logs/ (access log) and both processes' output
    logs.mkdir()
    chroma_port, port = free_port(), free_port()
    (tmp / "nginx.conf").write_text(nginx_conf(listen=port, upstream=chroma_port))
    chroma_log = open(logs / "chroma.log", "wb")  # noqa: SIM115 - closed below
    nginx_log = open(logs / "nginx.log", "wb")  # noqa: SIM115 - closed below
    chroma = subprocess.Popen(
        [str(BIN / "chroma"), "run", "--path", str(tmp / "chroma")]
        + ["--host", "127.0.0.1", "--port", str(chroma_port)],
        stdout=chroma_log,
        stderr=subprocess.STDOUT,
    )
    directives = f"daemon off; pid {tmp}/nginx.pid; error_log {logs}/error.log;"
    proxy = subprocess.Popen(
        [nginx, "-c", str(tmp / "nginx.conf"), "-p", f"{tmp}/", "-g", directives],
        stdout=nginx_log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(
            lambda: answers(f"http://127.0.0.1:{port}/api/v2/heartbeat"),
            60,
            "chroma behind nginx",
            logs,
        )
        yield {"port": port, "chroma_port": chroma_port, "logs": logs}
    finally:
        stop(proxy, signal.SIGQUIT)  # nginx's graceful shutdown
        stop(chroma)
        chroma_log.close()
        nginx_log.close()


@pytest.fixture
def console_via(settings: Any, proxy: dict[str, Any]) -> Iterator[Any]:
    """``console_via(token)``: the console's Chroma settings pointed at the proxy."""

    def point(token: str) -> None:
        settings.CHROMA_MODE, settings.CHROMA_HOST = "http", "127.0.0.1"
        settings.CHROMA_PORT, settings.CHROMA_SSL = proxy["port"], False
        settings.CHROMA_TOKEN = token
        stores.reset_client_cache()

    yield point
    stores.reset_client_cache()


def test_the_console_runs_and_applies_a_pass_through_the_token_proxy(
    client: Client,
    alice,
    bob,
    carol,
    proxy,
    console_via,
    agent_with_memories,
    django_capture_on_commit_callbacks,
) -> None:
    console_via(TOKEN)
    # agent_create and an upsert, through nginx
    agent = agent_with_memories(TEXTS, policy={"max_loss_fraction": 0.5})
    assert stores.get_store(agent).count() == 10

    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, user=alice)
    run.refresh_from_db()
    assert run.status == Pass.Status.PROPOSED, (run.status, run.error, run.reason)
    assert run.operations.filter(kind="merge").count() == 2
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED, (run.status, run.error)

    store = stores.get_store(agent)
    assert sorted(r.document for r in store.iter_records()) == sorted(DISTINCT_FACTS[:8])
    client.force_login(carol)
    page = client.get(reverse("memory_list", args=[agent.slug])).content.decode()
    assert DISTINCT_FACTS[7] in page and "Store unavailable" not in page
    # it all went through nginx: the apply's delete of the merged originals is in its access log
    access = (proxy["logs"] / "chroma-proxy.access.log").read_text()
    assert f"/collections/{store.collection.id}/delete HTTP/1.1\" 200" in access

    # a console with the wrong token: pages say the store is unavailable and why, no 500
    console_via("not-the-token")
    reason = (
        f"Access denied by the Chroma server at http://127.0.0.1:{proxy['port']}, "
        "check CHROMA_TOKEN: Chroma refused the token (HTTP 401)"
    )
    r = client.get(reverse("agent_detail", args=[agent.slug]))
    assert r.status_code == 200
    assert "unavailable" in r.content.decode() and reason in r.content.decode()
    r = client.get(reverse("memory_list", args=[agent.slug]))
    assert r.status_code == 200 and f"Store unavailable: {reason}" in r.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        refused = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, user=alice)
    refused.refresh_from_db()
    assert refused.status == Pass.Status.FAILED and reason in refused.error

    console_via(TOKEN)  # nothing was lost on the way
    assert stores.get_store(agent).count() == 8


def test_a_full_write_batch_passes_the_proxy(proxy, console_via, unique_name) -> None:
    from consolidation import MemoryRecord
    from consolidation.adapters.chroma_store import ChromaMemoryStore, open_collection

    console_via(TOKEN)
    name = unique_name("batch")
    store = ChromaMemoryStore(open_collection(stores.get_client(), name))
    vectors = np.random.default_rng(12).standard_normal((2000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.upsert(
        [MemoryRecord(f"m-{i:04d}", f"memory {i}", v, {"i": i}) for i, v in enumerate(vectors)]
    )
    assert store.write_batch == 1000 and store.count() == 2000
    # each batch was one request over nginx's default 1 MB body cap, and it passed (new ids go
    # through Chroma's add, stored ones through its upsert: ChromaMemoryStore.upsert)
    writes = [
        line
        for line in (proxy["logs"] / "chroma-proxy.access.log").read_text().splitlines()
        if re.search(rf"/collections/{store.collection.id}/(add|upsert) ", line)
    ]
    sizes = [int(re.search(r" 20[01] in=(\d+) ", line).group(1)) for line in writes]  # add: 201
    assert len(sizes) == 2 and min(sizes) > 1024 * 1024, writes


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer not-the-token"}, 401),
        ({"X-Chroma-Token": "not-the-token"}, 401),
        ({"Authorization": TOKEN}, 401),  # the bearer scheme is part of the header
        ({"X-Chroma-Token": TOKEN.swapcase()}, 401),  # compared exactly, case included
        ({"Authorization": f"Bearer {TOKEN}x"}, 401),
        ({"X-Chroma-Token": TOKEN[1:]}, 401),
        ({"Authorization": f"Bearer {TOKEN}"}, 200),
        ({"X-Chroma-Token": TOKEN}, 200),
    ],
)
def test_the_proxy_lets_only_the_token_through(proxy, headers, status) -> None:
    r = httpx.get(f"http://127.0.0.1:{proxy['port']}{COLLECTIONS}", headers=headers)
    assert r.status_code == status, r.text
    if status == 401:  # Chroma's error body: the Python client raises AuthorizationError
        assert json.loads(r.text)["error"] == "AuthorizationError"
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
    else:
        assert isinstance(r.json(), list)


def test_only_the_heartbeat_answers_without_the_token(proxy) -> None:
    base = f"http://127.0.0.1:{proxy['port']}/api/v2"
    assert httpx.get(f"{base}/heartbeat").status_code == 200  # load balancers' health check
    assert httpx.post(f"{base}/heartbeat").status_code == 403
    assert httpx.get(f"{base}/version").status_code == 401
    # Chroma itself, on its private port, answers anyone: the reason it must stay private
    assert httpx.get(f"http://127.0.0.1:{proxy['chroma_port']}{COLLECTIONS}").status_code == 200
