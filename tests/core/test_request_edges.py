"""Request edges the JSON API, the MCP tools and the pages answer cleanly: an integer past the
database's range, a body over the upload limit, a path no route matches, an over-long agent or
layer name, a disallowed Host, the token page's caching."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client as McpClient

from memoryadmin.api.mcp_tools import build_server
from memoryadmin.core.validation import DB_INT_MAX
from tests.api.api_helpers import api_factory
from tests.api.mcp_helpers import error
from tests.conftest import login

pytestmark = pytest.mark.django_db

HUGE = str(DB_INT_MAX + 1)  # 2**63: one past SQLite's integer and PostgreSQL's bigint


@pytest.fixture
def api_as(alice: Any, bob: Any, carol: Any) -> Any:
    return api_factory(alice, bob, carol)


def _json(r: Any) -> dict:
    assert r["Content-Type"].startswith("application/json"), r.content[:200]
    return json.loads(r.content)


@pytest.mark.parametrize(
    "path",
    [
        f"/audit/events?pass_id={HUGE}",
        f"/audit/events?page={HUGE}",
        f"/passes?page={HUGE}",
        f"/passes/1?page={HUGE}",
    ],
)
def test_an_integer_past_the_database_range_is_a_422_naming_the_field(api_as, path) -> None:
    api = api_as("viewer")
    api.client.raise_request_exception = False
    r = api.client.get(f"/api/v1{path}", **api.headers)
    assert r.status_code == 422
    assert "less than or equal to 9223372036854775807" in _json(r)["detail"]


def test_an_integer_at_the_database_limit_is_answered(api_as) -> None:
    r = api_as("viewer").get(f"/audit/events?pass_id={DB_INT_MAX}")
    assert r.status_code == 200 and _json(r)["count"] == 0


def test_an_overflow_that_reaches_the_database_is_a_400_not_a_500(client, bob, agent_with_memories):
    """The backstop: a page that filters by an unbounded id (the review views' operation of a
    pass) answers 400 when the driver cannot hold the number."""
    agent_with_memories(1)
    client.raise_request_exception = False
    r = login(client, bob).post(f"/passes/{HUGE}/ops/1/exclude/")
    assert r.status_code in (400, 404)


def test_a_body_over_the_upload_limit_is_json(api_as, settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    api = api_as("admin")
    r = api.client.post(
        "/api/v1/passes",
        json.dumps({"agent": "x" * 5_000}),
        content_type="application/json",
        **api.headers,
    )
    assert r.status_code in (400, 413)
    assert "limit" in _json(r)["detail"] or r.status_code == 400


@pytest.mark.parametrize(
    "path", ["/api/v1/agents/..%2F..%2Fetc", "/api/v1/no-such-route", "/api/v1/agents/a/b/c/d"]
)
def test_a_path_no_route_matches_is_a_json_404(api_as, path) -> None:
    api = api_as("viewer")
    r = api.client.get(path, **api.headers)
    assert r.status_code == 404
    assert _json(r)["detail"] == "Not Found."


def test_pages_keep_their_html_404(client, alice) -> None:
    r = login(client, alice).get("/no-such-page/")
    assert r.status_code == 404 and r["Content-Type"].startswith("text/html")


def test_a_disallowed_host_is_answered_with_the_security_headers(client) -> None:
    for path in ("/", "/accounts/login/", "/api/v1/agents"):
        r = client.get(path, HTTP_HOST="evil.example")
        assert r.status_code == 400
        assert r["X-Frame-Options"] == "DENY"
        assert "default-src" in r["Content-Security-Policy"]


def test_the_token_page_is_never_cached(client, alice) -> None:
    c = login(client, alice)
    r = c.post("/account/api-tokens/", {"name": "laptop"}, follow=True)
    assert r.status_code == 200 and r.context["new_token"]
    assert "no-store" in r["Cache-Control"]
    assert "no-store" in c.get("/account/api-tokens/")["Cache-Control"]


def _mcp(user: Any, name: str, args: dict[str, Any]) -> Any:
    async def run() -> Any:
        async with McpClient(build_server(user_id=user.pk)) as client:
            return await client.call_tool(name, args)

    return anyio.run(run)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("memory_compact", {"agent": "a" * 100_000}),
        ("memory_compact", {"agent": "demo", "layer": "l" * 100_000}),
        ("memory_consolidate", {"agent": "a" * 100_000, "dry_run": True}),
        ("search_memories", {"agent": "a" * 100_000, "query": "tea"}),
        ("list_proposals", {"agent": "a" * 100_000}),
        ("get_pass", {"pass_id": int(HUGE)}),
    ],
)
def test_mcp_caps_names_and_ids_and_never_echoes_a_long_value(alice, tool, args) -> None:
    message = error(_mcp(alice, tool, args))
    assert len(message) < 1_000, message[:300]
    assert (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        not in message
    )


@pytest.mark.django_db(transaction=True)
def test_an_unknown_layer_is_named_cut_short(alice, bare_agent) -> None:
    agent = bare_agent()
    message = error(_mcp(alice, "memory_compact", {"agent": agent.slug, "layer": "x" * 40}))
    assert "Unknown layer 'xxxxxxxx" in message and "x" * 40 not in message
