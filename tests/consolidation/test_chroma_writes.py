"""How ChromaMemoryStore.upsert writes a batch (a real in-process Chroma): every record ends
exactly as written, and a stored record that already holds the document and the vector is
updated in its metadata alone (no vector re-indexed)."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

from consolidation.adapters.chroma_store import ChromaMemoryStore, make_client, open_collection
from consolidation.records import MemoryRecord

DIM = 384


class Recording:
    """A real Chroma collection that notes which write call each id went through."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.calls: list[tuple[str, list[str]]] = []
        self.metadatas: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._collection, name)
        if name not in ("add", "upsert", "update"):
            return attr

        def call(**kwargs: Any) -> Any:
            self.calls.append((name, list(kwargs["ids"])))
            self.metadatas.extend(kwargs.get("metadatas") or [])
            return attr(**kwargs)

        return call

    def by_call(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name, ids in self.calls:
            out.setdefault(name, []).extend(ids)
        return out


@pytest.fixture(scope="module")
def client() -> Any:
    return make_client(ephemeral=True)


@pytest.fixture
def recorded(client: Any) -> tuple[ChromaMemoryStore, Recording]:
    col = Recording(open_collection(client, f"w-{uuid.uuid4().hex[:12]}"))
    return ChromaMemoryStore(col, write_batch=4), col


def unit_vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_a_record_rewritten_with_its_own_text_and_vector_gets_its_metadata_alone_replaced(
    recorded: tuple[ChromaMemoryStore, Recording],
) -> None:
    store, col = recorded
    vec = unit_vectors(1)[0]
    store.upsert([MemoryRecord("r", "Alice likes jazz.", vec, {"a": 1, "gone": "x", "n": [1]})])
    (stored,) = store.get(["r"])  # what a merge or a rollback writes back: the vector read
    col.calls.clear()
    store.upsert([MemoryRecord("r", stored.document, stored.embedding, {"a": 2, "new": True})])
    assert col.by_call() == {"update": ["r"]}
    (rec,) = store.get(["r"])
    assert rec.document == "Alice likes jazz."
    assert rec.metadata == {"a": 2, "new": True}  # replaced whole: "gone" and "n" removed
    assert np.array_equal(rec.embedding, stored.embedding)


def test_a_new_text_or_a_new_vector_under_a_stored_id_is_upserted_whole(
    recorded: tuple[ChromaMemoryStore, Recording],
) -> None:
    store, col = recorded
    vecs = unit_vectors(3)
    store.upsert(
        [MemoryRecord("t", "old text", vecs[0], {"k": 1}), MemoryRecord("v", "same", vecs[1], {})]
    )
    stored = {r.id: r for r in store.get(["t", "v"])}
    col.calls.clear()
    store.upsert(
        [
            MemoryRecord("t", "new text", stored["t"].embedding, {"k": 2}),  # the text changed
            MemoryRecord("v", "same", vecs[2], {"k": 3}),  # the vector changed
        ]
    )
    assert col.by_call() == {"upsert": ["t", "v"]}
    got = {r.id: r for r in store.get(["t", "v"])}
    assert (got["t"].document, got["t"].metadata) == ("new text", {"k": 2})
    assert got["v"].metadata == {"k": 3} and float(got["v"].embedding @ vecs[2]) > 0.9999


def test_a_mixed_batch_adds_updates_and_upserts_and_every_record_ends_as_written(
    recorded: tuple[ChromaMemoryStore, Recording],
) -> None:
    store, col = recorded
    vecs = unit_vectors(12, seed=1)
    store.upsert([MemoryRecord(f"s{i}", f"text {i}", vecs[i], {"i": i}) for i in range(6)])
    stored = {r.id: r for r in store.get([f"s{i}" for i in range(6)])}
    plain = [MemoryRecord("s6", "no metadata", vecs[6], {})]
    store.upsert(plain)
    (plain_stored,) = store.get(["s6"])
    col.calls.clear()
    writes = [
        *(MemoryRecord(f"s{i}", f"text {i}", stored[f"s{i}"].embedding, {"j": i}) for i in (0, 2)),
        *(MemoryRecord(f"s{i}", f"edited {i}", vecs[i], {"j": i}) for i in (1, 3)),
        *(MemoryRecord(f"n{i}", f"new {i}", vecs[6 + i], {"j": i}) for i in range(4)),
        MemoryRecord("s6", "no metadata", plain_stored.embedding, {}),  # nothing to change
    ]
    store.upsert(writes)
    calls = col.by_call()
    assert sorted(calls["update"]) == ["s0", "s2"]
    assert sorted(calls["upsert"]) == ["s1", "s3"]
    assert sorted(calls["add"]) == ["n0", "n1", "n2", "n3"]
    got = {r.id: r for r in store.get([w.id for w in writes])}
    for w in writes:
        assert (got[w.id].document, got[w.id].metadata) == (w.document, w.metadata)
        assert float(got[w.id].embedding @ w.embedding) > 0.9999
    assert store.count() == 11  # s0–s6, n0–n3: nothing lost, nothing doubled


def test_an_update_sends_only_the_keys_that_change_and_a_record_as_written_is_left_alone(
    recorded: tuple[ChromaMemoryStore, Recording],
) -> None:
    store, col = recorded
    vec = unit_vectors(1, seed=2)[0]
    old = {"a": 1, "b": "x", "c": [1, 2], "d": True, "gone": 0.5}
    store.upsert([MemoryRecord("r", "text", vec, old)])
    (stored,) = store.get(["r"])
    col.calls.clear()
    col.metadatas.clear()
    new = {"a": 1, "b": "y", "c": [1, 2], "d": 1, "e": [0.5]}  # d: True → 1 is a change
    store.upsert([MemoryRecord("r", "text", stored.embedding, new)])
    assert col.calls == [("update", ["r"])]
    assert col.metadatas == [{"b": "y", "d": 1, "e": [0.5], "gone": None}]
    (rec,) = store.get(["r"])
    assert rec.metadata == new and type(rec.metadata["d"]) is int
    col.calls.clear()
    col.metadatas.clear()
    store.upsert([MemoryRecord("r", "text", stored.embedding, new)])  # already as written
    assert col.calls == [] and store.get(["r"])[0].metadata == new
