"""What a forget request's purge checks, covers and survives: a listed id that changed since
planning is left alone and listed; the LLM judge's verdict cache and the probes that ask about a
forgotten memory are purged with it; a purge cut short by a dead worker is resumed by recovery
from its journal. Real Chroma (in-process), django-q2 sync."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from consolidation import MemoryRecord
from memoryadmin import tasks
from memoryadmin.agents.models import ProbeQuery
from memoryadmin.agents.services.probes import probe_create
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.core.models import AuditEvent
from memoryadmin.memories.models import ForgetRequest
from memoryadmin.memories.selectors.forget import ForgetSelection, last_applied_forget
from memoryadmin.memories.services import forget as forget_module
from memoryadmin.memories.services.forget import forget_approve, forget_request_create
from memoryadmin.ops.services.recovery import forget_requests_recover, passes_recover
from memoryadmin.proposals.services.review import pass_approve, pass_reject
from tests.conftest import DISTINCT_FACTS, login
from tests.memories.forget_helpers import approve, database_traces
from tests.ops.test_recover_worker import dead_worker
from tests.proposals.test_services_passes import run_pass

pytestmark = pytest.mark.django_db

PASSPORT = "Gina's passport number is ZQ-4471 and expires in 2031."


@pytest.fixture
def verdicts(settings, tmp_path):
    """The LLM judge's verdict cache in a fresh file."""
    settings.VERDICT_CACHE_PATH = tmp_path / "verdicts.sqlite3"
    return stores.verdict_cache()


def live(agent) -> dict[str, MemoryRecord]:
    return {r.id: r for r in stores.get_store(agent).iter_records(include_embeddings=True)}


def overwrite(agent, memory_id: str, text: str, **meta) -> None:
    """Write ``memory_id`` again as an import would (same id, new text and metadata)."""
    old = live(agent)[memory_id]
    stores.get_store(agent).upsert([MemoryRecord(memory_id, text, old.embedding, dict(meta))])


def test_an_id_written_again_since_planning_is_skipped_listed_and_kept(
    agent_with_memories, bob, client, django_capture_on_commit_callbacks
):
    users = [{"user_id": "alice"}] * 4 + [{"user_id": "carl"}]
    agent = agent_with_memories(5, metadatas=users)
    sel = ForgetSelection("scope", key="user_id", value="alice")
    req, plan = forget_request_create(agent=agent, selection=sel, user=bob)
    assert [m["id"] for m in plan.live] == ["mem-000", "mem-001", "mem-002", "mem-003"]
    # After planning, an import writes mem-001 for bob, and mem-002 gets another text.
    overwrite(agent, "mem-001", "Bob keeps his spare keys with the neighbour.", user_id="bob")
    overwrite(agent, "mem-002", "Alice now prefers green tea.", user_id="alice")

    req = approve(django_capture_on_commit_callbacks, req, bob)

    assert req.status == "applied"
    after = live(agent)
    assert set(after) == {"mem-001", "mem-002", "mem-004"}
    assert after["mem-001"].metadata["user_id"] == "bob"
    assert after["mem-002"].document == "Alice now prefers green tea."
    assert req.skipped == [
        {"id": "mem-001", "why": "another scope now holds this id"},
        {"id": "mem-002", "why": "its text or metadata changed since planning"},
    ]
    assert req.purged["live"] == 2 and req.purged["skipped"] == 2
    page = login(client, bob).get(reverse("forget_detail", args=[req.pk])).content.decode()
    assert "mem-001" in page and "another scope now holds this id" in page
    assert database_traces([DISTINCT_FACTS[0], DISTINCT_FACTS[3]]) == []


def test_the_judges_cached_verdicts_about_a_forgotten_memory_are_purged(
    agent_with_memories, bob, django_capture_on_commit_callbacks, verdicts
):
    agent = agent_with_memories(4)
    gone, kept = DISTINCT_FACTS[1], DISTINCT_FACTS[2]
    verdicts.put(
        "pair-with-gone", {"verdict": "conflict", "keep": "both", "why": "x"}, (gone, kept)
    )
    verdicts.put("pair-without", {"verdict": "distinct", "keep": "both", "why": "y"}, (kept, "z"))
    quoting = {"verdict": "same", "keep": "a", "why": f"both say: {gone}"}
    verdicts.put("pair-quoting", quoting, (DISTINCT_FACTS[3], "w"))
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("ids", ids=("mem-001",)), user=bob
    )
    req = approve(django_capture_on_commit_callbacks, req, bob)
    assert verdicts.get("pair-with-gone") is None and verdicts.get("pair-quoting") is None
    assert verdicts.get("pair-without") is not None
    assert req.purged["verdict_cache_entries"] == 2
    assert gone.encode() not in verdicts_bytes(verdicts)


def test_a_pass_leaves_its_texts_features_for_the_next_and_a_forget_drops_them(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(4)
    cache = stores.feature_cache()
    run_pass(agent, django_capture_on_commit_callbacks)
    gone = DISTINCT_FACTS[1]
    assert cache.forget([]) == 0 and len(cache) >= 4  # the pass kept every text's features
    held = len(cache)
    assert all(gone not in repr(v) for v in vars(cache).values())  # hashes, never the text
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("ids", ids=("mem-001",)), user=bob
    )
    req = approve(django_capture_on_commit_callbacks, req, bob)
    assert req.purged["feature_cache_entries"] == 1
    assert len(cache) == held - 1 and cache.forget([gone]) == 0


def test_an_incremental_pass_keeps_the_stores_rows_and_a_forget_drops_them_everywhere(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    from tests.conftest import memory_records

    agent = agent_with_memories(DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2])  # two merges
    first = run_pass(agent, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=first, user=bob)
    stores.get_store(agent).upsert(memory_records([DISTINCT_FACTS[2]], prefix="late"))

    def kept():  # what the next pass of this process plans with
        return stores.row_cache(agent, forgotten=last_applied_forget(agent=agent))

    cache = kept()
    assert len(cache) == 0  # a full pass keeps no rows
    nxt = run_pass(agent, django_capture_on_commit_callbacks)  # incremental: late-000 is new
    assert [sorted(op.source_ids) for op in nxt.operations.all()] == [["late-000", "mem-002"]]
    live_count = stores.get_store(agent).count()
    assert kept() is cache and len(cache) == live_count  # every row kept
    with django_capture_on_commit_callbacks(execute=True):
        pass_reject(run=nxt, user=bob, note="not now")
    # a worker process that planned before the forget holds the store's rows under the
    # forget stamp of then
    stamp, other = stores._caches["rows"][agent.collection_name]
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("ids", ids=("mem-003",)), user=bob
    )
    req = approve(django_capture_on_commit_callbacks, req, bob)
    assert req.purged["row_cache_rows"] == live_count and len(cache) == 0  # this process's
    stores._caches["rows"][agent.collection_name] = (stamp, other)  # as that process has it
    assert kept() is not other  # its next pass starts the rows again
    assert len(kept()) == 0


def verdicts_bytes(cache) -> bytes:
    return b"".join(p.read_bytes() for p in Path(cache.path).parent.glob("verdicts.sqlite3*"))


def test_a_probe_about_a_forgotten_memory_and_its_audit_are_purged(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    agent = agent_with_memories([PASSPORT, DISTINCT_FACTS[7], DISTINCT_FACTS[5]])

    def probe(question: str, answer: str) -> ProbeQuery:
        return probe_create(agent=agent, question=question, answer=answer, user=bob)

    gone = [
        probe("Which passport is ZQ-4471?", "Gina's"),  # shares the passport number
        probe("When does Gina's passport expire?", "in 2031"),  # only that memory answers it
    ]
    kept = [
        probe("What happened in 2031?", "nothing yet"),  # a year names no one
        probe("Who adopted Pixel?", "Gina"),  # a memory the forget leaves still answers it
        probe("What is Tim learning?", "the cello"),
    ]
    assert "ZQ-4471" in str(AuditEvent.objects.filter(verb="probe_created").values("data"))
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("contains", text="passport"), user=bob
    )
    req = approve(django_capture_on_commit_callbacks, req, bob)
    left = set(ProbeQuery.objects.filter(agent=agent).values_list("pk", flat=True))
    assert left == {p.pk for p in kept} and not left & {p.pk for p in gone}
    assert req.purged["probes"] == 2 and req.purged["probe_events"] == 2
    assert database_traces(["ZQ-4471", "When does Gina's passport expire?"]) == []
    assert database_traces(["What is Tim learning?"])  # the other probes and events stay


def test_recovery_finishes_a_purge_a_dead_worker_left_half_done(
    agent_with_memories, bob, client, monkeypatch, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(8)
    ids = tuple(f"mem-{i:03d}" for i in range(4))
    req, _ = forget_request_create(agent=agent, selection=ForgetSelection("ids", ids=ids), user=bob)
    monkeypatch.setattr(forget_module, "DELETE_CHUNK", 2)

    class Killed(BaseException):
        """The worker process dying right after its first chunk was journaled."""

    def die(name: str) -> None:
        if name == "forget:deleted":
            raise Killed

    monkeypatch.setattr(forget_module, "failpoint", die)
    with pytest.raises(Killed), django_capture_on_commit_callbacks(execute=True):
        forget_approve(request=req, user=bob)
    req.refresh_from_db()
    assert req.status == "applying" and req.journal["deleted"] == ["mem-000", "mem-001"]
    assert set(live(agent)) == {f"mem-{i:03d}" for i in range(2, 8)}  # half deleted
    page = login(client, bob).get(reverse("forget_detail", args=[req.pk])).content.decode()
    assert "The worker is forgetting these memories: 2 of 4 deleted from the store" in page
    # The lease a killed worker leaves behind: its process is gone, the lease not yet expired.
    ForgetRequest.objects.filter(pk=req.pk).update(
        lease_owner=dead_worker(), lease_expires_at=timezone.now() + timedelta(hours=1)
    )
    monkeypatch.setattr(forget_module, "failpoint", lambda name: None)

    passes_recover()

    req.refresh_from_db()
    assert req.status == "applied" and req.purged["live"] == 4
    assert set(live(agent)) == {f"mem-{i:03d}" for i in range(4, 8)}  # nothing else removed
    assert database_traces(list(DISTINCT_FACTS[:4])) == []
    assert req.lease_owner == "" and req.journal == {"skipped": []}


def test_a_live_worker_holding_the_lease_is_left_alone(agent_with_memories, bob):
    agent = agent_with_memories(3)
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("ids", ids=("mem-000",)), user=bob
    )
    forget_approve(request=req, user=bob)  # the task not run: applying, no lease yet
    ForgetRequest.objects.filter(pk=req.pk).update(
        lease_owner="elsewhere:1", lease_expires_at=timezone.now() + timedelta(hours=1)
    )
    assert tasks.apply_forget(req.pk) == f"forget request #{req.pk}: being purged by elsewhere:1"
    lines: list[str] = []
    passes_recover(stdout=lines.append)
    assert f"forget request #{req.pk}: being purged by elsewhere:1" in lines
    assert stores.get_store(agent).count() == 3


def test_a_pass_waits_for_a_forget_the_worker_has_not_finished(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    texts = ["Gina adopted a grey rescue cat named Pixel."] * 2 + ["Tim plays the cello."]
    agent = agent_with_memories(texts, policy={"max_loss_fraction": 0.7})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    assert run.status == "proposed"
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("contains", text="Pixel"), user=bob
    )
    assert forget_approve(request=req, user=bob).status == "applying"  # queued for the worker
    with pytest.raises(ServiceError, match=f"Forget request #{req.pk} is being applied"):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "proposed" and stores.get_store(agent).count() == 3
    assert tasks.apply_forget(req.pk) == f"forget request #{req.pk}: applied"
    run.refresh_from_db()
    assert run.status == "stale"  # it held the forgotten memories


def test_recovery_leaves_a_purge_applying_while_the_store_is_down(
    agent_with_memories, bob, monkeypatch
):
    agent = agent_with_memories(3)
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("ids", ids=("mem-000",)), user=bob
    )
    forget_approve(request=req, user=bob)  # applying; its worker died before purging
    real_get_store = stores.get_store

    def down(_agent):
        raise StoreUnavailable("Cannot reach the Chroma server (test)")

    monkeypatch.setattr(stores, "get_store", down)
    lines: list[str] = []
    forget_requests_recover(stdout=lines.append)
    req.refresh_from_db()
    assert req.status == "applying" and any("waits for the store" in x for x in lines)
    monkeypatch.setattr(stores, "get_store", real_get_store)
    [done] = forget_requests_recover()
    assert done.status == "applied" and stores.get_store(agent).count() == 2


def test_a_request_an_old_web_process_left_applying_is_finished_without_a_trace(
    agent_with_memories, bob, django_capture_on_commit_callbacks
):
    """Before the worker purged them, approval deleted the live memories in the web process:
    one killed right after that left the request ``applying`` with no journal and the texts
    only in the database. Recovery finishes it, finding the texts through the proposal."""
    gina = "Gina adopted a grey rescue cat named Pixel."
    agent = agent_with_memories([gina, gina, DISTINCT_FACTS[7]], policy={"max_loss_fraction": 0.7})
    run = run_pass(agent, django_capture_on_commit_callbacks)
    pass_reject(run=run, user=bob, note=f"Keep both copies of “{gina}” for now.")
    assert database_traces([gina])
    req, _ = forget_request_create(
        agent=agent, selection=ForgetSelection("contains", text="Pixel"), user=bob
    )
    items = {k: v for k, v in req.items.items() if k != "planned"}  # as requests were stored
    ForgetRequest.objects.filter(pk=req.pk).update(status="applying", items=items)
    stores.get_store(agent).delete(["mem-000", "mem-001"])  # then the web process died

    [done] = forget_requests_recover()

    assert done.status == "applied" and stores.get_store(agent).count() == 1
    assert database_traces([gina]) == []  # the reviewer's note quoted it too
