"""The operator's time zone in a real browser: Debian chromium through
Playwright, its zone set to New York. app.js stores the zone in the ``tz`` cookie URL-encoded
(``America%2FNew_York``); the server read it as is, found no such zone and showed UTC
everywhere."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from tests.core.test_browser import browser_page  # noqa: F401  (the chromium fixture)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _new_york(chromium_page, live_server):
    """A browser context in New York with bob signed in (the login page stores the zone)."""
    context = chromium_page.context.browser.new_context(timezone_id="America/New_York")
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))
    return context, page


def test_a_new_york_browser_sees_new_york_times(
    live_server,
    transactional_db,
    bob,
    browser_page,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    from memoryadmin.core.models import AuditEvent
    from memoryadmin.core.services import audit

    event = audit(actor="cli", verb="agent_updated", note="zone check")
    AuditEvent.objects.filter(pk=event.pk).update(created_at=datetime(2026, 1, 15, 12, tzinfo=UTC))

    context, page = _new_york(browser_page, live_server)
    cookie = next(c for c in context.cookies() if c["name"] == "tz")
    assert cookie["value"] == "America%2FNew_York"  # as app.js writes it
    page.goto(f"{live_server.url}/audit/events/")
    zone = page.locator('.userbox [title="times are shown in this zone"]')
    expect(zone).to_have_text("America/New_York")
    row = page.locator("#event-results tbody tr", has_text="zone check")
    expect(row.locator("td").first).to_have_text("2026-01-15 07:00:00")  # 12:00 UTC, EST
    context.close()


def test_the_first_page_drawn_before_the_zone_was_known_is_drawn_again_in_it(
    live_server,
    transactional_db,
    bob,
    browser_page,  # noqa: F811 - the fixture imported above
) -> None:
    """A signed-in browser without the ``tz`` cookie (its first visit, a cleared cookie): the
    server draws the page in UTC; app.js stores the zone and draws the page again, once."""
    from playwright.sync_api import expect

    from memoryadmin.core.models import AuditEvent
    from memoryadmin.core.services import audit

    event = audit(actor="cli", verb="agent_updated", note="first visit")
    AuditEvent.objects.filter(pk=event.pk).update(created_at=datetime(2026, 7, 15, 12, tzinfo=UTC))

    context, page = _new_york(browser_page, live_server)
    # a first visit: no cookie, and no earlier redraw in this tab (app.js redraws a tab once;
    # a sign-in page drawn before its script stored the zone would have used that once)
    context.clear_cookies(name="tz")
    page.evaluate("window.sessionStorage.clear()")
    page.goto(f"{live_server.url}/audit/events/")
    zone = page.locator('.userbox [title="times are shown in this zone"]')
    expect(zone).to_have_text("America/New_York", timeout=20_000)
    row = page.locator("#event-results tbody tr", has_text="first visit")
    expect(row.locator("td").first).to_have_text("2026-07-15 08:00:00")  # 12:00 UTC, EDT
    context.close()
