"""``GET /healthz`` and ``GET /metrics`` as an orchestrator and a Prometheus server see them.

Real in-process Chroma, django-q2 in sync mode, a real pass planned against the LLM stub
server (tests/llm_stub.py) so the model work and its cost are the stored figures of a pass;
/metrics is read back with prometheus-client's own parser.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django_q.models import OrmQ
from prometheus_client.parser import text_string_to_metric_families

from memoryadmin.agents.models import StoreSample
from memoryadmin.api.tokens import token_create
from memoryadmin.core import stores
from memoryadmin.core.models import AuditEvent
from memoryadmin.ops.models import WorkerHeartbeat
from memoryadmin.ops.services.health import worker_heartbeat_beat
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.templatetags.console import usd
from tests.conftest import DISTINCT_FACTS as F
from tests.conftest import free_port
from tests.proposals.make import make_proposal

pytest_plugins = ["tests.llm_stub"]

ALL_OK = {"database": "ok", "chroma": "ok", "worker": "ok", "embedder": "ok"}


def _health(client: Client) -> tuple[int, dict[str, Any]]:
    r = client.get(reverse("healthz"))
    assert r["Content-Type"] == "application/json"
    return r.status_code, r.json()


def test_healthz_is_ok_without_login_when_every_dependency_answers(client: Client, db) -> None:
    worker_heartbeat_beat()
    status, body = _health(client)
    assert (status, body) == (200, {"status": "ok", "checks": ALL_OK})


def test_healthz_fails_the_worker_without_a_recent_heartbeat(client: Client, db) -> None:
    status, body = _health(client)
    assert status == 503 and body["status"] == "failing"
    assert body["checks"] == ALL_OK | {"worker": "failing"}
    beat = worker_heartbeat_beat(worker="host:1")
    WorkerHeartbeat.objects.filter(pk=beat.pk).update(beat_at=timezone.now() - timedelta(minutes=5))
    assert _health(client)[1]["checks"]["worker"] == "failing"
    worker_heartbeat_beat(worker="host:2")
    assert _health(client) == (200, {"status": "ok", "checks": ALL_OK})


def test_healthz_fails_the_worker_when_a_task_waits_too_long(client: Client, db, settings) -> None:
    worker_heartbeat_beat()
    settings.HEALTH_QUEUE_MAX_AGE = 60
    task = OrmQ.objects.create(key="memoryadmin", payload="x", lock=timezone.now())
    assert _health(client)[0] == 200
    OrmQ.objects.filter(pk=task.pk).update(lock=timezone.now() - timedelta(minutes=2))
    status, body = _health(client)
    assert status == 503 and body["checks"] == ALL_OK | {"worker": "failing"}
    # a task a worker has taken (its lock lies in the future) is not waiting
    OrmQ.objects.filter(pk=task.pk).update(lock=timezone.now() + timedelta(minutes=30))
    assert _health(client)[0] == 200


def test_healthz_fails_chroma_when_the_server_does_not_answer(client: Client, db, settings) -> None:
    worker_heartbeat_beat()
    settings.CHROMA_MODE = "http"
    settings.CHROMA_HOST, settings.CHROMA_PORT = "127.0.0.1", free_port()
    stores.reset_client_cache()
    try:
        status, body = _health(client)
    finally:
        settings.CHROMA_MODE = "ephemeral"
        stores.reset_client_cache()
    assert status == 503 and body == {"status": "failing", "checks": ALL_OK | {"chroma": "failing"}}
    assert "127.0.0.1" not in str(body)  # no detail of the deployment in the body


# ----- /metrics -----------------------------------------------------------------------------


def _scrape(client: Client, **headers: Any) -> dict[str, Any]:
    r = client.get(reverse("metrics"), **headers)
    assert r.status_code == 200, r.content
    assert r["Content-Type"].startswith("text/plain; version=")
    return {f.name: f for f in text_string_to_metric_families(r.content.decode())}


def _value(families: dict[str, Any], name: str, sample: str | None = None, **labels: str) -> float:
    found = [
        s.value
        for s in families[name].samples
        if s.name == (sample or name) and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (name, labels, families[name].samples)
    return found[0]


def test_metrics_answers_the_allowed_addresses_or_an_api_token(
    client: Client, db, alice, settings
) -> None:
    assert client.get(reverse("metrics")).status_code == 200  # the test client is 127.0.0.1
    far = {"REMOTE_ADDR": "10.1.2.3"}
    r = client.get(reverse("metrics"), **far)
    assert r.status_code == 403 and b"MEMORYADMIN_METRICS_ALLOW" in r.content
    assert (
        client.get(reverse("metrics"), HTTP_AUTHORIZATION="Bearer ma_wrong", **far).status_code
        == 403
    )
    _, raw = token_create(user=alice, name="prometheus")
    assert (
        client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {raw}", **far).status_code == 200
    )
    settings.MEMORYADMIN_METRICS_ALLOW = ["10.0.0.0/8"]
    assert client.get(reverse("metrics"), **far).status_code == 200
    assert client.get(reverse("metrics")).status_code == 403


def test_metrics_by_token_needs_the_viewer_role(client: Client, db, carol) -> None:
    from django.contrib.auth import get_user_model

    far = {"REMOTE_ADDR": "10.1.2.3"}
    nobody = get_user_model().objects.create_user("nobody", password="password")
    _, raw = token_create(user=nobody, name="no role yet")
    r = client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {raw}", **far)
    assert r.status_code == 403 and b"viewer" in r.content and b"memoryadmin_" not in r.content
    _, raw = token_create(user=carol, name="prometheus")  # a viewer
    r = client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {raw}", **far)
    assert r.status_code == 200 and b"memoryadmin_" in r.content


@pytest.fixture
def llm_pass(agent_with_memories, llm_stub, settings, django_capture_on_commit_callbacks):
    """A planned pass of an agent whose memories the stub distils (model gpt-4o-mini); the stub
    proposes no fact, so the pass has no changes: nothing to review or apply."""
    metas = [{"session": "s1"}] * 4 + [{}] * 2
    agent = agent_with_memories(F[:6], metas)
    settings.MEMORYADMIN_LLM_MODEL = "gpt-4o-mini"
    settings.OPENAI_BASE_URL = llm_stub.base_url
    settings.OPENAI_API_KEY = "test-key"
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger="operator")
    run.refresh_from_db()
    assert run.status == Pass.Status.NO_CHANGES, (run.status, run.error, run.guard_reason)
    assert llm_stub.requests, "the pass never called the LLM"
    return run


def test_metrics_show_a_planned_pass_its_operations_its_loss_and_its_llm_cost(
    client: Client, llm_pass: Pass, bare_agent
) -> None:
    run, agent = llm_pass, llm_pass.agent.slug
    waiting = make_proposal(bare_agent(), merges=2)
    Pass.objects.filter(pk=waiting.pk).update(planned_at=timezone.now() - timedelta(hours=1))
    worker_heartbeat_beat()
    m = _scrape(client)
    assert (
        _value(m, "memoryadmin_passes", agent=agent, status="no_changes", trigger="operator") == 1
    )
    assert (
        _value(
            m, "memoryadmin_passes", agent=waiting.agent.slug, status="proposed", trigger="operator"
        )
        == 1
    )
    age = _value(m, "memoryadmin_oldest_pending_proposal_age_seconds", agent=waiting.agent.slug)
    assert 3600 <= age < 3700
    assert (
        _value(
            m, "memoryadmin_operations", agent=waiting.agent.slug, kind="merge", status="pending"
        )
        == 2
    )
    kinds = {
        s.labels["kind"]: s.value
        for s in m["memoryadmin_operations"].samples
        if s.labels["agent"] == agent
    }
    assert sum(kinds.values()) == run.operations.count()
    for kind, n in kinds.items():
        assert run.operations.filter(kind=kind).count() == n
    loss = "memoryadmin_pass_loss_fraction"
    assert _value(m, loss, loss + "_count", agent=agent) == 1
    assert _value(m, loss, loss + "_sum", agent=agent) == pytest.approx(run.loss_fraction)
    assert _value(m, loss, loss + "_bucket", agent=agent, le="+Inf") == 1
    lost = "memoryadmin_pass_lost_sentences"
    assert _value(m, lost, lost + "_count", agent=agent) == 1
    plan = "memoryadmin_pass_plan_duration_seconds"
    assert _value(m, plan, plan + "_count", agent=agent) == 1
    assert "memoryadmin_pass_apply_duration_seconds" in m  # nothing was applied: no ops
    newest = StoreSample.objects.filter(agent=run.agent).order_by("-taken_at").first()
    assert _value(m, "memoryadmin_memories", agent=agent) == newest.count
    totals = run.telemetry["llm"]["totals"]
    assert totals["tokens_in"] > 0
    model = {"agent": agent, "gen_ai_request_model": "gpt-4o-mini"}
    tokens = "memoryadmin_llm_tokens"
    assert (
        _value(m, tokens, tokens + "_total", gen_ai_token_type="input", **model)
        == totals["tokens_in"]
    )
    assert (
        _value(m, tokens, tokens + "_total", gen_ai_token_type="output", **model)
        == totals["tokens_out"]
    )
    cost = (totals["tokens_in"] * 0.15 + totals["tokens_out"] * 0.60) / 1e6
    usd = "memoryadmin_llm_cost_usd"
    assert _value(m, usd, usd + "_total", **model) == pytest.approx(cost, abs=1e-6)
    assert _value(m, "memoryadmin_worker_heartbeat_age_seconds") < 60


def test_the_llm_cost_is_on_the_pass_page_the_dashboard_and_the_api(
    client: Client, llm_pass: Pass, alice
) -> None:
    totals = llm_pass.telemetry["llm"]["totals"]
    cost = round((totals["tokens_in"] * 0.15 + totals["tokens_out"] * 0.60) / 1e6, 6)
    _, raw = token_create(user=alice)
    body = client.get(f"/api/v1/passes/{llm_pass.pk}", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    assert body["llm"]["cost_usd"] == pytest.approx(cost)
    client.force_login(alice)
    page = client.get(reverse("pass_detail", args=[llm_pass.pk])).content.decode()
    shown = usd(cost)
    assert shown == f"${cost:.6f}".rstrip("0") or shown == f"${cost:.3g}"
    assert f'<span data-testid="llm-cost">{shown}</span>' in page
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert (
        shown in dashboard and f"{totals['tokens_in']} / {totals['tokens_out']} tokens" in dashboard
    )


def test_a_model_without_a_price_shows_no_price_and_no_cost_metric(
    client: Client, llm_pass: Pass, alice, settings
) -> None:
    settings.LLM_PRICES = {}
    client.force_login(alice)
    page = client.get(reverse("pass_detail", args=[llm_pass.pk])).content.decode()
    assert '<span data-testid="llm-cost">no price</span>' in page
    m = _scrape(client)
    assert m["memoryadmin_llm_cost_usd"].samples == []
    assert "1 pass with no price" in client.get(reverse("dashboard")).content.decode()


def test_the_apply_duration_runs_from_the_applying_event_to_the_end(
    client: Client, bare_agent
) -> None:
    run = make_proposal(bare_agent(), merges=1, status="applied")
    end = timezone.now()
    Pass.objects.filter(pk=run.pk).update(finished_at=end)
    AuditEvent.objects.create(
        actor="worker",
        verb="applying",
        run=run,
        agent=run.agent,
        created_at=end - timedelta(seconds=40),
    )
    m = _scrape(client)
    name, agent = "memoryadmin_pass_apply_duration_seconds", run.agent.slug
    assert _value(m, name, name + "_sum", agent=agent) == pytest.approx(40, abs=0.01)
    assert _value(m, name, name + "_bucket", agent=agent, le="30.0") == 0
    assert _value(m, name, name + "_bucket", agent=agent, le="60.0") == 1


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1.234, "$1.23"),
        (0.0123, "$0.01"),
        (0.00123, "$0.00123"),
        (0.00008, "$0.00008"),
        (0, "$0.00"),
        (None, "no price"),
    ],
)
def test_costs_read_as_dollars(value: float | None, shown: str) -> None:
    assert usd(value) == shown


@pytest.mark.parametrize("name", ["healthz", "metrics"])
def test_health_and_metrics_take_get_only(client: Client, db, name: str) -> None:
    for method in ("post", "put", "delete"):
        assert getattr(client, method)(reverse(name)).status_code == 405


@pytest.mark.parametrize("status", ["rejected", "rejected_by_guard", "failed"])
def test_metrics_report_the_operations_of_an_ended_pass_as_that_pass_s_state(
    client: Client, bare_agent, status: str
) -> None:
    ended = make_proposal(bare_agent(), merges=2, status=status)
    m = _scrape(client)
    slug = ended.agent.slug
    assert _value(m, "memoryadmin_operations", agent=slug, kind="merge", status=status) == 2
    assert not [
        s
        for s in m["memoryadmin_operations"].samples
        if s.labels["agent"] == slug and s.labels["status"] == "pending"
    ]


@pytest.mark.services
@pytest.mark.skipif(
    not os.environ.get("Q_REDIS_URL"), reason="needs the Redis broker: run by `make test-services`"
)
def test_the_oldest_task_s_age_is_read_from_the_redis_list(db) -> None:
    """With the Redis broker the queue age comes from the ``started`` time django-q2 signs into
    the task at the head of the list (on a list of this test's own, so no worker takes it)."""
    import uuid

    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    from memoryadmin.ops.selectors.health import oldest_queued_task_age

    broker = get_broker(list_key=f"health-test-{uuid.uuid4().hex[:8]}")
    try:
        assert oldest_queued_task_age(broker) == 0.0
        for minutes in (3, 1):  # RPUSH: the first is the oldest, at the head
            task = {"id": uuid.uuid4().hex, "started": timezone.now() - timedelta(minutes=minutes)}
            broker.enqueue(SignedPackage.dumps(task))
        assert 175 <= oldest_queued_task_age(broker) <= 200
    finally:
        broker.delete_queue()
