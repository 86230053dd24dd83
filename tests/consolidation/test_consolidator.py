"""Consolidator: PraisonAI-style memory, our store protocol, guard, dry run, write order."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from consolidation import (
    ConsolidationResult,
    Consolidator,
    DefaultEmbedder,
    MemoryRecord,
    Operation,
    OpKind,
    Policy,
    WritableMemoryStore,
    summarize,
)
from consolidation.adapters import get_default_embedder

from ._vectors import at_cosine, basis

NOW = datetime(2025, 1, 1, tzinfo=UTC)
WHOLE = Policy(trim_to_guard=False)  # the whole pass judged: rejected when it loses too much


def clock() -> datetime:
    return NOW


class PraisonMemory:
    """The shape PraisonAI's memory exposes: get_all_memories() → list of dicts. Read-only."""

    def __init__(self, items: list[dict]):
        self.items = items

    def get_all_memories(self) -> list[dict]:
        return [dict(i) for i in self.items]


class DictStore:
    """A real in-process implementation of WritableMemoryStore that logs every call."""

    def __init__(self, records: Sequence[MemoryRecord]):
        self.data = {r.id: r for r in records}
        self.log: list[tuple[str, list[str]]] = []

    def count(self) -> int:
        return len(self.data)

    def iter_pages(self, *, page_size: int = 5000, include_embeddings: bool = True):
        rows = [self.data[k] for k in sorted(self.data)]
        for i in range(0, len(rows), page_size):
            yield rows[i : i + page_size]

    def get(self, ids, *, include_embeddings: bool = True):
        self.log.append(("get", list(ids)))
        return [self.data[i] for i in ids if i in self.data]

    def upsert(self, records):
        self.log.append(("upsert", [r.id for r in records]))
        for r in records:
            assert r.embedding is not None
            self.data[r.id] = r

    def delete(self, ids):
        self.log.append(("delete", list(ids)))
        for i in ids:
            self.data.pop(i, None)

    def snapshot(self):
        return {k: (r.document, r.metadata, r.embedding.tobytes()) for k, r in self.data.items()}


class CountingEmbedder:
    """Deterministic offline embedder for tests: every text → axis 5 (all texts alike)."""

    dim = 384

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return np.tile(basis(5), (len(texts), 1))


def praison_items() -> list[dict]:
    return [
        {
            "id": "1",
            "text": "Alice likes jazz",
            "metadata": {"session": "s1"},
            "embedding": basis(0).tolist(),
        },
        {
            "id": "2",
            "memory": "alice likes jazz!",
            "metadata": {"session": "s2"},
            "embedding": basis(0).tolist(),
        },
        {"id": "3", "content": "Bob plays chess", "metadata": None, "embedding": basis(1).tolist()},
        {"id": "4", "text": "Carol has a cat", "metadata": {}, "embedding": basis(2).tolist()},
    ]


def store_records() -> list[MemoryRecord]:
    return [
        MemoryRecord("a", "Alice likes jazz", basis(0), {"session": "s1", "importance": 0.3}),
        MemoryRecord("b", "Alice likes jazz.", at_cosine(0, 0.99, 3), {"session": "s2"}),
        MemoryRecord("c", "Bob plays chess", basis(1), {"access_count": 9}),
        MemoryRecord("d", "Carol has a cat", basis(2), {}),
        MemoryRecord("e", "Dan owns a boat", basis(4), {}),
    ]


def test_it_consolidates_a_praisonai_memory_without_writing():
    memory = PraisonMemory(praison_items())
    result = Consolidator(WHOLE, clock=clock, embedder=CountingEmbedder()).consolidate(memory)
    assert isinstance(result, ConsolidationResult)
    assert (result.entries_before, result.merged, result.entries_after) == (4, 2, 3)
    assert result.retained_originals == 2 and result.loss_fraction == 0.5
    assert result.rejected is True  # 0.5 > 0.25: the default guard refuses it
    result = Consolidator(clock=clock).consolidate(memory, max_loss_fraction=0.5)
    assert not result.rejected
    assert (
        result.context["applied"] is False and result.context["write_skipped"] == "read-only memory"
    )
    assert result.context["operations"]["merge"] == 1
    assert memory.items == praison_items()


def test_it_embeds_only_memories_without_embeddings():
    items = praison_items()
    del items[2]["embedding"]
    embedder = CountingEmbedder()
    Consolidator(embedder=embedder, clock=clock).consolidate(
        PraisonMemory(items), max_loss_fraction=1.0
    )
    assert embedder.calls == [["Bob plays chess"]]


@pytest.mark.parametrize(
    ("items", "error"),
    [
        ([{"text": "no id"}], ValueError),
        ([{"id": "x"}], ValueError),
        ([{"id": "x", "text": "t", "metadata": [1]}], ValueError),
        (["just a string"], ValueError),
    ],
)
def test_it_rejects_malformed_memories(items, error):
    with pytest.raises(error):
        Consolidator(embedder=CountingEmbedder()).consolidate(PraisonMemory(items))


def test_it_rejects_an_object_that_is_not_a_memory():
    with pytest.raises(TypeError):
        Consolidator().consolidate(object())


def test_it_writes_through_the_store_in_i3_order():
    store = DictStore(store_records())
    assert isinstance(store, WritableMemoryStore)
    result = Consolidator(clock=clock, embedder=CountingEmbedder()).consolidate(
        store, max_loss_fraction=0.5
    )
    assert not result.rejected and result.context["applied"] is True
    kinds = [k for k, _ in store.log]
    assert kinds.index("upsert") < kinds.index("delete")
    upserted = next(ids for k, ids in store.log if k == "upsert")
    assert any(k == "get" and ids == upserted for k, ids in store.log[kinds.index("upsert") :])
    assert set(store.data) == {"c", "d", "e", upserted[0]}
    merged = store.data[upserted[0]]
    assert merged.metadata["merged_from"] == ["a", "b"] and merged.metadata["session"] == [
        "s1",
        "s2",
    ]
    assert store.data["c"].metadata["tier"] == "curated"  # promoted (access_count 9)
    assert (result.merged, result.promoted) == (2, 1)


def test_it_never_writes_in_dry_run():
    store = DictStore(store_records())
    before = store.snapshot()
    result = Consolidator(dry_run=True, clock=clock).consolidate(store, max_loss_fraction=1.0)
    assert result.merged == 2 and result.context["write_skipped"] == "dry_run"
    assert store.snapshot() == before
    assert not any(k in ("upsert", "delete") for k, _ in store.log)


def test_it_writes_nothing_when_the_guard_trips():
    store = DictStore(store_records())
    before = store.snapshot()
    result = Consolidator(WHOLE, clock=clock).consolidate(store, max_loss_fraction=0.1)
    assert result.rejected is True
    assert "40.0%" in result.reason and "10.0%" in result.reason
    assert store.snapshot() == before and store.log == []


def test_without_a_policy_it_applies_what_fits_the_guard_and_says_what_it_deferred():
    records = [*store_records(), MemoryRecord("f", "Dan owns a boat", basis(4), {})]
    store = DictStore(records)  # two merges, a+b and e+f: 4 of 6 originals = 67 %
    result = Consolidator(clock=clock, embedder=CountingEmbedder()).consolidate(
        store, max_loss_fraction=0.4
    )
    assert not result.rejected and result.context["applied"] is True
    assert result.loss_fraction == pytest.approx(2 / 6) and result.merged == 2
    # a+b merged into b's record (the merged text is b's), e+f deferred
    assert "a" not in store.data and store.data["b"].metadata["merged_from"] == ["a", "b"]
    assert {"e", "f"} <= set(store.data)
    assert result.reason == (
        "1 operation (merge 1) deferred to the next passes: they do not fit the loss budget"
    )
    again = Consolidator(clock=clock, embedder=CountingEmbedder()).consolidate(
        store, max_loss_fraction=0.4
    )
    assert again.merged == 2 and again.reason is None
    assert set(store.data) == {"b", "c", "d", "e"}  # e+f merged into e, the first with the text
    assert store.data["e"].metadata["merged_from"] == ["e", "f"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.1, 1.5, True, "x", None])
def test_it_rejects_an_invalid_threshold_and_writes_nothing(bad):
    store = DictStore(store_records())
    before = store.snapshot()
    result = Consolidator(clock=clock).consolidate(store, max_loss_fraction=bad)
    assert result.rejected is True and "invalid loss threshold" in result.reason
    assert store.snapshot() == before and store.log == []


def test_it_plans_without_writing():
    store = DictStore(store_records())
    plan = Consolidator(WHOLE, clock=clock).plan(store)
    assert {op.kind for op in plan.operations} == {OpKind.MERGE, OpKind.PROMOTE}
    assert store.log == []


def test_it_consolidates_asynchronously():
    store = DictStore(store_records())
    result = asyncio.run(
        Consolidator(clock=clock, embedder=CountingEmbedder()).aconsolidate(
            store, max_loss_fraction=0.5
        )
    )
    assert result.context["applied"] is True and "a" not in store.data


def test_it_builds_with_no_arguments():
    c = Consolidator()
    assert c.policy == Policy() and c.policy.trim_to_guard and c.dry_run is False
    # The offline default embedder, not loaded until a text needs embedding (no onnxruntime).
    assert isinstance(c.embedder, DefaultEmbedder) and c.embedder.dim == 384


@pytest.mark.parametrize(
    ("texts", "merged_pair"),
    [
        (
            ["Alice hired Bob", "Bob hired Alice", "Alice likes jazz", "Alice likes jazz."],
            ["3", "4"],
        ),
        (
            ["Anna mag Jazz", "Anna mag Jazz.", "Der Zug fährt um acht", "Ich habe zwei Katzen"],
            ["1", "2"],
        ),
        (["我住在北京", "我的猫叫小白", "我的猫叫小白。", "明天下雨"], ["2", "3"]),
    ],
    ids=["english-role-swap-kept-apart", "german", "chinese"],
)
def test_it_embeds_memories_without_embeddings_with_the_default_embedder(texts, merged_pair):
    items = [
        {"id": str(i), "text": t, "metadata": {"created_at": f"2024-12-0{i}"}}
        for i, t in enumerate(texts, start=1)
    ]
    consolidator = Consolidator(WHOLE, clock=clock)
    assert not consolidator.embedder.loaded
    plan = consolidator.plan(PraisonMemory(items))
    (op,) = plan.operations
    assert op.kind == OpKind.MERGE and op.source_ids == merged_pair
    assert consolidator.embedder.loaded


def test_a_merge_that_keeps_a_sources_text_keeps_its_record_and_vector_and_embeds_nothing():
    store = DictStore(store_records())
    embedder = CountingEmbedder()
    result = Consolidator(clock=clock, embedder=embedder).consolidate(store, max_loss_fraction=0.5)
    assert result.context["applied"] is True
    # b's text "Alice likes jazz." is the merged text: b's record stays, a leaves
    assert "a" not in store.data and not any(i.startswith("m-") for i in store.data)
    merged = store.data["b"]
    assert merged.document == "Alice likes jazz."
    assert merged.metadata["merged_from"] == ["a", "b"] and merged.metadata["importance"] == 0.3
    assert np.array_equal(merged.embedding, at_cosine(0, 0.99, 3))  # the stored vector
    assert [t for call in embedder.calls for t in call] == []  # nothing embedded to write it


def _chroma_store():
    chroma_store = pytest.importorskip("consolidation.adapters.chroma_store")
    client = chroma_store.make_client(ephemeral=True)
    collection = chroma_store.open_collection(client, f"ct-{uuid.uuid4().hex}")
    store = chroma_store.ChromaMemoryStore(collection)
    store.upsert(store_records())
    return store, collection


def test_it_consolidates_a_chroma_collection():
    store, collection = _chroma_store()
    embedder = get_default_embedder()
    result = Consolidator(clock=clock, embedder=embedder).consolidate(store, max_loss_fraction=0.5)
    assert not result.rejected and result.context["applied"] is True
    ids = set(collection.get()["ids"])
    assert ids == {"b", "c", "d", "e"}  # a merged into b, whose text the merge keeps
    (merged,) = store.get(["b"])
    assert merged.document == "Alice likes jazz."
    assert np.array_equal(merged.embedding, at_cosine(0, 0.99, 3))
    assert merged.metadata["merged_from"] == ["a", "b"]
    assert merged.metadata["session"] == ["s1", "s2"] and merged.metadata["importance"] == 0.3
    assert store.get(["c"])[0].metadata["tier"] == "curated"
    # a second pass over the consolidated store finds nothing more to do
    again = Consolidator(clock=clock, embedder=embedder).consolidate(store, max_loss_fraction=0.5)
    assert again.context["operations"]["merge"] == 0 and again.loss_fraction == 0.0


@pytest.mark.parametrize(
    ("dry_run", "threshold"), [(True, 1.0), (False, 0.1), (False, float("nan"))]
)
def test_it_leaves_a_chroma_collection_untouched_when_not_applying(dry_run, threshold):
    store, collection = _chroma_store()
    before = collection.get(include=["documents", "metadatas", "embeddings"])
    result = Consolidator(WHOLE, clock=clock, dry_run=dry_run).consolidate(
        store, max_loss_fraction=threshold
    )
    assert result.context.get("applied") is False
    after = collection.get(include=["documents", "metadatas", "embeddings"])
    assert after["ids"] == before["ids"] and after["documents"] == before["documents"]
    assert after["metadatas"] == before["metadatas"]
    assert np.array_equal(np.asarray(after["embeddings"]), np.asarray(before["embeddings"]))


class CopyingStore(DictStore):
    """A store whose library keeps two copies of some memories, and says which."""

    def __init__(self, records, copies):
        super().__init__(records)
        self.copies = copies

    def library_copies(self):
        return dict(self.copies)


def copied_records() -> list[MemoryRecord]:
    return [
        MemoryRecord("a", "Alice likes jazz", basis(0), {}),
        MemoryRecord("a2", "Alice likes jazz", basis(0), {}),
        MemoryRecord("b", "Bob plays chess", basis(1), {}),
        MemoryRecord("b2", "Bob plays chess", basis(1), {}),
        MemoryRecord("c", "Carol has a cat", basis(2), {}),
    ]


def test_a_memory_the_library_stored_twice_counts_as_one_original():
    plain = DictStore(copied_records())
    lossy = Consolidator(WHOLE, clock=clock).consolidate(plain, max_loss_fraction=0.0)
    assert lossy.rejected and lossy.loss_fraction == pytest.approx(4 / 5)

    store = CopyingStore(copied_records(), {"a2": "a", "b2": "b"})
    result = Consolidator(WHOLE, clock=clock).consolidate(store, max_loss_fraction=0.0)

    assert not result.rejected and result.context["applied"] is True, result.reason
    assert (result.entries_before, result.entries_after, result.merged) == (3, 3, 4)
    assert result.loss_fraction == 0.0 and result.context["stored"] == {"before": 5, "after": 3}
    assert sorted(r.document for r in store.data.values()) == [
        "Alice likes jazz",
        "Bob plays chess",
        "Carol has a cat",
    ]


def test_removing_every_copy_of_an_original_loses_it_and_one_copy_does_not():
    def prune(*ids):
        return Operation(OpKind.PRUNE, list(ids), ["h"] * len(ids), list(ids), "old", "decay")

    copies = {"a2": "a", "b2": "b"}
    one_copy = summarize(5, [prune("a2")], copies)
    assert (one_copy.entries_before, one_copy.loss_fraction) == (3, 0.0)
    both = summarize(5, [prune("a"), prune("a2")], copies)
    assert both.loss_fraction == pytest.approx(1 / 3)
