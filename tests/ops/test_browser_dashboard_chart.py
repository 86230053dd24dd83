"""The store-size chart on a time axis, Debian chromium through Playwright:
the chart used categories (three samples of one minute read the same label, and a day's gap
took as much room as a second's) and a smoothed line that dipped below the lowest sample."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from memoryadmin.agents.models import StoreSample
from tests.core.test_browser import browser_page  # noqa: F401  (the chromium fixture)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_store_size_is_drawn_on_a_time_axis_without_smoothing(
    live_server,
    transactional_db,
    carol,
    agent_with_memories,
    browser_page,  # noqa: F811 - the fixture imported above
) -> None:
    from playwright.sync_api import expect

    agent = agent_with_memories(3)
    StoreSample.objects.filter(agent=agent).delete()
    start = datetime(2026, 11, 2, 12, 0, 5, tzinfo=UTC)
    times = [start, start + timedelta(seconds=20), start + timedelta(seconds=40)]
    times.append(start + timedelta(days=1))
    for when, count in zip(times, [40, 12, 40, 38], strict=True):
        StoreSample.objects.create(agent=agent, count=count, taken_at=when)
    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/?next=/%3Fagent%3D{agent.slug}")
    page.fill("#id_username", "carol")
    page.fill("#id_password", "password")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/(\?agent=.*)?$"))
    canvas = page.locator('#agent-chart canvas[data-chart="samples"]')
    expect(canvas).to_be_visible()
    page.wait_for_function(
        "window.Chart && Chart.getChart(document.querySelector("
        "'#agent-chart canvas[data-chart=\"samples\"]'))"
    )
    chart = page.evaluate(
        """(sel) => {
        const c = Chart.getChart(document.querySelector(sel));
        const ds = c.data.datasets[0];
        return {type: c.scales.x.type, tension: ds.tension, xs: ds.data.map(p => p.x),
                ticks: c.scales.x.ticks.map(t => t.label)};
    }""",
        '#agent-chart canvas[data-chart="samples"]',
    )
    assert chart["type"] == "linear" and chart["tension"] == 0
    assert chart["xs"] == [int(t.timestamp() * 1000) for t in times]  # at their real times
    assert len(set(chart["ticks"])) == len(chart["ticks"])  # no two ticks read the same
