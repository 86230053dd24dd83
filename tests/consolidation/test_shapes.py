"""Shape detection on collections written by the real libraries (tests/agent_stores.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import chromadb
import numpy as np
import pytest

from consolidation import FieldMap
from consolidation.adapters.chroma_info import sample_collection
from consolidation.adapters.embedder import get_default_embedder
from consolidation.shapes import CollectionSample, detect_shape
from tests.agent_stores import (
    FOREIGN_DIM,
    Mem0Memory,
    PraisonMemory,
    write_mem0,
    write_plain,
    write_praisonai,
)

MEMORIES = [
    Mem0Memory(
        "Prefers dark mode in the editor",
        user_id="alice",
        created_at=datetime(2025, 1, 10, tzinfo=UTC),
    ),
    Mem0Memory("Trinkt morgens schwarzen Kaffee", user_id="alice"),
    Mem0Memory("不要在代码里使用分号", user_id="bob"),
    Mem0Memory("Prefers dark mode in the editor", user_id="bob"),
]


def _embed(texts: list[str]) -> np.ndarray:
    return np.asarray(get_default_embedder().embed(texts), dtype=np.float32)


@pytest.fixture
def client() -> chromadb.api.ClientAPI:
    return chromadb.EphemeralClient()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_it_reads_mem0s_text_from_metadata_data(client):
    name = _name("mem0")
    write_mem0(client, name, MEMORIES)
    col = client.get_collection(name)
    stored = col.get(include=["documents", "metadatas"])
    assert all(d is None for d in stored["documents"])  # mem0 writes no document
    report = detect_shape(sample_collection(col), embed=_embed)
    assert report.shape == "mem0"
    assert report.field_map.document == "data"
    assert report.field_map.updated_at == "updated_at"
    assert "user_id" in report.field_map.scope
    assert (report.vector_width, report.space) == (FOREIGN_DIM, "l2")
    assert report.embedder_matches is False
    assert any("user_id" in n for n in report.notes)


def test_it_reads_praisonai_documents_and_timestamp(client):
    write_praisonai(
        client,
        [
            PraisonMemory("User likes jazz", timestamp=1.7e9),
            PraisonMemory("Der Nutzer wohnt in Berlin"),
        ],
        collection_name=(name := _name("praison")),
    )
    report = detect_shape(sample_collection(client.get_collection(name)), embed=_embed)
    assert report.shape == "praisonai"
    assert report.field_map.document == ""
    assert report.field_map.created_at == "timestamp"
    assert (report.vector_width, report.space) == (FOREIGN_DIM, "cosine")


def test_it_recognises_a_plain_log_embedded_with_our_model(client):
    name = _name("plain")
    write_plain(client, name, ["deployed v1.2 to staging", "回滚到 v1.1", "Tests grün"])
    report = detect_shape(sample_collection(client.get_collection(name)), embed=_embed)
    assert report.shape == "plain"
    assert report.field_map.document == ""
    assert report.embedder_matches is True
    assert (report.vector_width, report.space) == (384, "l2")


@pytest.mark.parametrize(
    ("preset", "error"),
    [
        ("mem0", "does not look like mem0"),
        ("praisonai", "most records have no document"),
        ("plain", "most records have no document"),
        ("bogus", "unknown preset"),
    ],
)
def test_it_refuses_a_preset_the_records_contradict(preset, error):
    if preset == "mem0":
        sample = CollectionSample(ids=["a"], documents=["text"], metadatas=[{}])
    else:
        sample = CollectionSample(
            ids=["a"], documents=[None], metadatas=[{"data": "x", "hash": "h"}]
        )
    with pytest.raises(ValueError, match=error):
        detect_shape(sample, preset=preset)


def test_it_finds_text_in_another_metadata_key_and_refuses_when_there_is_none():
    sample = CollectionSample(
        ids=["a", "b"], documents=[None, None], metadatas=[{"content": "one"}, {"content": "two"}]
    )
    assert detect_shape(sample).field_map.document == "content"
    with pytest.raises(ValueError, match="no memory text found"):
        detect_shape(CollectionSample(ids=["a"], documents=[None], metadatas=[{"n": 1}]))


def test_it_says_when_384d_vectors_are_another_models():
    texts = ["the cat sat", "un perro ladra"]
    rng = np.random.default_rng(0)
    sample = CollectionSample(
        ids=["a", "b"],
        documents=texts,
        metadatas=[{}, {}],
        vectors=rng.standard_normal((2, 384)).tolist(),
        vector_width=384,
    )
    report = detect_shape(sample, embed=_embed)
    assert report.embedder_matches is False
    assert "another model" in " ".join(report.notes)


def test_an_empty_collection_gets_our_own_field_map():
    report = detect_shape(CollectionSample(ids=[], documents=[], metadatas=[]))
    assert (report.shape, report.field_map, report.embedder_matches) == (
        "memoryadmin",
        FieldMap(),
        None,
    )
    assert "empty" in " ".join(report.notes)
