"""A reviewer decides a conflict in the browser, Debian chromium through
Playwright: "Keep A" on the Review tab's card updates both cards, the loss figure and the approve
line in place (htmx, no page load, no CSP violation); approving archives B and keeps A."""

from __future__ import annotations

import re

import pytest

from memoryadmin.core import stores
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run
from tests.conftest import DISTINCT_FACTS
from tests.core.test_browser import CSP_LISTENER, browser_page  # noqa: F401  (the chromium fixture)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CONTRADICTION = ["Is allergic to penicillin", "Is not allergic to penicillin"]
SAME_TIME = [{"created_at": "2025-03-01T00:00:00+00:00"}] * 2


def test_keep_a_in_place_then_approve_archives_b(
    live_server,
    transactional_db,
    bob,
    agent_with_memories,
    browser_page,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    agent = agent_with_memories(CONTRADICTION + DISTINCT_FACTS[:6], SAME_TIME + [{}] * 6)
    run = pass_run(run=pass_request(agent=agent, trigger="operator", user=bob))
    assert run.status == Pass.Status.PROPOSED
    op = run.operations.get(kind=Operation.Kind.CONFLICT)
    a_id, b_id = op.source_ids

    page = browser_page
    page.add_init_script(CSP_LISTENER)
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{run.pk}/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/$"))

    expect(page.locator("#approve-line")).to_contain_text("1 undecided conflict stays")
    expect(page.locator("#loss-fraction")).to_have_text("0.0%")
    page.evaluate("window.__noReload = 'still here'")
    page.locator(f'#rv-{op.pk} [data-conflict-keep="a"]').click()
    expect(page.locator("#loss-fraction")).to_have_text("12.5%")
    expect(page.locator(f'#rv-{op.pk} [data-testid="conflict"]')).to_have_attribute(
        "data-decided", "a"
    )
    expect(page.locator(f'#op-{op.pk} [data-testid="conflict"]')).to_have_attribute(
        "data-decided", "a"
    )
    expect(page.locator(f'#op-{op.pk} [data-side="b"]')).to_contain_text("removed on apply")
    expect(page.locator("#approve-line")).not_to_contain_text("undecided")
    assert page.evaluate("window.__noReload") == "still here"  # no page load happened
    assert page.evaluate("window.__csp") == []

    page.click("#approve-btn")
    expect(page.locator('.pagehead [data-status="applied"]')).to_be_visible()
    ids = {r.id for p in stores.get_store(agent).iter_pages(page_size=100) for r in p}
    assert a_id in ids and b_id not in ids
    assert ArchivedMemory.objects.filter(run=run, memory_id=b_id).exists()
