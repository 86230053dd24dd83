"""Agents and single-memory operator actions through the services: validation, archive, audit."""

from __future__ import annotations

import io
import json
import math

import pytest
from django.core.management import call_command

from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.agents.services.agents import agent_create, agent_delete, agent_update
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.models import AuditEvent
from memoryadmin.core.validation import MAX_DOCUMENT_CHARS
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.memories.services.memories import memory_delete, memory_edit, memory_set_pinned
from memoryadmin.proposals.services.passes import pass_request, pass_run
from tests.conftest import DISTINCT_FACTS

pytestmark = pytest.mark.django_db


def test_it_creates_an_agent_with_its_collection_and_schedule(alice, unique_name):
    from django_q.models import Schedule

    name = unique_name("mem")
    agent = agent_create(
        name="Ops bot",
        slug="ops-bot",
        collection_name=name,
        user=alice,
        policy={"max_loss_fraction": 0.1},
    )
    assert stores.collection_exists(name)
    assert agent.get_policy().max_loss_fraction == 0.1
    assert Schedule.objects.get(name="consolidate:ops-bot").cron == "0 3 * * *"
    event = AuditEvent.objects.get(agent=agent, verb="agent_created")
    assert event.actor == "alice"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": " "}, "needs a name"),
        ({"slug": "Not A Slug"}, "slug"),
        ({"collection_name": "ab"}, "3-512 characters"),
        ({"collection_name": "-bad-"}, "letter or digit"),
        ({"collection_name": "a..b"}, "must not contain '..'"),
        ({"collection_name": "10.0.0.1"}, "IPv4"),
        ({"policy": {"max_loss_fraction": math.nan}}, "max_loss_fraction"),
        ({"policy": {"max_loss_fraction": 2}}, "max_loss_fraction"),
        ({"policy": {"max_loss_fraction": True}}, "max_loss_fraction"),
        ({"policy": {"max_loss_fraction": "abc"}}, "max_loss_fraction"),
        ({"policy": {"nonsense": 1}}, "unknown policy fields"),
        ({"field_map": {"colour": "c"}}, "unknown field-map keys"),
        ({"schedule_cron": "every day"}, "5-field cron"),
        ({"schedule_cron": "61 3 * * *"}, "Invalid cron expression"),
        ({"attach": True}, "no collection named"),
    ],
)
def test_bad_agent_input_is_refused_and_nothing_is_written(fields, message, unique_name):
    from django_q.models import Schedule

    kwargs = {"name": "Bot", "slug": "bot", "collection_name": unique_name("mem")} | fields
    with pytest.raises(ValueError, match=message):
        agent_create(**kwargs)
    assert not Agent.objects.exists() and not Schedule.objects.exists()
    if "collection_name" not in fields:
        assert not stores.collection_exists(kwargs["collection_name"])


def test_it_attaches_an_existing_collection_and_refuses_to_recreate_it(
    agent_with_memories, unique_name
):
    first = agent_with_memories(3)
    with pytest.raises(ValueError, match="already belongs"):
        agent_create(name="X", slug="x", collection_name=first.collection_name, attach=True)
    name = unique_name("ext")
    stores.create_collection(name)
    with pytest.raises(ValueError, match="attach it instead"):
        agent_create(name="X", slug="x", collection_name=name)
    agent = agent_create(name="X", slug="x", collection_name=name, attach=True)
    assert agent.attached


def test_it_updates_and_deletes_an_agent_keeping_its_collection(agent_with_memories, alice):
    from django_q.models import Schedule

    agent = agent_with_memories(2, slug="helper")
    with pytest.raises(ValueError, match="collection_name"):
        agent_update(agent=agent, collection_name="other")
    agent = agent_update(agent=agent, user=alice, slug="helper-2", schedule_cron="30 4 * * 1")
    assert list(Schedule.objects.values_list("name", "cron")) == [
        ("consolidate:helper-2", "30 4 * * 1")
    ]
    event = AuditEvent.objects.get(agent=agent, verb="agent_updated")
    assert event.data["changed"] == ["schedule_cron", "slug"]

    agent_delete(agent=agent, user=alice)
    assert not Agent.objects.exists() and not Schedule.objects.exists()
    assert stores.collection_exists(agent.collection_name)
    assert AuditEvent.objects.filter(verb="agent_deleted", agent=None).count() == 1


def test_an_agent_with_an_active_pass_cannot_be_deleted(agent_with_memories):
    agent = agent_with_memories(2)
    pass_request(agent=agent, trigger="operator")
    with pytest.raises(ServiceError, match="queued"):
        agent_delete(agent=agent)


def test_pin_edit_delete_archive_the_prior_version_and_audit(agent_with_memories, alice):
    agent = agent_with_memories(3)
    store = stores.get_store(agent)
    memory_set_pinned(agent=agent, memory_id="mem-000", pinned=True, user=alice)
    assert store.get(["mem-000"])[0].metadata["pinned"] is True
    memory_edit(agent=agent, memory_id="mem-001", document="Melanie ran a marathon.", user=alice)
    edited = store.get(["mem-001"])[0]
    assert edited.document == "Melanie ran a marathon."
    memory_delete(agent=agent, memory_id="mem-002", user=alice)
    assert store.get(["mem-002"]) == []

    archived = {a.action: a for a in ArchivedMemory.objects.filter(agent=agent)}
    assert set(archived) == {"operator_pin", "operator_edit", "operator_delete"}
    assert archived["operator_edit"].document == DISTINCT_FACTS[1]
    assert archived["operator_delete"].get_embedding().shape == (384,)
    assert all(a.actor == "alice" for a in archived.values())
    assert set(AuditEvent.objects.filter(agent=agent).values_list("verb", flat=True)) >= {
        "memory_pinned",
        "memory_edited",
        "memory_deleted",
    }


@pytest.mark.parametrize("document", ["", "   ", "x" * (MAX_DOCUMENT_CHARS + 1), 42])
def test_a_bad_memory_edit_writes_nothing(agent_with_memories, alice, document):
    agent = agent_with_memories(2)
    before = agent_census(agent=agent)
    with pytest.raises(ValueError):
        memory_edit(agent=agent, memory_id="mem-000", document=document, user=alice)
    assert agent_census(agent=agent) == before


def test_an_unknown_memory_is_a_clear_error(agent_with_memories, alice):
    agent = agent_with_memories(1)
    with pytest.raises(ServiceError, match="not in"):
        memory_delete(agent=agent, memory_id="nope", user=alice)


def test_census_command_prints_counts_and_hashes(agent_with_memories, alice):
    agent = agent_with_memories(3)
    out = io.StringIO()
    call_command("census", agent.slug, "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["store"]["count"] == 3 and len(data["store"]["sha256"]) == 64
    assert data["archive"]["count"] == 0
    memory_set_pinned(agent=agent, memory_id="mem-000", pinned=True, user=alice)
    out2 = io.StringIO()
    call_command("census", agent.slug, "--json", stdout=out2)
    after = json.loads(out2.getvalue())
    assert after["store"]["count"] == 3 and after["store"]["sha256"] != data["store"]["sha256"]
    assert after["archive"]["count"] == 1
    text = io.StringIO()
    call_command("census", agent.slug, stdout=text)
    assert "store" in text.getvalue() and "archive" in text.getvalue()


def test_roles_are_idempotent_and_grant_the_right_powers(alice, bob, carol):
    from memoryadmin.core.roles import can_edit_memories, can_manage, can_review

    call_command("setup_roles", stdout=io.StringIO())
    assert (can_review(alice), can_manage(alice), can_edit_memories(alice)) == (True, True, True)
    assert (can_review(bob), can_manage(bob), can_edit_memories(bob)) == (True, False, False)
    assert (can_review(carol), can_manage(carol), can_edit_memories(carol)) == (False, False, False)


def test_deleting_an_agent_keeps_its_archive_and_audit_trail(agent_with_memories, alice):
    agent = agent_with_memories(3)
    memory_delete(agent=agent, memory_id="mem-001", user=alice)  # archived + audited
    run = pass_request(agent=agent, trigger="operator")
    pass_run(run=run)
    events = AuditEvent.objects.count()
    agent_delete(agent=agent, user=alice)
    kept = ArchivedMemory.objects.get(memory_id="mem-001")  # I-1: nothing is lost
    assert kept.agent is None and kept.document
    assert AuditEvent.objects.count() == events + 1  # the trail plus "agent_deleted"


def test_an_edited_memory_is_the_newer_one_when_a_later_pass_reconciles(agent_with_memories, alice):
    """The edit stamps updated_at, so an older statement of the same fact is superseded by the
    edited memory, not the other way round (created_at alone would say the edit is older)."""
    from consolidation import FieldMap, Policy
    from consolidation.planning import plan

    agent = agent_with_memories(
        ["Caroline lives in Boston", "Caroline lives in Austin"],
        [{"created_at": "2024-01-01T00:00:00+00:00"}, {"created_at": "2024-06-01T00:00:00+00:00"}],
    )
    store = stores.get_store(agent)
    memory_edit(agent=agent, memory_id="mem-000", document="Caroline lives in Denver", user=alice)
    edited = store.get(["mem-000"])[0]
    assert FieldMap().get_updated_at(edited.metadata) is not None
    records = list(store.iter_records())
    from django.utils import timezone

    p = plan(records, Policy(trim_to_guard=False), now=timezone.now())
    (op,) = [o for o in p.operations if o.removes]
    assert op.kind.value == "reconcile" and op.removes == ["mem-001"], op.reason
