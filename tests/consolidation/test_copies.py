"""Exact copies merge even when the merge they were grouped in cannot be written.

A store of another model's vectors with no embedder for it (mem0's or PraisonAI's 1536-d
OpenAI vectors) can write only texts it already holds; a merge of copies and a paraphrase has a
new text and is left out. Its copies still merge, keeping one copy's text and stored vector.
"""

from __future__ import annotations

import uuid

import chromadb
import numpy as np
import pytest

from consolidation import Consolidator, FieldMap, MemoryRecord
from consolidation.adapters.chroma_layout import Layout
from consolidation.adapters.chroma_store import ChromaMemoryStore
from consolidation.adapters.embedder import get_default_embedder
from consolidation.adapters.vector_cache import VectorCache
from consolidation.copies import leave_out_keeping_copies
from consolidation.plans import Fate, Operation, OpKind, Plan, summarize
from consolidation.policy import NAMED_POLICIES, Policy
from consolidation.shapes import preset_field_map
from tests.agent_stores import (
    FOREIGN_DIM,
    Mem0Memory,
    PraisonMemory,
    foreign_vector,
    write_mem0,
    write_praisonai,
)

FACT = "Prefers dark mode in the editor"
PARAPHRASE = "Likes the editor in dark mode"  # joins the copies at the aggressive 0.82 link
OTHERS = [f"Box {k} in the attic holds item {k * 7 + 3}" for k in range(45)]
NO_EMBEDDER = "the collection holds 1536-d vectors of another model and no embedder"


def foreign_store(collection, preset: str) -> ChromaMemoryStore:
    """The store as attached without the agent's own embedder (no ``native_embed``)."""
    layout = Layout(
        collection.name,
        field_map=preset_field_map(preset),
        embed=lambda texts: np.asarray(get_default_embedder().embed(texts), np.float32),
        cache=VectorCache(":memory:"),
    )
    return ChromaMemoryStore(collection, layout=layout)


def mem0_collection(memories):
    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    write_mem0(client, name, memories)
    return client.get_collection(name)


def test_fifteen_rewrites_and_a_paraphrase_in_mem0_merge_the_copies_only():
    col = mem0_collection(
        [Mem0Memory(FACT, user_id="alice") for _ in range(15)]
        + [Mem0Memory(PARAPHRASE, user_id="alice")]
        + [Mem0Memory(t, user_id="bob") for t in OTHERS]
    )
    consolidator = Consolidator(
        NAMED_POLICIES["aggressive"],
        fieldmap=preset_field_map("mem0"),
        embedder=get_default_embedder(),
    )
    store = foreign_store(col, "mem0")

    plan = consolidator.plan(store)
    [left] = plan.context["left_out"]  # the copies and the paraphrase: a new text
    assert len(left["source_ids"]) == 16 and left["copies_merged"] == 15
    [merge] = plan.by_kind(OpKind.MERGE)
    assert merge.rule == "exact_duplicate" and merge.result_document == FACT

    result = consolidator.consolidate(store)  # the seed's default guard, 0.25

    assert result.context["applied"] and not result.rejected
    assert result.loss_fraction <= 0.25 and result.merged == 15
    rows = col.get(include=["metadatas", "embeddings"])
    alice = [
        (m["data"], e)
        for m, e in zip(rows["metadatas"], rows["embeddings"], strict=True)
        if m["user_id"] == "alice"
    ]
    assert sorted(t for t, _ in alice) == sorted([FACT, PARAPHRASE])
    for text, vec in alice:  # mem0's own (OpenAI-width) vector of each text, none embedded by us
        assert len(vec) == FOREIGN_DIM
        assert np.allclose(vec, foreign_vector(text), atol=1e-6)
    assert sorted(m["data"] for m in rows["metadatas"] if m["user_id"] == "bob") == sorted(OTHERS)


def test_the_copies_merge_is_still_held_to_the_loss_guard():
    col = mem0_collection(
        [Mem0Memory(FACT, user_id="alice") for _ in range(15)]
        + [Mem0Memory(PARAPHRASE, user_id="alice")]
        + [Mem0Memory(t, user_id="bob") for t in OTHERS[:10]]
    )
    policy = NAMED_POLICIES["aggressive"].with_(trim_to_guard=False)
    consolidator = Consolidator(
        policy, fieldmap=preset_field_map("mem0"), embedder=get_default_embedder()
    )

    result = consolidator.consolidate(foreign_store(col, "mem0"), max_loss_fraction=0.25)

    assert result.rejected and result.reason.startswith("Loss guard tripped")
    assert result.merged == 15 and col.count() == 26  # 14 of 26 would go: nothing written


def test_praisonais_turns_stored_twice_merge_beside_a_paraphrase():
    """PraisonAI keeps every turn twice (long- and short-term); in its chroma-backed memory of
    OpenAI vectors the two copies merge although a paraphrase joined their group."""
    client = chromadb.EphemeralClient()
    name = f"memory_{uuid.uuid4().hex[:10]}"
    texts = [FACT, FACT, PARAPHRASE, "Bob plays chess", "Bob plays chess", *OTHERS[:5]]
    write_praisonai(client, [PraisonMemory(t) for t in texts], collection_name=name)
    col = client.get_collection(name)
    consolidator = Consolidator(
        NAMED_POLICIES["aggressive"],
        fieldmap=preset_field_map("praisonai"),
        embedder=get_default_embedder(),
    )

    result = consolidator.consolidate(foreign_store(col, "praisonai"), max_loss_fraction=0.9)

    assert result.context["applied"] and (result.entries_before, result.entries_after) == (10, 8)
    rows = col.get(include=["documents", "embeddings"])
    assert sorted(rows["documents"]) == sorted(["Bob plays chess", FACT, PARAPHRASE, *OTHERS[:5]])
    for text, vec in zip(rows["documents"], rows["embeddings"], strict=True):
        assert np.allclose(vec, foreign_vector(text), atol=1e-6)


def _record(rid: str, text: str, user: str = "alice") -> MemoryRecord:
    vec = np.ones(384, np.float32) / np.sqrt(384)
    return MemoryRecord(rid, text, vec, {"user_id": user})


def _merge_plan(records: list[MemoryRecord], text: str) -> Plan:
    ids = [r.id for r in records]
    op = Operation(
        OpKind.MERGE,
        ids,
        [f"h-{i}" for i in ids],
        list(ids),
        "near duplicates",
        "near_duplicate",
        result_id="m-new",
        result_document=text,
        result_metadata={"user_id": records[0].metadata["user_id"]},
    )
    return Plan([op], summarize(len(records), [op]), dict.fromkeys(ids, Fate.MERGED))


@pytest.mark.parametrize(
    ("copies", "paraphrase"),
    [
        (["Prefers dark mode in the editor", "prefers dark mode in the editor."], PARAPHRASE),
        (
            ["Trinkt morgens schwarzen Kaffee", "Trinkt morgens schwarzen Kaffee"],
            "Morgens trinkt er Kaffee ohne Milch",
        ),
        (["喜欢喝乌龙茶", "喜欢喝乌龙茶。", "喜欢喝乌龙茶"], "爱喝乌龙"),
        (["朝はブラックコーヒーを飲む", "朝はブラックコーヒーを飲む"], "毎朝コーヒーを飲む"),
    ],
    ids=["english", "german", "chinese", "japanese"],
)
def test_a_left_out_merge_keeps_its_copies_merged_in_any_script(copies, paraphrase):
    records = [_record(f"c{k}", t) for k, t in enumerate(copies)] + [_record("p", paraphrase)]
    plan = _merge_plan(records, f"{copies[0]} {paraphrase}")

    out = leave_out_keeping_copies(
        plan, {f"{copies[0]} {paraphrase}": NO_EMBEDDER}, records, Policy(), FieldMap()
    )

    [merge] = out.operations
    assert merge.source_ids == merge.removes == [f"c{k}" for k in range(len(copies))]
    assert merge.result_document == copies[0]  # a copy's own text: its stored vector is reused
    assert merge.rule == "exact_duplicate" and merge.result_id != "m-new"
    assert out.fates["p"] == Fate.KEPT
    assert all(out.fates[f"c{k}"] == Fate.MERGED for k in range(len(copies)))
    assert out.result.entries_after == 2 and out.result.merged == len(copies)
    assert out.context["left_out"][0]["copies_merged"] == len(copies)


def test_a_left_out_merge_without_copies_keeps_everything():
    records = [_record("a", "Prefers dark mode"), _record("b", PARAPHRASE)]
    plan = _merge_plan(records, "Prefers dark mode. Likes the editor in dark mode.")

    out = leave_out_keeping_copies(
        plan, {plan.operations[0].result_document: NO_EMBEDDER}, records, Policy(), FieldMap()
    )

    assert out.operations == [] and set(out.fates.values()) == {Fate.KEPT}
    assert "copies_merged" not in out.context["left_out"][0]


def test_a_copy_merge_the_store_still_refuses_is_left_out_too():
    records = [_record("a", FACT), _record("b", FACT), _record("p", PARAPHRASE)]
    plan = _merge_plan(records, f"{FACT}. {PARAPHRASE}.")

    out = leave_out_keeping_copies(
        plan,
        {f"{FACT}. {PARAPHRASE}.": NO_EMBEDDER},
        records,
        Policy(),
        FieldMap(),
        unwritable=lambda texts: dict.fromkeys(texts, "read-only"),
    )

    assert out.operations == [] and set(out.fates.values()) == {Fate.KEPT}
