"""Account security behind a proxy: whose address django-axes locks, a password reset lifting a
lockout, password-reset mail and password-change attempts throttled, ALLOWED_HOSTS='*' refused."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client
from django.urls import reverse

from memoryadmin.core.models import AuditEvent
from memoryadmin.ops.services.accounts import client_ip

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.2"


def _wrong_logins(client: Client, username: str, times: int, **headers: str) -> None:
    for _ in range(times):
        client.post(reverse("login"), {"username": username, "password": "wrong"}, **headers)


def _login(client: Client, username: str, password: str = "password", **headers: str) -> int:
    return client.post(
        reverse("login"), {"username": username, "password": password}, **headers
    ).status_code


def test_without_trusted_proxies_the_forwarded_header_is_ignored(client, carol, settings) -> None:
    """The default: the peer's address counts, so a client cannot pick one by a header — and
    behind an unconfigured proxy everyone shares the proxy's address (the README says so)."""
    via = {"REMOTE_ADDR": PROXY}
    _wrong_logins(
        client, "carol", settings.AXES_FAILURE_LIMIT, HTTP_X_FORWARDED_FOR="1.1.1.1", **via
    )
    assert _login(Client(), "carol", HTTP_X_FORWARDED_FOR="2.2.2.2", **via) == 429


def test_behind_a_trusted_proxy_one_client_locks_only_itself(client, carol, settings) -> None:
    settings.TRUSTED_PROXIES = [PROXY]
    via = {"REMOTE_ADDR": PROXY}
    attacker = {"HTTP_X_FORWARDED_FOR": "203.0.113.7", **via}
    _wrong_logins(client, "carol", settings.AXES_FAILURE_LIMIT, **attacker)
    assert _login(Client(), "carol", **attacker) == 429
    assert _login(Client(), "carol", HTTP_X_FORWARDED_FOR="198.51.100.9", **via) == 302
    # A client that writes the header itself cannot escape: the proxy appends the real address.
    spoofed = {"HTTP_X_FORWARDED_FOR": "198.51.100.9, 203.0.113.7", **via}
    assert _login(Client(), "carol", **spoofed) == 429


def test_client_ip_reads_the_header_only_from_a_trusted_peer(rf, settings) -> None:
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]

    def ip(remote: str, xff: str | None = None) -> str:
        extra = {"HTTP_X_FORWARDED_FOR": xff} if xff is not None else {}
        return client_ip(rf.get("/", REMOTE_ADDR=remote, **extra))

    assert ip("192.0.2.1", "203.0.113.7") == "192.0.2.1"  # not a proxy: header ignored
    assert ip("10.0.0.2", "203.0.113.7") == "203.0.113.7"
    assert ip("10.0.0.2", "203.0.113.7, 10.0.0.9") == "203.0.113.7"  # two proxies
    assert ip("10.0.0.2", "") == "10.0.0.2"
    assert ip("10.0.0.2", "garbage, 203.0.113.7") == "203.0.113.7"
    assert ip("10.0.0.2", "203.0.113.7, garbage") == "10.0.0.2"


def _reset_link(mail) -> str:
    return re.search(r"https?://[^/\s]+(/accounts/reset/\S+/)", mail.body).group(1)


def test_a_password_reset_lifts_a_lockout(client, carol, settings, mailoutbox) -> None:
    settings.EMAIL_HOST = "mail.example.org"
    _wrong_logins(client, "carol", settings.AXES_FAILURE_LIMIT)
    assert _login(client, "carol") == 429
    client.post(reverse("password_reset"), {"email": "carol@example.org"})
    assert len(mailoutbox) == 1
    r = client.get(_reset_link(mailoutbox[0]), follow=True)
    new = "a new long password 42"
    r = client.post(r.redirect_chain[-1][0], {"new_password1": new, "new_password2": new})
    assert r.status_code == 302 and r["Location"] == reverse("password_reset_complete")
    assert _login(client, "carol", new) == 302


def test_password_reset_mail_is_throttled_per_address_and_per_account(
    client, carol, bob, settings, mailoutbox
) -> None:
    settings.EMAIL_HOST = "mail.example.org"
    for _ in range(20):
        r = client.post(reverse("password_reset"), {"email": "carol@example.org"})
        assert r.status_code == 302 and r["Location"] == reverse("password_reset_done")
    assert len(mailoutbox) == settings.PASSWORD_RESET_LIMITS["per_email"]
    assert AuditEvent.objects.filter(verb="password_reset_throttled").count() == 17
    for i in range(20):
        client.post(reverse("password_reset"), {"email": f"nobody{i}@example.org"})
    requested = AuditEvent.objects.filter(verb="password_reset_requested").count()
    assert requested == settings.PASSWORD_RESET_LIMITS["per_address"]
    # Another address may still ask for bob.
    Client(REMOTE_ADDR="192.0.2.50").post(reverse("password_reset"), {"email": "bob@example.org"})
    assert mailoutbox[-1].to == ["bob@example.org"]
    assert not any("carol@example.org" in str(e.data) for e in AuditEvent.objects.all())


def test_wrong_old_passwords_on_the_change_form_are_throttled(client, carol, settings) -> None:
    """They count as failed logins: at the limit django-axes answers its lockout page, and even
    the right old password changes nothing until the cool-off has passed."""
    client.force_login(carol)
    url = reverse("password_change")
    new = {"new_password1": "a new long password 42", "new_password2": "a new long password 42"}
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        r = client.post(url, {"old_password": "wrong", **new})
        assert r.status_code == 200 and r.context["form"].errors["old_password"]
    r = client.post(url, {"old_password": "wrong", **new})
    assert r.status_code == 429 and "Too many failed logins" in r.content.decode()
    r = client.post(url, {"old_password": "password", **new})
    assert r.status_code in (200, 429)
    if r.status_code == 200:
        assert "Too many wrong passwords" in r.context["form"].errors["old_password"][0]
    carol.refresh_from_db()
    assert carol.check_password("password")


def test_the_password_change_still_works(client, carol) -> None:
    client.force_login(carol)
    new = "a new long password 42"
    r = client.post(
        reverse("password_change"),
        {"old_password": "password", "new_password1": new, "new_password2": new},
    )
    assert r.status_code == 302
    carol.refresh_from_db()
    assert carol.check_password(new)


def test_a_wildcard_host_is_refused_with_debug_off(settings) -> None:
    settings.DEBUG, settings.ALLOWED_HOSTS = False, ["*"]
    with pytest.raises(SystemCheckError, match="memoryadmin.E001"):
        call_command("check")
    settings.DEBUG = True
    call_command("check")
    settings.DEBUG, settings.ALLOWED_HOSTS = False, ["console.example.org"]
    call_command("check")
