"""Archive retention: copies older than an agent's retention are purged by the worker's daily
task (audited with counts), passes applied before then lose their Undo (page, service and API
say why), ``0`` keeps everything forever, and the agent page shows the archive's size and
oldest copy. Real Chroma (in-process), django-q2 sync."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memoryadmin.agents.services.agents import agent_update
from memoryadmin.agents.services.schedules import PURGE_SCHEDULE, purge_schedule_ensure
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.models import AuditEvent
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.review import pass_approve
from memoryadmin.proposals.services.rollback import archive_purge, pass_rollback_request
from memoryadmin.tasks import purge_archives
from tests.conftest import DISTINCT_FACTS
from tests.proposals.test_services_passes import run_pass

pytestmark = pytest.mark.django_db

DUPES = DISTINCT_FACTS[:6] + [DISTINCT_FACTS[0], DISTINCT_FACTS[1]]


def _applied(agent_with_memories, alice, capture, **fields):
    agent = agent_with_memories(DUPES, policy={"max_loss_fraction": 0.5}, **fields)
    run = run_pass(agent, capture)
    with capture(execute=True):
        pass_approve(run=run, user=alice)
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED
    assert ArchivedMemory.objects.filter(agent=agent).count() == 4  # both sides of 2 merges
    return agent, run


def _age(agent, run, days):
    """Pretend the pass and its archive copies are ``days`` old."""
    then = timezone.now() - timedelta(days=days)
    ArchivedMemory.objects.filter(agent=agent).update(archived_at=then)
    Pass.objects.filter(pk=run.pk).update(finished_at=then)
    run.refresh_from_db()


def test_copies_past_retention_are_purged_and_the_pass_loses_its_undo(
    agent_with_memories, alice, bob, client, django_capture_on_commit_callbacks
):
    agent, run = _applied(agent_with_memories, alice, django_capture_on_commit_callbacks)
    agent = agent_update(agent=agent, archive_days=30, user=alice)
    _age(agent, run, 10)
    assert archive_purge() == {}  # within retention: nothing purged, undo still offered
    assert run.can_roll_back and not run.undo_expired

    _age(agent, run, 31)
    assert archive_purge(dry_run=True) == {agent.slug: 4}
    assert ArchivedMemory.objects.filter(agent=agent).count() == 4  # a dry run deletes nothing
    assert purge_archives() == f"purged {agent.slug}: 4"
    assert not ArchivedMemory.objects.filter(agent=agent).exists()
    event = AuditEvent.objects.get(agent=agent, verb="archive_purged")
    assert event.data["count"] == 4 and event.data["retention_days"] == 30

    run.refresh_from_db()
    assert not run.can_roll_back
    assert "keeps archived copies for 30 days" in run.undo_expired
    with pytest.raises(ServiceError, match="Undo expired"):
        pass_rollback_request(run=run, user=bob)
    client.force_login(bob)
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "Undo expired" in page and "Roll back…" not in page
    # the rollback page says why, and not also that the (applied) pass is of the wrong status
    page = client.get(reverse("pass_rollback", args=[run.pk])).content.decode()
    assert "Undo expired" in page and "Only an applied or partially applied" not in page

    from django.test import Client

    from memoryadmin.api.tokens import token_create
    from tests.api.api_helpers import Api

    api = Api(Client(), token_create(user=bob, name="t")[1])
    got = api.post(f"/passes/{run.pk}/rollback", {"note": "undo"})
    assert got.status_code == 409 and "Undo expired" in got.json()["detail"]


def test_zero_keeps_everything_forever(
    agent_with_memories, alice, django_capture_on_commit_callbacks, settings
):
    settings.ARCHIVE_RETENTION_DAYS = 7
    agent, run = _applied(agent_with_memories, alice, django_capture_on_commit_callbacks)
    agent = agent_update(agent=agent, archive_days=0, user=alice)
    _age(agent, run, 4000)
    assert archive_purge() == {}
    assert ArchivedMemory.objects.filter(agent=agent).count() == 4
    assert run.can_roll_back


def test_an_empty_retention_uses_the_deployment_default(
    agent_with_memories, alice, django_capture_on_commit_callbacks, settings
):
    settings.ARCHIVE_RETENTION_DAYS = 7
    agent, run = _applied(agent_with_memories, alice, django_capture_on_commit_callbacks)
    _age(agent, run, 8)
    assert archive_purge() == {agent.slug: 4}


def test_the_agent_page_shows_the_archive_and_the_form_sets_retention(
    agent_with_memories, alice, client, django_capture_on_commit_callbacks
):
    agent, run = _applied(agent_with_memories, alice, django_capture_on_commit_callbacks)
    client.force_login(alice)
    page = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert "4 archived copies" in page and "kept forever" in page
    assert f"oldest {timezone.now():%Y-%m-%d}" in page

    form = client.get(reverse("agent_edit", args=[agent.slug])).context["form"]
    data = {k: v for k, v in form.initial.items() if v is not None}
    data["archive_days"] = "-1"
    bad = client.post(reverse("agent_edit", args=[agent.slug]), data)
    assert bad.status_code == 200 and "archive_days" in bad.context["form"].errors
    agent.refresh_from_db()
    assert agent.archive_days is None  # nothing saved on bad input


def test_the_worker_schedules_the_daily_purge(db, settings):
    settings.ARCHIVE_PURGE_CRON = "5 4 * * *"
    from django_q.models import Schedule

    assert purge_schedule_ensure() is True
    assert purge_schedule_ensure() is False  # idempotent
    row = Schedule.objects.get(name=PURGE_SCHEDULE)
    assert row.cron == "5 4 * * *" and row.func == "memoryadmin.tasks.purge_archives"
