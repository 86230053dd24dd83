"""Per-agent django-q2 schedules: idempotent sync, pause/resume, delete, command, preview."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.urls import reverse
from django_q.models import Schedule

from memoryadmin import tasks
from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.schedules import schedule_preview
from memoryadmin.agents.services.agents import agent_delete, agent_update
from memoryadmin.agents.services.schedules import schedule_sync
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.review import pass_reject

pytestmark = pytest.mark.django_db


def test_saving_an_agent_creates_then_updates_one_schedule(agent_with_memories):
    agent = agent_with_memories(1, slug="sched")
    s = Schedule.objects.get(name="consolidate:sched")
    assert (s.func, s.args, s.schedule_type, s.cron) == (
        "memoryadmin.tasks.scheduled_pass",
        repr(agent.pk),
        Schedule.CRON,
        "0 3 * * *",
    )
    assert s.next_run > datetime.now(UTC) and (s.next_run.hour, s.next_run.minute) == (3, 0)

    schedule_sync(agent=agent)
    schedule_sync(agent=agent)
    assert Schedule.objects.count() == 1 and Schedule.objects.get().pk == s.pk

    agent_update(agent=agent, schedule_cron="15 */6 * * *")
    s2 = Schedule.objects.get()
    assert s2.pk == s.pk and s2.cron == "15 */6 * * *" and s2.next_run.minute == 15


def test_pausing_removes_the_schedule_and_resuming_restores_it(agent_with_memories):
    agent = agent_with_memories(1, slug="pausy")
    agent_update(agent=agent, schedule_enabled=False)
    assert not Schedule.objects.filter(name="consolidate:pausy").exists()
    agent_update(agent=agent, schedule_enabled=True)
    assert Schedule.objects.filter(name="consolidate:pausy").count() == 1


def test_deleting_an_agent_removes_its_schedule(agent_with_memories):
    agent = agent_with_memories(1)
    agent_delete(agent=agent)
    assert not Schedule.objects.exists()


def test_sync_schedules_command_repairs_every_agent(agent_with_memories):
    a = agent_with_memories(1, slug="one")
    agent_with_memories(1, slug="two", schedule_enabled=False)
    Schedule.objects.all().delete()
    Schedule.objects.create(
        name="consolidate:ghost",
        func="memoryadmin.tasks.scheduled_pass",
        args="999",
        schedule_type=Schedule.CRON,
        cron="0 1 * * *",
    )
    Agent.objects.filter(pk=a.pk).update(
        schedule_cron="5 5 * * *"
    )  # drifted behind the service's back
    out = io.StringIO()
    call_command("sync_schedules", stdout=out)
    assert "1 enabled, 1 paused, 2 agents" in out.getvalue()
    assert list(Schedule.objects.values_list("name", "cron")) == [("consolidate:one", "5 5 * * *")]
    call_command("sync_schedules", stdout=io.StringIO())
    assert Schedule.objects.count() == 1


def test_preview_lists_the_next_five_runs_in_the_operators_time_zone(settings):
    settings.TIME_ZONE = "UTC"
    now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    runs = schedule_preview(cron="0 3 * * *", tz="Europe/Berlin", now=now)
    assert len(runs) == 5
    assert all(r.tzinfo == ZoneInfo("Europe/Berlin") for r in runs)
    # 03:00 UTC is 04:00 in Berlin before the DST switch on 29 March 2026 and 05:00 after it
    assert [(r.day, r.hour) for r in runs] == [(29, 5), (30, 5), (31, 5), (1, 5), (2, 5)]
    assert runs[0].astimezone(UTC) == datetime(2026, 3, 29, 3, 0, tzinfo=UTC)


@pytest.mark.parametrize("cron", ["", "* * * *", "60 * * * *", "0 3 * * * *", "every day", None])
def test_preview_refuses_a_bad_cron(cron):
    with pytest.raises(ValueError):
        schedule_preview(cron=cron, tz="UTC")


def test_preview_refuses_an_unknown_time_zone():
    with pytest.raises(ValueError, match="Unknown time zone"):
        schedule_preview(cron="0 3 * * *", tz="Mars/Olympus")


def test_the_scheduled_task_requests_a_pass_and_refuses_a_second(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(3)
    first = tasks.scheduled_pass(agent.pk)  # on_commit not executed: the pass stays queued
    assert "queued" in first
    second = tasks.scheduled_pass(agent.pk)
    assert "refused" in second
    assert Pass.objects.filter(agent=agent).count() == 1
    assert Pass.objects.get(agent=agent).trigger == "schedule"
    assert AuditEvent.objects.filter(agent=agent, verb="refused", actor="schedule").count() == 1
    assert "does not exist" in tasks.scheduled_pass(10**9)


def test_django_q_scheduler_fires_the_agents_schedule_into_a_proposal(
    agent_with_memories, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone
    from django_q.scheduler import scheduler

    from tests.conftest import DISTINCT_FACTS

    agent = agent_with_memories(DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2], slug="nightly")
    Schedule.objects.filter(name="consolidate:nightly").update(
        next_run=timezone.now() - timedelta(minutes=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        scheduler()
    run = Pass.objects.get(agent=agent)
    assert (run.trigger, run.status) == ("schedule", "proposed")
    assert run.events.get(verb="requested").actor == "schedule"
    assert Schedule.objects.get(name="consolidate:nightly").next_run > timezone.now()


def test_a_scheduled_run_with_a_pending_proposal_is_skipped_and_audited(
    agent_with_memories, django_capture_on_commit_callbacks
):
    from tests.conftest import DISTINCT_FACTS

    agent = agent_with_memories(DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2])
    with django_capture_on_commit_callbacks(execute=True):
        assert "queued" in tasks.scheduled_pass(agent.pk)
    pending = Pass.objects.get(agent=agent)
    assert pending.status == "proposed"
    with django_capture_on_commit_callbacks(execute=True):
        assert "skipped" in tasks.scheduled_pass(agent.pk)
    assert Pass.objects.filter(agent=agent).count() == 1  # nothing planned, nothing made stale
    pending.refresh_from_db()
    assert pending.status == "proposed"
    event = AuditEvent.objects.get(agent=agent, verb="skipped")
    assert event.actor == "schedule" and event.run_id == pending.pk
    assert f"pass #{pending.pk} is waiting for its reviewer" in event.note


def test_repeated_skips_for_a_waiting_proposal_fold_into_one_history_row(
    client, alice, agent_with_memories, django_capture_on_commit_callbacks
):
    from tests.conftest import DISTINCT_FACTS

    agent = agent_with_memories(DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2])
    with django_capture_on_commit_callbacks(execute=True):
        tasks.scheduled_pass(agent.pk)
    pending = Pass.objects.get(agent=agent)
    for _ in range(3):  # a * * * * * schedule, three minutes while nobody reviews
        with django_capture_on_commit_callbacks(execute=True):
            assert "skipped" in tasks.scheduled_pass(agent.pk)
    event = AuditEvent.objects.get(agent=agent, verb="skipped")  # one row, not three
    assert event.data["count"] == 3 and "skipped 3 times" in event.note
    client.force_login(alice)
    page = client.get(reverse("pass_detail", args=[pending.pk])).content.decode()
    assert page.count('data-verb="skipped"') == 1 and "skipped 3 times" in page


BERLIN_NIGHT = datetime(
    2025, 10, 26, 0, 30, 20, tzinfo=UTC
)  # 02:30:20 CEST, clocks go back at 03:00


def test_preview_lists_the_repeated_local_hour_once(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    runs = schedule_preview(
        cron="30 2 * * *", tz="Europe/Berlin", now=datetime(2025, 10, 25, 12, 0, tzinfo=UTC)
    )
    assert [(r.day, r.hour, r.minute) for r in runs] == [
        (26, 2, 30),
        (27, 2, 30),
        (28, 2, 30),
        (29, 2, 30),
        (30, 2, 30),
    ]
    assert runs[0].astimezone(UTC) == datetime(2025, 10, 26, 0, 30, tzinfo=UTC)  # the first 02:30


def test_a_schedule_runs_once_per_local_slot_across_the_autumn_clock_change(
    settings,
    monkeypatch,
    time_machine,
    agent_with_memories,
    bob,
    django_capture_on_commit_callbacks,
):
    from django_q.conf import Conf
    from django_q.scheduler import scheduler

    from tests.conftest import DISTINCT_FACTS

    settings.TIME_ZONE = "Europe/Berlin"
    monkeypatch.setattr(Conf, "TIME_ZONE", "Europe/Berlin")  # django-q2 reads it at import
    time_machine.move_to(datetime(2025, 10, 25, 12, 0, tzinfo=UTC), tick=False)
    agent = agent_with_memories(
        DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2], schedule_cron="30 2 * * *"
    )
    assert Schedule.objects.get(name=agent.schedule_name).next_run == datetime(
        2025, 10, 26, 0, 30, tzinfo=UTC
    )

    time_machine.move_to(BERLIN_NIGHT, tick=False)  # 02:30 CEST
    with django_capture_on_commit_callbacks(execute=True):
        scheduler()
    first = Pass.objects.get(agent=agent)
    pass_reject(run=first, user=bob, note="not tonight")  # nothing pending any more

    # django-q2 computes the next run from local 02:30:20 CEST: 02:30 CET, one hour later
    assert Schedule.objects.get(name=agent.schedule_name).next_run == datetime(
        2025, 10, 26, 1, 30, tzinfo=UTC
    )
    time_machine.move_to(BERLIN_NIGHT + timedelta(hours=1), tick=False)  # 02:30 CET
    with django_capture_on_commit_callbacks(execute=True):
        scheduler()
    assert Pass.objects.filter(agent=agent).count() == 1  # the repeated 02:30 did not plan again
    skipped = AuditEvent.objects.get(agent=agent, verb="skipped")
    assert skipped.data["slot"] == "2025-10-26T02:30" and "already happened" in skipped.note
    assert first.events.get(verb="requested").data["slot"] == "2025-10-26T02:30"

    time_machine.move_to(BERLIN_NIGHT + timedelta(days=1, hours=1), tick=False)  # next night
    with django_capture_on_commit_callbacks(execute=True):
        scheduler()
    assert Pass.objects.filter(agent=agent).count() == 2
