"""Forget requests through every surface — the agent's Forget page, the JSON API, the MCP tools
and ``manage.py forget`` — for each kind of selection (scope, ids, contains, similar): the
dry run lists without storing, the request waits for a reviewer, approval removes exactly its
memories and says it cannot be undone, roles are checked, and afterwards the API and the
export never return a forgotten memory. Real Chroma (in-process), django-q2 sync."""

from __future__ import annotations

import io
import json
from html import escape

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from memoryadmin.api.actions.common import Forbidden
from memoryadmin.api.mcp_tools import build_server
from memoryadmin.core import stores
from memoryadmin.memories.models import ForgetRequest
from tests.api.api_helpers import api_factory
from tests.conftest import DISTINCT_FACTS, login
from tests.proposals.test_decisions import tool

pytestmark = pytest.mark.django_db

TEXTS = DISTINCT_FACTS[:6]
USERS = ["u1", "u2", "u1", "u2", "u1", "u2"]
# What each kind selects in TEXTS, and the ids it removes.
CASES = {
    "scope": ({"kind": "scope", "key": "user_id", "value": "u1"}, {0, 2, 4}),
    "ids": ({"kind": "ids", "ids": ["mem-001", "mem-005"]}, {1, 5}),
    "contains": ({"kind": "contains", "text": "BOARD GAME"}, {3}),
    "similar": ({"kind": "similar", "text": "a charity run", "similarity": 0.5}, {1}),
}


@pytest.fixture
def agent(agent_with_memories):
    return agent_with_memories(TEXTS, [{"user_id": u} for u in USERS])


@pytest.fixture
def api_as(alice, bob, carol):
    return api_factory(alice, bob, carol)


def live_ids(agent) -> set[str]:
    return {r.id for r in stores.get_store(agent).iter_records(include_embeddings=False)}


def ids(numbers: set[int]) -> set[str]:
    return {f"mem-{i:03d}" for i in numbers}


def export_text(agent) -> str:
    out = io.StringIO()
    call_command("export_memories", agent.slug, "-", stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_page_dry_runs_requests_and_approves(
    case, agent, client, bob, carol, django_capture_on_commit_callbacks
):
    selection, gone = CASES[case]
    form = {k: (" ".join(v) if isinstance(v, list) else v) for k, v in selection.items()}
    c = login(client, bob)
    page = c.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert reverse("forget_page", args=[agent.slug]) in page
    url = reverse("forget_create", args=[agent.slug])
    preview = c.post(url, form | {"action": "preview"})
    assert preview.status_code == 200
    body = preview.content.decode()
    assert f"Dry run: {len(gone)} memor" in body
    assert all(escape(TEXTS[i]) in body for i in gone)
    assert not ForgetRequest.objects.exists()

    r = c.post(url, form | {"action": "request", "reason": "ticket 9"})
    req = ForgetRequest.objects.get()
    assert r.status_code == 302 and r["Location"] == req.get_absolute_url()
    detail = c.get(req.get_absolute_url()).content.decode()
    assert "cannot be rolled back" in detail and "Approve and forget" in detail
    assert live_ids(agent) == ids(set(range(6)))  # a request removes nothing

    viewer = login(client.__class__(), carol)
    assert viewer.post(reverse("forget_approve", args=[req.pk])).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):  # the worker (django-q2 sync)
        r = c.post(reverse("forget_approve", args=[req.pk]), {"note": "ok"}, follow=True)
    assert "the worker is forgetting" in r.content.decode()
    req.refresh_from_db()
    assert req.status == "applied"
    assert live_ids(agent) == ids(set(range(6)) - gone)
    after = c.get(req.get_absolute_url()).content.decode()
    assert "tombstone" in after and not any(escape(TEXTS[i]) in after for i in gone)
    assert not any(TEXTS[i] in export_text(agent) for i in gone)


def test_the_page_refuses_a_bad_selection_with_its_reason(agent, client, bob):
    c = login(client, bob)
    r = c.post(
        reverse("forget_create", args=[agent.slug]),
        {"kind": "contains", "text": "no such text anywhere", "action": "request"},
    )
    assert r.status_code == 409 and "nothing stored" in r.content.decode()
    assert not ForgetRequest.objects.exists()


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_api_dry_runs_requests_and_approves(
    case, agent, api_as, django_capture_on_commit_callbacks
):
    selection, gone = CASES[case]
    path = f"/agents/{agent.slug}/forget"
    assert api_as("viewer").post(path, selection | {"dry_run": True}).status_code == 403
    reviewer = api_as("reviewer")
    dry = reviewer.post(path, selection | {"dry_run": True}).json()
    assert dry["dry_run"] and dry["count"] == len(gone) and dry["id"] is None
    assert {m["id"] for m in dry["memories"]} == ids(gone)
    assert not ForgetRequest.objects.exists()

    got = reviewer.post(path, selection).json()
    assert got["status"] == "proposed" and "cannot be rolled back" in got["not_undoable"]
    assert reviewer.get(f"/forget/{got['id']}").json()["count"] == len(gone)
    with django_capture_on_commit_callbacks(execute=True):  # the worker (django-q2 sync)
        approved = reviewer.post(f"/forget/{got['id']}/approve", {"note": "erasure"}).json()
    assert approved["status"] == "applying"  # the worker purges it
    done = reviewer.get(f"/forget/{got['id']}").json()
    assert done["status"] == "applied" and done["memories"] == [] and done["display"] == ""
    assert done["decided_by"] == "bob" and done["purged"]["live"] == len(gone)

    listed = reviewer.get(f"/agents/{agent.slug}/memories").json()
    assert {m["id"] for m in listed["items"]} == ids(set(range(6)) - gone)
    for mid in ids(gone):
        shown = reviewer.get(f"/agents/{agent.slug}/memory", id=mid).json()
        assert shown.get("current") is None and shown.get("archived", []) == []


def test_the_api_names_a_bad_key_and_refuses_approving_twice(agent, api_as):
    reviewer = api_as("reviewer")
    bad = reviewer.post(f"/agents/{agent.slug}/forget", {"kind": "scope", "key": "colour"})
    assert bad.status_code == 422 and "not a scope key" in bad.json()["detail"]
    got = reviewer.post(f"/agents/{agent.slug}/forget", CASES["ids"][0]).json()
    assert reviewer.post(f"/forget/{got['id']}/approve").status_code == 200
    again = reviewer.post(f"/forget/{got['id']}/approve")
    assert again.status_code == 409 and "only a proposed" in again.json()["detail"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_mcp_tools_dry_run_request_and_approve(
    case, agent, bob, carol, django_capture_on_commit_callbacks
):
    selection, gone = CASES[case]
    server = build_server(user_id=bob.pk)
    with pytest.raises(Forbidden, match="may not forget"):
        tool(build_server(user_id=carol.pk), "forget")(agent=agent.slug, **selection)
    dry = tool(server, "forget")(agent=agent.slug, dry_run=True, **selection)
    assert dry.count == len(gone) and not ForgetRequest.objects.exists()
    req = tool(server, "forget")(agent=agent.slug, **selection)
    assert req.status == "proposed"
    with django_capture_on_commit_callbacks(execute=True):  # the worker (django-q2 sync)
        approved = tool(server, "approve_forget")(forget_id=req.id, note="ok")
    assert approved.status == "applying"
    assert ForgetRequest.objects.get(pk=req.id).status == "applied"
    assert live_ids(agent) == ids(set(range(6)) - gone)


def _argv(selection: dict) -> list[str]:
    kind = selection["kind"]
    if kind == "scope":
        return ["--scope", f"{selection['key']}={selection['value']}"]
    if kind == "ids":
        return ["--ids", *selection["ids"]]
    if kind == "contains":
        return ["--contains", selection["text"]]
    return ["--similar", selection["text"], "--similarity", str(selection["similarity"])]


def forget_cmd(*args: str) -> dict:
    out = io.StringIO()
    call_command("forget", *args, "--json", stdout=out)
    text = out.getvalue().strip()
    assert "\n" not in text
    return json.loads(text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_command_dry_runs_requests_and_applies_with_yes(case, agent):
    selection, gone = CASES[case]
    argv = [agent.slug, *_argv(selection)]
    dry = forget_cmd(*argv, "--dry-run")
    assert dry["dry_run"] and {m["id"] for m in dry["memories"]} == ids(gone)
    proposed = forget_cmd(*argv)
    assert proposed["status"] == "proposed" and live_ids(agent) == ids(set(range(6)))
    ForgetRequest.objects.filter(pk=proposed["id"]).update(status="rejected")
    done = forget_cmd(*argv, "--yes", "--note", "erasure request 12")
    assert done["status"] == "applied" and done["decided_by"] == "cli"
    assert live_ids(agent) == ids(set(range(6)) - gone)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nope", "--contains", "tea"], "Unknown agent 'nope'"),
        (["{slug}"], "Give exactly one of --scope"),
        (["{slug}", "--contains", "tea", "--ids", "x"], "Give exactly one of"),
        (["{slug}", "--scope", "user_id"], "--scope takes KEY=VALUE"),
        (["{slug}", "--scope", "colour=red"], "not a scope key"),
        (["{slug}", "--ids", "missing-id"], "nothing stored"),
    ],
)
def test_the_command_refuses_bad_input_with_one_line_and_exit_2(agent, argv, message):
    argv = [a.format(slug=agent.slug) for a in argv]
    with pytest.raises(CommandError) as err:
        call_command("forget", *argv, stdout=io.StringIO())
    assert err.value.returncode == 2 and message in str(err.value)
    assert "\n" not in str(err.value)
    assert not ForgetRequest.objects.exists()


def test_the_command_prints_the_list_for_people(agent):
    out = io.StringIO()
    call_command("forget", agent.slug, "--contains", "catan", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "Dry run: 1 memories (1 live, 0 archived)." in text and TEXTS[3] in text


def test_the_pages_say_what_archived_a_copy_and_what_was_purged_in_words(
    agent, client, bob, django_capture_on_commit_callbacks
):
    """The review lists who archived each copy as the archive page does, and the tombstone
    reads its hashed selection and purge counts in words, not as raw keys."""
    from memoryadmin.memories.services.memories import memory_delete

    memory_delete(agent=agent, memory_id="mem-000", user=bob)
    c = login(client, bob)
    url = reverse("forget_create", args=[agent.slug])
    form = {"kind": "scope", "key": "user_id", "value": "u1"}
    preview = c.post(url, form | {"action": "preview"}).content.decode()
    assert "Operator Delete · bob" in preview and "operator_delete" not in preview
    c.post(url, form | {"action": "request", "reason": "ticket 10"})
    req = ForgetRequest.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        c.post(reverse("forget_approve", args=[req.pk]), {"note": "ok"})
    after = c.get(req.get_absolute_url()).content.decode()
    assert "user_id = a value, SHA-256 " in after and "value_sha256" not in after
    assert "vector cache rows" in after and "vector_cache_rows" not in after
