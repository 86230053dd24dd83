"""MCP over streamable HTTP with the SDK's own client: the server runs in a thread of this
process (same in-process Chroma and test database), authenticated with real API tokens."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from io import StringIO
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import uvicorn
from django.core.management import call_command
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from memoryadmin.agents.models import Agent
from memoryadmin.api.mcp_tools import http_app
from memoryadmin.api.tokens import token_create, token_revoke
from memoryadmin.core import stores
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run
from tests.api.mcp_helpers import TOOLS, error, free_port, locomo_file, result
from tests.proposals.make import make_proposal

# The server's worker threads read what the test wrote: committed data, not a rolled-back test
# transaction.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def mcp_url() -> Iterator[str]:
    port = free_port()
    config = uvicorn.Config(
        http_app(host="127.0.0.1", port=port), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "MCP server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(10)


def calls(url: str, token: str, *steps: tuple[str, dict[str, Any]]) -> list[Any]:
    """Open one MCP session with ``token`` and make each tool call in order."""

    async def run() -> list[Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        async with Client(streamable_http_client(url, http_client=http)) as client:
            out = []
            for name, args in steps:
                out.append(
                    await client.list_tools()
                    if name == "tools/list"
                    else await client.call_tool(name, args)
                )
            return out

    return anyio.run(run)


def test_tools_are_listed_with_typed_inputs(mcp_url, carol) -> None:
    _t, raw = token_create(user=carol)
    [listing] = calls(mcp_url, raw, ("tools/list", {}))
    tools = {t.name: t for t in listing.tools}
    assert set(tools) == TOOLS
    search = tools["search_memories"].input_schema
    assert search["required"] == ["agent", "query"]
    assert (
        search["properties"]["k"]["type"] == "integer" and search["properties"]["k"]["minimum"] == 1
    )
    consolidate = tools["memory_consolidate"]
    assert consolidate.input_schema["properties"]["dry_run"]["type"] == "boolean"
    out = consolidate.output_schema  # a pass (ConsolidateOut) or a dry run (DryRunOut)
    assert "loss_fraction" in out["$defs"]["ConsolidateOut"]["properties"]
    assert "poll_url" in out["$defs"]["DryRunOut"]["properties"]
    assert tools["get_dry_run"].input_schema["required"] == ["dry_run_id"]
    assert tools["reject_pass"].input_schema["required"] == ["pass_id", "note"]


def test_dry_run_on_a_locomo_agent_writes_nothing_and_search_finds_by_meaning(
    mcp_url, carol
) -> None:
    out = StringIO()
    call_command(
        "import_locomo", str(locomo_file()), "--conversation", "conv-30", "--json", stdout=out
    )
    agent = Agent.objects.get(slug="locomo-conv-30")
    before = stores.get_store(agent).count()
    _t, raw = token_create(user=carol)  # a viewer: a dry run writes nothing, so anyone may
    agents, dry, hits = calls(
        mcp_url,
        raw,
        ("list_agents", {}),
        ("memory_consolidate", {"agent": "locomo-conv-30", "dry_run": True}),
        (
            "search_memories",
            {"agent": "locomo-conv-30", "query": "Jon lost his job as a banker", "k": 5},
        ),
    )
    [row] = result(agents)
    assert row["slug"] == "locomo-conv-30" and row["memories"] == before == 557
    queued = result(dry)
    assert queued["status"] == "done" and queued["poll_url"].endswith(f"/{queued['dry_run_id']}")
    d = queued["result"]
    assert d["dry_run"] is True and d["pass_id"] is None and d["entries_before"] == 557
    assert d["entries_after"] <= 557 and 0.0 <= d["loss_fraction"] <= 1.0
    assert d["guard_passed"] is not None and d["guard_reason"]
    assert d["recall_before"] is not None and d["recall_after"] is not None  # 81 probe queries
    assert not Pass.objects.filter(agent=agent).exists()
    assert stores.get_store(agent).count() == 557
    found = result(hits)
    assert len(found) == 5 and found[0]["score"] >= found[-1]["score"]
    assert any("bank" in h["document"].lower() for h in found[:3]), [h["document"] for h in found]


def test_a_viewer_may_not_approve_and_a_reviewer_may(
    mcp_url, carol, bob, agent_with_memories
) -> None:
    agent = agent_with_memories(4)
    run = make_proposal(agent, entries_before=40)
    _t, viewer = token_create(user=carol)
    [refused] = calls(mcp_url, viewer, ("approve_pass", {"pass_id": run.pk, "note": "lgtm"}))
    assert "carol (viewer) may not approve" in error(refused)
    run.refresh_from_db()
    assert run.status == "proposed"
    _t, reviewer = token_create(user=bob)
    proposals, approved = calls(
        mcp_url,
        reviewer,
        ("list_proposals", {"agent": agent.slug}),
        ("approve_pass", {"pass_id": run.pk, "note": "lgtm"}),
    )
    assert [p["id"] for p in result(proposals)] == [run.pk]
    # the hand-made proposal's sources are not in the store: applied, it changes nothing
    assert result(approved)["status"] in ("approved", "applying", "no_changes")
    assert AuditEvent.objects.filter(run=run, verb="approved", actor="bob").exists()


def test_unknown_agents_bad_arguments_and_missing_passes_are_tool_errors(
    mcp_url, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(3)
    _t, raw = token_create(user=alice)
    unknown, bad_k, bad_policy, no_pass, blank_note, bad_layer, after = calls(
        mcp_url,
        raw,
        ("search_memories", {"agent": "ghost", "query": "anything"}),
        ("search_memories", {"agent": agent.slug, "query": "x", "k": 0}),
        ("memory_consolidate", {"agent": agent.slug, "dry_run": True, "policy": "reckless"}),
        ("get_pass", {"pass_id": 999999}),
        ("reject_pass", {"pass_id": 1, "note": ""}),
        ("memory_compact", {"agent": agent.slug, "layer": "dreams"}),
        ("list_agents", {}),  # the server is still up and answering
    )
    assert f"Unknown agent 'ghost'. Known agents: {agent.slug}." in error(unknown)
    assert "k" in error(bad_k) and "greater than or equal to 1" in error(bad_k)
    assert "Unknown policy 'reckless'" in error(bad_policy)
    assert "There is no pass #999999." in error(no_pass)
    assert "note" in error(blank_note)
    assert "Unknown layer 'dreams'" in error(bad_layer)
    assert [a["slug"] for a in result(after)] == [agent.slug]


def test_compact_creates_a_reconcile_and_dedupe_proposal_for_admins_only(
    mcp_url, alice, carol, agent_with_memories
) -> None:
    agent = agent_with_memories(5)
    _t, viewer = token_create(user=carol)
    [refused] = calls(mcp_url, viewer, ("memory_compact", {"agent": agent.slug}))
    assert "only admins may" in error(refused)
    _t, admin = token_create(user=alice)
    [made] = calls(mcp_url, admin, ("memory_compact", {"agent": agent.slug, "layer": "semantic"}))
    run = Pass.objects.get(pk=result(made)["id"])
    assert run.requested_by == alice and run.telemetry["policy_override"] == "compact:semantic"
    assert run.policy["prune"] is False and run.policy["promote"] is False
    assert run.policy["reconcile"] is True


def test_consolidate_refuses_to_supersede_a_waiting_proposal_unless_asked(
    mcp_url, alice, agent_with_memories
) -> None:
    from tests.proposals.make import make_proposal

    agent = agent_with_memories(5)
    waiting = make_proposal(agent)
    _t, admin = token_create(user=alice)
    [refused] = calls(mcp_url, admin, ("memory_consolidate", {"agent": agent.slug}))
    assert f"Pass #{waiting.pk} of {agent.slug} is waiting for review" in error(refused)
    assert Pass.objects.filter(agent=agent).count() == 1
    [made] = calls(mcp_url, admin, ("memory_consolidate", {"agent": agent.slug, "replace": True}))
    assert result(made)["pass_id"] != waiting.pk


def test_no_token_or_a_revoked_token_is_refused_at_the_door(mcp_url, carol) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    assert httpx.post(mcp_url, json=body, headers=headers).status_code == 401
    token, raw = token_create(user=carol)
    token_revoke(token=token)
    r = httpx.post(mcp_url, json=body, headers=headers | {"Authorization": f"Bearer {raw}"})
    assert r.status_code == 401


CONTRADICTION = ["Is allergic to penicillin", "Is not allergic to penicillin"]


def test_a_reviewer_decides_a_conflict_and_excludes_an_operation_over_mcp(
    mcp_url, bob, carol, agent_with_memories
) -> None:
    from memoryadmin.proposals.models import Operation
    from tests.conftest import DISTINCT_FACTS

    same_time = [{"created_at": "2025-03-01T00:00:00+00:00"}] * 2
    agent = agent_with_memories(CONTRADICTION + DISTINCT_FACTS[:6], same_time + [{}] * 6)
    run = pass_run(run=pass_request(agent=agent, trigger="operator"))
    conflict = run.operations.get(kind=Operation.Kind.CONFLICT)
    _t, viewer = token_create(user=carol)
    [refused] = calls(
        mcp_url,
        viewer,
        ("resolve_conflict", {"pass_id": run.pk, "index": conflict.index, "keep": "a"}),
    )
    assert "carol (viewer) may not" in error(refused)
    _t, reviewer = token_create(user=bob)
    bad, kept, excluded, included = calls(
        mcp_url,
        reviewer,
        ("resolve_conflict", {"pass_id": run.pk, "index": conflict.index, "keep": "neither"}),
        ("resolve_conflict", {"pass_id": run.pk, "index": conflict.index, "keep": "a"}),
        ("exclude_operation", {"pass_id": run.pk, "index": conflict.index}),
        ("exclude_operation", {"pass_id": run.pk, "index": conflict.index, "excluded": False}),
    )
    assert "keep" in error(bad)
    before = result(kept)
    assert before["reconciled"] == 1 and before["entries_after"] == len(DISTINCT_FACTS[:6]) + 1
    assert result(excluded)["excluded_operations"] == 1 and result(excluded)["reconciled"] == 0
    assert result(included)["reconciled"] == 1
    assert before["loss_fraction"] == pytest.approx(1 / 8)
    conflict.refresh_from_db()
    assert conflict.kind == "reconcile" and conflict.rule == "reviewer_pick"
    assert conflict.scores["decision"]["by"] == "bob"
    verbs = set(AuditEvent.objects.filter(run=run, actor="bob").values_list("verb", flat=True))
    assert {"conflict_resolved", "excluded", "included"} <= verbs, verbs


def test_a_reviewer_forgets_a_scope_over_mcp_and_a_viewer_may_not(
    mcp_url, carol, bob, agent_with_memories
) -> None:
    agent = agent_with_memories(4, [{"user_id": u} for u in ("u1", "u2", "u1", "u2")])
    sel = {"agent": agent.slug, "kind": "scope", "key": "user_id", "value": "u1"}
    _t, viewer = token_create(user=carol)
    [refused] = calls(mcp_url, viewer, ("forget", sel | {"dry_run": True}))
    assert "carol (viewer) may not forget" in error(refused)
    _t, reviewer = token_create(user=bob)
    dry, proposed = calls(mcp_url, reviewer, ("forget", sel | {"dry_run": True}), ("forget", sel))
    assert result(dry)["count"] == 2 and result(dry)["id"] is None
    assert result(proposed)["status"] == "proposed"
    [done] = calls(mcp_url, reviewer, ("approve_forget", {"forget_id": result(proposed)["id"]}))
    assert result(done)["status"] == "applied" and result(done)["live_count"] == 2
    left = stores.get_store(agent).iter_records(include_embeddings=False)
    assert sorted(r.id for r in left) == ["mem-001", "mem-003"]


def test_dry_runs_over_mcp_are_queued_polled_and_limited(
    mcp_url, carol, agent_with_memories, settings, monkeypatch
) -> None:
    """django-q2 as deployed (not sync): the tool queues the dry run, waits (bounded) and gives
    its id; the same request again shares it; a viewer's token is held to the per-user limit;
    get_dry_run returns the figures once the worker has planned it."""
    from django_q.conf import Conf

    from memoryadmin import tasks

    monkeypatch.setattr(Conf, "SYNC", False)
    settings.MEMORYADMIN_DRY_RUNS_PER_USER = 1
    first, second = agent_with_memories(3), agent_with_memories(3)
    _t, raw = token_create(user=carol)
    queued, again, other_policy, over_limit = calls(
        mcp_url,
        raw,
        ("memory_consolidate", {"agent": first.slug, "dry_run": True, "wait": 0.5}),
        ("memory_consolidate", {"agent": first.slug, "dry_run": True, "wait": 0}),
        ("memory_consolidate", {"agent": first.slug, "dry_run": True, "policy": "aggressive"}),
        ("memory_consolidate", {"agent": second.slug, "dry_run": True, "wait": 0}),
    )
    q = result(queued)
    assert q["status"] == "queued" and q["result"] is None
    assert result(again)["dry_run_id"] == q["dry_run_id"]
    assert f"Dry run #{q['dry_run_id']}" in error(other_policy)
    assert "at most 1 at a time" in error(over_limit)
    tasks.run_dry_run(q["dry_run_id"])  # what the worker does with the queued task
    [done, missing] = calls(
        mcp_url,
        raw,
        ("get_dry_run", {"dry_run_id": q["dry_run_id"], "wait": 0}),
        ("get_dry_run", {"dry_run_id": 987654, "wait": 0}),
    )
    d = result(done)
    assert d["status"] == "done" and d["result"]["entries_before"] == 3
    assert d["result"]["pass_id"] is None and not Pass.objects.filter(agent=first).exists()
    assert "There is no dry run #987654" in error(missing)


def test_bad_arguments_are_one_readable_line_each_without_pydantic_text(mcp_url, alice) -> None:
    _t, raw = token_create(user=alice)
    (bad,) = calls(mcp_url, raw, ("get_pass", {"pass_id": "abc"}))
    (missing,) = calls(mcp_url, raw, ("search_memories", {"k": "many"}))
    text = error(bad)
    assert "Bad arguments for get_pass:" in text and "- pass_id: Input should be" in text
    for raw_text in ("validation error", "Arguments", "errors.pydantic.dev"):
        assert raw_text not in error(bad) and raw_text not in error(missing)
    lines = error(missing).splitlines()
    assert "- agent: required" in lines and "- query: required" in lines
    assert any(line.startswith("- k: ") for line in lines)
