"""JSON API at /api/v1/: every endpoint × role × method against the live URL conf with real
tokens; 401/403/404/405/409/422 as JSON with a readable ``detail`` naming the field."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from memoryadmin.api.tokens import token_create
from memoryadmin.core.models import AuditEvent
from memoryadmin.core.validation import MAX_NOTE_CHARS
from memoryadmin.proposals.models import Pass
from tests.api.api_helpers import api_factory
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db

ROLES = ["viewer", "reviewer", "admin"]


@pytest.fixture
def api_as(alice: Any, bob: Any, carol: Any) -> Any:
    return api_factory(alice, bob, carol)


@pytest.fixture
def agent(agent_with_memories: Any) -> Any:
    return agent_with_memories(6)


def reads(agent: Any, run: Pass) -> list[str]:
    return [
        "/agents",
        f"/agents/{agent.slug}",
        f"/agents/{agent.slug}/memories",
        f"/agents/{agent.slug}/memories/search?q=rescue+cat",
        f"/agents/{agent.slug}/memory?id=mem-000",
        "/passes",
        f"/passes/{run.pk}",
        "/audit/events",
    ]


# ----- auth ---------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["anonymous", *ROLES])
def test_every_read_needs_a_token_and_any_role_may_read(api_as, role, agent) -> None:
    run = make_proposal(agent)
    api = api_as(role)
    for path in reads(agent, run):
        r = api.get(path)
        if role == "anonymous":
            assert r.status_code == 401, path
            assert "Bearer" in r.json()["detail"] and r["WWW-Authenticate"] == "Bearer"
        else:
            assert r.status_code == 200, (path, r.content[:300])
            assert r["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    "header", ["Bearer ma_not-a-real-token", "Bearer ", "Basic YWxpY2U6cGFzc3dvcmQ=", "ma_x"]
)
def test_a_bad_token_is_401_json(client, header, agent) -> None:
    r = client.get("/api/v1/agents", HTTP_AUTHORIZATION=header)
    assert r.status_code == 401 and "API token" in r.json()["detail"]


def test_a_revoked_token_and_an_inactive_user_are_401(client, carol, agent) -> None:
    from memoryadmin.api.tokens import token_create, token_revoke

    token, raw = token_create(user=carol)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert client.get("/api/v1/agents", **auth).status_code == 200
    token_revoke(token=token)
    assert client.get("/api/v1/agents", **auth).status_code == 401
    _token2, raw2 = token_create(user=carol)
    carol.is_active = False
    carol.save()
    assert client.get("/api/v1/agents", HTTP_AUTHORIZATION=f"Bearer {raw2}").status_code == 401


def test_the_api_never_redirects_to_the_login_page(client) -> None:
    r = client.post("/api/v1/passes", {}, content_type="application/json")
    assert r.status_code == 401 and r["Content-Type"].startswith("application/json")


def test_openapi_schema_and_docs_are_served_to_a_signed_in_user_or_a_token(client, carol) -> None:
    anonymous = client.get("/api/v1/openapi.json")
    assert anonymous.status_code == 401 and "Authentication required" in anonymous.json()["detail"]
    page = client.get("/api/v1/docs")
    assert page.status_code == 302 and page["Location"].startswith(reverse("login"))
    assert "paths" not in page.content.decode()
    _token, raw = token_create(user=carol, name="reads the reference")
    wrong = client.get("/api/v1/openapi.json", HTTP_AUTHORIZATION="Bearer not-a-token")
    assert wrong.status_code == 401
    schema = client.get("/api/v1/openapi.json", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    assert "/api/v1/passes/{pass_id}/approve" in schema["paths"]
    client.force_login(carol)
    assert "/api/v1/passes" in client.get("/api/v1/openapi.json").json()["paths"]
    assert client.get("/api/v1/docs").status_code == 200


def test_the_docs_page_loads_only_our_own_files_under_the_csp(client, carol) -> None:
    """Swagger UI works offline: every script and stylesheet the page names is served by us
    (200, not a CDN), nothing runs inline, and the CSP allows our own files."""
    client.force_login(carol)
    r = client.get("/api/v1/docs")
    html = r.content.decode()
    assert r.status_code == 200 and 'id="swagger-ui"' in html
    csp = r["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "style-src 'self'" in csp
    scripts = re.findall(r"<script([^>]*)>", html)
    srcs = [m.group(1) for a in scripts if (m := re.search(r'src="([^"]+)"', a))]
    styles = re.findall(r'<link[^>]*rel="stylesheet"[^>]*href="([^"]+)"', html)
    styles += re.findall(r'<link[^>]*href="([^"]+)"[^>]*rel="stylesheet"', html)
    assert any("swagger-ui-bundle" in u for u in srcs) and styles
    for a in scripts:  # an inline script is blocked by the CSP; a JSON data block is not run
        assert "src=" in a or 'type="application/json"' in a, a
    for url in srcs + styles:
        assert url.startswith("/"), f"{url} is not ours"
        assert client.get(url).status_code == 200, url


# ----- writes × roles ------------------------------------------------------------------------

WRITES = {
    # name: (path template, body, roles allowed)
    "approve": ("/passes/{run}/approve", {"note": "ok"}, {"reviewer", "admin"}),
    "reject": ("/passes/{run}/reject", {"note": "not now"}, {"reviewer", "admin"}),
    "exclude": ("/passes/{run}/operations/0/exclude", {}, {"reviewer", "admin"}),
    "include": ("/passes/{run}/operations/0/include", {}, {"reviewer", "admin"}),
    "rollback": ("/passes/{run}/rollback", {"note": "undo"}, {"reviewer", "admin"}),
    "create": ("/passes", {"agent": "{agent}", "replace": True}, {"admin"}),
    "dry_run": ("/passes", {"agent": "{agent}", "dry_run": True}, {"viewer", "reviewer", "admin"}),
}


@pytest.mark.parametrize("role", ["anonymous", *ROLES])
@pytest.mark.parametrize("action", sorted(WRITES))
def test_each_write_is_allowed_exactly_for_its_roles(api_as, role, action, agent) -> None:
    run = make_proposal(agent, status="applied" if action == "rollback" else "proposed")
    path, body, allowed = WRITES[action]
    body = {k: (v.format(agent=agent.slug) if isinstance(v, str) else v) for k, v in body.items()}
    r = api_as(role).post(path.format(run=run.pk), body)
    if role == "anonymous":
        assert r.status_code == 401 and r.json()["detail"].startswith("Authentication required")
        assert not AuditEvent.objects.filter(run=run).exists()
        return
    if role not in allowed:
        assert r.status_code == 403, r.content
        assert r.json()["detail"].startswith(
            f"{ {'viewer': 'carol', 'reviewer': 'bob'}[role] } ({role})"
        )
        run.refresh_from_db()
        assert run.operations.filter(status="excluded").count() == 0
        return
    # A permitted role gets past the role check: the service answers (rollback of this
    # synthetic applied pass is refused by the store check, a real 409, never a 403).
    assert r.status_code in (200, 202, 409), r.content
    if action != "rollback":
        assert r.status_code in (200, 202), r.content


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("delete", "/agents"),
        ("post", "/agents"),
        ("get", "/passes/{run}/approve"),
        ("put", "/passes/{run}"),
        ("get", "/passes/{run}/rollback"),
        ("patch", "/audit/events"),
    ],
)
def test_a_wrong_method_is_405(api_as, method, path, agent) -> None:
    run = make_proposal(agent)
    r = api_as("admin").call(method, path.format(run=run.pk))
    assert r.status_code == 405


# ----- what reviewers do is audited as them ---------------------------------------------------


def test_review_through_the_api_is_audited_with_the_tokens_user(api_as, agent, bob) -> None:
    run = make_proposal(agent, merges=2)
    api = api_as("reviewer")
    before = api.get(f"/passes/{run.pk}").json()
    r = api.post(f"/passes/{run.pk}/operations/1/exclude")
    assert r.status_code == 200 and r.json()["excluded_operations"] == 1
    # the summary follows the exclusion, as on the page
    assert (
        r.json()["merged"] < before["merged"]
        and r.json()["loss_fraction"] < before["loss_fraction"]
    )
    r = api.post(f"/passes/{run.pk}/reject", {"note": "wrong agent"})
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    assert r.json()["decided_by"] == "bob" and r.json()["note"] == "wrong agent"
    verbs = list(
        AuditEvent.objects.filter(run=run).order_by("id").values_list("verb", "actor", "user")
    )
    assert verbs == [("excluded", "bob", bob.pk), ("rejected", "bob", bob.pk)]
    events = api.get("/audit/events", pass_id=run.pk).json()
    assert [e["verb"] for e in events["items"]] == ["rejected", "excluded"]


# ----- constraints: same as the console ---------------------------------------------------------


def test_a_second_pass_while_one_is_active_is_409_and_audited_as_refused(api_as, agent) -> None:
    Pass.objects.create(agent=agent, trigger="operator", status="running")
    r = api_as("admin").post("/passes", {"agent": agent.slug})
    assert r.status_code == 409
    assert "already has a pass in progress" in r.json()["detail"]
    assert AuditEvent.objects.filter(agent=agent, verb="refused", actor="alice").exists()


def test_approve_is_refused_with_the_guards_reason_when_it_fails_now(api_as, agent) -> None:
    run = make_proposal(agent, entries_before=4, merges=2, max_loss_fraction=0.25)
    r = api_as("reviewer").post(f"/passes/{run.pk}/approve", {"note": "go"})
    assert r.status_code == 409 and "loss" in r.json()["detail"].lower()
    run.refresh_from_db()
    assert run.status == "proposed"
    assert AuditEvent.objects.filter(run=run, verb="approve_refused", actor="bob").exists()


def test_reviewing_a_pass_that_is_no_longer_proposed_is_409(api_as, agent) -> None:
    run = make_proposal(agent, status="rejected")
    api = api_as("reviewer")
    for path in (f"/passes/{run.pk}/approve", f"/passes/{run.pk}/operations/0/exclude"):
        r = api.post(path, {"note": "x"})
        assert r.status_code == 409 and "only a proposed pass" in r.json()["detail"]


# ----- validation errors name the field --------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("post", "/passes", {}, 422, "agent"),
        ("post", "/passes", {"agent": "{agent}", "dry_run": "sometimes"}, 422, "dry_run"),
        ("post", "/passes", {"agent": "{agent}", "policy": "reckless"}, 422, "policy"),
        ("post", "/passes", {"agent": "no-such-agent"}, 404, "agent"),
        ("post", "/passes/{run}/reject", {"note": "   "}, 422, "note"),
        ("post", "/passes/{run}/reject", {}, 422, "note"),
        ("post", "/passes/{run}/approve", {"note": "x" * (MAX_NOTE_CHARS + 1)}, 422, "note"),
        ("post", "/passes/{run}/reject", {"note": "x" * (MAX_NOTE_CHARS + 1)}, 422, "note"),
        ("post", "/passes/{run}/operations/99/exclude", {}, 404, "index"),
        ("get", "/passes?status=done", None, 422, "status"),
        ("get", "/passes?page=0", None, 422, "page"),
        ("get", "/passes?page=9", None, 404, "page"),
        ("get", "/passes?agent=ghost", None, 404, "agent"),
        ("get", "/passes/{run}?kind=delete", None, 422, "kind"),
        ("get", "/passes/{run}?page=5", None, 404, "page"),
        ("get", "/passes/123456", None, 404, "pass_id"),
        ("get", "/agents/ghost", None, 404, "agent"),
        ("get", "/agents/{agent}/memories/search", None, 422, "q"),
        ("get", "/agents/{agent}/memories/search?q=+", None, 422, "q"),
        ("get", "/agents/{agent}/memories/search?q=cat&k=1000", None, 422, "k"),
        ("get", "/agents/{agent}/memories?pinned=maybe", None, 422, "pinned"),
        ("get", "/agents/{agent}/memories?page=7", None, 404, "page"),
        ("get", "/agents/{agent}/memory?id=never-existed", None, 404, "id"),
        ("get", "/audit/events?agent=ghost", None, 404, "agent"),
        ("get", "/agents/{agent}/decisions?page=0", None, 422, "page"),
        ("get", "/agents/{agent}/decisions?page=-1", None, 422, "page"),
        ("get", "/agents/{agent}/decisions?page=9", None, 404, "page"),
    ],
)
def test_bad_input_is_a_json_error_naming_the_field(
    api_as, agent, method, path, body, status, field
) -> None:
    run = make_proposal(agent)
    path = path.format(run=run.pk, agent=agent.slug)
    api = api_as("admin")
    if body is not None:
        body = {
            k: (v.format(agent=agent.slug) if isinstance(v, str) else v) for k, v in body.items()
        }
    r = api.post(path, body) if method == "post" else api.get(path)
    assert r.status_code == status, r.content
    data = r.json()
    assert field in [e["field"] for e in data["errors"]], data
    detail = data["detail"].lower()
    assert field in detail or "unknown agent" in detail or "no " in detail, detail


def test_a_body_that_is_not_json_is_422(api_as, agent) -> None:
    api = api_as("admin")
    r = api.client.post("/api/v1/passes", "agent=x", content_type="application/json", **api.headers)
    assert r.status_code in (400, 422) and "detail" in r.json()


# ----- reads show what the pages show ---------------------------------------------------------


def test_agent_detail_has_counts_schedule_and_policy(api_as, agent) -> None:
    make_proposal(agent)
    make_proposal(agent, status="applied")
    d = api_as("viewer").get(f"/agents/{agent.slug}").json()
    assert d["memories"] == 6 and d["pending_proposals"] == 1
    assert d["passes"] == {"proposed": 1, "applied": 1}
    assert d["schedule"]["cron"] == agent.schedule_cron and d["schedule"]["next_run"]
    assert d["policy"]["max_loss_fraction"] == 0.25


def test_memories_page_filters_and_search_ranks_by_meaning(api_as, agent) -> None:
    api = api_as("viewer")
    page = api.get(f"/agents/{agent.slug}/memories", contains="BOSTON").json()
    assert page["count"] == 1 and page["items"][0]["id"] == "mem-000"
    hits = api.get(f"/agents/{agent.slug}/memories/search", q="a pet cat adopted", k=3).json()
    assert len(hits) == 3 and hits[0]["id"] == "mem-005"
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]


def test_pass_detail_pages_operations_and_lists_filter_by_status(api_as, agent) -> None:
    run = make_proposal(agent, entries_before=200, merges=25, prunes=3)
    api = api_as("viewer")
    first = api.get(f"/passes/{run.pk}").json()
    assert first["operations_count"] == 28 and first["operations_pages"] == 2
    assert [o["index"] for o in first["items"]] == list(range(20))
    assert first["items"][0]["sources"][0]["memory_id"] == "m0-a"
    second = api.get(f"/passes/{run.pk}", page=2).json()
    assert [o["index"] for o in second["items"]] == list(range(20, 28))
    prunes = api.get(f"/passes/{run.pk}", kind="prune").json()
    assert {o["kind"] for o in prunes["items"]} == {"prune"} and prunes["operations_count"] == 3
    make_proposal(agent, status="rejected")
    listed = api.get("/passes", status="rejected", agent=agent.slug).json()
    assert listed["count"] == 1 and listed["items"][0]["status"] == "rejected"


def test_writes_need_no_csrf_token_with_a_bearer_token(alice, agent) -> None:
    from django.test import Client

    from memoryadmin.api.tokens import token_create

    _t, raw = token_create(user=alice)
    strict = Client(enforce_csrf_checks=True)
    r = strict.post(
        "/api/v1/passes",
        {"agent": agent.slug, "dry_run": True},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert r.status_code == 202, r.content  # queued for the worker


def test_a_session_login_is_not_an_api_credential(client, alice, agent) -> None:
    client.force_login(alice)
    assert client.get("/api/v1/agents").status_code == 401


# ----- tester's reports: rollback without a body, superseding, the approve revision ----------


def test_rollback_needs_no_body_and_a_viewer_is_refused_by_role(api_as, agent) -> None:
    """``curl -X POST …/rollback`` (no body, no content type): the role answers, not a 422."""
    run = make_proposal(agent, status="applied")
    viewer = api_as("viewer")
    r = viewer.client.generic("POST", f"/api/v1/passes/{run.pk}/rollback", b"", **viewer.headers)
    assert r.status_code == 403 and "only reviewers and admins" in r.json()["detail"]


@pytest.mark.parametrize("status", ["rolled_back", "rolling_back", "proposed"])
def test_rolling_back_a_pass_that_is_not_applied_is_409(api_as, agent, status) -> None:
    run = make_proposal(agent, status=status)
    reviewer = api_as("reviewer")
    path = f"/api/v1/passes/{run.pk}/rollback"
    r = reviewer.client.generic("POST", path, b"", **reviewer.headers)
    assert r.status_code == 409, r.content
    # the page and the API say the same sentence: the rollback service's own
    words = status.replace("_", " ")
    assert r.json()["detail"] == (
        f"Pass #{run.pk} is already {words}; nothing was done."
        if status != "proposed"
        else f"Pass #{run.pk} is {words}. "
        "Only an applied or partially applied pass can be rolled back."
    )
    run.refresh_from_db()
    assert run.status == status


def test_a_new_pass_does_not_silently_supersede_a_waiting_proposal(api_as, agent) -> None:
    waiting = make_proposal(agent)
    admin = api_as("admin")
    r = admin.post("/passes", {"agent": agent.slug})
    assert r.status_code == 409, r.content
    assert f"Pass #{waiting.pk} of {agent.slug} is waiting for review" in r.json()["detail"]
    assert "replace=true" in r.json()["detail"]
    assert list(Pass.objects.filter(agent=agent)) == [waiting]
    waiting.refresh_from_db()
    assert waiting.status == "proposed"

    r = admin.post("/passes", {"agent": agent.slug, "replace": True})
    assert r.status_code == 202, r.content
    assert Pass.objects.filter(agent=agent).count() == 2  # planned, it supersedes #waiting


def test_approve_with_the_revision_read_refuses_a_changed_plan(api_as, agent) -> None:
    """Tab A read the pass (2 operations included); another reviewer excludes them all; A's
    approve with the revision it read is refused, nothing applied; a fresh read approves."""
    run = make_proposal(agent, merges=2)
    reviewer, other = api_as("reviewer"), api_as("admin")
    seen = reviewer.get(f"/passes/{run.pk}").json()
    assert seen["revision"] and seen["excluded_operations"] == 0
    for index in range(2):
        assert other.post(f"/passes/{run.pk}/operations/{index}/exclude").status_code == 200
    r = reviewer.post(f"/passes/{run.pk}/approve", {"revision": seen["revision"]})
    assert r.status_code == 409, r.content
    assert "changed since you opened it" in r.json()["detail"]
    assert "nothing was applied" in r.json()["detail"] and "2 excluded" in r.json()["detail"]
    run.refresh_from_db()
    assert run.status == "proposed"
    now = reviewer.get(f"/passes/{run.pk}").json()
    assert now["revision"] != seen["revision"]
    for index in range(2):
        other.post(f"/passes/{run.pk}/operations/{index}/include")
    again = reviewer.get(f"/passes/{run.pk}").json()["revision"]
    assert again not in (seen["revision"], now["revision"])  # every change is a new revision
    r = reviewer.post(f"/passes/{run.pk}/approve", {"revision": again})
    assert r.status_code == 200 and r.json()["status"] in ("approved", "applied"), r.content
    assert r.json()["revision"] is None  # no longer a proposal


def test_approve_takes_the_revision_as_a_json_number_too(api_as, agent) -> None:
    """``{"revision": 5}`` is the revision ``"5"``: approved when it is the one read, refused
    (409) when the operations changed since, never a 422."""
    run = make_proposal(agent, merges=2)
    reviewer = api_as("reviewer")
    seen = int(reviewer.get(f"/passes/{run.pk}").json()["revision"])
    r = reviewer.post(f"/passes/{run.pk}/approve", {"revision": seen + 1})
    assert r.status_code == 409, r.content
    r = reviewer.post(f"/passes/{run.pk}/approve", {"revision": seen})
    assert r.status_code == 200 and r.json()["status"] in ("approved", "applied"), r.content


@pytest.mark.parametrize("revision", ["zzz", "1.5", "", 1.5, -1, True])
def test_approve_with_a_malformed_revision_is_a_422_naming_the_field(
    api_as, agent, revision: object
) -> None:
    """A revision that is no revision at all is a bad request (422), not a changed pass (409);
    nothing is applied."""
    run = make_proposal(agent, merges=2)
    r = api_as("reviewer").post(f"/passes/{run.pk}/approve", {"revision": revision})
    assert r.status_code == 422, r.content
    assert "revision" in str(r.json()) and "changed since" not in str(r.json())
    run.refresh_from_db()
    assert run.status == "proposed"
