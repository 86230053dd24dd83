"""The Notifications page: channels, subscriptions, defaults, the delivery log, and who may do
what (alice admin, bob reviewer, carol viewer)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.notifications.models import NotificationChannel, NotificationDefaults, Subscription

pytestmark = pytest.mark.django_db


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_shows_the_page_with_the_channels_subscriptions_and_log(agent_with_memories, bob):
    agent = agent_with_memories(2)
    response = login(bob).get(reverse("notifications"))
    assert response.status_code == 200
    html = response.content.decode()
    for part in ("Your channels", "Your subscriptions", "Delivery log", agent.name):
        assert part in html
    assert 'aria-current="page">Notifications' in html


def test_it_adds_an_email_channel(bob):
    response = login(bob).post(
        reverse("notification_channel_add"), {"kind": "email", "target": "bob@example.org"}
    )
    assert response.status_code == 302
    assert NotificationChannel.objects.get(user=bob).target == "bob@example.org"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"kind": "email", "target": "not-an-address"}, "Enter an e-mail address."),
        ({"kind": "webhook", "target": "http://127.0.0.1:8765/api/v2"}, "non-public address"),
        ({"kind": "webhook", "target": "ftp://example.com/x"}, "must be http(s)"),
        ({"kind": "webhook", "target": ""}, "This field is required."),
    ],
)
def test_it_shows_the_field_errors_of_a_bad_channel(bob, settings, data, error):
    settings.WEBHOOK_HOSTS_ALLOWED = []
    response = login(bob).post(reverse("notification_channel_add"), data)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'class="errorlist"' in html and error in html
    assert not NotificationChannel.objects.exists()


def test_a_listed_webhook_host_is_accepted_and_gets_a_secret(bob, settings):
    settings.WEBHOOK_HOSTS_ALLOWED = ["hooks.internal"]
    response = login(bob).post(
        reverse("notification_channel_add"),
        {"kind": "webhook", "target": "https://hooks.internal/memoryadmin"},
    )
    assert response.status_code == 302
    channel = NotificationChannel.objects.get(user=bob)
    assert len(channel.secret) >= 40
    assert channel.secret in login(bob).get(reverse("notifications")).content.decode()


def test_it_saves_and_removes_a_subscription(agent_with_memories, bob):
    agent = agent_with_memories(2)
    client = login(bob)
    url = reverse("notification_subscription_save", args=[agent.slug])
    client.post(url, {"events": ["proposal_waiting", "stuck"]})
    assert Subscription.objects.get(user=bob, agent=agent).events == ["proposal_waiting", "stuck"]
    response = client.post(url, {"events": ["nonsense"]})
    assert response.status_code == 200 and "not one of the available choices" in (
        response.content.decode()
    )
    client.post(url, {})
    assert not Subscription.objects.filter(user=bob).exists()


def test_send_a_test_shows_in_the_delivery_log(bob, mailoutbox, django_capture_on_commit_callbacks):
    channel = NotificationChannel.objects.create(user=bob, kind="email", target="b@example.org")
    client = login(bob)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("notification_channel_test", args=[channel.pk]))
    assert response.status_code == 302
    html = client.get(reverse("notifications")).content.decode()
    assert "Test notification from memoryadmin" in html
    assert '<td data-testid="delivery-status">sent</td>' in html
    [mail] = mailoutbox  # pytest-django's locmem backend
    assert mail.to == ["b@example.org"] and "Test notification" in mail.subject


def test_an_unconfigured_smtp_backend_fails_the_attempt_and_says_why(
    bob, settings, django_capture_on_commit_callbacks
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = ""
    channel = NotificationChannel.objects.create(user=bob, kind="email", target="b@example.org")
    client = login(bob)
    assert (
        'data-testid="email-unconfigured"' in client.get(reverse("notifications")).content.decode()
    )
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("notification_channel_test", args=[channel.pk]))
    html = client.get(reverse("notifications")).content.decode()
    assert "EMAIL_HOST is empty" in html
    assert '<td data-testid="delivery-status">retrying</td>' in html


def test_a_channel_of_another_user_cannot_be_tested_or_removed(alice, bob):
    channel = NotificationChannel.objects.create(user=alice, kind="email", target="a@example.org")
    client = login(bob)
    client.post(reverse("notification_channel_test", args=[channel.pk]))
    client.post(reverse("notification_channel_delete", args=[channel.pk]))
    assert NotificationChannel.objects.filter(pk=channel.pk).exists()
    assert not channel.deliveries.exists()


def test_only_an_admin_saves_the_defaults(alice, bob):
    data = {"events": ["pass_failed"], "waiting_hours": "6", "subscribe_new_agents": "on"}
    assert login(bob).post(reverse("notification_defaults"), data).status_code == 403
    assert login(alice).post(reverse("notification_defaults"), data).status_code == 302
    row = NotificationDefaults.current()
    assert (row.events, row.waiting_hours, row.subscribe_new_agents) == (["pass_failed"], 6, True)
    response = login(alice).post(reverse("notification_defaults"), {**data, "waiting_hours": "0"})
    assert response.status_code == 200 and 'class="errorlist"' in response.content.decode()


def test_a_viewer_reads_the_page_but_changes_nothing(carol, agent_with_memories):
    agent = agent_with_memories(1)
    client = login(carol)
    assert client.get(reverse("notifications")).status_code == 200
    for url, data in (
        (reverse("notification_channel_add"), {"kind": "email", "target": "c@example.org"}),
        (reverse("notification_subscription_save", args=[agent.slug]), {"events": ["stuck"]}),
    ):
        assert client.post(url, data).status_code == 403
    assert not NotificationChannel.objects.exists() and not Subscription.objects.exists()


def test_it_needs_a_login_and_refuses_other_methods(bob):
    assert Client().get(reverse("notifications")).status_code == 302
    assert login(bob).get(reverse("notification_channel_add")).status_code == 405
