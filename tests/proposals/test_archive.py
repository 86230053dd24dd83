"""Archive browser and undo from the pages: list/search/page archived memories, restore one,
roll a pass back from its page, and see stale operations before approving."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.core import stores
from memoryadmin.core.errors import AlreadyDone
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.memories.services.memories import memory_delete, memory_edit
from memoryadmin.proposals.models import Decision, Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.rollback import archive_restore, pass_rollback_request
from tests.conftest import DISTINCT_FACTS as F
from tests.conftest import XSS_MIXED as XSS
from tests.conftest import login
from tests.proposals.test_rollback import applied, every_kind, same, state

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(agent_with_memories: Any, alice: Any) -> Any:
    agent = agent_with_memories(F[:3] + [XSS])
    for mid in ("mem-000", "mem-001", "mem-003"):
        memory_delete(agent=agent, memory_id=mid, user=alice)
    return agent


def test_it_lists_archived_memories_with_who_removed_them(client, carol, agent):
    r = login(client, carol).get(reverse("archive_list", args=[agent.slug]))
    assert r.status_code == 200
    body = r.content.decode()
    assert "3 archived versions" in body and F[0] in body and F[1] in body
    assert "Operator Delete · alice" in body
    assert "alice" in body
    assert XSS not in body and "&lt;script&gt;" in body  # memory text is escaped (I-7)
    assert "Restore</button>" not in body  # a viewer cannot restore


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("boston", 1),
        ("MEM-001", 1),
        ("' OR 1=1 --", 0),
        ("%", 0),
        ("_", 0),
        ("<script>", 1),
        ("", 3),
    ],
)
def test_it_searches_text_literally(client, carol, agent, q, expected):
    r = login(client, carol).get(reverse("archive_list", args=[agent.slug]), {"q": q})
    assert r.status_code == 200
    plural = "" if expected == 1 else "s"
    assert f"{expected} archived version{plural}" in r.content.decode()


def test_it_pages_fifty_at_a_time(client, carol, agent):
    ArchivedMemory.objects.bulk_create(
        [
            ArchivedMemory(
                agent=agent,
                memory_id=f"x-{i}",
                document=f"note {i}",
                content_hash="h",
                action="operator_delete",
            )
            for i in range(60)
        ]
    )
    c = login(client, carol)
    first = c.get(reverse("archive_list", args=[agent.slug])).content.decode()
    second = c.get(reverse("archive_list", args=[agent.slug]), {"page": 2}).content.decode()
    assert "page 1 of 2" in first and "page 2 of 2" in second
    assert first.count('id="archived-') == 50 and second.count('id="archived-') == 13


def test_a_reviewer_restores_one_memory_whole(client, bob, agent):
    archived = ArchivedMemory.objects.get(agent=agent, memory_id="mem-001")
    r = login(client, bob).post(
        reverse("archive_restore", args=[agent.slug, archived.pk]), follow=True
    )
    assert "Memory mem-001 restored." in r.content.decode()
    [rec] = stores.get_store(agent).get(["mem-001"])
    assert (rec.document, rec.content_hash) == (archived.document, archived.content_hash)
    assert abs(rec.embedding - archived.get_embedding()).max() < 1e-6
    archived.refresh_from_db()
    assert archived.restored_at is not None
    assert agent.events.filter(verb="memory_restored", actor="bob").count() == 1


def test_restore_refuses_when_a_different_live_memory_has_the_id(client, bob, alice, agent):
    memory_edit(agent=agent, memory_id="mem-002", document="Something else entirely.", user=alice)
    archived = ArchivedMemory.objects.get(agent=agent, memory_id="mem-002")
    census = agent_census(agent=agent)
    r = login(client, bob).post(
        reverse("archive_restore", args=[agent.slug, archived.pk]), follow=True
    )
    assert (
        "exists and differs" in r.content.decode() and "nothing was restored" in r.content.decode()
    )
    assert agent_census(agent=agent) == census


def test_restore_is_forbidden_for_a_viewer_and_needs_post(client, carol, bob, agent):
    archived = ArchivedMemory.objects.filter(agent=agent).first()
    url = reverse("archive_restore", args=[agent.slug, archived.pk])
    assert login(client, carol).post(url).status_code == 403
    assert login(Client(), bob).get(url).status_code == 405
    assert Client().post(url).status_code == 302  # anonymous → login


def test_a_reviewer_rolls_a_pass_back_from_its_page(
    client, bob, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = every_kind(agent_with_memories)
    before = state(agent)
    run = applied(agent, bob, django_capture_on_commit_callbacks)
    c = login(client, bob)
    page = c.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert reverse("pass_rollback", args=[run.pk]) in page
    confirm = c.get(reverse("pass_rollback", args=[run.pk])).content.decode()
    assert "Roll back pass" in confirm and 'id="rollback-blockers"' not in confirm
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post(reverse("pass_rollback", args=[run.pk]), {"note": "undo please"})
    assert r.status_code == 302
    run.refresh_from_db()
    assert run.status == "rolled_back" and same(state(agent), before)


def test_the_rollback_page_names_records_changed_after_the_pass(
    client, alice, bob, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = every_kind(agent_with_memories)
    run = applied(agent, bob, django_capture_on_commit_callbacks)
    merged = run.operations.get(kind="merge").result_id
    memory_edit(agent=agent, memory_id=merged, document="Edited after the pass.", user=alice)
    c = login(client, bob)
    confirm = c.get(reverse("pass_rollback", args=[run.pk])).content.decode()
    assert 'id="rollback-blockers"' in confirm and merged in confirm
    r = c.post(reverse("pass_rollback", args=[run.pk]), {"note": ""})
    assert r.status_code == 200 and "Rollback refused, nothing was changed" in r.content.decode()
    assert Pass.objects.get(pk=run.pk).status == "applied"


def test_rollback_is_forbidden_for_a_viewer(client, carol, agent):
    run = Pass.objects.create(agent=agent, trigger="operator", status="applied")
    assert login(client, carol).post(reverse("pass_rollback", args=[run.pk])).status_code == 403
    assert login(Client(), carol).get(reverse("pass_rollback", args=[run.pk])).status_code == 403


def test_rollback_of_a_pass_that_is_not_applied_says_why(client, bob, agent):
    run = Pass.objects.create(agent=agent, trigger="operator", status="rejected")
    r = login(client, bob).post(reverse("pass_rollback", args=[run.pk]), {"note": ""})
    assert (
        r.status_code == 200
        and f"Pass #{run.pk} is rejected. Only an applied or partially applied pass"
        in r.content.decode()
    )


def test_the_proposal_page_warns_about_each_affected_operation(
    client, alice, bob, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(F[:16] + [F[0], F[1]])
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger="operator")
    c = login(client, bob)
    check = reverse("pass_stale", args=[run.pk])
    page = c.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert f'hx-get="{check}"' in page and 'hx-trigger="load"' in page  # checked once shown
    fragment = c.get(check, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="stale-warning"' not in fragment and 'id="stale-none"' in fragment
    memory_delete(agent=agent, memory_id="mem-017", user=alice)
    op = run.operations.get(sources__memory_id="mem-017")
    fragment = c.get(check, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="stale-warning"' in fragment and "1 operation is affected" in fragment
    assert f'href="?merge_page=1#op-{op.pk}">merge #{op.index}</a>' in fragment
    # the mark lands on the operation's row (out of band), which the page holds a place for
    assert (
        fragment.count('data-testid="stale-op"') == 1
        and "Memory mem-017 no longer exists" in fragment
    )
    mark = f'<div id="stale-op-{op.pk}" class="errors stale-op" data-testid="stale-op"'
    assert f'{mark} hx-swap-oob="true">' in fragment
    assert f'<div id="stale-op-{op.pk}" hidden></div>' in page
    # without scripts the check is the page itself, the row marked in place
    page = c.get(check).content.decode()
    assert 'id="stale-warning"' in page and "1 operation is affected" in page
    assert page.count('data-testid="stale-op"') == 1 and f"{mark}>Affected" in page


def test_rollback_leaves_nothing_for_a_second_rollback(
    bob, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = every_kind(agent_with_memories)
    run = applied(agent, bob, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        pass_rollback_request(run=run, user=bob)
    with pytest.raises(AlreadyDone, match="already rolled back; nothing was done"):
        pass_rollback_request(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "rolled_back"


def test_a_restored_row_shows_when_instead_of_a_restore_button(client, bob, agent):
    archived = ArchivedMemory.objects.get(agent=agent, memory_id="mem-001")
    c = login(client, bob)
    c.post(reverse("archive_restore", args=[agent.slug, archived.pk]))
    body = c.get(reverse("archive_list", args=[agent.slug])).content.decode()
    row = body[body.index(f'id="archived-{archived.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "restored" in row and "Restore</button>" not in row
    archived.refresh_from_db()
    restored_cell, last_cell = row.split("<td")[-2:]
    assert f"{archived.restored_at:%Y-%m-%d %H:%M:%S}" in restored_cell
    assert "restored at" not in row and ":" not in last_cell.split(">", 1)[1]  # the time once
    assert body.count("Restore</button>") == 2  # the two others can still be restored


def test_posting_rollback_again_says_the_pass_is_already_rolled_back(client, bob, agent):
    run = Pass.objects.create(agent=agent, trigger="operator", status="rolled_back")
    r = login(client, bob).post(
        reverse("pass_rollback", args=[run.pk]), {"note": "again"}, follow=True
    )
    body = r.content.decode()
    assert f"Pass #{run.pk} is already rolled back; nothing was done." in body
    assert "Rolling back pass" not in body
    assert not run.events.exists()


def test_a_second_restore_of_one_archived_memory_adds_nothing(client, bob, agent):
    archived = ArchivedMemory.objects.get(agent=agent, memory_id="mem-001")
    c = login(client, bob)
    for _ in range(2):  # a double click, or a second tab
        c.post(reverse("archive_restore", args=[agent.slug, archived.pk]))
    assert stores.get_store(agent).get(["mem-001"])
    assert agent.events.filter(verb="memory_restored").count() == 1
    assert Decision.objects.filter(agent=agent, kind="keep").count() == 1


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_ten_concurrent_restores_restore_once_decide_once_and_audit_once(agent, bob):
    """Ten requests at the same instant, each in its own thread and database connection: the
    agent's row lock orders them, and the nine that find the memory restored add nothing. Runs
    on PostgreSQL (``make test-services``) or a SQLite file (env ``SQLITE_TEST_NAME``): SQLite's
    shared in-memory test database refuses a second thread's write at once ("database table is
    locked") instead of waiting for the lock; the double submit above holds the promise there."""
    from django.db import connection

    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.skip("threads need a database that waits for a lock (SQLITE_TEST_NAME=<file>)")
    archived = ArchivedMemory.objects.get(agent=agent, memory_id="mem-001")
    start = threading.Barrier(10)
    errors: list[BaseException] = []

    def restore() -> None:
        try:
            start.wait()
            archive_restore(archived=archived, user=bob)
        except BaseException as exc:  # reported below, never swallowed
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=restore) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert [r.id for r in stores.get_store(agent).get(["mem-001"])] == ["mem-001"]
    assert agent.events.filter(verb="memory_restored").count() == 1
    assert Decision.objects.filter(agent=agent, kind="keep").count() == 1
