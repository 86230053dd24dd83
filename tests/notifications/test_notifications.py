"""Notifications end to end: a real pass, a local SMTP sink (aiosmtpd) and a local HTTP receiver
(http.server in a thread) that checks each webhook's HMAC signature; retries through django-q2's
own scheduler; no memory text in any payload.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone
from django_q.models import Schedule
from django_q.scheduler import scheduler

from consolidation.adapters.endpoints import check_webhook_url
from memoryadmin.core.models import AuditEvent
from memoryadmin.notifications.models import Delivery, Notification
from memoryadmin.notifications.services.notifications import (
    channel_create,
    notification_defaults_save,
    notification_test,
    notifications_check,
    subscription_save,
)
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_fail, pass_request
from tests.conftest import DISTINCT_FACTS

pytestmark = pytest.mark.django_db

SECRET_TEXT = "Zanthoria Quibbleworth hides the vault code 88XQ-PLUM under the teapot."
"""A memory text that appears nowhere else: no notification may carry any part of it."""
DUPES = [*DISTINCT_FACTS[:10], SECRET_TEXT, SECRET_TEXT + " "]
LOSSY = [*DISTINCT_FACTS[:2], SECRET_TEXT, SECRET_TEXT + " ", DISTINCT_FACTS[0], DISTINCT_FACTS[1]]


class Receiver:
    """A webhook receiver on 127.0.0.1: answers ``fail_first`` requests with 500, then 204;
    keeps each request's body, headers and whether its signature verified."""

    def __init__(self) -> None:
        self.secret = ""
        self.fail_first = 0
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                expected = (
                    "sha256=" + hmac.new(outer.secret.encode(), body, hashlib.sha256).hexdigest()
                )
                given = self.headers.get("X-Memoryadmin-Signature", "")
                outer.requests.append(
                    {
                        "body": body,
                        "json": json.loads(body),
                        "event": self.headers.get("X-Memoryadmin-Event"),
                        "verified": hmac.compare_digest(expected, given),
                    }
                )
                failing = len(outer.requests) <= outer.fail_first
                self.send_response(500 if failing else 204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Sink:
    """aiosmtpd handler keeping every message's envelope and content."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(
            {"to": list(envelope.rcpt_tos), "content": envelope.content.decode("utf-8", "replace")}
        )
        return "250 OK"


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    settings.WEBHOOK_HOSTS_ALLOWED = ["127.0.0.1"]
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def smtp(settings: Any) -> Iterator[Sink]:
    sink = Sink()
    with socket.socket() as probe:  # a free port (aiosmtpd's start() cannot use port 0)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = port
    settings.EMAIL_USE_TLS = False
    yield sink
    controller.stop()


def webhook(user: Any, receiver: Receiver) -> Any:
    channel = channel_create(user=user, kind="webhook", target=receiver.url)
    receiver.secret = channel.secret
    return channel


def run_pass(agent: Any, capture: Any) -> Pass:
    with capture(execute=True):
        run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR)
    run.refresh_from_db()
    return run


def assert_no_memory_text(*texts: str) -> None:
    for text in texts:
        for word in ("Zanthoria", "Quibbleworth", "88XQ", "teapot", "vault"):
            assert word not in text, f"{word!r} leaked into a notification: {text[:300]}"


def test_it_posts_a_signed_webhook_and_mails_when_a_proposal_waits(
    agent_with_memories, bob, receiver, smtp, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    webhook(bob, receiver)
    channel_create(user=bob, kind="email", target="bob@example.org")
    subscription_save(user=bob, agent=agent, events=["proposal_waiting"])

    run = run_pass(agent, django_capture_on_commit_callbacks)

    assert run.status == Pass.Status.PROPOSED
    [hook] = receiver.requests
    assert hook["verified"] and hook["event"] == "proposal_waiting"
    body = hook["json"]
    assert body["pass"]["id"] == run.pk
    assert body["pass"]["url"].endswith(f"/passes/{run.pk}/")
    assert body["pass"]["operations"] >= 1 and body["agent"]["slug"] == agent.slug
    assert f"Pass #{run.pk} of {agent.name} waits for review" in body["summary"]
    [mail] = smtp.messages
    assert mail["to"] == ["bob@example.org"]
    assert f"/passes/{run.pk}/" in mail["content"]
    assert_no_memory_text(hook["body"].decode(), mail["content"], body["summary"])
    assert set(Delivery.objects.values_list("status", flat=True)) == {"sent"}


def test_it_tells_only_subscribers_of_that_agent_and_event(
    agent_with_memories, alice, bob, receiver, django_capture_on_commit_callbacks
):
    agent, other = agent_with_memories(DUPES), agent_with_memories(3)
    webhook(bob, receiver)
    subscription_save(user=bob, agent=other, events=["proposal_waiting"])
    subscription_save(user=bob, agent=agent, events=["pass_failed"])

    run_pass(agent, django_capture_on_commit_callbacks)

    assert receiver.requests == []
    assert not Notification.objects.exists()


def test_it_reports_a_pass_the_guard_rejected(
    agent_with_memories, bob, receiver, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(LOSSY, policy={"trim_to_guard": False})
    webhook(bob, receiver)
    subscription_save(user=bob, agent=agent, events=["guard_rejected", "proposal_waiting"])

    run = run_pass(agent, django_capture_on_commit_callbacks)

    assert run.status == Pass.Status.REJECTED_BY_GUARD
    [hook] = receiver.requests
    assert hook["verified"] and hook["event"] == "guard_rejected"
    assert "rejected by a guard" in hook["json"]["summary"]
    assert_no_memory_text(hook["body"].decode())


def test_a_failing_receiver_is_retried_by_django_q_until_it_answers(
    agent_with_memories, bob, receiver, settings, django_capture_on_commit_callbacks
):
    settings.NOTIFY_RETRY_SECONDS = 60
    receiver.fail_first = 2
    agent = agent_with_memories(DUPES)
    webhook(bob, receiver)
    subscription_save(user=bob, agent=agent, events=["proposal_waiting"])

    run_pass(agent, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("retrying", 1)
    assert "HTTP 500" in delivery.last_error
    retry = Schedule.objects.get(func="memoryadmin.tasks.deliver_notification")
    assert retry.schedule_type == Schedule.ONCE
    first_wait = (retry.next_run - timezone.now()).total_seconds()
    assert 50 < first_wait <= 60

    for expected_attempts, wait in ((2, 240), (3, None)):
        Schedule.objects.filter(pk=retry.pk).update(next_run=timezone.now() - timedelta(seconds=1))
        scheduler()  # django-q2's own scheduler runs the due retry (sync mode: inline)
        delivery.refresh_from_db()
        assert delivery.attempts == expected_attempts
        if wait is not None:
            retry = Schedule.objects.get(func="memoryadmin.tasks.deliver_notification")
            assert wait - 10 < (retry.next_run - timezone.now()).total_seconds() <= wait

    assert delivery.status == "sent" and delivery.last_error == ""
    assert [a["ok"] for a in delivery.attempts_log] == [False, False, True]
    assert [a["status_code"] for a in delivery.attempts_log] == [500, 500, 204]
    assert [r["verified"] for r in receiver.requests] == [True, True, True]
    assert [r["json"]["attempt"] for r in receiver.requests] == [1, 2, 3]
    assert not Schedule.objects.filter(func="memoryadmin.tasks.deliver_notification")
    verbs = set(AuditEvent.objects.values_list("verb", flat=True))
    assert {"notification_retrying", "notification_sent"} <= verbs


def test_it_gives_up_after_the_last_attempt(
    bob, receiver, settings, django_capture_on_commit_callbacks
):
    settings.NOTIFY_ATTEMPTS = 2
    receiver.fail_first = 99
    channel = webhook(bob, receiver)
    with django_capture_on_commit_callbacks(execute=True):
        notification_test(user=bob, channel_id=channel.pk)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("retrying", 1)
    Schedule.objects.update(next_run=timezone.now() - timedelta(seconds=1))
    scheduler()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 2)
    assert not Schedule.objects.filter(func="memoryadmin.tasks.deliver_notification")


def test_it_reports_a_proposal_waiting_longer_than_the_set_hours_once(
    agent_with_memories, alice, bob, receiver, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    notification_defaults_save(
        user=alice, events=["waiting_long"], waiting_hours=2, subscribe_new_agents=False
    )
    run = run_pass(agent, django_capture_on_commit_callbacks)
    webhook(bob, receiver)
    subscription_save(user=bob, agent=agent, events=["waiting_long"])

    with django_capture_on_commit_callbacks(execute=True):
        assert notifications_check(now=timezone.now() + timedelta(hours=1)) == []
        assert len(notifications_check(now=timezone.now() + timedelta(hours=3))) == 1
        assert notifications_check(now=timezone.now() + timedelta(hours=4)) == []

    [hook] = receiver.requests
    assert hook["event"] == "waiting_long" and hook["json"]["pass"]["id"] == run.pk
    assert hook["json"]["pass"]["waiting_hours"] >= 3
    assert_no_memory_text(hook["body"].decode())


def test_it_reports_a_stuck_apply(agent_with_memories, bob, receiver, settings):
    settings.NOTIFY_STUCK_MINUTES = 30
    agent = agent_with_memories(3)
    run = Pass.objects.create(
        agent=agent, status=Pass.Status.APPLYING, trigger="operator", decided_at=timezone.now()
    )
    webhook(bob, receiver)
    subscription_save(user=bob, agent=agent, events=["stuck"])

    assert notifications_check(now=timezone.now() + timedelta(minutes=10)) == []
    [note] = notifications_check(now=timezone.now() + timedelta(minutes=45))
    assert note.event == "stuck" and note.run == run
    assert "is stuck (applying)" in note.summary


def test_new_agents_get_the_default_subscription_when_the_admin_says_so(
    agent_with_memories, alice, bob, carol, receiver
):
    webhook(bob, receiver)
    channel_create(user=carol, kind="email", target="carol@example.org")
    notification_defaults_save(
        user=alice, events=["pass_failed", "stuck"], waiting_hours=24, subscribe_new_agents=True
    )
    agent = agent_with_memories(2)
    subs = {s.user.username: s.events for s in agent.subscriptions.select_related("user")}
    assert subs == {"bob": ["pass_failed", "stuck"]}  # carol is a viewer


@pytest.mark.parametrize(
    ("url", "allowed", "addresses", "ok"),
    [
        ("https://hooks.example.com/x", [], ["93.184.216.34"], True),
        ("http://127.0.0.1:8765/api", [], ["127.0.0.1"], False),
        ("http://internal.example/x", [], ["10.0.0.5"], False),
        ("http://metadata.example/x", [], ["169.254.169.254"], False),
        ("http://v6.example/x", [], ["::1"], False),
        ("http://127.0.0.1:9000/hook", ["127.0.0.1"], [], True),
        ("https://hooks.example.com/x", ["*.internal"], [], False),
        ("ftp://hooks.example.com/x", [], ["93.184.216.34"], False),
        ("https://user:pw@hooks.example.com/x", [], ["93.184.216.34"], False),
    ],
)
def test_webhook_urls_are_limited_to_what_the_deployment_allows(url, allowed, addresses, ok):
    def resolve(host: str, port: int) -> list[str]:
        return addresses

    if ok:
        assert check_webhook_url(url, allowed, resolve=resolve) == url
    else:
        with pytest.raises(ValueError):
            check_webhook_url(url, allowed, resolve=resolve)


def test_the_documented_receiver_accepts_a_signed_delivery_and_refuses_a_forged_one(
    bob, settings, django_capture_on_commit_callbacks
):
    guide = Path(__file__).resolve().parents[2] / "docs" / "OPERATOR.md"
    readme = guide.read_text(encoding="utf-8")
    code = readme.split("<!-- webhook-receiver -->\n```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {"__name__": "readme_receiver"}
    exec(compile(code, "docs/OPERATOR.md receiver", "exec"), namespace)  # noqa: S102 - our own docs
    server = HTTPServer(("127.0.0.1", 0), namespace["Receiver"])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.WEBHOOK_HOSTS_ALLOWED = ["127.0.0.1"]
    try:
        url = f"http://127.0.0.1:{server.server_port}/"
        channel = channel_create(user=bob, kind="webhook", target=url)
        for secret, expected in ((channel.secret, "sent"), ("wrong", "retrying")):
            namespace["SECRET"] = secret
            with django_capture_on_commit_callbacks(execute=True):
                note = notification_test(user=bob, channel_id=channel.pk)
            delivery = note.deliveries.get()
            assert delivery.status == expected, delivery.last_error
        assert "HTTP 401" in delivery.last_error
    finally:
        server.shutdown()
        server.server_close()


def test_it_reports_a_failed_pass_without_its_error_text(
    agent_with_memories, bob, receiver, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(2)
    webhook(bob, receiver)
    subscription_save(user=bob, agent=agent, events=["pass_failed"])
    run = Pass.objects.create(agent=agent, status=Pass.Status.QUEUED, trigger="operator")

    with django_capture_on_commit_callbacks(execute=True):
        pass_fail(run=run, error=f"ValueError: memory 'mem-010' {SECRET_TEXT}")

    [hook] = receiver.requests
    assert hook["verified"] and hook["event"] == "pass_failed"
    assert f"Pass #{run.pk} of {agent.name} failed" in hook["json"]["summary"]
    assert_no_memory_text(hook["body"].decode())


def test_an_auto_applied_proposal_is_not_reported_as_waiting(
    agent_with_memories, bob, receiver, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES, auto_apply="all")
    webhook(bob, receiver)
    subscription_save(user=bob, agent=agent, events=["proposal_waiting"])

    run = run_pass(agent, django_capture_on_commit_callbacks)

    assert run.status != Pass.Status.PROPOSED
    assert receiver.requests == [] and not Notification.objects.exists()


def test_a_delivery_abandoned_mid_attempt_is_sent_again_by_the_check(
    bob, receiver, django_capture_on_commit_callbacks
):
    channel = webhook(bob, receiver)
    note = Notification.objects.create(key="k", event="stuck", summary="Import #1 is stuck")
    delivery = Delivery.objects.create(
        notification=note,
        channel=channel,
        status=Delivery.Status.SENDING,
        next_attempt_at=timezone.now() + timedelta(minutes=1),
    )
    with django_capture_on_commit_callbacks(execute=True):
        notifications_check(now=timezone.now())  # still within its deadline: left alone
    assert receiver.requests == []
    with django_capture_on_commit_callbacks(execute=True):
        notifications_check(now=timezone.now() + timedelta(minutes=5))
    delivery.refresh_from_db()
    assert delivery.status == "sent" and len(receiver.requests) == 1
