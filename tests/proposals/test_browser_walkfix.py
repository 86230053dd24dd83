"""Browser checks of the Review tab's paging and of a bulk exclude (Debian chromium through
Playwright): the page a reviewer is on is in the URL (reload and Back keep it), and excluding
every prune updates the Operations header and the Summary in place, the Prune row kept at 0."""

from __future__ import annotations

import re

import pytest

from tests.core.test_browser import browser_page  # noqa: F401  (the chromium fixture)
from tests.proposals.make import make_proposal

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _login(page, live_server, run) -> None:
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{run.pk}/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/$"))


def test_the_review_page_is_in_the_url_and_a_bulk_exclude_updates_in_place(
    live_server,
    transactional_db,
    bob,
    bare_agent,
    browser_page,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    run = make_proposal(
        bare_agent(), entries_before=400, merges=2, prunes=60, max_loss_fraction=0.9
    )
    page = browser_page
    _login(page, live_server, run)
    pager = page.locator("#review-panel .pager").last
    expect(pager).to_contain_text("page 1 of 3")
    pager.get_by_text("next →").click()
    expect(page.locator("#review-panel .pager").last).to_contain_text("page 2 of 3")
    assert re.search(r"[?&]page=2\b", page.url), page.url  # pushed into the address bar
    page.reload()
    expect(page.locator("#review-panel .pager").last).to_contain_text("page 2 of 3")
    page.go_back()
    expect(page.locator("#review-panel .pager").last).to_contain_text("page 1 of 3")

    page.evaluate("window.__noReload = 'still here'")
    page.select_option("#bulk-form select[name=scope]", "rule")
    page.select_option("#bulk-form select[name=group]", "prune:")
    page.click('#bulk-form [data-bulk="exclude"]')
    header = page.locator('[data-testid="group-prune"]')
    expect(header).to_have_text("0 prune operations · 0 memories pruned · 60 excluded")
    expect(page.locator('[data-testid="count-prune"]')).to_have_text(
        "0 prune operations · 0 memories pruned"
    )
    expect(page.locator('[data-testid="count-prune-excluded"]')).to_have_text("· 60 excluded")
    expect(page.locator('[data-testid="count-merge"]')).to_have_text(
        "2 merge operations · 4 memories merged into 2"
    )
    assert page.evaluate("window.__noReload") == "still here"  # no page load happened
