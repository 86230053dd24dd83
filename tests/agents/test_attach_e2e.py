"""End to end: a mem0 collection attached with ``attach_collection``, one default pass
proposed and applied through the console services.

The collection is written through mem0's own ``ChromaDB`` class (tests/agent_stores.py): two
users, facts each user's agent re-wrote word for word (mem0's ``infer=False`` path does not
deduplicate), the same fact for both users, three languages, 1536-d vectors, no documents.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter

import numpy as np
import pytest
from django.core.management import call_command

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import pass_approve
from memoryadmin.proposals.services.rollback import pass_rollback_request
from tests.agent_stores import FOREIGN_DIM, Mem0Memory, foreign_vector, raw_records, write_mem0
from tests.conftest import DISTINCT_FACTS

pytestmark = pytest.mark.django_db
pytest_plugins = ["tests.llm_stub"]

ALICE = [
    "Prefers dark mode in the editor",
    "Prefers dark mode in the editor",  # re-written by alice's agent
    "Trinkt morgens schwarzen Kaffee",
    "Trinkt morgens schwarzen Kaffee",  # re-written (German)
    "Works at Acme as a data engineer",
    *DISTINCT_FACTS[:10],
]
BOB = [
    "喜欢喝乌龙茶",
    "喜欢喝乌龙茶",  # re-written (Chinese)
    "Lives in Lisbon near the river",
    *DISTINCT_FACTS[10:],
]
SHARED = "Prefers dark mode in the editor"  # alice's fact, also written for bob


def stored(collection_name: str) -> list[tuple[str | None, dict, int]]:
    col = stores.get_client().get_collection(collection_name)
    got = col.get(include=["documents", "metadatas", "embeddings"])
    return [
        (d, m, len(e))
        for d, m, e in zip(got["documents"], got["metadatas"], got["embeddings"], strict=True)
    ]


def texts_by_user(collection_name: str) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for _, meta, _ in stored(collection_name):
        user = meta["user_id"]
        assert isinstance(user, str), meta  # a merge keeps its scope value as a scalar
        out.setdefault(user, Counter())[meta["data"]] += 1
    return out


def attach_and_run(
    name: str, memories: list[Mem0Memory], alice, bob, capture
) -> tuple[Agent, Pass]:
    """Write ``memories`` with mem0 (none: already written), attach, run one default pass,
    approve it; both users act."""
    if memories:
        write_mem0(stores.get_client(), name, memories)
    out = io.StringIO()
    call_command("attach_collection", f"agent-{name}", name, "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert (report["shape"], report["field_map"]["document"], report["vector_width"]) == (
        "mem0",
        "data",
        1536,
    )
    agent = Agent.objects.get(slug=f"agent-{name}")
    with capture(execute=True):
        run = pass_request(agent=agent, trigger="operator", user=alice)
    run.refresh_from_db()
    assert run.status == Pass.Status.PROPOSED, (run.status, run.error, run.reason)
    with capture(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    return agent, run


def test_a_default_pass_merges_each_users_rewrites_and_keeps_the_collections_shape(
    unique_name, alice, bob, django_capture_on_commit_callbacks
):
    name = unique_name("mem0")
    memories = [Mem0Memory(t, user_id="alice") for t in ALICE] + [
        Mem0Memory(t, user_id="bob") for t in BOB
    ]
    _, run = attach_and_run(name, memories, alice, bob, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.APPLIED, (run.status, run.error)
    merges = sorted(len(op.source_ids) for op in run.operations.all() if op.kind == "merge")
    assert merges == [2, 2, 2]  # alice's two re-writes and bob's one, nothing else
    assert texts_by_user(name) == {
        "alice": Counter(dict.fromkeys(ALICE, 1)),
        "bob": Counter(dict.fromkeys(BOB, 1)),
    }
    rows = stored(name)
    assert {width for _, _, width in rows} == {FOREIGN_DIM}  # the collection's own vectors
    assert all(doc is None for doc, _, _ in rows)  # the text stays in metadata "data" (mem0)
    assert all(
        meta["hash"] == hashlib.md5(meta["data"].encode()).hexdigest() for _, meta, _ in rows
    )
    col = stores.get_client().get_collection(name)
    assert col.configuration_json["hnsw"]["space"] == "l2"
    assert col.count() == len(ALICE) + len(BOB) - 3


def raw(collection_name: str) -> dict[str, tuple[str | None, dict, bytes]]:
    return raw_records(stores.get_client(), collection_name)


def test_undoing_the_pass_restores_mem0s_records_byte_identical(
    unique_name, alice, bob, django_capture_on_commit_callbacks
):
    name = unique_name("mem0")
    memories = [Mem0Memory(t, user_id="alice") for t in ALICE] + [
        Mem0Memory(t, user_id="bob") for t in BOB
    ]
    write_mem0(stores.get_client(), name, memories)
    before = raw(name)
    _, run = attach_and_run(name, [], alice, bob, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.APPLIED and raw(name) != before
    with django_capture_on_commit_callbacks(execute=True):
        pass_rollback_request(run=run, user=bob, note="undo")
    run.refresh_from_db()
    assert run.status == Pass.Status.ROLLED_BACK, (run.status, run.error)
    assert raw(name) == before  # ids, no documents, metadata and the original 1536-d vectors


def test_nothing_leaves_its_users_scope(
    unique_name, alice, bob, django_capture_on_commit_callbacks
):
    name = unique_name("mem0")
    memories = [Mem0Memory(t, user_id="alice") for t in ALICE] + [
        Mem0Memory(t, user_id="bob") for t in [*BOB, SHARED]
    ]
    _, run = attach_and_run(name, memories, alice, bob, django_capture_on_commit_callbacks)
    for op in run.operations.all():  # no operation spans two users
        users = {src.metadata.get("user_id") for src in op.sources.all()}
        assert len(users) == 1, (op.kind, op.source_ids, users)
    assert run.status == Pass.Status.APPLIED, (run.status, run.error)
    assert texts_by_user(name) == {
        "alice": Counter(dict.fromkeys(ALICE, 1)),
        "bob": Counter(dict.fromkeys([*BOB, SHARED], 1)),
    }


CHAT = [
    "Booked a table at Luigi's for Friday",
    "Asked for a window seat at Luigi's",
    "Luigi's confirmed the Friday booking",
]
FACT = "Has a Friday dinner booking at Luigi's with a window seat"


@pytest.fixture
def llm_env(llm_stub, settings):
    settings.OPENAI_BASE_URL = llm_stub.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.MEMORYADMIN_LLM_MODEL = "stub-model"
    settings.MEMORYADMIN_LLM_TIMEOUT = "2"
    return llm_stub


@pytest.mark.parametrize("with_embedder", [False, True])
def test_a_new_text_needs_the_collections_own_embedder(
    with_embedder, unique_name, alice, bob, llm_env, django_capture_on_commit_callbacks
):
    """A distilled fact is a new text: without the agent's embedder for the collection's 1536-d
    model it is left out of the plan with the reason; with one (the stub's /v1/embeddings) it
    is written with that model's vector, in metadata ``data``."""
    name = unique_name("mem0")
    ids = write_mem0(
        stores.get_client(), name, [Mem0Memory(t, user_id="alice", run_id="chat-1") for t in CHAT]
    )
    args = ["--embedder-url", llm_env.base_url, "--embedder-model", "text-embedding-3-small"]
    call_command(
        "attach_collection",
        f"agent-{name}",
        name,
        *(args if with_embedder else []),
        stdout=io.StringIO(),
    )
    agent = Agent.objects.get(slug=f"agent-{name}")
    llm_env.push_facts([{"text": FACT, "evidence": ids[:2], "confidence": 0.9}])
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger="operator", user=alice)
    run.refresh_from_db()
    distills = list(run.operations.filter(kind="distill"))
    if not with_embedder:
        assert distills == [] and run.status == Pass.Status.NO_CHANGES  # nothing else to do
        [left] = run.telemetry["left_out"]
        assert (left["kind"], left["text"]) == ("distill", FACT)
        assert "1536-d vectors of another model" in left["reason"]
        assert sorted(meta["data"] for _, meta, _ in stored(name)) == sorted(CHAT)
        return
    assert [op.result_document for op in distills] == [FACT]
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    col = stores.get_client().get_collection(name)
    got = col.get(ids=[distills[0].result_id], include=["documents", "metadatas", "embeddings"])
    assert got["documents"] == [None] and got["metadatas"][0]["data"] == FACT
    assert np.allclose(got["embeddings"][0], foreign_vector(FACT))  # the endpoint's vector
    assert [r.path for r in llm_env.requests].count("/v1/embeddings") == 1
