"""One browser test: Debian chromium through Playwright against the live server.

Log in, open a real proposal with two merges, exclude one merge and see the loss fraction change
without a page load (a marker set on ``window`` before the click survives), approve, and see the
pass applied (django-q2 runs the apply inline in tests).
"""

from __future__ import annotations

import os
import re
import shutil

import pytest

from memoryadmin.memories.services.memories import memory_delete
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from tests.conftest import DISTINCT_FACTS

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser_page(monkeypatch):
    if not shutil.which(CHROMIUM) and os.getenv("CI"):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install -y chromium)")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    # Playwright's sync API runs an event loop in this thread; Django's ORM calls from the test
    # body are still synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            yield page
        finally:
            browser.close()


def test_it_excludes_a_merge_live_then_approves_and_applies(
    live_server, transactional_db, bob, agent_with_memories, browser_page
) -> None:
    from playwright.sync_api import expect

    # 16 distinct facts + two exact-duplicate pairs: two merges removing 4 of 20 originals (20%).
    dup_a, dup_b = "The printer on floor three needs new toner.", "Jon's favourite colour is teal."
    agent = agent_with_memories(
        [*DISTINCT_FACTS[:16], dup_a, dup_a, dup_b, dup_b],
        policy={"prune": False, "promote": False},
    )
    run = pass_request(agent=agent, trigger="operator", user=bob, run_inline=True)
    run.refresh_from_db()
    assert run.status == Pass.Status.PROPOSED, (run.status, run.error, run.guard_reason)
    assert run.operations.filter(kind="merge").count() == 2

    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{run.pk}/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/$"))

    loss = page.locator("#loss-fraction")
    expect(loss).to_have_text("20.0%")
    page.evaluate("window.__noReload = 'still here'")
    page.locator('[data-kind="merge"] [data-action="toggle-exclude"]').first.click()
    expect(loss).to_have_text("10.0%")
    expect(page.locator('[data-kind="merge"].excluded')).to_have_count(1)
    assert page.evaluate("window.__noReload") == "still here"  # no page load happened

    page.click("#approve-btn")
    expect(page.locator('.pagehead [data-status="applied"]')).to_be_visible()
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED
    assert run.operations.filter(status="applied").count() == 1
    assert run.operations.filter(status="excluded").count() == 1


CSP_LISTENER = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " +
                    (e.sourceFile || "") + ":" + e.lineNumber);
});
"""


def test_no_page_breaks_the_content_security_policy(
    live_server, transactional_db, alice, agent_with_memories, browser_page
) -> None:
    """The main pages, the dashboard's Chart.js and htmx swaps run with no CSP violation."""
    from playwright.sync_api import expect

    dup = "Jon's favourite colour is teal."
    agent = agent_with_memories(
        [*DISTINCT_FACTS[:6], dup, dup], policy={"prune": False, "promote": False}
    )
    run = pass_request(agent=agent, trigger="operator", user=alice, run_inline=True)
    page = browser_page
    console_errors: list[str] = []
    page.on(
        "console",
        lambda m: console_errors.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.add_init_script(CSP_LISTENER)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))
    expect(page.locator('#agent-chart canvas[data-chart="samples"]')).to_be_visible()
    page.wait_for_function("document.querySelector('#agent-chart canvas').width > 0")
    urls = [
        "/agents/",
        f"/agents/{agent.slug}/",
        f"/agents/{agent.slug}/memories/",
        f"/agents/{agent.slug}/memory/?id=mem-000",
        f"/agents/{agent.slug}/import/",
        f"/agents/{agent.slug}/archive/",
        f"/passes/{run.pk}/",
        "/audit/",
        "/audit/events/",
        "/agents/new/",
    ]
    for url in urls:
        page.goto(live_server.url + url)
        page.wait_for_load_state("load")
        assert page.evaluate("window.__csp") == [], (url, page.evaluate("window.__csp"))
    # htmx swaps under the policy: a filter change on the audit page swaps the results in place.
    page.goto(f"{live_server.url}/audit/")
    page.evaluate("window.__noReload = 1")
    page.select_option("#id_status", "all")
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.__noReload") == 1 and page.evaluate("window.__csp") == []
    assert console_errors == []


def test_a_stale_csrf_token_shows_a_message_with_a_reload_link(
    live_server, transactional_db, bob, agent_with_memories, browser_page
) -> None:
    from playwright.sync_api import expect

    dup_a, dup_b = "The printer on floor three needs new toner.", "Jon's favourite colour is teal."
    agent = agent_with_memories(
        [*DISTINCT_FACTS[:16], dup_a, dup_a, dup_b, dup_b],
        policy={"prune": False, "promote": False},
    )
    run = pass_request(agent=agent, trigger="operator", user=bob, run_inline=True)
    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{run.pk}/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/$"))
    loss = page.locator("#loss-fraction")
    expect(loss).to_have_text("20.0%")
    # As after logging in again in another tab: the CSRF secret in the cookie is new, so every
    # token this page holds is stale.
    page.context.add_cookies(
        [{"name": "csrftoken", "value": "N3wS3cretFromAnotherTabLogin0000", "url": live_server.url}]
    )
    page.locator('[data-kind="merge"] [data-action="toggle-exclude"]').first.click()
    message = page.locator('#messages [data-testid="csrf-failure"]')
    expect(message).to_be_visible()
    expect(message).to_contain_text("out of date")
    expect(loss).to_have_text("20.0%")  # nothing changed, and the page was not replaced
    expect(page.locator("#approve-btn")).to_be_visible()
    message.locator('[data-testid="reload"]').click()
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/$"))
    page.locator('[data-kind="merge"] [data-action="toggle-exclude"]').first.click()
    expect(loss).to_have_text("10.0%")  # after the reload the same click works


def test_the_api_docs_render_offline_under_the_csp(live_server, carol, browser_page) -> None:
    """/api/v1/docs draws Swagger UI from our own files (no CDN) for a signed-in user: the
    operations are listed and no CSP violation is reported."""
    from playwright.sync_api import expect

    page = browser_page
    outside: list[str] = []
    page.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith(live_server.url) else None,
    )
    page.add_init_script(CSP_LISTENER)
    page.goto(f"{live_server.url}/accounts/login/?next=/api/v1/docs")
    page.fill("#id_username", "carol")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/api/v1/docs$"))
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("memoryadmin API")
    expect(page.locator(".opblock").first).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.__csp") == []
    assert [u for u in outside if not u.startswith("data:")] == []


def test_the_stale_check_loads_after_the_page_and_marks_the_row(
    live_server, transactional_db, alice, bob, agent_with_memories, browser_page
) -> None:
    """The page shows at once; the check against the store follows (htmx) and marks the
    overtaken merge's row in place, with no script error."""
    from playwright.sync_api import expect

    dup_a, dup_b = "The printer on floor three needs new toner.", "Jon's favourite colour is teal."
    agent = agent_with_memories(
        [*DISTINCT_FACTS[:16], dup_a, dup_a, dup_b, dup_b],
        policy={"prune": False, "promote": False},
    )
    run = pass_request(agent=agent, trigger="operator", user=bob, run_inline=True)
    memory_delete(agent=agent, memory_id="mem-017", user=alice)
    overtaken = run.operations.get(sources__memory_id="mem-017")
    page = browser_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{run.pk}/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/$"))
    expect(page.locator("#stale-warning")).to_contain_text("1 operation is affected")
    mark = page.locator(f'#op-{overtaken.pk} [data-testid="stale-op"]')
    expect(mark).to_contain_text("Memory mem-017 no longer exists")
    expect(page.locator('[data-testid="stale-op"]')).to_have_count(1)
    assert errors == []


def test_a_long_proposals_group_loads_its_rows_when_opened(
    live_server, transactional_db, bob, agent_with_memories, browser_page
) -> None:
    """More than ten operations: the groups are collapsed, and opening one loads its rows
    (htmx), each marked when the store has overtaken it (here none of the sources is in it)."""
    from playwright.sync_api import expect

    from tests.proposals.make import make_proposal

    run = make_proposal(agent_with_memories(DISTINCT_FACTS[:3]), merges=12, entries_before=40)
    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{run.pk}/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/$"))
    expect(page.locator("#stale-warning")).to_contain_text("12 operations are affected")
    expect(page.locator('[data-kind="merge"]')).to_have_count(0)
    page.locator("#ops-merge > summary").click()
    expect(page.locator('#ops-merge[open] [data-kind="merge"]')).to_have_count(12)
    expect(page.locator('#ops-merge [data-testid="stale-op"]')).to_have_count(12)
