"""A partly applied pass says the same figures on its page, in the API and on the dashboard:
what it applied (the operations it counts now), with the planned figures under ``planned_*``."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.memories.services.memories import memory_edit
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.review import operation_set_excluded, pass_approve
from tests.api.api_helpers import api_factory
from tests.proposals.test_pass_counts import META, TEXTS, run_pass, text_of

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
    assert "1 excluded, 1 in conflict" in html

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


def test_promoted_is_the_page_s_figure_in_the_dry_run_and_the_created_pass(
    client: Client, alice, bob, carol, agent_with_memories, django_capture_on_commit_callbacks
):
    """One promote operation and one merge written straight to the curated tier (the engine's
    ``promoted`` total is 2): the pass page says "1 memory promoted", and so do the dry run
    (API, its page) and the POST /passes response; the curated merge is `merged_to_curated`."""
    from django_q.conf import Conf

    from memoryadmin import tasks
    from memoryadmin.api.actions.passes import _created

    meta = [dict(m) for m in META]
    meta[0] = meta[16] = {"importance": 0.9}  # a duplicate pair of important memories
    agent = agent_with_memories(TEXTS, meta, policy={"max_loss_fraction": 0.5})
    api = api_factory(alice, bob, carol)("reviewer")
    old_sync = Conf.SYNC
    Conf.SYNC = False  # queued, run below as the worker would
    try:
        d = api.post("/passes", {"agent": agent.slug, "dry_run": True}).json()
    finally:
        Conf.SYNC = old_sync
    tasks.run_dry_run(d["dry_run_id"])
    dry = api.get(f"/dry-runs/{d['dry_run_id']}").json()["result"]
    assert (dry["promoted"], dry["merged_to_curated"]) == (1, 1), dry
    client.force_login(bob)
    dry_page = client.get(reverse("dry_run_detail", args=[d["dry_run_id"]])).content.decode()
    assert text_of(dry_page, "promoted").startswith("1 ")

    with django_capture_on_commit_callbacks(execute=True):
        created = api_factory(alice, bob, carol)("admin").post("/passes", {"agent": agent.slug})
    run = Pass.objects.get(pk=created.json()["pass_id"])
    assert run.status == "proposed" and run.promoted == 2  # the engine's total
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert text_of(html, "count-promote") == "1 promote operation · 1 memory promoted"
    # the figures POST /passes and MCP memory_consolidate answer with, once the pass is planned
    out = _created(run, "agent")
    assert (out.promoted, out.merged_to_curated) == (1, 1)


def test_the_waiting_part_of_a_safe_split_measures_its_own_recall(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    """The waiting part's recall is measured from the store its applied part leaves (before)
    to that store with its own operations applied (after), not copied from the applied part."""
    from consolidation import MemoryRecord
    from memoryadmin.agents.models import ProbeQuery
    from memoryadmin.agents.selectors.probes import read_records, recall_check
    from memoryadmin.agents.services.agents import agent_update
    from memoryadmin.core import stores
    from memoryadmin.proposals.selectors.evaluation import to_engine_operation
    from memoryadmin.proposals.services.review import pass_reject
    from memoryadmin.tasks import scheduled_pass
    from tests.conftest import DISTINCT_FACTS as F
    from tests.conftest import days_ago, embed_texts

    agent = agent_with_memories(F[:16] + [F[0]])  # one merge, rejected: it will wait
    ProbeQuery.objects.create(agent=agent, question="Where did Caroline move?", answer="Boston")
    ProbeQuery.objects.create(agent=agent, question="What did Melanie run?", answer="race")
    first = run_pass(agent, django_capture_on_commit_callbacks)
    pass_reject(run=first, user=bob, note="too aggressive")
    stores.get_store(agent).upsert(  # a new duplicate: its merge is safe and applies
        [MemoryRecord("dup-of-1", F[1], embed_texts([F[1]])[0], {"created_at": days_ago(1)})]
    )
    agent_update(agent=agent, auto_apply="safe")
    with django_capture_on_commit_callbacks(execute=True):
        scheduled_pass(agent.pk)
    applied = Pass.objects.filter(agent=agent, trigger="schedule").get()
    waiting = Pass.objects.filter(agent=agent, trigger="policy").get()
    assert applied.status == "applied" and waiting.status == "proposed"

    records = read_records(agent)  # the store the applied part left (18 → 17)
    ops = [to_engine_operation(op) for op in waiting.operations.prefetch_related("sources")]
    own = recall_check(agent, records, ops, agent.get_policy())
    rc = waiting.recall
    assert rc["context_chars_before"] == own["context_chars_before"]
    assert rc["context_chars_after"] == own["context_chars_after"]
    assert rc["answer_recall_before"] == own["answer_recall_before"]
    # not the applied part's figures: its before is the store with the new duplicate
    assert rc["context_chars_before"] != applied.recall["context_chars_before"]
