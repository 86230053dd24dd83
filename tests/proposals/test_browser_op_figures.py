"""Browser: the Review tab's per-operation lost words add up to the tab's total, before and
after excluding, in place, the operation the shared words are counted under."""

from __future__ import annotations

import re

import pytest

from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run
from tests.core.test_browser import browser_page  # noqa: F401  (the chromium fixture)
from tests.proposals.test_op_figures_agree import META, TEXTS

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SUM_JS = """() => {
  let n = 0;
  for (const card of document.querySelectorAll('article.rv-op:not(.excluded)')) {
    for (const li of card.querySelectorAll('.reasons li')) {
      const m = li.textContent.match(/loses (\\d+) content words?:/);
      if (m) n += Number(m[1]);
    }
  }
  const total = (document.querySelector('#review-panel').textContent
    .match(/\\((\\d+) content words?/) || [0, 0])[1];
  return [n, Number(total)];
}"""


def test_it_shows_per_operation_words_that_add_up_to_the_total(
    live_server,
    transactional_db,
    bob,
    agent_with_memories,
    browser_page,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    agent = agent_with_memories(
        TEXTS, META, policy={"max_loss_fraction": 0.5, "max_lost_content_words": None}
    )
    run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, user=bob)
    run.refresh_from_db()
    if run.status == Pass.Status.QUEUED:
        run = pass_run(run=run)
    first = run.operations.filter(kind="prune").order_by("index").first()

    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{run.pk}/%3Frisk%3Dall")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{run.pk}/"))
    expect(page.locator(f"#rv-{first.pk}")).to_be_visible()
    cards, total = page.evaluate(SUM_JS)
    assert cards == total > 0
    assert page.get_by_text(f"counted under #{first.index}").count() >= 2

    page.locator(f'#rv-{first.pk} [data-review-action="exclude"]').click()
    expect(page.locator(f"#rv-{first.pk}")).to_have_class(re.compile("excluded"))
    after_cards, after_total = page.evaluate(SUM_JS)
    assert after_cards == after_total < total
    assert page.get_by_text(f"counted under #{first.index}").count() == 0
