"""Dry runs are planned by the worker, never by the web process: the API
queues one and answers at once, the result is polled; one per agent, a per-user limit, a time
and a memory budget; old results are swept."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import OrmQ

from memoryadmin import tasks
from memoryadmin.core.services import TASK_DRY_RUN
from memoryadmin.proposals.models import DryRun, Pass
from memoryadmin.proposals.services import passes as pass_services
from memoryadmin.proposals.services.dry_runs import dry_runs_sweep, memory_budget
from memoryadmin.proposals.services.passes import pass_dry_run
from tests.api.api_helpers import api_factory
from tests.conftest import login

pytestmark = pytest.mark.django_db

MB = 1024 * 1024


@pytest.fixture
def api_as(alice: Any, bob: Any, carol: Any) -> Any:
    return api_factory(alice, bob, carol)


@pytest.fixture
def agent(agent_with_memories: Any) -> Any:
    texts = ["Alice likes jazz", "Alice likes jazz", "Alice no longer likes jazz"]
    return agent_with_memories([*texts, "The office is in Leeds", "Bob drives a blue van"])


@pytest.fixture
def no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """django-q2 as deployed (not sync): ``async_task`` puts the task on the ORM broker and
    nothing runs it until a worker takes it."""
    monkeypatch.setattr(Conf, "SYNC", False)


def queued_tasks() -> list[str]:
    return [q.func() for q in OrmQ.objects.all()]


def test_it_queues_the_dry_run_and_the_web_process_never_plans(
    api_as, agent, no_worker, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    def planned_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the web process planned a dry run")

    monkeypatch.setattr(pass_services, "plan_snapshot", planned_here)
    viewer = api_as("viewer")
    with django_capture_on_commit_callbacks(execute=True):
        r = viewer.post("/passes", {"agent": agent.slug, "dry_run": True})
    assert r.status_code == 202, r.content
    d = r.json()
    assert d["status"] == "queued" and d["result"] is None
    assert d["poll_url"] == f"/api/v1/dry-runs/{d['dry_run_id']}"
    assert queued_tasks() == [TASK_DRY_RUN]  # on the broker, for the worker
    polled = viewer.get(f"/dry-runs/{d['dry_run_id']}").json()
    assert polled["status"] == "queued" and polled["result"] is None
    assert not Pass.objects.filter(agent=agent).exists()


def test_polling_returns_the_figures_the_synchronous_dry_run_returned(
    api_as, agent, no_worker
) -> None:
    viewer = api_as("viewer")
    d = viewer.post("/passes", {"agent": agent.slug, "dry_run": True}).json()
    assert tasks.run_dry_run(d["dry_run_id"]) == f"dry run #{d['dry_run_id']}: done"  # the worker
    done = viewer.get(f"/dry-runs/{d['dry_run_id']}").json()
    assert done["status"] == "done" and done["error"] == "" and done["seconds"] >= 0
    old = pass_dry_run(agent=agent, policy=agent.get_policy(), now=timezone.now())
    result = done["result"]
    assert result["dry_run"] is True and result["pass_id"] is None
    assert result["status"] == "dry_run" and result["policy"] == "agent"
    for key in ("entries_before", "entries_after", "merged", "reconciled", "loss_fraction"):
        assert result[key] == old[key], key
    assert (result["entries_before"], result["guard_passed"]) == (5, old["guard_passed"])
    assert result["merged"] + result["reconciled"] >= 1, result  # the duplicate, the change


def test_one_dry_run_per_agent_a_second_gets_it_back_another_policy_is_429(
    api_as, agent, no_worker
) -> None:
    first = api_as("viewer").post("/passes", {"agent": agent.slug, "dry_run": True}).json()
    again = api_as("reviewer").post("/passes", {"agent": agent.slug, "dry_run": True})
    assert again.status_code == 202 and again.json()["dry_run_id"] == first["dry_run_id"]
    other = api_as("viewer").post(
        "/passes", {"agent": agent.slug, "dry_run": True, "policy": "aggressive"}
    )
    assert other.status_code == 429 and other["Retry-After"] == "10"
    assert f"Dry run #{first['dry_run_id']}" in other.json()["detail"]
    assert DryRun.objects.filter(agent=agent).count() == 1


def test_a_viewer_token_is_held_to_the_per_user_limit(
    api_as, agent_with_memories, no_worker, settings
) -> None:
    settings.MEMORYADMIN_DRY_RUNS_PER_USER = 2
    agents = [agent_with_memories(2) for _ in range(3)]
    viewer = api_as("viewer")
    codes = [viewer.post("/passes", {"agent": a.slug, "dry_run": True}).status_code for a in agents]
    assert codes == [202, 202, 429]
    refused = viewer.post("/passes", {"agent": agents[2].slug, "dry_run": True}).json()
    assert "at most 2 at a time" in refused["detail"]
    # another user is not held to carol's limit, and a finished dry run frees a slot
    assert (
        api_as("reviewer").post("/passes", {"agent": agents[2].slug, "dry_run": True}).status_code
        == 202
    )
    mine = DryRun.objects.filter(created_by__username="carol").order_by("pk").first()
    tasks.run_dry_run(mine.pk)
    assert viewer.post("/passes", {"agent": agents[0].slug, "dry_run": True}).status_code == 202


def test_a_wait_is_bounded_by_the_setting(api_as, agent, no_worker, settings) -> None:
    settings.MEMORYADMIN_DRY_RUN_MAX_WAIT = 1
    viewer = api_as("viewer")
    d = viewer.post("/passes", {"agent": agent.slug, "dry_run": True}).json()
    started = time.monotonic()
    polled = viewer.get(f"/dry-runs/{d['dry_run_id']}", wait=20)
    assert polled.status_code == 200 and polled.json()["status"] == "queued"
    assert 0.9 <= time.monotonic() - started < 5
    assert viewer.get(f"/dry-runs/{d['dry_run_id']}", wait=600).status_code == 422
    assert viewer.get("/dry-runs/999999").status_code == 404
    assert api_as("anonymous").get(f"/dry-runs/{d['dry_run_id']}").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_a_wait_answers_200_as_soon_as_the_worker_has_finished(api_as, agent, no_worker) -> None:
    def worker() -> None:  # another process's worker, here a thread with its own connection
        try:
            deadline = time.monotonic() + 10
            while not DryRun.objects.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)
            tasks.run_dry_run(DryRun.objects.get().pk)
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    started = time.monotonic()
    r = api_as("viewer").post("/passes", {"agent": agent.slug, "dry_run": True, "wait": 25})
    thread.join(30)
    assert r.status_code == 200 and r.json()["result"]["entries_before"] == 5
    assert time.monotonic() - started < 20


def test_the_time_budget_fails_it_with_the_reason(api_as, agent, no_worker, settings) -> None:
    settings.MEMORYADMIN_DRY_RUN_SECONDS = 0
    viewer = api_as("viewer")
    d = viewer.post("/passes", {"agent": agent.slug, "dry_run": True}).json()
    tasks.run_dry_run(d["dry_run_id"])
    failed = viewer.get(f"/dry-runs/{d['dry_run_id']}").json()
    assert failed["status"] == "failed" and failed["result"] is None
    assert "time budget of 0 s" in failed["error"]
    # the agent is free again
    again = viewer.post("/passes", {"agent": agent.slug, "dry_run": True}).json()
    assert again["dry_run_id"] != d["dry_run_id"]


def test_the_memory_budget_refuses_allocations_past_it_and_is_lifted_after() -> None:
    peak: dict[str, int] = {}
    with pytest.raises(MemoryError), memory_budget(64 * MB, peak):
        bytearray(512 * MB)
    assert peak["bytes"] > 0 and 0 <= peak["headroom"] < 512 * MB
    assert len(bytearray(512 * MB)) == 512 * MB  # the worker's next task is not limited
    with memory_budget(64 * MB, {}):
        assert len(bytearray(16 * MB)) == 16 * MB


def test_the_sweep_fails_what_a_killed_worker_left_and_deletes_old_results(agent, settings) -> None:
    settings.MEMORYADMIN_DRY_RUN_KEEP_HOURS = 24
    now = timezone.now()
    stuck = DryRun.objects.create(
        agent=agent, status="running", started_at=now - timedelta(seconds=300 + 30 + 61)
    )
    old = DryRun.objects.create(
        agent=agent, status="done", result={}, finished_at=now - timedelta(hours=25)
    )
    recent = DryRun.objects.create(agent=agent, status="done", result={}, finished_at=now)
    assert dry_runs_sweep(now=now) == {"stopped": 1, "deleted": 1}
    stuck.refresh_from_db()
    assert stuck.status == "failed" and "time budget" in stuck.error
    assert not DryRun.objects.filter(pk=old.pk).exists()
    assert DryRun.objects.filter(pk=recent.pk).exists()


def test_running_twice_plans_once(agent, no_worker) -> None:
    dry = DryRun.objects.create(agent=agent, policy=agent.get_policy().to_dict())
    assert tasks.run_dry_run(dry.pk) == f"dry run #{dry.pk}: done"
    finished = DryRun.objects.get(pk=dry.pk).finished_at
    assert tasks.run_dry_run(dry.pk) == f"dry run #{dry.pk}: done"
    assert DryRun.objects.get(pk=dry.pk).finished_at == finished
    assert tasks.run_dry_run(987654) == "dry run #987654 does not exist"


# ----- the page -----------------------------------------------------------------------------


def test_it_shows_the_dry_run_pending_then_its_figures(client, carol, agent, no_worker) -> None:
    login(client, carol)  # a viewer: a dry run writes nothing
    assert b"Dry run</button>" in client.get(agent.get_absolute_url()).content
    r = client.post(f"/agents/{agent.slug}/dry-run/")
    dry = DryRun.objects.get(agent=agent)
    assert r.status_code == 302 and r["Location"] == f"/dry-runs/{dry.pk}/"
    page = client.get(r["Location"])
    assert page.status_code == 200 and b'data-testid="dry-run-pending"' in page.content
    assert f'hx-get="/dry-runs/{dry.pk}/"'.encode() in page.content
    pending = client.get(r["Location"], HTTP_HX_REQUEST="true")
    assert pending.status_code == 200 and b"waiting for the worker" in pending.content
    assert b"<html" not in pending.content
    tasks.run_dry_run(dry.pk)
    done = client.get(r["Location"], HTTP_HX_REQUEST="true")
    assert done.status_code == 286  # stops the polling
    assert b'data-testid="dry-run-result"' in done.content and b"5 \xe2\x86\x92" in done.content
    assert b"hx-trigger" not in done.content


def test_the_page_refuses_over_the_limit_and_wrong_methods(
    client, carol, agent_with_memories, no_worker, settings
) -> None:
    settings.MEMORYADMIN_DRY_RUNS_PER_USER = 1
    first, second = agent_with_memories(2), agent_with_memories(2)
    login(client, carol)
    client.post(f"/agents/{first.slug}/dry-run/")
    r = client.post(f"/agents/{second.slug}/dry-run/", follow=True)
    assert b"at most 1 at a time" in r.content
    assert not DryRun.objects.filter(agent=second).exists()
    assert client.get(f"/agents/{first.slug}/dry-run/").status_code == 405


def test_anonymous_visitors_are_sent_to_log_in(client, agent) -> None:
    r = client.post(f"/agents/{agent.slug}/dry-run/")
    assert r.status_code == 302 and "/login" in r["Location"]
    assert not DryRun.objects.exists()


def test_the_workers_every_minute_recovery_sweeps_dry_runs(agent) -> None:
    stuck = DryRun.objects.create(
        agent=agent, status="running", started_at=timezone.now() - timedelta(hours=1)
    )
    tasks.recover_passes()
    stuck.refresh_from_db()
    assert stuck.status == "failed" and stuck.finished_at is not None


def test_an_out_of_range_id_is_a_400_not_a_500(api_as) -> None:
    r = api_as("viewer").get("/dry-runs/9223372036854775808")
    assert r.status_code in (400, 404, 422) and r["Content-Type"].startswith("application/json")
