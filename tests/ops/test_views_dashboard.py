"""Dashboard, login and the base layout."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.agents.models import StoreSample
from memoryadmin.proposals.models import Pass
from tests.conftest import XSS

pytestmark = pytest.mark.django_db


def test_it_shows_the_login_page(client: Client) -> None:
    r = client.get(reverse("login"))
    assert r.status_code == 200
    assert b'name="username"' in r.content


def test_it_logs_in_and_lands_on_dashboard(client: Client, carol) -> None:
    r = client.post(reverse("login"), {"username": "carol", "password": "password"})
    assert r.status_code == 302
    assert r["Location"] == reverse("dashboard")


def test_it_lists_agents_with_count_pending_and_next_run(
    client: Client, carol, agent_with_memories
) -> None:
    agent = agent_with_memories(3, name="Support bot", schedule_cron="30 4 * * *")
    Pass.objects.create(
        agent=agent, trigger="operator", status="proposed", figures={"loss_fraction": 0.125}
    )
    client.force_login(carol)
    r = client.get(reverse("dashboard"))
    assert r.status_code == 200
    html = r.content.decode()
    assert "Support bot" in html
    row = r.context["rows"][0]
    assert row.store.count == 3
    assert row.pending == 1
    assert row.last_pass.loss_fraction == 0.125
    assert row.next_run is not None and (row.next_run.hour, row.next_run.minute) == (4, 30)
    assert "12.5%" in html
    assert "htmx" in html and 'hx-headers=\'{"X-CSRFToken"' in html


def test_it_shows_unavailable_when_chroma_is_down(
    bare_agent, client: Client, carol, settings
) -> None:
    from memoryadmin.core import stores

    bare_agent(name="Orphan")
    settings.CHROMA_MODE = "http"
    settings.CHROMA_HOST, settings.CHROMA_PORT = (
        "127.0.0.1",
        9,
    )  # nothing listens on the discard port
    stores.reset_client_cache()
    client.force_login(carol)
    r = client.get(reverse("dashboard"))
    assert r.status_code == 200
    assert b"unavailable" in r.content
    assert r.context["rows"][0].store.error


def test_during_an_outage_the_dashboard_says_the_store_is_unreachable_not_old_counts(
    agent_with_memories, client: Client, carol, settings
) -> None:
    from memoryadmin.core import stores

    agent = agent_with_memories(3, name="Support bot")
    StoreSample.objects.create(agent=agent, count=3)
    client.force_login(carol)
    assert b'data-testid="store-down"' not in client.get(reverse("dashboard")).content
    settings.CHROMA_MODE, settings.CHROMA_HOST, settings.CHROMA_PORT = "http", "127.0.0.1", 9
    stores.reset_client_cache()
    html = client.get(reverse("dashboard")).content.decode()
    assert 'data-testid="store-down"' in html and "unreachable" in html
    assert 'data-testid="store-unreachable"' in html
    assert 'data-testid="last-known">last known 3<' in html
    assert f'href="{reverse("memory_list", args=[agent.slug])}">3<' not in html


def test_it_shows_unavailable_for_a_missing_collection(bare_agent, client: Client, carol) -> None:
    bare_agent(name="Orphan")
    client.force_login(carol)
    r = client.get(reverse("dashboard"))
    assert r.status_code == 200
    assert b"unavailable" in r.content


def test_it_returns_the_chart_fragment_for_htmx(client: Client, carol, agent_with_memories) -> None:
    agent = agent_with_memories(1)
    StoreSample.objects.create(agent=agent, count=7)
    client.force_login(carol)
    r = client.get(
        reverse("dashboard"),
        {"agent": agent.slug},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="agent-chart",
    )
    assert r.status_code == 200
    html = r.content.decode()
    assert html.lstrip().startswith('<section class="card" id="agent-chart"')
    assert "<html" not in html
    assert 'id="chart-data"' in html and '"count": 7' in html


def test_it_serves_the_chart_data_as_json_script(
    client: Client, carol, agent_with_memories
) -> None:
    agent = agent_with_memories(1)
    Pass.objects.create(
        agent=agent, trigger="operator", status="applied", figures={"loss_fraction": 0.2}
    )
    client.force_login(carol)
    r = client.get(reverse("dashboard"), {"agent": agent.slug})
    assert r.context["chart"]["passes"][0]["loss"] == 0.2
    assert b'<script id="chart-data" type="application/json">' in r.content


def test_it_escapes_agent_names(client: Client, carol, agent_with_memories) -> None:
    agent_with_memories(1, name=XSS)
    client.force_login(carol)
    r = client.get(reverse("dashboard"))
    assert XSS.encode() not in r.content
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in r.content


def test_the_last_pass_age_counts_from_when_it_finished(
    client: Client, carol, agent_with_memories
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    agent = agent_with_memories(2, name="Aged bot")
    run = Pass.objects.create(agent=agent, trigger="operator", status="applied")
    Pass.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(days=3), finished_at=timezone.now()
    )
    client.force_login(carol)
    html = client.get(reverse("dashboard")).content.decode()
    assert 'title="finished">0\xa0minutes ago' in html and "3\xa0days" not in html


def test_an_admin_is_linked_to_the_raw_records_and_may_read_them_not_change_them(
    client: Client, alice, carol, agent_with_memories
) -> None:
    agent = agent_with_memories(1, name="Support bot")
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    client.force_login(alice)
    html = client.get(reverse("dashboard")).content.decode()
    assert 'data-testid="admin-link"' in html
    index = client.get(reverse("admin:index")).content.decode()
    assert "permission to view or edit anything" not in index and "Agents" in index
    change = reverse("admin:console_agent_change", args=[agent.pk])
    r = client.get(change)
    assert r.status_code == 200 and "Support bot" in r.content.decode()
    assert client.post(change, {"name": "Renamed"}).status_code == 403
    client.force_login(carol)  # a viewer sees no link
    assert 'data-testid="admin-link"' not in client.get(reverse("dashboard")).content.decode()


def test_it_says_what_the_loss_figure_is(client: Client, carol, bare_agent) -> None:
    """The dashboard's "Loss 18.7%" beside "630 memories" read as "18.7 % fewer" (the net
    drop was 14.8 %): the dashboard says what the figure is, as the pass page does."""
    agent = bare_agent(name="Support bot")
    Pass.objects.create(
        agent=agent, trigger="operator", status="proposed", figures={"loss_fraction": 0.187}
    )
    client.force_login(carol)
    html = client.get(reverse("dashboard")).content.decode()
    assert ">Loss fraction (last pass)</th>" in html
    assert (
        "the originals the last pass removes (merged, pruned or superseded) ÷ the originals" in html
    )
    assert "not the drop in memories" in html
