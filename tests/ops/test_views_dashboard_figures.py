"""The dashboard's figures come from the database (samples recorded by passes, applies and
imports), so 50 agents cost a few queries and no store reads."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from memoryadmin.agents.models import Agent, StoreSample
from memoryadmin.core import stores
from memoryadmin.proposals.models import Pass

pytestmark = pytest.mark.django_db


def test_counts_come_from_the_latest_sample_without_reading_the_stores(
    client: Client, carol, settings, unique_name
) -> None:
    agents = [
        Agent.objects.create(
            name=f"Agent {i:02d}", slug=unique_name("a"), collection_name=unique_name("c")
        )
        for i in range(12)
    ]
    for i, agent in enumerate(agents):
        StoreSample.objects.create(agent=agent, count=10 + i)
        StoreSample.objects.create(agent=agent, count=1000 + i)  # the latest one counts
        Pass.objects.create(agent=agent, trigger="operator", status="proposed")
    # none of these agents has a collection: any store read would say "unavailable"
    client.force_login(carol)
    with CaptureQueriesContext(connection) as queries:
        r = client.get(reverse("dashboard"))
    assert r.status_code == 200 and b"unavailable" not in r.content
    assert [row.store.count for row in r.context["rows"]] == [1000 + i for i in range(12)]
    assert all(row.pending == 1 and row.last_pass is not None for row in r.context["rows"])
    assert len(queries) < 20  # not proportional to the number of agents
    # while the server is down, the same counts are shown as the last known ones, not current
    settings.CHROMA_MODE, settings.CHROMA_HOST, settings.CHROMA_PORT = "http", "127.0.0.1", 9
    stores.reset_client_cache()
    r = client.get(reverse("dashboard"))
    assert [row.store.last_known for row in r.context["rows"]] == [1000 + i for i in range(12)]
    assert all(row.store.count is None for row in r.context["rows"])


def test_an_import_records_the_store_size(agent_with_memories) -> None:
    from consolidation import MemoryRecord
    from memoryadmin.memories.services.transfer import memories_write

    agent = agent_with_memories(2)
    assert not StoreSample.objects.filter(agent=agent).exists()
    rec = MemoryRecord("new-1", "A fresh memory about kites.", None, {"importance": 0.5})
    memories_write(agent=agent, records=[rec])
    assert StoreSample.objects.filter(agent=agent).latest("taken_at").count == 3


def test_every_change_of_the_store_s_size_moves_the_dashboard_s_count(
    client: Client, carol, alice, agent_with_memories
) -> None:
    """Delete a memory, then restore it from the archive: the dashboard's count follows both
    (it was one behind after a restore) and is the store's own count."""
    from memoryadmin.memories.models import ArchivedMemory
    from memoryadmin.memories.services.memories import memory_delete
    from memoryadmin.proposals.services.rollback import archive_restore

    agent = agent_with_memories(3)
    store = stores.get_store(agent)
    victim = "mem-000"
    client.force_login(carol)

    def shown() -> int:
        (row,) = [r for r in client.get(reverse("dashboard")).context["rows"] if r.agent == agent]
        return row.store.count

    memory_delete(agent=agent, memory_id=victim, user=alice)
    assert shown() == store.count() == 2
    archived = ArchivedMemory.objects.get(agent=agent, memory_id=victim)
    archive_restore(archived=archived, user=alice)
    assert shown() == store.count() == 3
