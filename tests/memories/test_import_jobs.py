"""Uploads run on the worker: the request saves the file and returns at once, the page
polls a progress bar that stops with 286, uploads are size-capped, and the saved file is removed
when the job ends. django-q2 runs in sync mode: the task runs when the upload's transaction
commits (``captureOnCommitCallbacks(execute=True)``), or not at all without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from memoryadmin.core import stores
from memoryadmin.memories.models import ImportJob

pytestmark = pytest.mark.django_db


def jsonl(n: int) -> bytes:
    return "\n".join(
        json.dumps({"id": f"m{i}", "document": f"Fact number {i} about tea."}) for i in range(n)
    ).encode()


def upload(client: Client, agent, content: bytes, **extra):
    return client.post(
        reverse("memories_import", args=[agent.slug]),
        {"file": SimpleUploadedFile("big.jsonl", content)},
        **extra,
    )


def test_the_request_returns_before_the_import_and_the_page_polls(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    r = upload(
        client, agent, jsonl(3), HTTP_HX_REQUEST="true"
    )  # no commit hook runs: no worker yet
    job = ImportJob.objects.get(agent=agent)
    assert r.status_code == 200 and job.status == "queued" and stores.get_store(agent).count() == 0
    html = r.content.decode()
    status_url = reverse("memories_import_status", args=[agent.slug, job.pk])
    assert f'hx-get="{status_url}"' in html and 'hx-trigger="every 1s"' in html
    assert 'data-testid="import-progress"' in html and 'role="progressbar"' in html
    assert Path(job.path).is_file() and Path(job.path).parent.name == "imports"
    # While it runs, the poll answers 200 with the bar; the agent page shows it too.
    ImportJob.objects.filter(pk=job.pk).update(status="importing", total=2000, done=1000)
    r = client.get(status_url, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "1000 of 2000 memories" in r.content.decode()
    assert 'aria-valuenow="50.0"' in r.content.decode()
    page = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert "1000 of 2000 memories" in page and f'hx-get="{status_url}"' in page


def test_the_worker_imports_it_and_the_poll_stops(
    client: Client, alice, agent_with_memories, django_capture_on_commit_callbacks
) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        upload(client, agent, jsonl(3), HTTP_HX_REQUEST="true")
    job = ImportJob.objects.get(agent=agent)
    assert job.status == "done" and job.done == job.total == 3 and job.finished_at
    assert stores.get_store(agent).count() == 3
    assert not Path(job.path).exists()  # the saved upload is removed when the job ends
    r = client.get(
        reverse("memories_import_status", args=[agent.slug, job.pk]), HTTP_HX_REQUEST="true"
    )
    html = r.content.decode()
    assert r.status_code == 286 and "hx-trigger" not in html  # 286: htmx stops polling
    assert "<strong>3</strong> memories written" in html
    # Without htmx the same URL is a page.
    r = client.get(reverse("memories_import_status", args=[agent.slug, job.pk]))
    assert r.status_code == 200 and "<html" in r.content.decode()


def test_uploads_over_the_cap_are_refused_with_the_setting_named(
    client: Client, alice, agent_with_memories, settings
) -> None:
    settings.MEMORYADMIN_MAX_UPLOAD_BYTES = 1024 * 1024
    agent = agent_with_memories(0)
    client.force_login(alice)
    r = upload(client, agent, jsonl(20_000))
    assert r.status_code == 200
    error = " ".join(r.context["form"].errors["file"])
    assert "uploads are limited to 1 MB (MEMORYADMIN_MAX_UPLOAD_MB)" in error
    assert not ImportJob.objects.exists() and stores.get_store(agent).count() == 0


def test_a_job_runs_once_even_if_the_task_runs_twice(
    client: Client, alice, agent_with_memories, django_capture_on_commit_callbacks
) -> None:
    from memoryadmin.tasks import import_memories

    agent = agent_with_memories(0)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        upload(client, agent, jsonl(2))
    job = ImportJob.objects.get(agent=agent)
    assert import_memories(job.pk) == f"import #{job.pk}: done"  # a no-op, not a second import
    assert import_memories(10**9) == f"import #{10**9} does not exist"


@pytest.mark.parametrize("user", ["bob", "carol"])
def test_readers_can_watch_but_not_upload(
    client: Client, user: str, request, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    upload(client, agent, jsonl(1))
    job = ImportJob.objects.get(agent=agent)
    client.force_login(request.getfixturevalue(user))
    assert upload(client, agent, jsonl(1)).status_code == 403
    assert (
        client.get(reverse("memories_import_status", args=[agent.slug, job.pk])).status_code == 200
    )
    other = agent_with_memories(0)
    assert (
        client.get(reverse("memories_import_status", args=[other.slug, job.pk])).status_code == 404
    )


class Outage:
    """The agent's real store, until ``fail_after`` upserts have gone through: from then on every
    call raises ``StoreUnavailable`` (the undo's too) until ``down`` is set back to False."""

    def __init__(self, store, state: dict) -> None:
        self._store, self._state = store, state

    def __getattr__(self, name: str):
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            from memoryadmin.core.errors import StoreUnavailable

            if self._state["down"]:
                raise StoreUnavailable("Cannot reach the Chroma server (test outage)")
            if name == "upsert":
                if self._state["fail_after"] == 0:
                    self._state["down"] = True
                    raise StoreUnavailable("Cannot reach the Chroma server (test outage)")
                self._state["fail_after"] -= 1
            return attr(*args, **kwargs)

        return call


def test_an_import_cut_short_by_an_outage_keeps_its_file_and_recovery_finishes_it(
    client: Client, alice, agent_with_memories, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    from memoryadmin.memories.services import transfer
    from memoryadmin.ops.services.recovery import import_jobs_recover

    agent = agent_with_memories(0)
    monkeypatch.setattr(transfer, "WRITE_BATCH", 10)
    real_get_store = stores.get_store
    state = {"down": False, "fail_after": 1}  # the first batch of 10 lands, then Chroma goes
    monkeypatch.setattr(stores, "get_store", lambda a: Outage(real_get_store(a), state))
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        upload(client, agent, jsonl(30))
    job = ImportJob.objects.get(agent=agent)
    assert job.status == "interrupted" and "resumes by itself" in job.message
    assert Path(job.path).is_file()  # kept: it is what finishes the import
    assert real_get_store(agent).count() == 10  # the undo could not run either
    lines: list[str] = []
    import_jobs_recover(stdout=lines.append)  # still down: it waits
    job.refresh_from_db()
    assert job.status == "interrupted" and any("waits for the store" in x for x in lines)
    page = client.get(reverse("memories_import_status", args=[agent.slug, job.pk]))
    assert "resumes by itself" in page.content.decode()

    state["down"] = False
    state["fail_after"] = 10**6
    with django_capture_on_commit_callbacks(execute=True):
        import_jobs_recover()
    job.refresh_from_db()
    assert job.status == "done" and job.resumes == 1 and job.report["valid"] == 30
    assert real_get_store(agent).count() == 30
    assert not Path(job.path).exists()


def test_an_import_whose_undo_worked_ends_failed_with_nothing_written(
    client: Client, alice, agent_with_memories, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    from memoryadmin.memories.services import transfer

    agent = agent_with_memories(0)
    monkeypatch.setattr(transfer, "WRITE_BATCH", 10)
    real_get_store = stores.get_store
    state = {"down": False, "fail_after": 1}
    monkeypatch.setattr(stores, "get_store", lambda a: Outage(real_get_store(a), state))
    original_undo = transfer._Journal.undo

    def undo_after_recovery(self, store):
        state["down"] = False
        return original_undo(self, store)

    monkeypatch.setattr(transfer._Journal, "undo", undo_after_recovery)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        upload(client, agent, jsonl(30))
    job = ImportJob.objects.get(agent=agent)
    assert job.status == "failed" and "nothing was imported" in job.message
    assert real_get_store(agent).count() == 0 and not Path(job.path).exists()
