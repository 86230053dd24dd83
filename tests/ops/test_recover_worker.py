"""Work a dead worker or a Chroma outage left behind recovers by itself, promptly and safely.

- planning holds the pass's lease, so a pass left ``running`` by a dead process of this host is
  planned again at once (not after the hour-long task timeout), and one planned by a live
  process is left alone;
- at worker start, queued passes and imports are sent to the queue again (a dead cluster's
  messages stay locked in the broker for ``Q_RETRY``);
- an import left ``importing`` by a dead worker is imported again from its saved file (or
  failed with the reason when the file is gone);
- an apply cut short by a Chroma outage is resumed by the worker's every-minute recovery
  schedule once the store answers, and logged at WARNING while it waits.
"""

from __future__ import annotations

import io
import logging
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone

from memoryadmin import tasks
from memoryadmin.agents.services.schedules import RECOVERY_SCHEDULE, recovery_schedule_ensure
from memoryadmin.core import stores
from memoryadmin.core.errors import PassAlreadyActive
from memoryadmin.core.leases import worker_id
from memoryadmin.memories.models import ImportJob
from memoryadmin.memories.services.transfer_jobs import import_job_create
from memoryadmin.ops.services.recovery import import_jobs_recover, passes_recover
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services import passes as passes_module
from memoryadmin.proposals.services.passes import pass_request
from tests.conftest import DISTINCT_FACTS
from tests.proposals.test_services_apply import DUPES, FlakyStore, approve, proposed

pytestmark = pytest.mark.django_db


def dead_worker() -> str:
    """``"host:pid"`` of a process of this host that has exited."""
    pid = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return f"{socket.gethostname()}:{pid}"


def left_running(agent: Any, *, owner: str, expires_in: timedelta) -> Pass:
    """A pass a worker was planning (``running`` under ``owner``'s lease) when it stopped."""
    run = pass_request(agent=agent, trigger="operator")  # on_commit not run: queued
    Pass.objects.filter(pk=run.pk).update(
        status="running",
        started_at=timezone.now(),
        lease_owner=owner,
        lease_expires_at=timezone.now() + expires_in,
    )
    return Pass.objects.get(pk=run.pk)


def test_it_holds_the_lease_while_planning_and_gives_it_back(
    agent_with_memories, monkeypatch, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    seen: list[tuple[str, str]] = []
    real_plan = passes_module.pass_plan

    def plan_and_look(**kwargs: Any) -> Any:
        row = Pass.objects.filter(agent=agent).values("status", "lease_owner").get()
        seen.append((row["status"], row["lease_owner"]))
        return real_plan(**kwargs)

    monkeypatch.setattr(passes_module, "pass_plan", plan_and_look)
    run = proposed(agent, django_capture_on_commit_callbacks)
    assert seen == [("running", worker_id())]
    assert run.lease_owner == "" and run.lease_expires_at is None


def test_a_pass_whose_planning_worker_died_is_planned_again_at_once(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    owner = dead_worker()
    run = left_running(agent, owner=owner, expires_in=timedelta(minutes=30))
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("recover_passes", stdout=out)
    run.refresh_from_db()
    assert run.status == "proposed" and run.operations.count() == 2
    [event] = run.events.filter(verb="requeued")
    assert owner in event.note


def test_a_pass_planned_by_a_live_worker_is_left_alone(agent_with_memories):
    agent = agent_with_memories(DUPES)
    run = left_running(agent, owner="other-host:1234", expires_in=timedelta(minutes=30))
    out = io.StringIO()
    call_command("recover_passes", stdout=out)
    assert f"pass #{run.pk} of {agent.slug}: still running by other-host:1234" in out.getvalue()
    assert Pass.objects.get(pk=run.pk).status == "running"
    with pytest.raises(PassAlreadyActive):
        pass_request(agent=agent, trigger="operator")


def test_a_pass_of_another_host_is_planned_again_when_its_lease_expired(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = left_running(agent, owner="other-host:1234", expires_in=timedelta(seconds=-1))
    with django_capture_on_commit_callbacks(execute=True):
        [recovered] = passes_recover()
    recovered.refresh_from_db()
    assert recovered.pk == run.pk and recovered.status == "proposed"


def test_worker_start_sends_queued_passes_to_the_queue_again(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(DUPES)
    run = pass_request(agent=agent, trigger="operator")  # its message was lost
    call_command("recover_passes", stdout=io.StringIO())
    assert Pass.objects.get(pk=run.pk).status == "queued"  # only at worker start
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("recover_passes", resend_queued=True, stdout=out)
    assert "queued, sent to the workers again" in out.getvalue()
    assert Pass.objects.get(pk=run.pk).status == "proposed"


def jsonl(n: int) -> SimpleUploadedFile:
    lines = [f'{{"id": "imp-{i}", "document": "{DISTINCT_FACTS[i]}"}}' for i in range(n)]
    return SimpleUploadedFile("memories.jsonl", ("\n".join(lines) + "\n").encode())


def test_an_import_whose_worker_died_is_imported_again_from_its_file(
    agent_with_memories, alice, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.VAR_DIR = tmp_path
    agent = agent_with_memories(2)
    job = import_job_create(agent=agent, upload=jsonl(5), skip_invalid=False, user=alice)
    ImportJob.objects.filter(pk=job.pk).update(
        status="importing", worker=dead_worker(), started_at=timezone.now(), total=5, done=3
    )
    with django_capture_on_commit_callbacks(execute=True):
        call_command("recover_passes", stdout=io.StringIO())
    job.refresh_from_db()
    assert job.status == "done" and job.done == 5, job.message
    assert stores.get_store(agent).count() == 7
    assert not Path(job.path).exists()


def test_an_import_whose_worker_died_without_its_file_fails_with_the_reason(
    agent_with_memories, alice, settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    agent = agent_with_memories(2)
    job = import_job_create(agent=agent, upload=jsonl(5), skip_invalid=False, user=alice)
    owner = dead_worker()
    ImportJob.objects.filter(pk=job.pk).update(
        status="importing", worker=owner, started_at=timezone.now(), total=5, done=3
    )
    Path(job.path).unlink()
    passes_recover()
    job.refresh_from_db()
    assert job.status == "failed" and job.finished_at is not None
    assert owner in job.message and "3 of 5 memories were written" in job.message


def test_an_import_of_a_live_worker_is_left_alone(agent_with_memories, alice, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    agent = agent_with_memories(2)
    job = import_job_create(agent=agent, upload=jsonl(5), skip_invalid=False, user=alice)
    ImportJob.objects.filter(pk=job.pk).update(
        status="importing", worker="other-host:1", started_at=timezone.now()
    )
    assert import_jobs_recover() == []
    assert ImportJob.objects.get(pk=job.pk).status == "importing"


def test_the_worker_resumes_an_apply_cut_short_by_a_store_outage_by_itself(
    agent_with_memories,
    bob,
    settings,
    monkeypatch,
    caplog,
    django_capture_on_commit_callbacks,
):
    from django_q.models import Schedule
    from django_q.tasks import async_task

    agent = agent_with_memories(DUPES)
    run = proposed(agent, django_capture_on_commit_callbacks)
    real_get_store = stores.get_store
    failures = ["Cannot reach the Chroma server (test)"]
    with monkeypatch.context() as m:
        m.setattr(stores, "get_store", lambda a: FlakyStore(real_get_store(a), failures))
        with caplog.at_level(logging.WARNING):
            run = approve(run, bob, django_capture_on_commit_callbacks)
    assert run.status == "applying"
    assert f"apply of pass {run.pk} interrupted" in caplog.text  # the worker log says so
    assert "resumed once it answers" in run.progress_label

    assert recovery_schedule_ensure() is True  # run_worker does this at start
    assert recovery_schedule_ensure() is False  # idempotent
    [schedule] = Schedule.objects.filter(name=RECOVERY_SCHEDULE)
    assert (schedule.schedule_type, schedule.cron) == (Schedule.CRON, "* * * * *")

    # The store is still down: the minute's run tries nothing and says the pass waits.
    settings.CHROMA_MODE, settings.CHROMA_PORT = "http", 9
    stores.reset_client_cache()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        async_task(schedule.func)  # what the scheduler runs (sync in tests)
    assert f"pass #{run.pk} (applying) waits for the store" in caplog.text
    assert Pass.objects.get(pk=run.pk).status == "applying"

    # The store is back: the next minute's run finishes the apply, nothing done twice.
    settings.CHROMA_MODE = "ephemeral"
    stores.reset_client_cache()
    assert tasks.recover_passes() == "recovered 1 pass(es)"
    run.refresh_from_db()
    assert run.status == "applied"
    assert real_get_store(agent).count() == 16
    assert run.events.filter(verb="apply_interrupted").count() == 1
    pass_request(agent=agent, trigger="schedule", actor="schedule")  # not refused


def test_a_pid_reused_by_a_newer_process_does_not_keep_a_dead_workers_lease(
    agent_with_memories, settings, django_capture_on_commit_callbacks
):
    """In a container a restarted worker often gets the dead one's pid: a lease taken before
    that process started is not its lease."""
    import os

    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 10 * 86400}
    agent = agent_with_memories(DUPES)
    me = f"{socket.gethostname()}:{os.getpid()}"  # alive, but started after the lease below
    run = left_running(agent, owner=me, expires_in=timedelta(days=1))  # taken 9 days ago
    with django_capture_on_commit_callbacks(execute=True):
        passes_recover()
    assert Pass.objects.get(pk=run.pk).status == "proposed"

    run = pass_request(agent=agent, trigger="operator")
    Pass.objects.filter(pk=run.pk).update(
        status="running",
        lease_owner=me,
        lease_expires_at=timezone.now() + timedelta(days=10),  # taken just now: ours
    )
    passes_recover()
    assert Pass.objects.get(pk=run.pk).status == "running"
