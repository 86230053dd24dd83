"""Each figure of a pass has one source and says the same wherever it shows: the loss line and
the guard's sentence of a settled pass, the lost content's tense, the audit list's Reason
column and the dashboard's convergence under a failed pass."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.memories.services.memories import memory_edit
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_fail, pass_request
from memoryadmin.proposals.services.review import pass_approve, pass_reject
from tests.conftest import DISTINCT_FACTS
from tests.proposals.test_pass_counts import run_pass, text_of

pytestmark = pytest.mark.django_db

F = DISTINCT_FACTS
DUPES = F[:16] + [F[0], F[1]]  # two exact-duplicate merges, 4 of 18 originals removed


def test_a_partially_applied_pass_counts_the_same_removals_in_the_loss_line_and_the_guard(
    client: Client, bob, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert "(4 removed)" in run.guard_reason
    first = run.operations.order_by("index").first()
    memory_edit(agent=agent, memory_id=first.source_ids[0], document="Changed meanwhile.", user=bob)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "partially_applied"
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert text_of(html, "loss-arithmetic") == "= 2 originals removed ÷ 18 originals before"
    verdict = re.search(r'id="guard-verdict">(.*?)</p>', html, re.S).group(1)
    assert "(2 removed)" in verdict and "(4 removed)" not in verdict


def test_an_applied_pass_says_what_it_lost_not_what_it_would_lose(
    client: Client, bob, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(
        F[:6], [{}] * 5 + [{"importance": 0.01, "created_at": "2020-01-01"}]
    )
    run = run_pass(agent, django_capture_on_commit_callbacks)
    client.force_login(bob)
    if not run.operations.filter(lost_sentences__gt=0).exists():
        pytest.skip("the plan loses nothing here")
    assert (
        "This pass would lose" in client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    )
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "This pass lost" in html and "would lose" not in html


def test_a_rejected_pass_gives_no_guard_verdict_as_its_reason_in_the_audit_list(
    client: Client, bob, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    pass_reject(run=run, user=bob, note="not now")
    client.force_login(bob)
    html = client.get(reverse("audit")).content.decode()
    row = re.search(rf'href="/passes/{run.pk}/">#{run.pk}</a>(.*?)</tr>', html, re.S)
    assert row, html[:2000]
    assert "not now" in row.group(1) and "Loss guard passed" not in row.group(1)


def test_the_dashboard_does_not_say_converged_under_a_failed_pass(
    client: Client, bob, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(F[:4])
    run_pass(agent, django_capture_on_commit_callbacks)  # nothing to do: converged
    client.force_login(bob)
    assert text_of(client.get(reverse("dashboard")).content.decode(), "convergence") == "converged"
    failed = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR)
    pass_fail(run=failed, error="Cannot reach the Chroma server (test)")
    html = client.get(reverse("dashboard")).content.decode()
    assert text_of(html, "convergence") == "not known: the last pass failed"


def test_promoted_is_the_page_s_promoted_memories_in_the_api_and_mcp(
    client: Client, alice, bob, carol, bare_agent
):
    """A pass of one promote and two merges, one of them written straight to the curated tier:
    the page says "1 promote operation · 1 memory promoted"; the API's and MCP's `promoted` is
    that 1 (not the engine's total of 2), the curated merge is `merged_to_curated`."""
    from memoryadmin.api.present.passes import pass_detail_out
    from memoryadmin.proposals.models import Operation
    from memoryadmin.proposals.services.evaluation import pass_store_figures
    from tests.api.api_helpers import api_factory
    from tests.proposals.make import _source, make_proposal

    run = make_proposal(bare_agent(), merges=2)
    first = run.operations.get(index=0)
    Operation.objects.filter(pk=first.pk).update(scores={**first.scores, "promoted": True})
    promote = Operation.objects.create(
        run=run, index=2, kind="promote", rule="durable", reason="durable", source_ids=["q0"]
    )
    _source(promote, 0, "q0", "The user prefers tea", False)
    pass_store_figures(run=run)
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert text_of(html, "count-promote") == "1 promote operation · 1 memory promoted"
    api = api_factory(alice, bob, carol)("viewer").get(f"/passes/{run.pk}").json()
    mcp = pass_detail_out(Pass.objects.get(pk=run.pk), page=1).model_dump()  # MCP get_pass
    for out in (api, mcp):
        assert out["counts"]["promote"] == "1 promote operation · 1 memory promoted"
        assert (out["promoted"], out["merged_to_curated"]) == (1, 1)


def test_the_dashboard_does_not_say_converged_after_an_undo(
    client: Client, alice, agent_with_memories, django_capture_on_commit_callbacks
):
    """A fresh operator approved a pass, rolled it back and read "converged": the store is as
    unconsolidated as before, so nothing is claimed until a pass is applied again."""
    from memoryadmin.proposals.services.rollback import pass_rollback_request
    from tests.conftest import DISTINCT_FACTS

    agent = agent_with_memories(DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2])
    run = run_pass(agent, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=alice)
    client.force_login(alice)
    assert text_of(client.get(reverse("dashboard")).content.decode(), "convergence") == "converged"
    with django_capture_on_commit_callbacks(execute=True):
        pass_rollback_request(run=run, user=alice)
    run.refresh_from_db()
    assert run.status == "rolled_back"
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert 'data-testid="convergence">converged' not in dashboard
