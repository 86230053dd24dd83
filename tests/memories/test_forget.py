"""Forget requests through the services: a mem0 store of two users (mem0's own code) — forgetting
one leaves the other byte-identical; afterwards no trace of the forgotten texts anywhere (every
text and JSON column of every model, Chroma, the vector cache, ``var/``, the JSONL export);
the tombstone; refusals; a forget beside a proposed, applying and rolled-back pass. Real
Chroma (in-process), django-q2 sync."""

from __future__ import annotations

import io

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from consolidation import MemoryRecord
from memoryadmin.api.mcp_tools import build_server
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.models import AuditEvent
from memoryadmin.memories.models import ForgetRequest
from memoryadmin.memories.selectors.forget import ForgetSelection, forget_plan, sha256
from memoryadmin.memories.services.forget import (
    forget_reject,
    forget_request_create,
)
from memoryadmin.memories.services.memories import memory_edit
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.review import pass_approve
from memoryadmin.proposals.services.rollback import pass_rollback_request
from tests.api.api_helpers import api_factory
from tests.memories.forget_helpers import (
    ALICE,
    ALICE_DELETED,
    BOB,
    cache_traces,
    chroma_traces,
    database_traces,
    file_traces,
    mem0_agent,
    user_census,
)
from tests.memories.forget_helpers import (
    approve as approve_now,
)
from tests.proposals.test_decisions import tool
from tests.proposals.test_services_passes import run_pass

pytestmark = pytest.mark.django_db

ALICE_TEXTS = sorted({*ALICE, ALICE_DELETED})


@pytest.fixture
def approve(django_capture_on_commit_callbacks):
    """``approve(req, user, note="")``: approve and run the worker's purge (sync)."""
    return lambda req, user, note="": approve_now(
        django_capture_on_commit_callbacks, req, user, note
    )


@pytest.fixture
def var_dir(settings, tmp_path):
    """``var/`` and the vector cache in a fresh directory, so the test can read every file."""
    settings.VAR_DIR = tmp_path
    settings.VECTOR_CACHE_PATH = tmp_path / "cache" / "vectors.sqlite3"
    return tmp_path


def test_forgetting_a_mem0_user_leaves_the_other_byte_identical_and_no_trace(
    approve, unique_name, alice, bob, django_capture_on_commit_callbacks, var_dir
):
    agent = mem0_agent(unique_name, django_capture_on_commit_callbacks, alice)
    applied = agent.passes.get(status=Pass.Status.APPLIED)
    assert database_traces(ALICE_TEXTS) and cache_traces(ALICE_TEXTS)  # they were there
    bob_before = user_census(agent, "bob")
    assert bob_before[0] == 2  # bob's duplicate merged

    sel = ForgetSelection("scope", key="user_id", value="alice")
    plan = forget_plan(agent=agent, selection=sel)  # the dry run: stores nothing
    assert not ForgetRequest.objects.exists()
    assert {m["document"] for m in plan.live} == {ALICE[0], ALICE[2], ALICE[3]}
    archived = {a["document"] for a in plan.archived}
    assert {ALICE[0], ALICE[3], ALICE_DELETED} <= archived  # merged sides, pin, delete
    assert plan.count == len(plan.live) + len(plan.archived)

    req, _ = forget_request_create(agent=agent, selection=sel, user=bob, reason="ticket 7")
    assert req.status == "proposed" and req.total == plan.count
    assert user_census(agent, "bob") == bob_before  # a proposal removes nothing
    req = approve(req, bob, "erasure request")
    assert req.status == "applied"

    assert user_census(agent, "bob") == bob_before
    assert user_census(agent, "alice")[0] == 0
    assert database_traces(ALICE_TEXTS) == []
    assert chroma_traces(ALICE_TEXTS) == []
    assert cache_traces(ALICE_TEXTS) == 0
    out = var_dir / "export.jsonl"
    call_command("export_memories", agent.slug, str(out), stdout=io.StringIO())
    assert file_traces(var_dir, ALICE_TEXTS) == []
    assert all(t.encode() in out.read_bytes() for t in set(BOB))

    # the tombstone: who, when, how many, the selection hashed
    req.refresh_from_db()
    assert (req.requested_actor, req.decided_actor, req.reason) == ("bob", "bob", "ticket 7")
    assert req.selection == {"kind": "scope", "key": "user_id", "value_sha256": sha256("alice")}
    assert req.items == {} and req.display == "" and req.finished_at is not None
    assert req.purged["live"] == 3 and req.purged["archived"] == req.archived_count
    event = AuditEvent.objects.get(verb="forget_applied")
    assert event.data["selection"] == req.selection and "alice" not in str(event.data)
    # the pass that held alice's memories can no longer be undone, and says why
    applied.refresh_from_db()
    assert not applied.can_roll_back
    assert f"purged by forget request #{req.pk}" in applied.undo_expired
    with pytest.raises(ServiceError, match="purged by forget request"):
        pass_rollback_request(run=applied, user=bob)


@pytest.mark.parametrize(
    ("selection", "gone"),
    [
        (ForgetSelection("ids", ids=("mem-001", "mem-003")), {1, 3}),
        (ForgetSelection("contains", text="CELLO"), {7}),
        (ForgetSelection("similar", text="a cat adopted from a shelter", similarity=0.5), {5}),
    ],
)
def test_each_selection_kind_removes_exactly_its_matches(
    approve, agent_with_memories, bob, selection, gone
):
    agent = agent_with_memories(10)
    req, plan = forget_request_create(agent=agent, selection=selection, user=bob)
    assert {m["id"] for m in plan.live} == {f"mem-{i:03d}" for i in gone}
    approve(req, bob)
    left = {r.id for r in stores.get_store(agent).iter_records(include_embeddings=False)}
    assert left == {f"mem-{i:03d}" for i in range(10)} - {f"mem-{i:03d}" for i in gone}


def test_bad_selections_are_refused_with_a_sentence(agent_with_memories, bob):
    agent = agent_with_memories(3)
    with pytest.raises(ValueError, match="not a scope key"):
        forget_plan(agent=agent, selection=ForgetSelection("scope", key="colour", value="x"))
    with pytest.raises(ValueError, match="at least 3 characters"):
        forget_plan(agent=agent, selection=ForgetSelection("contains", text="a"))
    with pytest.raises(ServiceError, match="nothing stored"):
        forget_request_create(
            agent=agent, selection=ForgetSelection("ids", ids=("nope",)), user=bob
        )
    assert not ForgetRequest.objects.exists()


def test_a_rejected_request_removes_nothing_and_cannot_be_approved(
    approve, agent_with_memories, bob
):
    agent = agent_with_memories(3)
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("ids", ids=("mem-000",)), user=bob
    )
    forget_reject(request=req, user=bob, note="wrong user")
    with pytest.raises(ServiceError, match="only a proposed"):
        approve(req, bob)
    assert stores.get_store(agent).count() == 3


def test_a_proposed_pass_holding_a_forgotten_memory_becomes_stale(
    approve, agent_with_memories, bob, django_capture_on_commit_callbacks
):
    texts = ["Gina adopted a grey rescue cat named Pixel."] * 2 + ["Tim plays the cello."]
    agent = agent_with_memories(texts, policy={"max_loss_fraction": 0.7})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.PROPOSED
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("contains", text="Pixel"), user=bob
    )
    approve(req, bob)
    run.refresh_from_db()
    assert run.status == Pass.Status.STALE
    assert run.reason == f"purged by forget request #{req.pk}"
    assert not run.operations.filter(sources__document__contains="Pixel").exists()


def test_a_forget_waits_for_an_applying_pass_then_for_nothing(
    approve, agent_with_memories, bob, django_capture_on_commit_callbacks
):
    texts = ["Gina adopted a grey rescue cat named Pixel."] * 2 + ["Tim plays the cello."]
    agent = agent_with_memories(texts, policy={"max_loss_fraction": 0.7})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("contains", text="Pixel"), user=bob
    )
    Pass.objects.filter(pk=run.pk).update(status=Pass.Status.APPLYING, lease_owner="elsewhere:1")
    with pytest.raises(ServiceError, match="is applying; approve the forget request when"):
        approve(req, bob)
    req.refresh_from_db()
    assert req.status == "proposed" and stores.get_store(agent).count() == 3
    Pass.objects.filter(pk=run.pk).update(status=Pass.Status.PROPOSED, lease_owner="")
    assert approve(req, bob).status == "applied"
    assert stores.get_store(agent).count() == 1


def test_a_rolled_back_pass_keeps_its_status_and_loses_its_texts(
    approve, agent_with_memories, bob, django_capture_on_commit_callbacks
):
    texts = ["Gina adopted a grey rescue cat named Pixel."] * 2 + ["Tim plays the cello."]
    agent = agent_with_memories(texts, policy={"max_loss_fraction": 0.7})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    with django_capture_on_commit_callbacks(execute=True):
        pass_rollback_request(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == Pass.Status.ROLLED_BACK
    edited = "Gina adopted a black rescue cat named Pixel."
    memory_edit(agent=agent, memory_id="mem-000", document=edited, user=bob)
    assert database_traces([edited])  # the audit quotes the edit
    req, plan = forget_request_create(
        agent=agent, selection=ForgetSelection("contains", text="Pixel"), user=bob
    )
    assert len(plan.live) == 2 and plan.archived  # restored originals and their archive rows
    approve(req, bob)
    run.refresh_from_db()
    assert run.status == Pass.Status.ROLLED_BACK
    assert database_traces(["rescue cat named Pixel"]) == []
    assert stores.get_store(agent).count() == 1


def test_no_surface_shows_a_forgotten_text_afterwards(
    approve, agent_with_memories, alice, bob, client, django_capture_on_commit_callbacks
):
    """Pages, CSV, the JSONL export, the API, MCP and Django's admin, after a forget of a
    memory that a pass merged (archived copies, operation sources) and an operator edited
    (the audit quotes both texts)."""
    secret = "Gina's door code is ZQ-4471 and the spare key sits under the mat."
    edited = "Gina's door code is ZQ-4472 and the spare key sits under the mat."
    agent = agent_with_memories(
        [secret, secret, "Tim plays the cello."], policy={"max_loss_fraction": 0.7}
    )
    run = run_pass(agent, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    merged = next(r for r in stores.get_store(agent).iter_records() if "ZQ-4471" in r.document)
    memory_edit(agent=agent, memory_id=merged.id, document=edited, user=alice)
    staff = get_user_model().objects.create_superuser("root", "r@example.org", "pw")
    web = Client()
    web.force_login(staff)
    before = [reverse("archive_list", args=[agent.slug]), reverse("pass_detail", args=[run.pk])]
    assert all(b"ZQ-4471" in web.get(url).content for url in before)  # they were shown
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("contains", text="door code"), user=bob
    )
    approve(req, bob)

    urls = [
        reverse("memory_list", args=[agent.slug]),
        reverse("archive_list", args=[agent.slug]),
        reverse("memories_export", args=[agent.slug]),
        reverse("pass_detail", args=[run.pk]),
        reverse("audit"),
        reverse("audit_csv"),
        reverse("audit_events"),
        reverse("audit_events_csv"),
        reverse("forget_detail", args=[req.pk]),
        reverse("forget_page", args=[agent.slug]),
    ]
    for model in admin.site._registry:
        meta = model._meta
        urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        for pk in model.objects.values_list("pk", flat=True)[:50]:
            urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[pk]))
    api = api_factory(alice, bob, bob)("admin")
    needles = ["door code", "ZQ-4471", "ZQ-4472"]
    shown = {}
    for url in urls:
        r = web.get(url)
        assert r.status_code == 200, url
        shown[url] = b"".join(r.streaming_content) if r.streaming else r.content
    for path in (f"/agents/{agent.slug}/memories", f"/passes/{run.pk}", "/audit/events"):
        shown[path] = api.get(path).content
    server = build_server(user_id=bob.pk)
    shown["mcp get_pass"] = tool(server, "get_pass")(pass_id=run.pk).model_dump_json().encode()
    hits = tool(server, "search_memories")(agent=agent.slug, query="door code under the mat")
    shown["mcp search"] = str([h.model_dump() for h in hits]).encode()
    leaks = [where for where, body in shown.items() if any(n.encode() in body for n in needles)]
    assert leaks == []
    assert "purged by forget request" in shown[reverse("pass_detail", args=[run.pk])].decode()


def test_a_pass_that_starts_while_a_forget_is_applying_fails_and_writes_nothing(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(3)
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("ids", ids=("mem-000",)), user=bob
    )
    ForgetRequest.objects.filter(pk=req.pk).update(status=ForgetRequest.Status.APPLYING)
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.FAILED
    assert run.error == f"Forget request #{req.pk} is being applied."
    assert not run.operations.exists()


def test_merged_memories_holding_a_forgotten_text_are_listed_for_the_reviewer(
    approve, agent_with_memories, bob, django_capture_on_commit_callbacks
):
    texts = ["Gina adopted a grey rescue cat named Pixel."] * 2 + ["Tim plays the cello."]
    agent = agent_with_memories(texts, policy={"max_loss_fraction": 0.7})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    merged = run.operations.get(kind="merge").result_id
    assert merged == "mem-000"  # the merge keeps the first copy's record; mem-001 leaves
    plan = forget_plan(agent=agent, selection=ForgetSelection("ids", ids=("mem-001",)))
    assert plan.live == [] and [a["memory_id"] for a in plan.archived] == ["mem-001"]
    assert [(m["id"], m["why"]) for m in plan.related] == [(merged, "merged from mem-001")]
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("ids", ids=("mem-001",)), user=bob
    )
    assert req.items["related"] == [merged] and req.related_count == 1
    approve(req, bob)
    assert merged in {r.id for r in stores.get_store(agent).iter_records()}  # left to the reviewer


def test_forgetting_a_merged_memory_by_id_takes_the_copies_it_was_merged_from(
    approve, agent_with_memories, bob, django_capture_on_commit_callbacks
):
    """A merge whose text is one source's keeps that source's id: an operator who forgets that
    id forgets the memory, so the archived copies of the sources it was merged from — at any
    depth: a second pass merged the result again — are listed and purged too; none is left to
    restore, and no table keeps the text."""
    secret = "Gina's door code is ZQ-4471 and the spare key sits under the mat."
    other = "Tim plays the cello in a quartet on Sundays."
    agent = agent_with_memories([secret, secret, other], policy={"max_loss_fraction": 0.7})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    store = stores.get_store(agent)
    kept = run.operations.get(kind="merge").result_id
    assert kept == "mem-000" and "mem-001" not in {r.id for r in store.iter_records()}
    # a copy written again by the agent, merged into the kept record by a second pass: the
    # kept record's merged_from now names that pass's sources only
    again = next(r for r in store.iter_records() if r.id == kept)
    store.upsert([MemoryRecord("mem-009", secret, again.embedding, {"source": "agent"})])
    second = run_pass(agent, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=second, user=bob)
    assert "mem-009" not in {r.id for r in store.iter_records()}

    selection = ForgetSelection("ids", ids=(kept,))
    plan = forget_plan(agent=agent, selection=selection)
    assert {a["memory_id"] for a in plan.archived} == {"mem-000", "mem-001", "mem-009"}
    assert plan.related == []
    req, _ = forget_request_create(agent=agent, selection=selection, user=bob)
    approve(req, bob)
    assert req.status == ForgetRequest.Status.APPLIED
    assert {r.document for r in store.iter_records()} == {other}
    assert not agent.archive.filter(document=secret).exists()  # nothing to restore
    assert database_traces([secret]) == []
