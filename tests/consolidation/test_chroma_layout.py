"""The store on collections written by mem0: text in ``data``, 1536-d vectors kept, no empties."""

from __future__ import annotations

import hashlib
import uuid

import chromadb
import numpy as np
import pytest

from consolidation import FieldMap, MemoryRecord
from consolidation.adapters.chroma_layout import EmptyText, Layout, NoVectorForText
from consolidation.adapters.chroma_store import ChromaMemoryStore
from consolidation.adapters.embedder import get_default_embedder
from consolidation.adapters.remote_embedder import EndpointEmbedder
from consolidation.adapters.vector_cache import VectorCache
from consolidation.shapes import preset_field_map
from tests.agent_stores import FOREIGN_DIM, Mem0Memory, foreign_vector, write_mem0

pytest_plugins = ["tests.llm_stub"]

TEXTS = ["Prefers dark mode in the editor", "Trinkt morgens schwarzen Kaffee", "喜欢喝乌龙茶"]


class CountingEmbed:
    """Our embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return np.asarray(get_default_embedder().embed(texts), dtype=np.float32)


@pytest.fixture
def mem0_collection():
    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    ids = write_mem0(client, name, [Mem0Memory(t, user_id="alice") for t in TEXTS])
    return client.get_collection(name), ids


def mem0_store(collection, cache, embed=None, native=None) -> ChromaMemoryStore:
    layout = Layout(
        collection.name,
        field_map=preset_field_map("mem0"),
        embed=embed or CountingEmbed(),
        native_embed=native,
        cache=cache,
    )
    return ChromaMemoryStore(collection, layout=layout)


def stored(collection, rid: str) -> tuple[str | None, dict, np.ndarray]:
    got = collection.get(ids=[rid], include=["documents", "metadatas", "embeddings"])
    return got["documents"][0], got["metadatas"][0], np.asarray(got["embeddings"][0])


def test_it_reads_the_text_from_data_and_plans_with_our_cached_embeddings(
    mem0_collection, tmp_path
):
    collection, _ = mem0_collection
    cache = VectorCache(tmp_path / "vectors.sqlite3")
    first = CountingEmbed()
    records = list(mem0_store(collection, cache, first).iter_records())
    assert sorted(r.document for r in records) == sorted(TEXTS)
    ours = np.asarray(get_default_embedder().embed([r.document for r in records]))
    assert np.allclose(np.stack([r.embedding for r in records]), ours, atol=1e-6)
    assert sorted(first.texts) == sorted(TEXTS)
    again = CountingEmbed()  # a new process opening the same cache file: nothing re-embedded
    list(mem0_store(collection, VectorCache(tmp_path / "vectors.sqlite3"), again).iter_records())
    assert again.texts == []


def test_a_merge_equal_to_a_source_reuses_its_vector_in_metadata_data(mem0_collection):
    collection, ids = mem0_collection
    store = mem0_store(collection, VectorCache(":memory:"))
    src = store.get([ids[0]])[0]
    store.upsert(
        [
            MemoryRecord(
                "merged-1", src.document, src.embedding, {**src.metadata, "merged_from": ids[:1]}
            )
        ]
    )
    store.delete([ids[0]])
    doc, meta, vec = stored(collection, "merged-1")
    assert doc is None and meta["data"] == TEXTS[0]
    assert meta["hash"] == hashlib.md5(TEXTS[0].encode()).hexdigest()
    assert vec.shape == (FOREIGN_DIM,) and np.allclose(vec, foreign_vector(TEXTS[0]))
    assert collection.configuration_json["hnsw"]["space"] == "l2"


def test_a_new_text_without_an_embedder_is_refused_and_reported(mem0_collection):
    collection, ids = mem0_collection
    store = mem0_store(collection, VectorCache(":memory:"))
    records = store.get(ids)
    new_text = "Prefers dark mode; drinks black coffee"
    assert store.unwritable([TEXTS[0], new_text, "  "]) == {
        new_text: "the collection holds 1536-d vectors of another model and the agent has no "
        "embedder for it, so a new text cannot be written",
        "  ": "the text is empty",
    }
    before = collection.count()
    with pytest.raises(NoVectorForText, match="1536-d vectors of another model"):
        store.upsert(
            [
                MemoryRecord("ok", TEXTS[1], records[1].embedding, {}),
                MemoryRecord("new", new_text, records[0].embedding, {}),
            ]
        )
    assert collection.count() == before and not collection.get(ids=["ok"])["ids"]


def test_a_new_text_is_embedded_by_the_agents_endpoint(mem0_collection, llm_stub):
    collection, ids = mem0_collection
    native = EndpointEmbedder(llm_stub.base_url, "text-embedding-3-small")
    store = mem0_store(collection, VectorCache(":memory:"), native=native.embed)
    rec = store.get(ids)[0]
    new_text = "Bevorzugt den Dunkelmodus"
    assert store.unwritable([new_text]) == {}
    store.upsert([MemoryRecord("new", new_text, rec.embedding, {"user_id": "alice"})])
    doc, meta, vec = stored(collection, "new")
    assert doc is None and meta["data"] == meta["text_lemmatized"] == new_text
    assert np.allclose(vec, foreign_vector(new_text))
    assert [r.path for r in llm_stub.requests] == ["/v1/embeddings"]


def test_a_rollback_restores_the_original_vector(mem0_collection, tmp_path):
    collection, ids = mem0_collection
    _, _, original = stored(collection, ids[2])
    store = mem0_store(collection, VectorCache(tmp_path / "v.sqlite3"))
    rec = store.get([ids[2]])[0]
    store.delete([ids[2]])
    fresh = mem0_store(collection, VectorCache(tmp_path / "v.sqlite3"))  # another process
    fresh.upsert([rec])
    doc, meta, vec = stored(collection, ids[2])
    assert doc is None and meta["data"] == TEXTS[2]
    assert np.array_equal(vec, original)


@pytest.mark.parametrize("layout", ["own", "mem0"])
@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_an_empty_text_is_never_written(mem0_collection, layout, text):
    collection, ids = mem0_collection
    if layout == "own":
        collection = chromadb.EphemeralClient().create_collection(f"own-{uuid.uuid4().hex[:8]}")
        store = ChromaMemoryStore(collection)
    else:
        store = mem0_store(collection, VectorCache(":memory:"))
    before = collection.count()
    vec = np.ones(384, np.float32) / np.sqrt(384)
    with pytest.raises(EmptyText, match="empty text is never written"):
        store.upsert(
            [MemoryRecord("a-fine-one", "fine text", vec, {}), MemoryRecord("e", text, vec, {})]
        )
    assert collection.count() == before


def test_a_plain_collection_keeps_text_in_the_document():
    layout = Layout("x", field_map=FieldMap())
    assert layout.default and layout.placed("a", "hi", {"k": 1}) == ("hi", {"k": 1})


def test_leave_out_drops_unwritable_operations_and_keeps_their_sources():
    from consolidation.plans import Fate, Operation, OpKind, Plan, leave_out, summarize

    ops = [
        Operation(
            OpKind.MERGE,
            ["a", "b"],
            ["ha", "hb"],
            ["a", "b"],
            "dupes",
            "exact_duplicate",
            result_id="m1",
            result_document="same text",
        ),
        Operation(
            OpKind.MERGE,
            ["c", "d"],
            ["hc", "hd"],
            ["c", "d"],
            "near",
            "near_duplicate",
            result_id="m2",
            result_document="a brand new text",
        ),
        Operation(OpKind.PRUNE, ["e"], ["he"], ["e"], "old", "decay"),
    ]
    fates = {
        "a": Fate.MERGED,
        "b": Fate.MERGED,
        "c": Fate.MERGED,
        "d": Fate.MERGED,
        "e": Fate.PRUNED,
        "f": Fate.KEPT,
    }
    plan = Plan(list(ops), summarize(6, ops), dict(fates))
    out = leave_out(plan, {"a brand new text": "no embedder"}, 6)
    assert [op.result_id for op in out.operations] == ["m1", None]
    assert (out.fates["c"], out.fates["d"], out.fates["a"]) == (Fate.KEPT, Fate.KEPT, Fate.MERGED)
    assert out.result.retained_originals == 3
    assert out.context["left_out"] == [
        {
            "kind": "merge",
            "source_ids": ["c", "d"],
            "text": "a brand new text",
            "reason": "no embedder",
        }
    ]


def test_the_consolidator_merges_rewrites_in_mems0_own_layout():
    from consolidation import Consolidator

    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    write_mem0(client, name, [Mem0Memory(t, user_id="alice") for t in [*TEXTS, TEXTS[0]]])
    col = client.get_collection(name)
    consolidator = Consolidator(fieldmap=preset_field_map("mem0"), embedder=get_default_embedder())
    result = consolidator.consolidate(
        mem0_store(col, VectorCache(":memory:")), max_loss_fraction=0.5
    )
    assert result.context["applied"] and result.entries_after == 3
    got = col.get(include=["documents", "metadatas", "embeddings"])
    assert sorted(m["data"] for m in got["metadatas"]) == sorted(TEXTS)
    assert all(d is None for d in got["documents"])
    assert {len(e) for e in got["embeddings"]} == {FOREIGN_DIM}


def test_the_consolidator_never_deletes_mem0_memories_read_without_their_field_map():
    """A reported case: read as if the text were the (absent) document, 8 unrelated mem0 facts
    all looked like the same empty text; a merge into '' deleted them all."""
    from consolidation import Consolidator

    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    facts = [f"{t} (#{i})" for i, t in enumerate(TEXTS * 3)][:8]
    write_mem0(client, name, [Mem0Memory(t, user_id="alice") for t in facts])
    col = client.get_collection(name)
    result = Consolidator(embedder=get_default_embedder()).consolidate(
        ChromaMemoryStore(col), max_loss_fraction=1.0
    )
    assert col.count() == 8
    assert sorted(m["data"] for m in col.get()["metadatas"]) == sorted(facts)
    assert not result.context.get("applied") or result.entries_after == 8


def test_the_consolidator_keeps_praisonais_documents_and_vectors():
    from consolidation import Consolidator
    from tests.agent_stores import PraisonMemory, write_praisonai

    client = chromadb.EphemeralClient()
    name = f"praison-{uuid.uuid4().hex[:10]}"
    write_praisonai(client, [PraisonMemory(t) for t in [*TEXTS, TEXTS[1]]], collection_name=name)
    col = client.get_collection(name)
    fm = preset_field_map("praisonai")
    store = ChromaMemoryStore(col, layout=Layout(name, field_map=fm, embed=CountingEmbed()))
    result = Consolidator(fieldmap=fm, embedder=get_default_embedder()).consolidate(
        store, max_loss_fraction=0.5
    )
    assert result.context["applied"] and result.entries_after == 3
    got = col.get(include=["documents", "embeddings"])
    assert sorted(got["documents"]) == sorted(TEXTS)
    assert {len(e) for e in got["embeddings"]} == {FOREIGN_DIM}
    assert col.configuration_json["hnsw"]["space"] == "cosine"


def test_iter_stored_gives_the_collections_own_vectors(mem0_collection):
    collection, ids = mem0_collection
    store = mem0_store(collection, VectorCache(":memory:"))
    [page] = list(store.iter_stored())
    assert {r.id for r, _ in page} == set(ids)
    for r, vec in page:
        assert r.embedding is None and r.document in TEXTS
        assert np.array_equal(
            np.frombuffer(vec, np.float32), np.float32(foreign_vector(r.document))
        )


def test_fifteen_rewrites_of_one_mem0_user_become_one_memory():
    """A reported case: 15 word-for-word re-writes of one user's fact, attached and applied,
    left more than one copy. The exact-duplicate group was split at ``max_group_size`` (8 + 7):
    two identical merged memories, which no later incremental pass compared again (both were in
    its checkpoint). Copies of one text now merge in one group (up to ``EXACT_MAX_GROUP``)."""
    from consolidation import Consolidator

    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    others = [f"Box {k} in the attic holds item {k * 7 + 3}" for k in range(45)]
    write_mem0(
        client,
        name,
        [Mem0Memory(TEXTS[0], user_id="alice") for _ in range(15)]
        + [Mem0Memory(t, user_id="bob") for t in others],
    )
    col = client.get_collection(name)
    consolidator = Consolidator(fieldmap=preset_field_map("mem0"), embedder=get_default_embedder())
    result = consolidator.consolidate(mem0_store(col, VectorCache(":memory:")))
    assert result.context["applied"]
    alice = [m for m in col.get()["metadatas"] if m["user_id"] == "alice"]
    assert [m["data"] for m in alice] == [TEXTS[0]]
    assert sorted(m["data"] for m in col.get()["metadatas"] if m["user_id"] == "bob") == sorted(
        others
    )
