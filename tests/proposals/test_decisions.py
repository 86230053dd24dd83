"""Standing decisions through the pages, the JSON API and the MCP tools, and auto-apply
off | safe | all: what a reviewer decided holds in every later pass until it is revoked."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from consolidation import MemoryRecord
from memoryadmin.agents.models import Agent
from memoryadmin.agents.services.agents import agent_update
from memoryadmin.api.actions.common import Forbidden
from memoryadmin.api.mcp_tools import build_server
from memoryadmin.core import stores
from memoryadmin.core.validation import validate_auto_apply
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Decision, Operation, Pass
from memoryadmin.proposals.selectors.decisions import rejected_signatures, standing_decisions
from memoryadmin.proposals.services.decisions import decision_revoke
from memoryadmin.proposals.services.passes import pass_request, pass_run
from memoryadmin.proposals.services.review import (
    conflict_resolve,
    operation_set_excluded,
    pass_approve,
    pass_reject,
)
from memoryadmin.proposals.services.rollback import pass_rollback_request
from memoryadmin.tasks import scheduled_pass
from tests.api.api_helpers import api_factory
from tests.conftest import DISTINCT_FACTS, days_ago, embed_texts, login
from tests.proposals.test_pass_counts import text_of
from tests.proposals.test_services_conflicts import CONTRADICTION, SAME_TIME
from tests.proposals.test_services_passes import run_pass

pytestmark = pytest.mark.django_db

F = DISTINCT_FACTS
DUPES = F[:16] + [F[0], F[1]]  # two exact-duplicate merges


@pytest.fixture
def api_as(alice: Any, bob: Any, carol: Any) -> Any:
    return api_factory(alice, bob, carol)


def merges(run: Pass) -> dict[tuple[str, ...], Operation]:
    return {
        tuple(sorted(op.source_ids)): op
        for op in run.operations.filter(kind="merge").prefetch_related("sources")
    }


def count(agent: Agent) -> int:
    return stores.get_store(agent).count()


def tool(server: Any, name: str) -> Any:
    """The body of MCP tool ``name`` (called in this thread, inside the test's transaction)."""
    return server._tool_manager._tools[name].fn.__wrapped__


# ----- keep apart ----------------------------------------------------------------------------


def test_an_excluded_merge_is_a_decision_that_holds_later_passes_back_until_revoked(
    agent_with_memories, client: Client, alice, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    first, second = run.operations.order_by("index")
    login(client, bob)
    r = client.post(reverse("operation_exclude", args=[run.pk, first.pk]), {"excluded": "1"})
    assert r.status_code == 302  # without htmx: back to the pass page
    d = Decision.objects.get(agent=agent)
    hashes = {s.memory_id: s.content_hash for s in first.sources.all()}
    assert d.kind == "keep_apart" and d.created_actor == "bob" and d.run_id == run.pk
    assert sorted(map(tuple, d.memories)) == sorted(hashes.items())
    page = client.get(reverse("decision_list", args=[agent.slug])).content.decode()
    assert f'id="decision-{d.pk}"' in page and "keep apart" in page and f"pass #{run.pk}" in page

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "applied" and count(agent) == 17  # only the second merge applied

    again = run_pass(agent, django_capture_on_commit_callbacks)
    assert tuple(sorted(first.source_ids)) not in merges(again)  # not proposed again…
    (held,) = again.telemetry["held_back"]  # … and said so, not dropped silently
    assert held["decision"] == d.pk and held["would_have"] == "merge"
    assert (
        f"left out by decision #{d.pk} (keep apart, set by bob on pass #{run.pk})"
        in (held["reason"])
    )
    html = client.get(reverse("pass_detail", args=[again.pk])).content.decode()
    assert 'data-testid="held-back"' in html and f"decision #{d.pk} (keep apart" in html
    d.refresh_from_db()
    assert d.held_back == 1

    r = client.post(reverse("decision_revoke", args=[agent.slug, d.pk]), {"note": "fine now"})
    assert r.status_code == 302
    d.refresh_from_db()
    assert d.revoked_at is not None and d.revoked_actor == "bob" and d.revoke_note == "fine now"
    assert agent.events.filter(verb="decision_revoked", data__decision=d.pk).exists()
    back = run_pass(agent, django_capture_on_commit_callbacks)
    assert tuple(sorted(first.source_ids)) in merges(back)  # the merge is proposed again


def test_including_an_operation_again_revokes_its_decision(agent_with_memories, bob):
    agent = agent_with_memories(DUPES)
    run = pass_run(run=pass_request(agent=agent, trigger="operator"))
    op = run.operations.order_by("index").first()
    operation_set_excluded(operation=op, excluded=True, user=bob)
    operation_set_excluded(operation=op, excluded=False, user=bob)
    (d,) = Decision.objects.filter(agent=agent)
    assert d.revoked_at is not None and "included again" in d.revoke_note
    assert len(standing_decisions(agent)) == 0


def test_a_viewer_cannot_revoke_and_the_api_lists_and_revokes(
    agent_with_memories, api_as, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    reviewer, viewer = api_as("reviewer"), api_as("viewer")
    r = reviewer.post(f"/passes/{run.pk}/operations/0/exclude")
    assert r.status_code == 200, r.content
    listed = viewer.get(f"/agents/{agent.slug}/decisions").json()
    assert [x["kind"] for x in listed] == ["keep_apart"]
    one = listed[0]
    assert one["created_by"] == "bob" and one["pass_id"] == run.pk and one["active"] is True
    assert len(one["memories"]) == 2 and all(len(m[1]) == 64 for m in one["memories"])
    assert one["label"] == f"decision #{one['id']}, keep apart, set by bob on pass #{run.pk}"

    path = f"/agents/{agent.slug}/decisions/{one['id']}?note=wrong"
    assert viewer.call("DELETE", path).status_code == 403
    assert Decision.objects.get(pk=one["id"]).revoked_at is None
    r = reviewer.call("DELETE", path)
    assert r.status_code == 200 and r.json()["active"] is False
    assert r.json()["revoke_note"] == "wrong"
    assert viewer.get(f"/agents/{agent.slug}/decisions").json() == []
    assert [x["id"] for x in viewer.get(f"/agents/{agent.slug}/decisions", state="revoked").json()]
    assert reviewer.call("DELETE", f"/agents/{agent.slug}/decisions/99999").status_code == 404
    assert viewer.get(f"/agents/{agent.slug}/decisions", state="nope").status_code == 422


def test_mcp_tools_list_and_revoke_decisions(
    agent_with_memories, bob, carol, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    server = build_server(user_id=bob.pk)
    tool(server, "exclude_operation")(pass_id=run.pk, index=0, excluded=True)
    (listed,) = tool(server, "list_decisions")(agent=agent.slug)
    assert listed.kind == "keep_apart" and listed.created_by == "bob"
    viewer = build_server(user_id=carol.pk)
    with pytest.raises(Forbidden, match="may not revoke"):  # a ToolError through the server
        tool(viewer, "revoke_decision")(agent=agent.slug, decision_id=listed.id)
    out = tool(server, "revoke_decision")(agent=agent.slug, decision_id=listed.id, note="ok")
    assert out.active is False and out.revoke_note == "ok"
    assert tool(server, "list_decisions")(agent=agent.slug) == []
    # rejecting through MCP with never_again keeps the other merge's memories apart
    tool(server, "reject_pass")(pass_id=run.pk, note="no", never_again=True)
    kinds = sorted(d.kind for d in Decision.objects.filter(agent=agent, revoked_at__isnull=True))
    assert kinds == ["keep_apart", "rejected_plan"]


# ----- keep, conflict pick -------------------------------------------------------------------


def test_a_restored_memory_is_not_pruned_again(
    agent_with_memories, client: Client, bob, django_capture_on_commit_callbacks
):
    texts = F[:8]
    metas = [{}] * 7 + [{"created_at": days_ago(400), "importance": 0.1}]
    agent = agent_with_memories(texts, metas)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.pruned == 1
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    archived = ArchivedMemory.objects.get(agent=agent)
    login(client, bob)
    client.post(reverse("archive_restore", args=[agent.slug, archived.pk]))
    assert count(agent) == 8
    d = Decision.objects.get(agent=agent)
    assert d.kind == "keep" and d.memory_ids == [archived.memory_id] and d.run_id == run.pk

    again = run_pass(agent, django_capture_on_commit_callbacks)
    assert not again.operations.filter(kind="prune").exists()
    (held,) = again.telemetry["held_back"]
    assert held["would_have"] == "prune" and held["memory_ids"] == [archived.memory_id]
    assert count(agent) == 8


def test_an_excluded_prune_is_a_keep_decision_the_next_pass_shows_until_revoked(
    agent_with_memories, client: Client, bob, django_capture_on_commit_callbacks
):
    """Excluding a prune is a decision like excluding a merge: listed on the Decisions page,
    the next pass says it held the prune back (not silently never proposing it again), and
    including the prune again revokes it."""
    texts = F[:8]
    metas = [{}] * 7 + [{"created_at": days_ago(400), "importance": 0.1}]
    agent = agent_with_memories(texts, metas)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    prune = run.operations.get(kind="prune")
    operation_set_excluded(operation=prune, excluded=True, user=bob)
    operation_set_excluded(operation=prune, excluded=False, user=bob)
    (d,) = Decision.objects.filter(agent=agent)
    assert d.kind == "keep" and d.revoked_at is not None and "included again" in d.revoke_note
    operation_set_excluded(operation=prune, excluded=True, user=bob)
    d = Decision.objects.get(agent=agent, revoked_at__isnull=True)
    assert d.kind == "keep" and d.memory_ids == prune.source_ids and d.run_id == run.pk
    login(client, bob)
    page = client.get(reverse("decision_list", args=[agent.slug])).content.decode()
    assert f'id="decision-{d.pk}"' in page and f"excluded prune #{prune.index}" in page
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    assert count(agent) == 8

    again = run_pass(agent, django_capture_on_commit_callbacks)
    assert not again.operations.filter(kind="prune").exists()
    html = client.get(reverse("pass_detail", args=[again.pk])).content.decode()
    assert 'data-testid="held-back"' in html and f"decision #{d.pk} (keep" in html
    decision_revoke(decision=d, user=bob)
    back = run_pass(agent, django_capture_on_commit_callbacks)
    assert back.operations.get(kind="prune").source_ids == prune.source_ids


def test_keep_both_on_a_conflict_is_a_keep_decision_through_the_api(
    agent_with_memories, api_as, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(CONTRADICTION, SAME_TIME)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    op = run.operations.get(kind="conflict")
    r = api_as("reviewer").post(f"/passes/{run.pk}/operations/{op.index}/resolve", {"keep": "both"})
    assert r.status_code == 200, r.content
    d = Decision.objects.get(agent=agent, revoked_at__isnull=True)
    assert d.kind == "keep" and d.payload == {"apart": True} and len(d.memories) == 2
    # changing the answer replaces the decision
    conflict_resolve(operation=op, keep="a", user=None)
    d2 = Decision.objects.get(agent=agent, revoked_at__isnull=True)
    assert d2.kind == "conflict_pick" and d2.payload["keep"] == op.source_ids[0]
    d.refresh_from_db()
    assert d.revoked_at is not None


# ----- rejected plans and auto-apply ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["safe", "all"])
def test_a_rejected_plan_never_auto_applies_in_safe_nor_all(
    agent_with_memories, bob, mode, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    pass_reject(run=run, user=bob, note="too aggressive")
    (rejected,) = Decision.objects.filter(agent=agent, kind="rejected_plan")
    assert len(rejected.payload["signatures"]) == 2
    assert set(rejected_signatures(agent).values()) == {f"in pass #{run.pk} by bob: too aggressive"}
    agent_update(agent=agent, auto_apply=mode)
    agent.refresh_from_db()

    with django_capture_on_commit_callbacks(execute=True):
        scheduled_pass(agent.pk)
    nxt = Pass.objects.filter(agent=agent).exclude(pk=run.pk).get()
    assert nxt.status == "proposed" and count(agent) == 18  # nothing applied
    for op in nxt.operations.all():
        assert "rejected" in op.scores["waiting"]["codes"]
        assert (
            f"rejected before: in pass #{run.pk} by bob: too aggressive"
            in (op.scores["waiting"]["reasons"])
        )
    rejected.refresh_from_db()
    assert rejected.held_back == 2


def test_safe_applies_the_safe_part_and_leaves_the_rest_for_review(
    agent_with_memories, client: Client, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(F[:16] + [F[0]])  # one merge, rejected
    run = run_pass(agent, django_capture_on_commit_callbacks)
    (rejected_merge,) = merges(run)
    pass_reject(run=run, user=bob, note="too aggressive")
    # a new duplicate arrives: the next pass plans the rejected merge again, and a new one
    stores.get_store(agent).upsert(
        [MemoryRecord("dup-of-1", F[1], embed_texts([F[1]])[0], {"created_at": days_ago(1)})]
    )
    agent_update(agent=agent, auto_apply="safe")
    with django_capture_on_commit_callbacks(execute=True):
        scheduled_pass(agent.pk)
    applied = Pass.objects.filter(agent=agent, trigger="schedule").get()
    waiting = Pass.objects.filter(agent=agent, trigger="policy").get()
    assert applied.status == "applied" and waiting.status == "proposed"
    assert tuple(sorted(merges(waiting))) == (rejected_merge,)
    assert rejected_merge not in merges(applied) and len(merges(applied)) == 1
    assert count(agent) == 17  # 18 → the new duplicate merged, the rejected pair untouched
    assert applied.telemetry["auto_apply"] == {
        "mode": "safe",
        "waiting": 1,
        "applied": 1,
        "reasons": {"rejected": 1},
        "waiting_pass": waiting.pk,
    }
    login(client, bob)
    html = client.get(reverse("pass_detail", args=[applied.pk])).content.decode()
    assert "Applied automatically: 1 · waiting for review: 1" in html
    html = client.get(reverse("pass_detail", args=[waiting.pk])).content.decode()
    assert "Applied automatically: 1 · waiting for review: 1" in html
    assert f"rejected before: in pass #{run.pk} by bob: too aggressive" in html
    # the waiting part counts from the store the applied part left (18 → 17), not from 18
    assert (applied.entries_before, applied.entries_after) == (18, 17)
    assert (waiting.entries_before, waiting.entries_after) == (17, 16)
    assert text_of(html, "entries") == "17 → 16"
    assert text_of(html, "loss-arithmetic").endswith("÷ 17 originals before")
    api = api_factory(bob, bob, bob)("viewer").get(f"/passes/{waiting.pk}").json()
    assert api["entries_before"] == 17 and api["loss_fraction"] == waiting.loss_fraction
    assert (
        f"pass #{waiting.pk}</a> waits for a person"
        in client.get(reverse("pass_detail", args=[applied.pk])).content.decode()
    )
    # once a person has decided the waiting part, neither page says it still waits
    pass_reject(run=waiting, user=bob, note="not this one either")
    html = client.get(reverse("pass_detail", args=[applied.pk])).content.decode()
    assert "waits for a person" not in html and "was left for a person and is rejected" in html
    html = client.get(reverse("pass_detail", args=[waiting.pk])).content.decode()
    assert "this part is now rejected" in html
    # undo works on the applied part
    with django_capture_on_commit_callbacks(execute=True):
        pass_rollback_request(run=applied, user=bob)
    applied.refresh_from_db()
    assert applied.status == "rolled_back" and count(agent) == 18


def test_rolling_back_can_revoke_the_decisions_made_on_the_pass(
    agent_with_memories, client: Client, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    first = run.operations.order_by("index").first()
    operation_set_excluded(operation=first, excluded=True, user=bob)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    login(client, bob)
    page = client.get(reverse("pass_rollback", args=[run.pk])).content.decode()
    assert 'id="rollback-decisions"' in page and "keep apart" in page
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("pass_rollback", args=[run.pk]), {"decisions": "revoke"})
    run.refresh_from_db()
    assert run.status == "rolled_back"
    assert Decision.objects.get(agent=agent, kind="keep_apart").revoked_at is not None
    back = run_pass(agent, django_capture_on_commit_callbacks)
    assert len(merges(back)) == 2


def test_an_undone_pass_is_not_redone_by_the_schedule_until_its_decision_is_revoked(
    agent_with_memories, client: Client, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    agent_update(agent=agent, auto_apply="safe")
    with django_capture_on_commit_callbacks(execute=True):
        pass_request(agent=agent, trigger=Pass.Trigger.SCHEDULE, actor="schedule")
    applied = Pass.objects.get(agent=agent)
    assert applied.status == "applied" and count(agent) == 16
    with django_capture_on_commit_callbacks(execute=True):
        pass_rollback_request(run=applied, user=bob, note="wrong pairs")
    assert count(agent) == 18
    undone = Decision.objects.get(agent=agent, kind="rejected_plan")
    assert undone.run_id == applied.pk and undone.note == "undone (rolled back): wrong pairs"
    # the next scheduled pass plans the same merges: they wait for a person, visibly
    with django_capture_on_commit_callbacks(execute=True):
        pass_request(agent=agent, trigger=Pass.Trigger.SCHEDULE, actor="schedule")
    nxt = Pass.objects.filter(agent=agent).exclude(pk=applied.pk).get()
    assert nxt.status == "proposed" and count(agent) == 18
    reason = f"rejected before: in pass #{applied.pk} by bob: undone (rolled back): wrong pairs"
    for op in nxt.operations.all():
        assert reason in op.scores["waiting"]["reasons"]
    login(client, bob)
    html = client.get(reverse("decision_list", args=[agent.slug])).content.decode()
    assert "undone (rolled back): wrong pairs" in html
    # revoking the decision lets auto-apply apply them on its own again
    decision_revoke(decision=undone, user=bob, note="they were right after all")
    with django_capture_on_commit_callbacks(execute=True):
        pass_request(agent=agent, trigger=Pass.Trigger.SCHEDULE, actor="schedule")
    assert count(agent) == 16


def test_a_rejected_merge_still_waits_when_one_more_copy_joins_it(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(F[:16] + [F[0]])  # one merge: F[0] and its copy
    run = run_pass(agent, django_capture_on_commit_callbacks)
    (rejected_merge,) = merges(run)
    pass_reject(run=run, user=bob, note="keep both wordings")
    # another copy arrives: the plan now merges three memories, a different signature
    stores.get_store(agent).upsert(
        [MemoryRecord("copy-3", F[0], embed_texts([F[0]])[0], {"created_at": days_ago(1)})]
    )
    agent_update(agent=agent, auto_apply="all")
    with django_capture_on_commit_callbacks(execute=True):
        scheduled_pass(agent.pk)
    nxt = Pass.objects.filter(agent=agent).exclude(pk=run.pk).get()
    assert nxt.status == "proposed" and count(agent) == 18  # nothing applied
    (op,) = merges(nxt).values()
    assert set(rejected_merge) < set(op.source_ids)  # the rejected pair plus the new copy
    assert op.signature not in rejected_signatures(agent)
    assert op.scores["waiting"]["reasons"] == [
        f"rejected before (it joins the same memories): in pass #{run.pk} by bob: "
        "keep both wordings"
    ]
    assert Decision.objects.get(agent=agent, kind="rejected_plan").held_back == 1


def test_a_decision_counts_an_operation_planned_again_once(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    """Before: "Held back (all passes)" added every pass's count, so a plan planned
    again counted its operations again (172 for an 86-operation plan)."""
    from memoryadmin.proposals.services.review import operation_set_excluded

    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    first = run.operations.order_by("index").first()
    operation_set_excluded(operation=first, excluded=True, user=bob)
    d = Decision.objects.get(agent=agent)
    for _ in range(3):  # the same store planned three times: the same merge held back
        again = run_pass(agent, django_capture_on_commit_callbacks)
        assert again.telemetry["held_back_count"] == 1
    d.refresh_from_db()
    assert d.held_back == 1 and len(d.held_keys) == 1


def test_auto_apply_modes_are_validated_and_shown(agent_with_memories, client: Client, bob):
    assert [validate_auto_apply(v) for v in (True, False, None, "SAFE", "all")] == [
        "safe",
        "off",
        "off",
        "safe",
        "all",
    ]
    with pytest.raises(ValueError, match="off, safe or all"):
        validate_auto_apply("sometimes")
    agent = agent_with_memories(F[:2], auto_apply="safe")
    login(client, bob)
    assert (
        'data-testid="auto-apply-mode">safe<' in client.get(reverse("dashboard")).content.decode()
    )
    html = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert 'data-testid="auto-apply-mode">safe' in html


def test_the_cli_plans_with_the_decisions_too(agent_with_memories, bob):
    agent = agent_with_memories(DUPES)
    run = pass_run(run=pass_request(agent=agent, trigger="operator"))
    operation_set_excluded(
        operation=run.operations.order_by("index").first(), excluded=True, user=bob
    )
    pass_reject(run=run, user=bob, note="not these")
    out = StringIO()
    call_command("consolidate", agent.slug, "--dry-run", "--json", stdout=out)
    figures = json.loads(out.getvalue())
    # one merge of two originals (four without the decision): the kept-apart pair is left out
    assert figures["merged"] == 2


def test_a_waiting_part_does_not_stop_the_nightly_pass_while_auto_apply_is_on(
    agent_with_memories, bob, time_machine, django_capture_on_commit_callbacks
):
    from datetime import UTC, datetime

    time_machine.move_to(datetime(2025, 3, 10, 3, 0, 5, tzinfo=UTC), tick=False)
    agent = agent_with_memories(F[:16] + [F[0]])  # one merge, rejected
    run = run_pass(agent, django_capture_on_commit_callbacks)
    (rejected_merge,) = merges(run)
    pass_reject(run=run, user=bob, note="too aggressive")
    store = stores.get_store(agent)
    store.upsert([MemoryRecord("dup-1", F[1], embed_texts([F[1]])[0], {"created_at": days_ago(1)})])
    agent_update(agent=agent, auto_apply="safe")
    with django_capture_on_commit_callbacks(execute=True):
        scheduled_pass(agent.pk)
    first_wait = Pass.objects.get(agent=agent, trigger="policy")
    assert first_wait.status == "proposed" and count(agent) == 17

    # the next night: a new duplicate arrives; the waiting part does not block the schedule
    time_machine.move_to(datetime(2025, 3, 11, 3, 0, 5, tzinfo=UTC), tick=False)
    store.upsert([MemoryRecord("dup-2", F[2], embed_texts([F[2]])[0], {"created_at": days_ago(1)})])
    with django_capture_on_commit_callbacks(execute=True):
        assert "queued" in scheduled_pass(agent.pk)
    nightly = Pass.objects.filter(agent=agent, trigger="schedule").order_by("-pk").first()
    assert nightly.status == "applied" and count(agent) == 17  # 18 → the new duplicate merged
    first_wait.refresh_from_db()
    assert first_wait.status == "stale"  # replaced by the new waiting part, same operation
    (second_wait,) = Pass.objects.filter(agent=agent, trigger="policy", status="proposed")
    assert tuple(merges(second_wait)) == (rejected_merge,)

    # auto-apply off: what waits is a person's work again, and the schedule waits for it
    agent_update(agent=agent, auto_apply="off")
    time_machine.move_to(datetime(2025, 3, 12, 3, 0, 5, tzinfo=UTC), tick=False)
    with django_capture_on_commit_callbacks(execute=True):
        assert "skipped" in scheduled_pass(agent.pk)
    second_wait.refresh_from_db()
    assert second_wait.status == "proposed"
