"""Tasks end to end in django-q2 sync mode against a real (in-process) Chroma."""

from __future__ import annotations

import pytest
from django_q.models import Task

from memoryadmin import tasks
from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import pass_approve
from tests.conftest import DISTINCT_FACTS

pytestmark = pytest.mark.django_db

DUPES = DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2]


def test_run_and_apply_tasks_go_through_django_q(
    agent_with_memories, alice, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger="operator", user=alice)  # an admin's Run now
    run.refresh_from_db()
    assert run.status == "proposed"
    planned = Task.objects.get(name=f"run_pass:{run.pk}")
    assert planned.success and planned.result == f"pass #{run.pk}: proposed"

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "applied"
    assert Task.objects.get(name=f"apply_pass:{run.pk}").result == f"pass #{run.pk}: applied"
    assert agent_census(agent=agent)["store"]["count"] == 16


def test_tasks_are_safe_to_run_twice_and_with_unknown_ids(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger="operator")
    assert tasks.run_pass(run.pk) == f"pass #{run.pk}: proposed"
    assert Pass.objects.get(pk=run.pk).operations.count() == 2
    assert tasks.apply_pass(run.pk) == f"pass #{run.pk}: proposed"  # not approved: nothing done
    assert "does not exist" in tasks.run_pass(10**9)
    assert "does not exist" in tasks.apply_pass(10**9)


def test_a_task_records_a_failure_on_the_pass_instead_of_raising(agent_with_memories):
    agent = agent_with_memories(3, policy={"max_loss_fraction": 0.2})
    run = pass_request(agent=agent, trigger="operator")
    agent.policy = {"max_loss_fraction": "broken"}
    agent.save()  # a policy corrupted behind the service's back
    assert tasks.run_pass(run.pk) == f"pass #{run.pk}: failed"
    run.refresh_from_db()
    assert "Invalid agent settings" in run.error and "max_loss_fraction" in run.error
