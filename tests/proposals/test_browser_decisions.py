"""The operator's sequence with auto-apply and standing decisions, Debian chromium through
Playwright: reject a proposal, turn auto-apply to safe, the schedule fires — nothing rejected
is applied; exclude two merges, approve, roll back, run again — both exclusions are listed as
decisions and visibly hold the next pass back; revoke one, run again — its merge is proposed.
"""

from __future__ import annotations

import re

import pytest

from memoryadmin.core import stores
from memoryadmin.proposals.models import Decision, Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.tasks import scheduled_pass
from tests.conftest import DISTINCT_FACTS
from tests.core.test_browser import browser_page  # noqa: F401  (the chromium fixture)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

F = DISTINCT_FACTS
THREE = F[:16] + [F[0], F[1], F[2]]  # three exact-duplicate merges, 19 memories


def merge_pairs(run: Pass) -> set[tuple[str, ...]]:
    return {tuple(sorted(op.source_ids)) for op in run.operations.filter(kind="merge")}


def test_rejections_and_exclusions_are_remembered_and_revocable(
    live_server,
    transactional_db,
    alice,
    agent_with_memories,
    browser_page,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    agent = agent_with_memories(
        THREE, policy={"prune": False, "promote": False, "max_loss_fraction": 0.5}
    )
    first = pass_request(agent=agent, trigger="operator", user=alice, run_inline=True)
    first.refresh_from_db()
    assert first.status == Pass.Status.PROPOSED and len(merge_pairs(first)) == 3
    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/?next=/passes/{first.pk}/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(rf"/passes/{first.pk}/$"))

    # 1. reject the proposal with a note
    page.fill("#reject-note", "too aggressive")
    page.get_by_role("button", name="Reject").click()
    expect(page.locator('.pagehead [data-status="rejected"]')).to_be_visible()

    # 2. auto-apply safe, on the agent's edit form
    page.goto(f"{live_server.url}/agents/{agent.slug}/edit/")
    page.select_option("#id_auto_apply", "safe")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(re.compile(rf"/agents/{agent.slug}/$"))
    expect(page.locator('[data-testid="auto-apply-mode"]')).to_contain_text("safe")

    # 3. the schedule fires: the same plan is not applied, it waits with its reason
    scheduled_pass(agent.pk)
    second = Pass.objects.filter(agent=agent).exclude(pk=first.pk).get()
    assert second.status == Pass.Status.PROPOSED
    assert stores.get_store(agent).count() == 19
    page.goto(f"{live_server.url}/passes/{second.pk}/")
    waiting = page.locator('[data-testid="waiting-reasons"]')
    expect(waiting).to_have_count(3)
    expect(waiting.first).to_contain_text(
        f"rejected before: in pass #{first.pk} by alice: too aggressive"
    )

    # 4. exclude two merges, approve (the third applies), roll back keeping the decisions
    toggles = page.locator('[data-kind="merge"] [data-action="toggle-exclude"]')
    toggles.nth(0).click()
    expect(page.locator('[data-kind="merge"].excluded')).to_have_count(1)
    toggles.nth(1).click()
    expect(page.locator('[data-kind="merge"].excluded')).to_have_count(2)
    page.click("#approve-btn")
    expect(page.locator('.pagehead [data-status="applied"]')).to_be_visible()
    excluded = {tuple(sorted(op.source_ids)) for op in second.operations.filter(status="excluded")}
    assert len(excluded) == 2 and stores.get_store(agent).count() == 18
    page.click("#rollback-link")
    expect(page.locator("#rollback-decisions")).to_contain_text("2 decisions made on this pass")
    expect(page.locator("#rollback-undo-decision")).to_contain_text("recorded as a rejected plan")
    page.click("#rollback-btn")
    expect(page.locator('.pagehead [data-status="rolled_back"]')).to_be_visible()
    assert stores.get_store(agent).count() == 19

    # run again: both exclusions are decisions, and hold the new pass back visibly
    page.goto(f"{live_server.url}/agents/{agent.slug}/")
    page.get_by_role("button", name="Run now").click()
    page.wait_for_url(re.compile(r"/passes/\d+/$"))
    third = Pass.objects.filter(agent=agent).order_by("-pk").first()
    assert not merge_pairs(third) & excluded
    held = page.locator('[data-testid="held-back"] li')
    expect(held).to_have_count(2)
    expect(held.first).to_contain_text("keep apart, set by alice on pass")
    page.goto(f"{live_server.url}/agents/{agent.slug}/decisions/")
    rows = page.locator('#decision-table tr[data-kind="keep_apart"]')
    expect(rows).to_have_count(2)
    expect(rows.locator('[data-testid="held-back-count"]').first).to_have_text("1")
    # the rejection of step 1, and the undo of step 4 (a rollback is a decision too)
    rejected_rows = page.locator('#decision-table tr[data-kind="rejected_plan"]')
    expect(rejected_rows).to_have_count(2)
    expect(rejected_rows.filter(has_text="undone (rolled back)")).to_have_count(1)

    # revoke one, run again: its merge is proposed
    revoked = Decision.objects.filter(agent=agent, kind="keep_apart").order_by("pk").first()
    row = page.locator(f"#decision-{revoked.pk}")
    row.locator('input[name="note"]').fill("they are duplicates after all")
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    row.locator('[data-action="revoke"]').click()
    expect(page.locator(f"#decision-{revoked.pk}")).to_have_count(0)  # not active any more
    assert asked and asked[0].startswith(f"Revoke decision #{revoked.pk} (")  # asked first
    page.goto(f"{live_server.url}/agents/{agent.slug}/")
    page.get_by_role("button", name="Run now").click()
    if page.locator("#run-confirm-btn").count():  # a proposal still waits: replace it
        page.click("#run-confirm-btn")
    page.wait_for_url(re.compile(r"/passes/\d+/$"))
    fourth = Pass.objects.filter(agent=agent).order_by("-pk").first()
    assert fourth.pk != third.pk and tuple(sorted(revoked.memory_ids)) in merge_pairs(fourth)
    expect(page.locator('[data-testid="held-back"] li')).to_have_count(1)
