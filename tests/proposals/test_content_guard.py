"""The content guard beside the loss guard: a merge that drops a code term the store keeps nowhere
else fails it; the proposal page and the API show both verdicts with the same figures;
auto-apply waits for a person; a person who approves past it is recorded."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.core import stores
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import pass_approve
from tests.api.api_helpers import api_factory
from tests.conftest import DISTINCT_FACTS

pytestmark = pytest.mark.django_db

# Near-duplicates the planner merges (the verbatim rules keep ~/cache and /cache apart, not an
# assignment's operator); the merge keeps one wording only and so drops "cache_dir = /var/cache".
ASSIGNMENTS = [
    "In the config the cache path is set with cache_dir = /var/cache on the build host.",
    "In the config the cache path is set with cache_dir := /var/cache on the build host.",
]
TEXTS = DISTINCT_FACTS[:10] + ASSIGNMENTS
DUPES = DISTINCT_FACTS[:10] + [DISTINCT_FACTS[0]]  # an exact duplicate: nothing lost


@pytest.fixture
def api(alice: Any, bob: Any, carol: Any) -> Any:
    return api_factory(alice, bob, carol)("viewer")


def run_pass(agent: Any, capture: Any) -> Pass:
    with capture(execute=True):
        run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR)
    run.refresh_from_db()
    return run


def test_a_merge_that_loses_content_fails_the_content_guard_on_page_and_api(
    client: Client, alice, api, bare_agent
):
    from tests.proposals.make import make_proposal

    run = make_proposal(bare_agent(), merges=1, max_loss_fraction=0.5)
    assert run.status == "proposed" and run.guard_passed  # the loss guard passes
    client.force_login(alice)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "guard passes" in html and "content guard fails" in html
    api = api.get(f"/passes/{run.pk}").json()
    guard = api["content_guard"]
    assert api["guard_passed"] is True and guard["passed"] is False
    assert guard["lost_content_words"] >= 1 and guard["lost_sentences"] >= 1
    words = f"loses {guard['lost_content_words']} content word"
    assert words in guard["reason"] and words in html  # one figure, two places


def test_auto_apply_waits_for_a_person_when_the_content_guard_fails(
    client: Client, alice, api, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(TEXTS, auto_apply="all", policy={"max_loss_fraction": 0.5})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == "proposed" and stores.get_store(agent).count() == 12
    held = run.events.get(verb="auto_apply_held")
    assert "content guard" in held.note

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=alice, note="both forms set the same path here")
    run.refresh_from_db()
    assert run.status == "applied" and stores.get_store(agent).count() == 11
    past = run.events.get(verb="approved_past_content_guard")
    assert past.user == alice and "content word" in past.note
    client.force_login(alice)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'data-testid="content-override"' in html and "Approved past the content guard" in html
    assert api.get(f"/passes/{run.pk}").json()["content_guard"]["overridden"]["by"]


def test_auto_apply_applies_when_both_guards_pass(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES, auto_apply="all")
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == "applied"
    assert not run.events.filter(verb__in=["auto_apply_held", "approved_past_content_guard"])


def test_a_pass_all_holds_whole_still_marks_what_was_rejected_before_and_keeps_the_schedule(
    client: Client, alice, agent_with_memories, django_capture_on_commit_callbacks
):
    """Auto-apply ``all``, a reviewer rejected the plan, and the next pass fails the content
    guard as a whole: every operation waits marked with both reasons ("rejected before …" and
    the content guard), the rejected plan counts what it held back, the Review tab lists them
    one by one, and the waiting pass does not stop the schedule (the next one replaces it)."""
    from memoryadmin.proposals.models import Decision
    from memoryadmin.proposals.services.auto_apply import left_by_auto_apply
    from memoryadmin.proposals.services.review import pass_reject

    agent = agent_with_memories(TEXTS, policy={"max_loss_fraction": 0.5})
    first = run_pass(agent, django_capture_on_commit_callbacks)
    pass_reject(run=first, user=alice, note="keep both cache spellings")
    agent.auto_apply = "all"
    agent.save(update_fields=["auto_apply"])
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == "proposed" and stores.get_store(agent).count() == 12
    assert run.progress_label == "Waiting for review (content guard)"
    ops = list(run.operations.exclude(kind="conflict"))
    assert ops and all(op.scores["waiting"]["codes"] == ["rejected", "content"] for op in ops)
    assert all("keep both cache spellings" in op.scores["waiting"]["reasons"][0] for op in ops)
    assert run.telemetry["auto_apply"]["applied"] == 0
    assert run.events.filter(verb="auto_apply_held").count() == 1
    rejected = Decision.objects.get(agent=agent, kind="rejected_plan")
    assert rejected.held_back == len(ops)
    assert left_by_auto_apply(agent, run)  # the schedule goes on planning
    client.force_login(alice)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "rejected before" in html and "Auto-apply does not apply this pass" in html


def test_with_auto_apply_off_a_replanned_rejected_plan_is_marked_too(
    client: Client, alice, agent_with_memories, django_capture_on_commit_callbacks
):
    """Auto-apply off: everything waits for a person anyway, and what a reviewer rejected
    before still says so on the next pass, counted by the rejected plan."""
    from memoryadmin.proposals.models import Decision
    from memoryadmin.proposals.services.review import pass_reject

    agent = agent_with_memories(TEXTS, policy={"max_loss_fraction": 0.5})
    first = run_pass(agent, django_capture_on_commit_callbacks)
    pass_reject(run=first, user=alice, note="keep both cache spellings")
    again = run_pass(agent, django_capture_on_commit_callbacks)
    assert again.status == "proposed" and "auto_apply" not in (again.telemetry or {})
    ops = list(again.operations.exclude(kind="conflict"))
    assert ops and all(op.scores["waiting"]["codes"] == ["rejected"] for op in ops)
    assert Decision.objects.get(agent=agent, kind="rejected_plan").held_back == len(ops)
    client.force_login(alice)
    html = client.get(reverse("pass_detail", args=[again.pk])).content.decode()
    assert f"rejected before: in pass #{first.pk} by alice: keep both cache spellings" in html
