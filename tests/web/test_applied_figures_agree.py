"""A partly applied pass says the same figures on its page, in the API and on the dashboard:
what it applied (the operations it counts now), with the planned figures under ``planned_*``."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.console.models import Pass
from memoryadmin.console.services.memories import memory_edit
from memoryadmin.console.services.review import operation_set_excluded, pass_approve
from tests.web.test_pass_counts import META, TEXTS, run_pass, text_of

from .api_helpers import api_factory

pytestmark = pytest.mark.django_db


def test_a_partly_applied_pass_shows_the_applied_figures_on_page_api_and_dashboard(
    client: Client, alice, bob, carol, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(TEXTS, META, policy={"max_loss_fraction": 0.5})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == "proposed" and "(5 removed)" in run.guard_reason  # 18 → 15 planned
    prune = run.operations.get(kind="prune")
    operation_set_excluded(operation=prune, excluded=True, user=bob)
    merge = run.operations.filter(kind="merge").order_by("index").first()
    memory_edit(agent=agent, memory_id=merge.source_ids[0], document="Changed meanwhile.", user=bob)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=Pass.objects.get(pk=run.pk), user=bob)
    run.refresh_from_db()
    assert run.status == "partially_applied"

    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    # the page: one merge of 2 and the promote applied, the prune excluded, a merge in conflict
    assert text_of(html, "entries") == "18 → 17"
    assert 'id="loss-fraction">11.1%' in html  # 2 of 18
    assert "2 excluded or in conflict" in html

    api = api_factory(alice, bob, carol)("viewer").get(f"/passes/{run.pk}").json()
    assert (api["entries_before"], api["entries_after"], api["merged"]) == (18, 17, 2)
    assert api["loss_fraction"] == pytest.approx(2 / 18)
    assert "(2 removed)" in api["guard_reason"] and "(5 removed)" not in api["guard_reason"]
    assert api["uncounted_operations"] == 2 and api["excluded_operations"] == 1
    # the figures approved (planned, less the excluded prune) stay, under names that say so
    assert api["planned_entries_after"] == 16
    assert api["planned_loss_fraction"] == pytest.approx(4 / 18)
    assert "(4 removed)" in api["planned_guard_reason"]

    dashboard = client.get(reverse("dashboard")).content.decode()
    assert text_of(dashboard, "last-loss") == "11.1%"
    chart = re.search(r'"loss": ([0-9.]+)', client.get(reverse("dashboard")).content.decode())
    if chart:  # the chart's series, when the dashboard embeds it
        assert float(chart.group(1)) == pytest.approx(2 / 18, abs=1e-4)
