"""Browser review of a real LoCoMo pass, Debian chromium through Playwright.

Import one LoCoMo conversation, run a pass, open the proposal: the Review tab lists the riskiest
operation first with its loss struck through in place; ``x`` excludes the focused operation; a
bulk action excludes every prune and the loss figures change once, in place; approving applies
exactly the operations the approve line announced.
"""

from __future__ import annotations

import re

import pytest

from memoryadmin.agents.services.agents import agent_update
from memoryadmin.memories.services.transfer import locomo_import
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run
from tests.conftest import locomo_path
from tests.core.test_browser import browser_page  # noqa: F401  (the chromium fixture)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

# Loss guard and recall guard opened wide: the first pass over a whole conversation removes most
# of it (windows and covered prunes), and this test is about reviewing it, not about the guard.
# reconciles off: this test reviews merges and prunes (an update the rules settle would head the
# list); a contradiction becomes a conflict, which the reviewer keeps both of below
POLICY = {"max_loss_fraction": 0.95, "min_recall_retention": None, "reconcile": False}


@pytest.fixture
def locomo_pass(transactional_db, bob, unique_name) -> Pass:
    [report] = locomo_import(
        path=locomo_path(), conversations=["conv-30"], collection_prefix=unique_name("lc") + "-"
    )
    agent = agent_update(agent=report_agent(report.agent), policy=POLICY)
    run = pass_request(agent=agent, trigger="operator", user=bob)
    run = pass_run(run=run)
    assert run.status == Pass.Status.PROPOSED, (run.status, run.error, run.guard_reason)
    return run


def report_agent(slug: str):
    from memoryadmin.agents.models import Agent

    return Agent.objects.get(slug=slug)


def test_it_reviews_a_locomo_pass_riskiest_first_in_bulk_and_applies_it(
    live_server,
    locomo_pass,
    browser_page,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    run = locomo_pass
    ops = run.operations
    conflicts = list(ops.filter(kind="conflict").values_list("pk", flat=True))
    riskiest = ops.exclude(kind="conflict").order_by("-risk", "index").first()
    assert riskiest.lost_sentences > 0, "the riskiest operation of this pass loses something"
    assert riskiest.kind == "merge"
    assert ops.filter(kind="prune").count() >= 2

    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{run.pk}/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/$"))

    # Conflicts (risk 1) head the list: the reviewer keeps both of each, in place; decided, they
    # drop below the risk line (seen after a reload)
    for pk in conflicts:
        page.locator(f'#rv-{pk} [data-conflict-keep="both"]').click()
        expect(page.locator(f'#rv-{pk} [data-testid="conflict"]')).to_have_attribute(
            "data-decided", "both"
        )
    page.reload()

    # Review opens first: the riskiest operation heads the list, its loss struck through in place
    expect(page.locator('[data-testid="tab-review"][aria-current="page"]')).to_be_visible()
    first = page.locator("#review-list [data-rv-op]").first
    expect(first).to_have_id(f"rv-{riskiest.pk}")
    expect(first.locator("del.lost").first).to_be_visible()
    expect(first.locator(".reasons li").first).to_be_visible()

    # keyboard: j focuses the first operation, x excludes it (no page load)
    page.evaluate("window.__noReload = 'still here'")
    page.keyboard.press("j")
    expect(first).to_be_focused()
    page.keyboard.press("x")
    expect(page.locator(f"#rv-{riskiest.pk} [data-testid=rv-excluded]")).to_be_visible()
    expect(page.locator(f"#rv-{riskiest.pk}")).to_be_focused()
    riskiest.refresh_from_db()
    assert riskiest.excluded
    page.keyboard.press("?")
    expect(page.locator("#review-keys")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#review-keys")).to_be_hidden()
    # e opens the focused merge's text for editing; i includes it again; x excludes it again
    row = page.locator(f"#rv-{riskiest.pk}")
    page.keyboard.press("e")
    expect(row.locator("details[data-rv-edit] textarea")).to_be_focused()
    row.focus()
    page.keyboard.press("i")
    expect(row.locator("[data-testid=rv-excluded]")).to_have_count(0)
    expect(row).to_be_focused()
    page.keyboard.press("x")
    expect(row.locator("[data-testid=rv-excluded]")).to_be_visible()

    # bulk-exclude every prune: the loss figures are replaced once, in place
    loss_before = page.locator("#loss-fraction").inner_text()
    page.evaluate("""() => {
        window.__lossSwaps = 0;
        new MutationObserver((records) => {
            for (const r of records) for (const n of r.addedNodes)
                if (n.nodeType === 1 && (n.id === 'loss-fraction'
                                         || n.querySelector?.('#loss-fraction')))
                    window.__lossSwaps += 1;
        }).observe(document.body, {childList: true, subtree: true});
    }""")
    # (no query from this thread while a request is in flight: SQLite's shared in-memory test
    # database refuses concurrent access instead of waiting)
    prunes = ops.filter(kind="prune").count()
    page.select_option("#bulk-form select[name=scope]", "rule")
    page.select_option("#bulk-form select[name=group]", "prune:")
    page.click('#bulk-form [data-bulk="exclude"]')
    expect(page.locator("#review-messages")).to_contain_text(f"{prunes} operations excluded.")
    expect(page.locator("#loss-fraction")).not_to_have_text(loss_before)
    assert page.evaluate("window.__lossSwaps") == 1
    assert page.evaluate("window.__noReload") == "still here"
    assert not ops.filter(kind="prune").exclude(status="excluded").exists()

    # the approve line says what is approved; approving applies exactly that
    line = page.locator("#approve-line").inner_text()
    total, excluded = ops.count(), ops.filter(status="excluded").count()
    assert f"{total - excluded:,} of {total:,} operations ({excluded:,} excluded" in line, line
    page.click("#approve-btn")
    expect(page.locator('.pagehead [data-status="applied"]')).to_be_visible(timeout=120_000)
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED
    applied = ops.filter(status=Operation.Status.APPLIED).count()
    assert applied == total - excluded - len(conflicts)  # kept both: nothing to apply
    assert ops.filter(status=Operation.Status.EXCLUDED).count() == excluded
