"""ChromaMemoryStore against a real in-process Chroma (and, marked slow, a `chroma run` server)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
import pytest

from consolidation.adapters.chroma_store import (
    JSON_MARKER,
    ChromaMemoryStore,
    CollectionNotFound,
    StoreUnavailable,
    decode_metadata,
    encode_metadata,
    make_client,
    open_collection,
    validate_collection_name,
)
from consolidation.protocols import MemoryStore, WritableMemoryStore
from consolidation.records import MemoryRecord
from tests.conftest import free_port

DIM = 384


def unique(prefix: str = "t") -> str:
    # EphemeralClient instances share one in-process store: every test gets its own name.
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def unit_vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def same(a: Any, b: Any) -> bool:
    """Equal *and* of the same types all the way down (1 != 1.0 != True; NaN == NaN; -0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@pytest.fixture(scope="module")
def client() -> Any:
    return make_client(ephemeral=True)


@pytest.fixture
def store(client: Any) -> ChromaMemoryStore:
    return ChromaMemoryStore(open_collection(client, unique()), write_batch=7)


def records(n: int, seed: int = 0, prefix: str = "m") -> list[MemoryRecord]:
    vecs = unit_vectors(n, seed)
    return [
        MemoryRecord(f"{prefix}{i:05d}", f"memory number {i}", vecs[i], {"i": i, "tier": "working"})
        for i in range(n)
    ]


def test_it_implements_the_store_protocols(store: ChromaMemoryStore) -> None:
    assert isinstance(store, MemoryStore)
    assert isinstance(store, WritableMemoryStore)


# ---- paging ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_collection(client: Any) -> tuple[Any, list[str]]:
    """12,001 records written straight through chromadb (2-d vectors keep indexing cheap; the
    paging code path is the same as for 384-d)."""
    col = client.create_collection(unique("big"), embedding_function=None)
    ids = [f"id-{i:05d}" for i in range(12_001)]
    vecs = np.random.default_rng(1).standard_normal((len(ids), 2)).astype(np.float32)
    for s in range(0, len(ids), 5000):
        col.add(
            ids=ids[s : s + 5000],
            embeddings=vecs[s : s + 5000],
            documents=[f"doc {i}" for i in ids[s : s + 5000]],
            metadatas=[{"n": s + j} for j in range(len(ids[s : s + 5000]))],
        )
    return col, ids


@pytest.mark.parametrize("page_size", [1000, 4999, 5000])
def test_it_pages_over_12001_records_returning_every_id_exactly_once(
    big_collection: tuple[Any, list[str]], page_size: int
) -> None:
    col, ids = big_collection
    store = ChromaMemoryStore(col, page_size=page_size)
    pages = list(store.iter_pages(include_embeddings=False))
    seen = [r.id for page in pages for r in page]
    assert len(seen) == len(set(seen)) == 12_001
    assert set(seen) == set(ids)
    assert all(1 <= len(p) <= page_size for p in pages)
    assert len(pages) == math.ceil(12_001 / page_size)
    assert store.count() == 12_001
    first = pages[0][0]
    assert first.document == f"doc {first.id}" and first.embedding is None


def test_it_pages_with_embeddings_and_iter_records_yields_each_once(
    store: ChromaMemoryStore,
) -> None:
    recs = records(257)
    store.upsert(recs)
    pages = list(store.iter_pages(page_size=50))
    assert [len(p) for p in pages] == [50] * 5 + [7]
    by_id = {r.id: r for p in pages for r in p}
    assert set(by_id) == {r.id for r in recs}
    assert all(r.embedding is not None and r.embedding.dtype == np.float32 for r in by_id.values())
    assert sorted(r.id for r in store.iter_records()) == sorted(by_id)


@pytest.mark.parametrize("bad", [0, -1, 5001, 2.5, True, "10"])
def test_it_rejects_page_sizes_outside_chromas_safe_range(client: Any, bad: Any) -> None:
    col = open_collection(client, unique())
    with pytest.raises(ValueError, match="page_size"):
        ChromaMemoryStore(col, page_size=bad)
    with pytest.raises(ValueError, match="page_size"):
        next(ChromaMemoryStore(col).iter_pages(page_size=bad))


def test_it_iterates_an_empty_collection_as_no_pages(store: ChromaMemoryStore) -> None:
    assert list(store.iter_pages()) == []
    assert store.count() == 0


# ---- metadata round trip --------------------------------------------------------------------

METADATA_CASES: list[tuple[str, Any]] = [
    ("nested dict", {"a": {"b": [1, 2, {"c": None}]}, "d": "é"}),
    ("empty dict", {}),
    ("list of mixed types", [1, "two", 3.0, True, None]),
    ("nested lists", [[1, 2], [3]]),
    ("None", None),
    ("empty list", []),
    ("unicode string", "naïve café — 東京 🙂 \u2028 \x85"),
    ("empty string", ""),
    ("bool true", True),
    ("bool false", False),
    ("int", 42),
    ("int64 max", 2**63 - 1),
    ("int64 min", -(2**63)),
    ("int beyond 64 bits", 2**64 + 1),
    ("float", 0.1),
    ("integral float", 3.0),
    ("tiny float", 5e-324),
    ("negative zero", -0.0),
    ("NaN", math.nan),
    ("infinity", math.inf),
    ("minus infinity", -math.inf),
    ("list of str", ["a", "", "json:not-a-marker-in-lists"]),
    ("list of int", [1, -2, 2**62]),
    ("list of float", [0.1, 1e-300, 2.5]),
    ("list of bool", [True, False]),
    ("list with -0.0", [1.0, -0.0]),
    ("list of huge ints", [2**70, 1]),
    ("bool and int list", [True, 1]),
    ("string that looks encoded", 'json:{"a": 1}'),
    ("bare marker", "json:"),
    ("json-ish string", '{"a": 1}'),
]


@pytest.mark.parametrize(("label", "value"), METADATA_CASES, ids=[c[0] for c in METADATA_CASES])
def test_it_round_trips_every_metadata_value_exactly(
    store: ChromaMemoryStore, label: str, value: Any
) -> None:
    meta = {"value": value, "keep": "x"}
    store.upsert([MemoryRecord("r1", "doc", unit_vectors(1)[0], meta)])
    (got,) = store.get(["r1"])
    assert same(got.metadata, meta), f"{label}: {got.metadata!r} != {meta!r}"
    # …and the same through a page read
    (page,) = list(store.iter_pages())
    assert same(page[0].metadata, meta)


def test_it_round_trips_a_whole_mixed_metadata_dict_in_one_record(
    store: ChromaMemoryStore,
) -> None:
    meta = {f"k{i}": v for i, (_, v) in enumerate(METADATA_CASES)}
    store.upsert([MemoryRecord("all", "doc", unit_vectors(1)[0], meta)])
    assert same(store.get(["all"])[0].metadata, meta)


def test_it_stores_non_scalar_values_as_marked_json_strings(client: Any) -> None:
    encoded = encode_metadata({"d": {"a": 1}, "n": None, "s": "plain", "l": [1, 2]})
    assert JSON_MARKER == "json:"
    assert encoded == {"d": 'json:{"a":1}', "n": "json:null", "s": "plain", "l": [1, 2]}
    assert decode_metadata(encoded) == {"d": {"a": 1}, "n": None, "s": "plain", "l": [1, 2]}


def test_it_returns_a_foreign_marker_string_that_is_not_json_unchanged(client: Any) -> None:
    col = client.create_collection(unique(), embedding_function=None)
    col.add(
        ids=["f"],
        embeddings=unit_vectors(1),
        documents=["d"],
        metadatas=[{"note": "json: this is prose, not JSON"}],
    )
    (rec,) = ChromaMemoryStore(col).get(["f"])
    assert rec.metadata == {"note": "json: this is prose, not JSON"}


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"t": (1, 2)}, "tuple"),
        ({"s": {1, 2}}, "set"),
        ({"b": b"bytes"}, "bytes"),
        ({"d": {1: "int key"}}, "keys must be strings"),
        ({"o": object()}, "object"),
        ({"": 1}, "empty"),
        ({"#x": 1}, "reserved"),
        ({"$x": 1}, "reserved"),
        ({"chroma:document": 1}, "reserved"),
        ({"chroma:x": 1}, "reserved"),
        ({"s": "\ud800"}, "Unicode"),
    ],
)
def test_it_rejects_unencodable_metadata_and_writes_nothing(
    store: ChromaMemoryStore, meta: dict[str, Any], message: str
) -> None:
    vecs = unit_vectors(3)
    store.upsert([MemoryRecord("old", "before", vecs[0], {"a": 1})])
    batch = [
        MemoryRecord("old", "after", vecs[1], {"a": 2}),
        MemoryRecord("bad", "doc", vecs[2], meta),
    ]
    with pytest.raises(ValueError, match=message):
        store.upsert(batch)
    assert store.count() == 1
    (old,) = store.get(["old"])
    assert old.document == "before" and old.metadata == {"a": 1}


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([MemoryRecord("a", "x", None)], "no embedding"),
        ([MemoryRecord("a", "x", np.full(DIM, np.nan, dtype=np.float32))], "non-finite"),
        (
            [
                MemoryRecord("a", "x", unit_vectors(1)[0]),
                MemoryRecord("a", "y", unit_vectors(1)[0]),
            ],
            "more than once",
        ),
    ],
)
def test_it_rejects_bad_records_before_writing_anything(
    store: ChromaMemoryStore, batch: list[MemoryRecord], message: str
) -> None:
    good = MemoryRecord("good", "fine", unit_vectors(1)[0])
    with pytest.raises(ValueError, match=message):
        store.upsert([good, *batch])
    assert store.count() == 0


# ---- embeddings and documents ---------------------------------------------------------------


def test_it_round_trips_float32_embeddings_within_one_ulp_in_a_cosine_collection(
    store: ChromaMemoryStore,
) -> None:
    # Chroma's cosine HNSW stores the L2-normalised vector (re-normalising a unit vector can move
    # the last bit): documented in the module; l2/ip collections are exact (next test).
    recs = records(64)
    store.upsert(recs)
    got = {r.id: r.embedding for r in store.get([r.id for r in recs])}
    for r in recs:
        e = got[r.id]
        assert e.dtype == np.float32 and e.shape == (DIM,)
        assert np.all(np.abs(e - r.embedding) <= np.spacing(np.abs(r.embedding)))


@pytest.mark.parametrize("space", ["l2", "ip"])
def test_it_round_trips_embeddings_exactly_in_l2_and_ip_collections(
    client: Any, space: str
) -> None:
    name = unique(space)
    client.create_collection(
        name, embedding_function=None, configuration={"hnsw": {"space": space}}
    )
    store = ChromaMemoryStore(open_collection(client, name, create=False))
    raw = np.random.default_rng(5).standard_normal((20, DIM)).astype(np.float32)
    recs = [MemoryRecord(f"e{i}", "d", raw[i]) for i in range(20)]
    store.upsert(recs)
    for r in store.get([r.id for r in recs]):
        assert np.array_equal(r.embedding, raw[int(r.id[1:])])


def test_it_reads_a_record_without_a_document_as_empty_text(client: Any) -> None:
    col = client.create_collection(unique(), embedding_function=None)
    col.add(ids=["nodoc"], embeddings=unit_vectors(1))
    (rec,) = ChromaMemoryStore(col).get(["nodoc"])
    assert rec.document == "" and rec.metadata == {}


# ---- writes ---------------------------------------------------------------------------------


def test_it_upserts_idempotently(store: ChromaMemoryStore) -> None:
    recs = records(30)
    store.upsert(recs)
    first = {r.id: (r.document, r.metadata, r.embedding) for r in store.iter_records()}
    store.upsert(recs)
    second = {r.id: (r.document, r.metadata, r.embedding) for r in store.iter_records()}
    assert store.count() == 30
    assert first.keys() == second.keys()
    for k, (doc, meta, emb) in first.items():
        assert second[k][0] == doc and second[k][1] == meta
        assert np.allclose(second[k][2], emb, rtol=0, atol=1e-7)


def test_it_upsert_replaces_document_and_metadata_whole(store: ChromaMemoryStore) -> None:
    vecs = unit_vectors(2)
    store.upsert([MemoryRecord("r", "old text", vecs[0], {"a": 1, "b": [1, 2], "c": {"x": 1}})])
    store.upsert([MemoryRecord("r", "new text", vecs[1], {"a": 2})])
    (rec,) = store.get(["r"])
    assert rec.document == "new text"
    assert rec.metadata == {"a": 2}  # Chroma alone would have kept b and c
    assert float(rec.embedding @ vecs[1]) > 0.9999
    store.upsert([MemoryRecord("r", "no metadata", vecs[1], {})])
    assert store.get(["r"])[0].metadata == {}


def test_a_write_of_new_and_stored_ids_interleaved_leaves_every_record_as_written(
    store: ChromaMemoryStore,
) -> None:
    # new ids go through Chroma's add, stored ones through its upsert (add would leave them)
    vecs = unit_vectors(20)
    store.upsert([MemoryRecord(f"r{i}", f"old {i}", vecs[i], {"old": i}) for i in range(0, 20, 2)])
    store.upsert([MemoryRecord(f"r{i}", f"new {i}", vecs[19 - i], {"k": i}) for i in range(20)])
    got = {r.id: r for r in store.get([f"r{i}" for i in range(20)])}
    assert store.count() == 20
    for i in range(20):
        assert (got[f"r{i}"].document, got[f"r{i}"].metadata) == (f"new {i}", {"k": i})
        assert float(got[f"r{i}"].embedding @ vecs[19 - i]) > 0.9999


def test_it_writes_in_batches_no_larger_than_the_client_allows(client: Any) -> None:
    col = open_collection(client, unique())
    assert ChromaMemoryStore(col, write_batch=10**9).write_batch == client.get_max_batch_size()
    store = ChromaMemoryStore(col, write_batch=7)
    store.upsert(records(50))
    assert store.count() == 50
    with pytest.raises(ValueError, match="write_batch"):
        ChromaMemoryStore(col, write_batch=0)


def test_it_deletes_idempotently_and_ignores_missing_ids(store: ChromaMemoryStore) -> None:
    store.upsert(records(20))
    store.delete(["m00003", "m00004", "does-not-exist"])
    store.delete(["m00003", "m00004"])
    store.delete([])
    assert store.count() == 18
    assert store.get(["m00003", "m00005"])[0].id == "m00005"
    with pytest.raises(TypeError):
        store.delete("m00001")


def test_it_gets_existing_ids_in_request_order_and_leaves_out_missing_ones(
    store: ChromaMemoryStore,
) -> None:
    store.upsert(records(10))
    got = store.get(["m00007", "missing", "m00002", "m00007", "also-missing"])
    assert [r.id for r in got] == ["m00007", "m00002"]
    assert got[0].document == "memory number 7" and got[0].metadata == {"i": 7, "tier": "working"}
    assert store.get([]) == []
    assert store.get(["missing"]) == []
    assert store.get(["m00001"], include_embeddings=False)[0].embedding is None


def test_it_gets_more_ids_than_one_page(client: Any) -> None:
    store = ChromaMemoryStore(open_collection(client, unique()), page_size=16)
    store.upsert(records(40))
    ids = [f"m{i:05d}" for i in range(39, -1, -1)]
    assert [r.id for r in store.get(ids)] == ids


# ---- query ----------------------------------------------------------------------------------


def test_it_queries_nearest_records_by_cosine(store: ChromaMemoryStore) -> None:
    rng = np.random.default_rng(3)
    q = unit_vectors(1, seed=9)[0].astype(np.float64)
    # Build vectors with known cosines to q: cos * q + sin * (unit vector orthogonal to q).
    wanted = {"c95": 0.95, "c80": 0.80, "c50": 0.50, "c10": 0.10, "cneg": -0.30}
    recs = []
    for rid, cos in wanted.items():
        r = rng.standard_normal(DIM)
        r -= (r @ q) * q
        r /= np.linalg.norm(r)
        recs.append(
            MemoryRecord(rid, rid, (cos * q + math.sqrt(1 - cos * cos) * r).astype(np.float32))
        )
    store.upsert(recs)
    hits = store.query(q.astype(np.float32), k=3)
    assert [r.id for r, _ in hits] == ["c95", "c80", "c50"]
    for rec, cos in hits:
        assert cos == pytest.approx(wanted[rec.id], abs=1e-5)
        assert rec.document == rec.id and rec.embedding is not None
    assert [r.id for r, _ in store.query(q.astype(np.float32), k=50)] == [
        "c95",
        "c80",
        "c50",
        "c10",
        "cneg",
    ]


def test_it_queries_an_empty_store_as_no_hits(store: ChromaMemoryStore) -> None:
    assert store.query(unit_vectors(1)[0], k=5) == []


@pytest.mark.parametrize(
    ("embedding", "k", "message"),
    [
        (np.zeros(10, dtype=np.float32), 3, "shape"),
        (np.zeros(DIM, dtype=np.float32), 3, "zeros"),
        (np.full(DIM, np.inf, dtype=np.float32), 3, "NaN or infinity"),
        (np.ones(DIM, dtype=np.float32), 0, "k must"),
    ],
)
def test_it_rejects_bad_queries(
    store: ChromaMemoryStore, embedding: np.ndarray, k: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        store.query(embedding, k)


# ---- collections and clients ----------------------------------------------------------------

BAD_NAMES = [
    "ab",
    "a" * 513,
    "-abc",
    "abc-",
    "_abc",
    "abc.",
    "a b c",
    "a..b",
    "192.168.0.1",
    "é-abc",
    "",
    "abc/def",
]
GOOD_NAMES = ["abc", "a" * 512, "my.coll_1-x", "1.2.3", "A-b.C_d", "agent-42.memories"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_it_rejects_invalid_collection_names_with_a_readable_message(
    client: Any, name: str
) -> None:
    with pytest.raises(ValueError, match="invalid collection name") as info:
        open_collection(client, name)
    assert repr(name)[:40] in str(info.value) or name == "a" * 513
    # Chroma agrees the name is invalid: we only say it earlier and more clearly.
    with pytest.raises(Exception):  # noqa: B017 - chromadb raises several types here
        client.get_or_create_collection(name, embedding_function=None)


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_it_accepts_every_valid_collection_name(client: Any, name: str) -> None:
    assert validate_collection_name(name) == name
    col = open_collection(client, name)
    assert col.name == name
    client.delete_collection(name)


def test_it_opens_existing_collections_and_refuses_to_invent_missing_ones(client: Any) -> None:
    name = unique()
    with pytest.raises(CollectionNotFound, match=name):
        open_collection(client, name, create=False)
    col = open_collection(client, name)
    assert col.configuration_json["hnsw"]["space"] == "cosine"
    again = open_collection(client, name, create=False)
    assert again.id == col.id


def test_it_never_lets_chroma_compute_embeddings(client: Any) -> None:
    col = open_collection(client, unique())
    with pytest.raises(Exception):  # noqa: B017 - no embedding function: chromadb refuses
        col.add(ids=["x"], documents=["text without a vector"])
    assert col.count() == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"host": "localhost", "ephemeral": True},
        {"path": "/tmp/x", "ephemeral": True},
        {"host": "localhost", "port": 0},
    ],
)
def test_it_refuses_ambiguous_client_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_client(**kwargs)


def test_it_makes_a_persistent_client(tmp_path: Path) -> None:
    client = make_client(path=str(tmp_path / "chroma"))
    store = ChromaMemoryStore(open_collection(client, unique()))
    store.upsert(records(3))
    assert store.count() == 3


def test_it_reports_an_unreachable_server_as_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match="unreachable"):
        make_client(host="127.0.0.1", port=free_port())


# ---- a real `chroma run` server -------------------------------------------------------------


def chroma_executable() -> str:
    candidate = Path(sys.executable).with_name("chroma")
    return str(candidate) if candidate.exists() else (shutil.which("chroma") or "chroma")


@pytest.fixture
def chroma_server(tmp_path: Path) -> Any:
    port = free_port()
    log = (tmp_path / "chroma.log").open("wb")
    proc = subprocess.Popen(
        [
            chroma_executable(),
            "run",
            "--path",
            str(tmp_path / "data"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            break
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(
                    "chroma run did not start: " + (tmp_path / "chroma.log").read_text()[-2000:]
                ) from None
            time.sleep(0.2)
    yield proc, port
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    log.close()


@pytest.mark.slow
def test_it_works_through_a_chroma_server_and_reports_when_it_stops(chroma_server: Any) -> None:
    proc, port = chroma_server
    client = make_client(host="127.0.0.1", port=port)
    store = ChromaMemoryStore(open_collection(client, unique("http")), page_size=7, write_batch=5)
    recs = records(23)
    recs[0] = MemoryRecord(
        recs[0].id,
        "ünïcödé 🙂",
        recs[0].embedding,
        {
            "nested": {"a": [1, None, "x"]},
            "none": None,
            "empty": [],
            "big": 2**70,
            "neg0": -0.0,
            "flag": True,
            "f": 0.1,
        },
    )
    store.upsert(recs)
    store.upsert(recs)  # idempotent over HTTP too
    assert store.count() == 23
    pages = list(store.iter_pages())
    assert sorted(r.id for p in pages for r in p) == sorted(r.id for r in recs)
    (first,) = store.get([recs[0].id])
    assert first.document == "ünïcödé 🙂"
    assert same(first.metadata, recs[0].metadata)
    for got, want in zip(store.get([r.id for r in recs]), recs, strict=True):
        assert np.all(np.abs(got.embedding - want.embedding) <= np.spacing(np.abs(want.embedding)))
    hits = store.query(recs[5].embedding, k=1)
    assert hits[0][0].id == recs[5].id and hits[0][1] == pytest.approx(1.0, abs=1e-6)
    store.delete([recs[1].id])
    assert store.count() == 22

    proc.terminate()
    proc.wait(timeout=10)
    with pytest.raises(StoreUnavailable, match="unreachable"):
        store.count()
    with pytest.raises(StoreUnavailable):
        store.upsert(records(2, prefix="late"))
    with pytest.raises(StoreUnavailable):
        make_client(host="127.0.0.1", port=port)
