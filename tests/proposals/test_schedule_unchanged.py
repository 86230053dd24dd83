"""A ``* * * * *`` schedule on a store that has stopped changing: the schedule does not make one
identical pass a minute (each replacing the waiting part, or recording "no changes"). A run
that would plan what the agent's latest planned pass planned is skipped, folded into one
history row with a count; any change to what a pass plans from (a memory, the policy, a
decision, a probe, the day) plans again, and "Run now" always plans. Real Chroma
(EphemeralClient), the offline embedder, django-q2 sync."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from memoryadmin.agents.models import ProbeQuery
from memoryadmin.agents.services.agents import agent_update
from memoryadmin.core import stores
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Decision, Pass
from memoryadmin.proposals.services.decisions import decision_create, decision_revoke
from memoryadmin.proposals.services.passes import pass_request, pass_request_scheduled
from tests.conftest import memory_records
from tests.proposals.test_auto_apply_recall_split import _agent

pytestmark = pytest.mark.django_db

EVERY_MINUTE = "* * * * *"


def _minute(agent, at, capture) -> Pass | None:
    """The agent's ``* * * * *`` schedule fires at ``at``; the pass it queued (run in sync
    mode), or None."""
    if agent.schedule_cron != EVERY_MINUTE:
        agent_update(agent=agent, schedule_cron=EVERY_MINUTE)
    with capture(execute=True):
        run = pass_request_scheduled(agent=agent, now=at)
    agent.refresh_from_db()
    if run is not None:
        run.refresh_from_db()
    return run


def _skips(agent) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(agent=agent, verb="skipped", data__has_key="unchanged_since")
    )


def test_a_waiting_part_is_not_planned_again_every_minute(
    client, alice, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = _agent(agent_with_memories, "safe")  # one prune waits: it costs a probe its answer
    t0 = timezone.now()
    assert _minute(agent, t0, django_capture_on_commit_callbacks).status == Pass.Status.APPLIED
    # The store changed (two prunes applied): the next minute plans it as it is now.
    waiting = _minute(agent, t0 + timedelta(minutes=1), django_capture_on_commit_callbacks)
    assert waiting is not None and waiting.status == Pass.Status.PROPOSED
    passes = Pass.objects.filter(agent=agent).count()

    for i in range(2, 5):  # three more minutes, nothing changed
        assert _minute(agent, t0 + timedelta(minutes=i), django_capture_on_commit_callbacks) is None
    assert Pass.objects.filter(agent=agent).count() == passes
    waiting.refresh_from_db()
    assert waiting.status == Pass.Status.PROPOSED  # still the one to review, not superseded
    (skip,) = _skips(agent)  # one history row, not three
    assert skip.run_id == waiting.pk and skip.data["count"] == 3
    assert (
        "skipped 3 times" in skip.note and f"nothing changed since pass #{waiting.pk}" in skip.note
    )
    client.force_login(alice)
    page = client.get(reverse("pass_detail", args=[waiting.pk])).content.decode()
    assert page.count('data-verb="skipped"') == 1 and "skipped 3 times" in page

    # A new memory is a change: the next minute plans again.
    stores.get_store(agent).upsert(
        memory_records(["Priya keeps her climbing shoes in locker 14."], prefix="new")
    )
    again = _minute(agent, t0 + timedelta(minutes=5), django_capture_on_commit_callbacks)
    assert again is not None and again.pk != waiting.pk


def test_no_changes_is_recorded_once_until_something_changes(
    client, alice, bob, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(6)  # six distinct facts: nothing to consolidate
    t0 = timezone.now()
    first = _minute(agent, t0, django_capture_on_commit_callbacks)
    assert first.status == Pass.Status.NO_CHANGES
    client.force_login(alice)
    page = client.get(reverse("pass_detail", args=[first.pk])).content.decode()
    assert "the agent's policy (nothing to apply)" in page and ">Settled<" in page
    assert "Roll back" not in page
    for i in range(1, 4):
        assert _minute(agent, t0 + timedelta(minutes=i), django_capture_on_commit_callbacks) is None
    assert Pass.objects.filter(agent=agent).count() == 1
    assert _skips(agent)[0].data["count"] == 3

    def plans_at(minute: int) -> bool:
        run = _minute(agent, t0 + timedelta(minutes=minute), django_capture_on_commit_callbacks)
        return run is not None

    # Each input of a plan, changed on its own, plans again (and then settles again).
    agent_update(agent=agent, user=alice, policy={**agent.policy, "max_loss_fraction": 0.2})
    agent.refresh_from_db()
    assert plans_at(10) and not plans_at(11)
    mid, text_hash = next(iter(first.snapshot.hashes.items()))
    kept = decision_create(agent=agent, kind=Decision.Kind.KEEP, memories=[(mid, text_hash)],
                           user=bob)  # fmt: skip
    assert plans_at(20) and not plans_at(21)
    decision_revoke(decision=kept, user=bob)
    assert plans_at(30) and not plans_at(31)
    ProbeQuery.objects.create(agent=agent, question="Where did Caroline move?", answer="Boston")
    assert plans_at(40) and not plans_at(41)
    with time_machine.travel(timezone.now() + timedelta(days=1)):
        assert plans_at(60 * 24 + 1)  # a new day: stale-memory rules count days
    # A person's "Run now" always plans, unchanged store or not.
    with django_capture_on_commit_callbacks(execute=True):
        manual = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, user=alice)
    manual.refresh_from_db()
    assert manual.status == Pass.Status.NO_CHANGES


def test_an_unreadable_store_is_not_taken_for_an_unchanged_one(
    agent_with_memories, django_capture_on_commit_callbacks, settings
):
    agent = agent_with_memories(6)
    t0 = timezone.now()
    _minute(agent, t0, django_capture_on_commit_callbacks)
    settings.CHROMA_MODE, settings.CHROMA_HOST, settings.CHROMA_PORT = "http", "127.0.0.1", 9
    stores.reset_client_cache()  # nothing listens on the discard port
    run = _minute(agent, t0 + timedelta(minutes=1), django_capture_on_commit_callbacks)
    assert run is not None  # the pass goes ahead, so the outage is on record
    run.refresh_from_db()
    assert run.status == Pass.Status.FAILED and run.error
