"""``POST /api/v1/passes/{id}/operations/{index}/resolve``: a reviewer decides a conflict item
through the API exactly as on the proposal page."""

from __future__ import annotations

from typing import Any

import pytest

from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run
from memoryadmin.proposals.services.review import pass_reject
from tests.api.api_helpers import api_factory
from tests.conftest import DISTINCT_FACTS
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db

CONTRADICTION = ["Is allergic to penicillin", "Is not allergic to penicillin"]
SAME_TIME = [{"created_at": "2025-03-01T00:00:00+00:00"}] * 2


@pytest.fixture
def api_as(alice: Any, bob: Any, carol: Any) -> Any:
    return api_factory(alice, bob, carol)


@pytest.fixture
def conflict(agent_with_memories: Any) -> Operation:
    agent = agent_with_memories(CONTRADICTION + DISTINCT_FACTS[:6], SAME_TIME + [{}] * 6)
    run = pass_run(run=pass_request(agent=agent, trigger="operator"))
    assert run.status == Pass.Status.PROPOSED
    return run.operations.get(kind=Operation.Kind.CONFLICT)


def _path(op: Operation) -> str:
    return f"/passes/{op.run_id}/operations/{op.index}/resolve"


@pytest.mark.parametrize("role", ["anonymous", "viewer", "reviewer", "admin"])
def test_only_reviewers_and_admins_decide(api_as, role, conflict) -> None:
    r = api_as(role).post(_path(conflict), {"keep": "both"})
    expected = {"anonymous": 401, "viewer": 403, "reviewer": 200, "admin": 200}[role]
    assert r.status_code == expected, r.content
    decided = AuditEvent.objects.filter(run_id=conflict.run_id, verb="conflict_resolved")
    assert decided.exists() == (expected == 200)


def test_keep_a_counts_in_the_loss_and_shows_in_the_operations(api_as, conflict) -> None:
    api = api_as("reviewer")
    r = api.post(_path(conflict), {"keep": "a"})
    assert r.status_code == 200, r.content
    assert r.json()["loss_fraction"] == pytest.approx(1 / 8)
    (item,) = api.get(f"/passes/{conflict.run_id}", kind="reconcile").json()["items"]
    assert item["rule"] == "reviewer_pick" and item["scores"]["decision"]["by"] == "bob"
    assert [s["removed"] for s in item["sources"]] == [False, True]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [({}, 422, "keep"), ({"keep": "c"}, 422, "keep")],
)
def test_a_bad_choice_is_422_naming_keep(api_as, conflict, body, status, field) -> None:
    r = api_as("reviewer").post(_path(conflict), body)
    assert r.status_code == status and field in [e["field"] for e in r.json()["errors"]]


def test_a_settled_pass_is_409_and_a_non_conflict_422(api_as, conflict, bob) -> None:
    api = api_as("reviewer")
    pass_reject(run=conflict.run, user=bob, note="later")
    r = api.post(_path(conflict), {"keep": "a"})
    assert r.status_code == 409 and "only a proposed pass" in r.json()["detail"]
    run = make_proposal(conflict.run.agent, merges=1)
    r = api.post(f"/passes/{run.pk}/operations/0/resolve", {"keep": "a"})
    assert r.status_code == 422 and "not a conflict" in r.json()["detail"]
    r = api.post(f"/passes/{run.pk}/operations/9/resolve", {"keep": "a"})
    assert r.status_code == 404 and "index" in [e["field"] for e in r.json()["errors"]]
