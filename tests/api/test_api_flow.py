"""End to end over HTTP with real tokens: an admin creates a pass, waits for the proposal, a
reviewer excludes an operation, approves, sees it applied, and rolls it back — the store ends
byte-identical (I-1) and every step is in the audit trail under the token's user."""

from __future__ import annotations

import time
from typing import Any

import pytest

from memoryadmin.core import stores
from tests.api.api_helpers import Api, api_factory
from tests.conftest import DISTINCT_FACTS, days_ago

pytestmark = pytest.mark.django_db

F = DISTINCT_FACTS


def store_state(agent: Any) -> dict[str, tuple[str, Any]]:
    return {r.id: (r.document, r.metadata) for r in stores.get_store(agent).iter_records()}


def wait_settled(api: Api, pass_id: int, timeout: float = 60) -> dict[str, Any]:
    """Poll the pass until it leaves queued/running/approved/applying/rolling_back."""
    deadline = time.monotonic() + timeout
    while True:
        body = api.get(f"/passes/{pass_id}").json()
        if body["status"] not in ("queued", "running", "approved", "applying", "rolling_back"):
            return body
        assert time.monotonic() < deadline, f"pass {pass_id} still {body['status']}"
        time.sleep(0.2)


@pytest.fixture
def agent(agent_with_memories: Any) -> Any:
    """23 memories: an exact duplicate (merge), a decayed one (prune), an important one
    (promote) and a contradiction (reconcile)."""
    texts = F[:20] + [F[0], "Alice likes jazz", "Alice no longer likes jazz"]
    metas: list[dict] = [{}] * 23
    metas[3] = {"created_at": days_ago(400), "importance": 0.1}
    metas[4] = {"importance": 0.95}
    metas[21] = {"created_at": days_ago(10)}
    metas[22] = {"created_at": days_ago(2)}
    return agent_with_memories(texts, metas)


def test_create_review_apply_and_roll_back_over_http(
    alice, bob, carol, agent, django_capture_on_commit_callbacks
) -> None:
    admin, reviewer, _viewer = (
        api_factory(alice, bob, carol)(r) for r in ("admin", "reviewer", "viewer")
    )
    original = store_state(agent)

    with django_capture_on_commit_callbacks(execute=True):  # django-q2 sync: the task runs here
        r = admin.post("/passes", {"agent": agent.slug})
    assert r.status_code == 202, r.content
    pass_id = r.json()["pass_id"]
    proposal = wait_settled(admin, pass_id)
    assert proposal["status"] == "proposed", proposal["guard_reason"]
    assert proposal["requested_by"] == "alice" and proposal["entries_before"] == 23
    ops = {o["kind"]: o for o in proposal["items"]}
    assert {"merge", "prune"} <= set(ops), sorted(ops)
    pruned_id = ops["prune"]["sources"][0]["memory_id"]
    kept = ops["merge"]["result_id"]  # a merge keeping one source's text keeps its record
    merged_away = [
        s["memory_id"] for s in ops["merge"]["sources"] if s["removed"] and s["memory_id"] != kept
    ]
    assert merged_away

    r = reviewer.post(f"/passes/{pass_id}/operations/{ops['prune']['index']}/exclude")
    assert r.status_code == 200 and r.json()["excluded_operations"] == 1
    assert r.json()["pruned"] == proposal["pruned"] - 1

    with django_capture_on_commit_callbacks(execute=True):
        r = reviewer.post(f"/passes/{pass_id}/approve", {"note": "keep the old note for now"})
    assert r.status_code == 200, r.content
    applied = wait_settled(reviewer, pass_id)
    assert applied["status"] == "applied" and applied["decided_by"] == "bob"
    live = store_state(agent)
    assert pruned_id in live  # excluded: untouched
    assert not any(m in live for m in merged_away) and kept in live
    gone = reviewer.get(f"/agents/{agent.slug}/memory", id=merged_away[0]).json()
    assert gone["current"] is None and gone["archived"][0]["pass_id"] == pass_id
    ex = next(o for o in reviewer.get(f"/passes/{pass_id}", kind="prune").json()["items"])
    assert ex["excluded"] is True and ex["status"] == "excluded"

    with django_capture_on_commit_callbacks(execute=True):
        r = reviewer.post(f"/passes/{pass_id}/rollback", {"note": "undo the test pass"})
    assert r.status_code == 200, r.content
    assert wait_settled(reviewer, pass_id)["status"] == "rolled_back"
    assert store_state(agent) == original

    events = reviewer.get("/audit/events", pass_id=pass_id).json()["items"]
    trail = [(e["verb"], e["actor"]) for e in reversed(events)]
    for step in [
        ("requested", "alice"),
        ("excluded", "bob"),
        ("approved", "bob"),
        ("rollback_requested", "bob"),
    ]:
        assert step in trail, trail
    assert trail.index(("excluded", "bob")) < trail.index(("approved", "bob"))
