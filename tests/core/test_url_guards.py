"""Every console URL: anonymous visitors go to the login page, a POST without a CSRF token is
refused, and a method the view does not take gets 405.

The URLs come from ``console_patterns`` in ``memoryadmin/urls.py`` itself (path converters filled
with sample values), so a new URL is covered the day it is added; ``METHODS`` must then say which
methods it takes, or ``test_every_url_declares_its_methods`` fails. The guards all run before the
view's body (middleware, then the method decorator), so the sample objects need not exist.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, reverse

from memoryadmin.urls import console_patterns as urlpatterns

pytestmark = pytest.mark.django_db

GET, POST, BOTH = {"get"}, {"post"}, {"get", "post"}

METHODS: dict[str, set[str]] = {
    "dashboard": GET,
    "agent_list": GET,
    "agent_create": BOTH,
    "schedule_preview": GET,
    "agent_detail": GET,
    "agent_edit": BOTH,
    "agent_delete": BOTH,
    "agent_run": POST,
    "agent_dry_run": POST,
    "dry_run_detail": GET,
    "memory_list": GET,
    "memory_detail": GET,
    "memory_pin": POST,
    "memory_edit": POST,
    "memory_delete": POST,
    "archive_list": GET,
    "archive_restore": POST,
    "forget_page": GET,
    "forget_create": POST,
    "forget_detail": GET,
    "forget_approve": POST,
    "forget_reject": POST,
    "decision_list": GET,
    "decision_revoke": POST,
    "memories_import": BOTH,
    "memories_export": GET,
    "memories_import_status": GET,
    "probe_list": GET,
    "probe_create": POST,
    "probe_recall": GET,
    "probe_edit": BOTH,
    "probe_delete": POST,
    "pass_detail": GET,
    "pass_progress": GET,
    "pass_stale": GET,
    "pass_approve": POST,
    "pass_reject": POST,
    "pass_rollback": BOTH,
    "pass_review": GET,
    "review_bulk": POST,
    "conflict_resolve": POST,
    "operation_exclude": POST,
    "operation_edit": POST,
    "audit": GET,
    "audit_csv": GET,
    "audit_operations_csv": GET,
    "audit_events": GET,
    "audit_events_csv": GET,
    "notifications": GET,
    "notification_channel_add": POST,
    "notification_channel_delete": POST,
    "notification_channel_test": POST,
    "notification_subscription_save": POST,
    "notification_defaults": POST,
}
"""HTTP methods each named URL takes (lower case, as the test client spells them)."""

PUBLIC = {"favicon", "healthz", "metrics"}
"""URLs a visitor may fetch without logging in (marked ``login_not_required``; /metrics checks
the client address or an API token itself, tests/ops/test_health_metrics.py)."""

SAMPLE = {"slug": "sample-agent", "pk": 1, "op_id": 1}


def _url(pattern: URLPattern) -> str:
    kwargs = {name: SAMPLE[name] for name in pattern.pattern.converters}
    return reverse(pattern.name, kwargs=kwargs)


GUARDED = [p for p in urlpatterns if p.name not in PUBLIC]
IDS = [p.name for p in GUARDED]
POSTING = [p for p in GUARDED if "post" in METHODS.get(p.name, ())]


def test_every_url_declares_its_methods() -> None:
    names = {p.name for p in urlpatterns}
    assert names - PUBLIC - set(METHODS) == set(), "add the new URL's methods to METHODS"
    assert set(METHODS) - names == set(), "METHODS names a URL that no longer exists"


def test_only_the_public_urls_skip_the_login() -> None:
    exempt = {p.name for p in urlpatterns if getattr(p.callback, "login_required", True) is False}
    assert exempt == PUBLIC


@pytest.mark.parametrize("pattern", GUARDED, ids=IDS)
def test_it_sends_anonymous_visitors_to_the_login_page(client: Client, pattern: URLPattern) -> None:
    url = _url(pattern)
    for method in ("get", "post"):
        r = getattr(client, method)(url)
        assert r.status_code == 302, (method, url)
        assert r["Location"].startswith(reverse("login") + "?next="), (method, url)


@pytest.mark.parametrize("pattern", POSTING, ids=[p.name for p in POSTING])
def test_it_refuses_a_post_without_a_csrf_token(alice: Any, pattern: URLPattern) -> None:
    c = Client(enforce_csrf_checks=True)
    c.force_login(alice)
    r = c.post(_url(pattern), {"note": "n"})
    assert r.status_code == 403 and b"CSRF" in r.content


@pytest.mark.parametrize("pattern", GUARDED, ids=IDS)
def test_it_refuses_other_methods_with_405(client: Client, alice: Any, pattern: URLPattern) -> None:
    client.force_login(alice)
    url = _url(pattern)
    for method in sorted({"get", "post", "put", "patch", "delete"} - METHODS[pattern.name]):
        assert getattr(client, method)(url).status_code == 405, (method, url)
