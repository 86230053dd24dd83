"""Updates in stores written by mem0's and praisonaiagents' own storage code.

The new user's planted updates, in one scope, next to another scope's copy of every old fact:
each update of the first scope is reconciled (the newer kept) or asked, the agreement ("lives
in Paris" / "moved from Lyon to Paris") is neither, and the other scope is never touched.
Stores are written through tests/agent_stores.py (mem0ai's ``ChromaDB.insert``,
praisonaiagents' ``store_long_term`` payload) and read with the console's presets and our
embeddings, as an attached collection is.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import chromadb
import pytest

from consolidation import Fate, OpKind, Policy
from consolidation.adapters.chroma_layout import Layout
from consolidation.adapters.chroma_store import ChromaMemoryStore
from consolidation.adapters.embedder import get_default_embedder
from consolidation.adapters.int8_product import int8_product
from consolidation.adapters.vector_cache import VectorCache
from consolidation.planning import FeatureCache, RowCache, plan
from consolidation.shapes import preset_field_map
from tests.agent_stores import Mem0Memory, PraisonMemory, write_mem0, write_praisonai

FEB, MAY, NOV = (datetime(2026, m, 1, tzinfo=UTC) for m in (2, 5, 11))
PLANTED = [
    # (old text, old date, new text, new date, outcome)
    ("Alice's timezone is Europe/Paris.", MAY, "Alice's timezone is Europe/Berlin.", NOV, "ask"),
    ("Bob's manager is Carol.", FEB, "Bob's manager is now Dave.", NOV, "ask"),
    (
        "Bob runs Ubuntu 22.04 on his workstation.",
        FEB,
        "Bob runs Ubuntu 24.04 on his workstation.",
        NOV,
        "ask",
    ),  # fmt: skip
    (
        "Bob's API key rotates every 90 days.",
        FEB,
        "Bob's API key rotates every 30 days.",
        FEB,
        "ask",
    ),  # fmt: skip
    ("Alice's brother is named Jon.", FEB, "Alice's brother is named John.", NOV, "ask"),
    (
        "User prefers React for the frontend.",
        FEB,
        "User switched to Svelte for the frontend.",
        NOV,
        "reconcile",
    ),  # fmt: skip
    ("Bob lives in Paris.", FEB, "Bob moved from Lyon to Paris.", NOV, "keep"),
    ("Dark mode is off.", FEB, "Dark mode is on.", NOV, "reconcile"),  # one status
    (
        "Carol is vegetarian and allergic to nuts.",
        FEB,
        "Carol is no longer vegetarian.",
        NOV,
        "ask",
    ),  # fmt: skip
    ("Dana likes apples and strawberries.", FEB, "Dana no longer likes any fruit.", NOV, "ask"),
    ("Erik owns a Tesla.", FEB, "Erik sold the Tesla.", NOV, "ask"),
]


def _plan_attached(client, name: str, preset: str, tmp_path, checkpoint=None, **caches):
    """Plan the attached collection; ``checkpoint`` (``{id: content hash}`` of an earlier
    pass) makes it an incremental pass, which searches only the new memories × the store;
    ``caches``: ``features`` and ``rows`` kept between passes."""
    fm = preset_field_map(preset)
    layout = Layout(
        name,
        field_map=fm,
        embed=lambda t: get_default_embedder().embed(t),
        cache=VectorCache(tmp_path / "v.sqlite3"),
    )
    records = list(ChromaMemoryStore(client.get_collection(name), layout=layout).iter_records())
    return plan(records, Policy(trim_to_guard=False), now=datetime(2026, 12, 1, tzinfo=UTC),
                fieldmap=fm, checkpoint=checkpoint, **caches)  # fmt: skip


def _check(p, ids: list[str]) -> None:
    """``ids``: per planted row, [old, new] of the first scope, then the other scope's old."""
    n = len(PLANTED)
    pairs = {frozenset(op.source_ids): op for op in p.operations if op.kind != OpKind.MERGE}
    for k, (*_, outcome) in enumerate(PLANTED):
        old, new = ids[2 * k], ids[2 * k + 1]
        op = pairs.get(frozenset((old, new)))
        if outcome == "ask":
            assert op is not None and op.kind == OpKind.CONFLICT, PLANTED[k]
        elif outcome == "reconcile":
            assert op is not None and op.kind == OpKind.RECONCILE, PLANTED[k]
            assert op.source_ids[0] == new and op.removes == [old]
        else:
            assert op is None, (PLANTED[k], op.reason if op else None)
            assert p.fates[old] == p.fates[new] == Fate.KEPT
    other = set(ids[2 * n :])
    for op in p.operations:
        assert not other & set(op.source_ids), op.reason  # another scope: never compared


def test_a_mem0_store_of_two_users(tmp_path):
    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    written = []
    for old, t_old, new, t_new, _ in PLANTED:
        written += [Mem0Memory(old, user_id="alice", created_at=t_old),
                    Mem0Memory(new, user_id="alice", created_at=t_new)]  # fmt: skip
    written += [Mem0Memory(old, user_id="bob", created_at=t) for old, t, *_ in PLANTED]
    ids = write_mem0(client, name, written)
    _check(_plan_attached(client, name, "mem0", tmp_path), ids)


def test_updates_written_after_a_pass_are_found_by_the_incremental_pass(tmp_path):
    """The old facts of both users were planned already (the checkpoint); the first user's
    updates arrive later in the same mem0 collection and are judged as in a full pass."""
    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    olds = [Mem0Memory(old, user_id="alice", created_at=t) for old, t, *_ in PLANTED]
    others = [Mem0Memory(old, user_id="bob", created_at=t) for old, t, *_ in PLANTED]
    old_ids = write_mem0(client, name, olds + others)
    layout = Layout(name, field_map=preset_field_map("mem0"))
    store = ChromaMemoryStore(client.get_collection(name), layout=layout)
    checkpoint = {r.id: r.content_hash for r in store.iter_records()}
    news = [Mem0Memory(new, user_id="alice", created_at=t) for _, _, new, t, _ in PLANTED]
    new_ids = write_mem0(client, name, news)
    p = _plan_attached(client, name, "mem0", tmp_path, checkpoint=checkpoint)
    n = len(PLANTED)
    ids = [x for k in range(n) for x in (old_ids[k], new_ids[k])] + old_ids[n:]
    _check(p, ids)


@pytest.mark.parametrize("product", [None, int8_product()], ids=["float32", "int8"])
def test_an_incremental_pass_with_the_rows_kept_from_the_pass_before_decides_the_same(
    tmp_path, product
):
    """The stored rows' bounding rows (or their int8 codes, with onnxruntime's product) and
    update flags kept by an earlier incremental pass over the same mem0 collection (RowCache,
    FeatureCache) give the next pass the very operations a pass without them gives."""
    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    olds = [Mem0Memory(old, user_id="alice", created_at=t) for old, t, *_ in PLANTED]
    others = [Mem0Memory(old, user_id="bob", created_at=t) for old, t, *_ in PLANTED]
    old_ids = write_mem0(client, name, olds + others)
    # a paraphrase only the 0.75 search finds (cosine 0.965, two words apart: no twin), and an
    # unmarked new text whose only partner is a marked stored one, below 0.75 (0.745): found
    # through the kept flags (an unmarked new row is compared with the marked stored rows)
    extra_old = [
        Mem0Memory("Alice works as a nurse at the city hospital.", user_id="alice", created_at=FEB),
        Mem0Memory("Alice does not live in Berlin anymore.", user_id="alice", created_at=FEB),
    ]
    nurse, berlin = write_mem0(client, name, extra_old)
    store = ChromaMemoryStore(
        client.get_collection(name), layout=Layout(name, field_map=preset_field_map("mem0"))
    )
    checkpoint = {r.id: r.content_hash for r in store.iter_records()}
    caches = {"features": FeatureCache(), "rows": RowCache(product=product)}
    first = dict(list(checkpoint.items())[1:])  # one memory new: a partial pass keeps the rows
    _plan_attached(client, name, "mem0", tmp_path, checkpoint=first, **caches)
    assert len(caches["rows"]) == len(checkpoint)
    news = [Mem0Memory(new, user_id="alice", created_at=t) for _, _, new, t, _ in PLANTED]
    new_ids = write_mem0(client, name, news)
    nurse2, berlin2 = write_mem0(
        client,
        name,
        [
            Mem0Memory("Alice is a nurse at the city hospital.", user_id="alice", created_at=NOV),
            Mem0Memory("Alice lives in Berlin with her two cats.", user_id="alice", created_at=NOV),
        ],
    )
    kept = _plan_attached(client, name, "mem0", tmp_path, checkpoint=checkpoint, **caches)
    plain = _plan_attached(client, name, "mem0", tmp_path, checkpoint=checkpoint)
    assert len(caches["rows"]) == len(checkpoint) + len(news) + 2  # the new rows kept too
    assert [op.to_dict() for op in kept.operations] == [op.to_dict() for op in plain.operations]
    offered = [set(op.source_ids) for op in plain.operations]
    assert {nurse, nurse2} in offered and {berlin, berlin2} in offered  # both ways had work
    n = len(PLANTED)
    _check(kept, [x for k in range(n) for x in (old_ids[k], new_ids[k])] + old_ids[n:])


def test_a_praisonai_store_of_two_agents(tmp_path):
    client = chromadb.EphemeralClient()
    name = f"praison-{uuid.uuid4().hex[:10]}"
    written = []
    for old, t_old, new, t_new, _ in PLANTED:
        written += [
            PraisonMemory(old, agent_name="Coder", timestamp=t_old.timestamp()),
            PraisonMemory(new, agent_name="Coder", task_id="task-2", timestamp=t_new.timestamp()),
        ]
    written += [
        PraisonMemory(old, agent_name="Reviewer", timestamp=t.timestamp()) for old, t, *_ in PLANTED
    ]
    ids = write_praisonai(client, written, collection_name=name)
    _check(_plan_attached(client, name, "praisonai", tmp_path), ids)
