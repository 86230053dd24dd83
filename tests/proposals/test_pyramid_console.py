"""The memory pyramid in the console: a pass with ``summarize`` on proposes summarize operations,
applies them (one summary memory per cluster in the ``summary`` layer, nothing removed), shows
them on the proposal and the agent page, keeps them stable across passes, and rolls back.

Real Chroma (in-process) and the real offline embedder; django-q2 sync.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from memoryadmin.core import stores
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.evaluation import pass_evaluate
from memoryadmin.proposals.services.review import pass_approve
from memoryadmin.proposals.services.rollback import pass_rollback_request
from tests.conftest import DISTINCT_FACTS
from tests.proposals.test_services_passes import run_pass

pytestmark = pytest.mark.django_db

REX = [
    "Alice adopted a beagle named Rex in March.",
    "Rex the beagle loves long walks by the river.",
    "Alice takes Rex the beagle to the vet every spring.",
    "Rex the beagle learned to fetch the newspaper for Alice.",
]
PYRAMID = {
    "summarize": True,
    "summary_levels": 1,
    "summary_min_cluster": 3,
    "summary_threshold": 0.35,
}


def _agent(agent_with_memories: Any, **policy: Any) -> Any:
    return agent_with_memories(REX + DISTINCT_FACTS[:6], policy={**PYRAMID, **policy})


def _ids(agent: Any) -> set[str]:
    return {r.id for r in stores.get_store(agent).iter_records(include_embeddings=False)}


def _summaries(agent: Any) -> list[Any]:
    live = stores.get_store(agent).iter_records(include_embeddings=False)
    return [r for r in live if r.metadata.get("layer") == "summary"]


def test_a_pass_proposes_a_summary_over_the_topic_and_removes_nothing(
    agent_with_memories, alice, django_capture_on_commit_callbacks
):
    agent = _agent(agent_with_memories)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.PROPOSED
    ops = list(run.operations.filter(kind=Operation.Kind.SUMMARIZE))
    assert len(ops) == 1
    children = {s.memory_id for s in ops[0].sources.all()}
    assert children >= {"mem-000", "mem-001", "mem-002"}
    assert not any(s.removed for s in ops[0].sources.all())
    ev = pass_evaluate(run=run)
    assert ev.entries_after == ev.entries_before + 1  # one summary added, nothing removed


def test_applying_writes_the_summary_and_rollback_takes_it_out(
    agent_with_memories, alice, django_capture_on_commit_callbacks
):
    agent = _agent(agent_with_memories)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    before = _ids(agent)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=alice)
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED
    (summary,) = _summaries(agent)
    assert summary.metadata["summary_level"] == 1
    assert before <= _ids(agent)  # nothing removed

    # the same memories next pass: the summary is stable (no new summarize operation)
    again = run_pass(agent, django_capture_on_commit_callbacks)
    assert not again.operations.filter(kind=Operation.Kind.SUMMARIZE).exists()

    with django_capture_on_commit_callbacks(execute=True):
        pass_rollback_request(run=run, user=alice)
    assert _summaries(agent) == []
    assert before == _ids(agent)


def test_the_proposal_and_the_agent_page_show_the_pyramid(
    agent_with_memories, alice, client, django_capture_on_commit_callbacks
):
    agent = _agent(agent_with_memories)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    client.force_login(alice)
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "summarize" in page.lower()
    assert REX[0] in page  # a child quoted beside the summary
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=alice)
    page = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert "Pyramid" in page
    assert "level 1" in page.lower()


def test_a_summary_detail_lists_its_children(
    agent_with_memories, alice, client, django_capture_on_commit_callbacks
):
    agent = _agent(agent_with_memories)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=alice)
    (summary,) = _summaries(agent)
    client.force_login(alice)
    url = reverse("memory_detail", args=[agent.slug]) + f"?id={summary.id}"
    page = client.get(url).content.decode()
    n = len(summary.metadata["summary_children"])
    assert f"Summarises {n} memories" in page
    assert REX[1] in page
