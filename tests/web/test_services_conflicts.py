"""Conflict items end to end (issue 9, item 7): a pass whose only operations are conflicts is
proposed for review, never settled as "nothing to do", never auto-approved, and shows both
memories on the pass page; applying a pass never touches a conflict."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memoryadmin.console import services
from memoryadmin.console.models import Operation, Pass

pytestmark = pytest.mark.django_db

CONTRADICTION = ["Is allergic to penicillin", "Is not allergic to penicillin"]
SAME_TIME = [{"created_at": "2025-03-01T00:00:00+00:00"}] * 2  # which one is current: unknown


def _run(agent):
    return services.pass_run(run=services.pass_request(agent=agent, trigger="operator"))


@pytest.mark.parametrize("auto_apply", [False, True])
def test_a_pass_with_only_conflicts_waits_for_review(agent_with_memories, auto_apply):
    agent = agent_with_memories(CONTRADICTION, SAME_TIME, auto_apply=auto_apply)
    before = services.agent_census(agent=agent)
    run = _run(agent)
    (op,) = run.operations.all()
    assert op.kind == Operation.Kind.CONFLICT and op.removes == [] and op.rule == "negation"
    assert run.status == Pass.Status.PROPOSED and run.progress_label == "Conflicts to review"
    assert run.loss_fraction == 0.0
    assert not run.events.filter(verb__in=["nothing_to_apply", "approved"]).exists()
    assert services.agent_census(agent=agent) == before


def test_the_pass_page_shows_both_sides_of_a_conflict(agent_with_memories, client, alice):
    agent = agent_with_memories(CONTRADICTION, SAME_TIME)
    run = _run(agent)
    client.force_login(alice)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'data-testid="conflict-note"' in html
    assert html.count('data-testid="conflict-side"') == 2
    for text in CONTRADICTION:
        assert text in html


def test_approving_a_pass_never_applies_its_conflicts(agent_with_memories, bob):
    agent = agent_with_memories(CONTRADICTION, SAME_TIME)
    run = _run(agent)
    before = services.agent_census(agent=agent)
    services.pass_approve(run=run, user=bob)
    run = services.pass_apply(run=run)
    assert run.status == Pass.Status.APPLIED
    assert run.operations.get().status == Operation.Status.PENDING
    assert services.agent_census(agent=agent) == before
