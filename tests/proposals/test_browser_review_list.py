"""The Review list in a real browser, Debian chromium through
Playwright:

- the list keeps the operations it held when the page loaded while the reviewer works through
  it (an exclusion re-measures the others, and 13 prunes once left a 69-operation list
  silently), marks those that moved below the line and says how many, until a reload;
- a conflict decided "keep both" stays in the list, shown decided, after a reload;
- deciding from "All operations" while the Review list shows other operations logs no htmx
  ``oobErrorNoTarget``.
"""

from __future__ import annotations

import re

import pytest

from memoryadmin.agents.models import Agent
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run
from tests.conftest import DISTINCT_FACTS
from tests.core.test_browser import CSP_LISTENER, browser_page  # noqa: F401  (the chromium fixture)
from tests.proposals.make import make_proposal

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CONTRADICTION = ["Is allergic to penicillin", "Is not allergic to penicillin"]
SAME_TIME = [{"created_at": "2025-03-01T00:00:00+00:00"}] * 2


def _login(page, live_server, run: Pass) -> None:
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{run.pk}/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/$"))


def test_the_list_holds_what_it_showed_until_a_reload(
    live_server,
    transactional_db,
    bob,
    unique_name,
    browser_page,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    agent = Agent.objects.create(
        name="Support bot", slug=unique_name("a"), collection_name=unique_name("c")
    )
    run = make_proposal(agent, entries_before=40, merges=0, prunes=4)
    run.operations.update(risk=0.6)
    ops = list(run.operations.order_by("index"))
    page = browser_page
    _login(page, live_server, run)
    cards = page.locator("#review-list article.rv-op")
    expect(cards).to_have_count(4)
    page.evaluate("window.__noReload = 'still here'")
    page.locator(f'#rv-{ops[0].pk} [data-review-action="exclude"]').click()
    expect(page.locator(f'#rv-{ops[0].pk} [data-testid="rv-excluded"]')).to_be_visible()
    # What the exclusion's re-measuring can do: two others fall below the line.
    run.operations.filter(pk__in=[ops[1].pk, ops[2].pk]).update(risk=0.1)
    page.locator(f'#rv-{ops[3].pk} [data-review-action="exclude"]').click()
    expect(page.locator(f'#rv-{ops[3].pk} [data-testid="rv-excluded"]')).to_be_visible()
    expect(cards).to_have_count(4)
    expect(page.locator("#review-moves")).to_contain_text(
        "2 operations moved below the risk line since you opened this list"
    )
    expect(page.locator(f'#rv-{ops[1].pk} [data-testid="rv-moved"]')).to_be_visible()
    assert page.evaluate("window.__noReload") == "still here"
    page.reload()
    expect(cards).to_have_count(2)
    expect(page.locator("#review-moves")).to_have_count(0)


def test_keep_both_stays_in_the_list_and_no_oob_swap_misses(
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
    page = browser_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if "oobErrorNoTarget" in m.text else None)
    # htmx logs "htmx:oobErrorNoTarget, #…" for an out-of-band element with no target
    page.add_init_script(CSP_LISTENER)
    _login(page, live_server, run)
    page.locator(f'#rv-{op.pk} [data-conflict-keep="both"]').click()
    expect(page.locator(f'#rv-{op.pk} [data-testid="conflict"]')).to_have_attribute(
        "data-decided", "both"
    )
    page.reload()
    card = page.locator(f'#review-list #rv-{op.pk} [data-testid="conflict"]')
    expect(card).to_have_attribute("data-decided", "both")
    # The Review list filtered to merges holds no card of the conflict; deciding it from "All
    # operations" must send no card out of band, nor the label of a group the page lacks
    # (keep A makes it a reconcile: the page has no reconcile group).
    page.select_option("#rv-kind", "merge")
    expect(page.locator(f"#rv-{op.pk}")).to_have_count(0)
    if page.locator("#ops-conflict[open]").count() == 0:  # the group opens on a click
        page.locator("#ops-conflict > summary").click()
    page.locator(f'#op-{op.pk} [data-conflict-keep="a"]').click()
    expect(page.locator(f'#op-{op.pk} [data-testid="conflict"]')).to_have_attribute(
        "data-decided", "a"
    )
    assert errors == [], errors
    assert page.evaluate("window.__csp") == []
