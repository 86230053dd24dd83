"""PraisonAI's own memories as stores the engine writes: FileMemory's JSON files (what
``Agent(memory=True)`` uses) and a chroma-backed ``Memory``, written through praisonaiagents
1.7.17's own code and read back the way the library reads them.

Turns are stored as ``Agent`` does after each reply (``memory_mixin._persist_memory_turn``):
the text ``"User: …\\nAssistant: …"`` once with ``store_long_term`` and once with
``store_short_term``, metadata ``{"agent_id": name, "user_id": …}``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("PRAISONAI_TELEMETRY_DISABLED", "true")  # before praisonaiagents loads

from praisonaiagents.memory import ConsolidationResult as PraisonResult  # noqa: E402
from praisonaiagents.memory.file_memory import FileMemory  # noqa: E402
from praisonaiagents.memory.memory import Memory  # noqa: E402

from consolidation import Consolidator  # noqa: E402
from consolidation.integrations.praisonai import (  # noqa: E402
    ConsolidationPlugin,
    FileMemoryStore,
    collection_name,
)
from consolidation.store_adapters import adapt  # noqa: E402
from tests.agent_stores import PraisonMemory, foreign_vector, write_praisonai  # noqa: E402

pytest_plugins = ["tests.store_adapters"]

TURNS = {
    "english": [
        ("Where do I live?", "You live in Boston."),
        ("What is my cat called?", "Your cat is called Pixel."),
        ("Which music do I like?", "You like jazz."),
    ],
    "german": [
        ("Wo wohne ich?", "Du wohnst in München."),
        ("Wie heißt meine Katze?", "Deine Katze heißt Mimi."),
        ("Welche Musik mag ich?", "Du magst Jazz."),
    ],
    "chinese": [
        ("我住在哪里？", "你住在北京。"),
        ("我的猫叫什么？", "你的猫叫小白。"),
        ("我喜欢什么音乐？", "你喜欢爵士乐。"),
    ],
}


def persist_turns(memory: FileMemory, turns, *, user_id: str = "alice") -> list[str]:
    """Store ``turns`` as praisonaiagents' Agent does; return their texts."""
    texts = []
    for question, answer in turns:
        text = f"User: {question}\nAssistant: {answer}"
        meta = {"agent_id": "Support", "user_id": user_id}
        memory.store_long_term(text, metadata=meta)
        memory.store_short_term(text, metadata=meta)
        texts.append(text)
    return texts


def files(memory: FileMemory) -> dict[str, bytes]:
    paths = (memory.short_term_file, memory.long_term_file)
    return {p.name: p.read_bytes() if p.exists() else None for p in paths}


@pytest.fixture
def file_memory(tmp_path: Path) -> FileMemory:
    return FileMemory(user_id="alice", base_path=str(tmp_path / "memory"))


@pytest.mark.parametrize("language", sorted(TURNS))
def test_it_merges_each_turns_two_copies_into_one_the_library_still_reads(
    file_memory, tmp_path, language
):
    texts = persist_turns(file_memory, TURNS[language])
    store = FileMemoryStore(file_memory)
    assert store.count() == 6
    records = store.get([i["id"] for i in file_memory.get_all_memories()])
    assert {r.metadata["memory_type"] for r in records} == {"short_term", "long_term"}

    result = ConsolidationPlugin(environ={}).consolidate(file_memory, max_loss_fraction=1.0)

    assert isinstance(result, PraisonResult) and not result.rejected, result.reason
    # six stored entries, three originals: each turn's two copies count as one
    assert (result.entries_before, result.entries_after, result.merged) == (3, 3, 6)
    assert result.context["stored"] == {"before": 6, "after": 3} and result.loss_fraction == 0
    assert result.context["applied"] is True and result.context["mode"] == "local"
    # What the agent sees on its next run: a fresh FileMemory over the same files.
    again = FileMemory(user_id="alice", base_path=str(tmp_path / "memory"))
    items = again.get_all_memories()
    assert sorted(i["content"] for i in items) == sorted(texts)  # one copy each, none lost
    assert {i["type"] for i in items} == {"long_term"}
    for item in items:
        assert item["metadata"]["agent_id"] == "Support" and item["metadata"]["user_id"] == "alice"
        assert len(item["metadata"]["merged_from"]) == 2
        assert isinstance(item["created_at"], float) and item["importance"] == 0.8
    found = again.search(TURNS[language][1][1], limit=1)
    assert found and found[0]["item"]["content"] == texts[1]


def test_identical_turns_of_two_users_stay_apart(file_memory, tmp_path):
    same = [("Which music do I like?", "You like jazz.")]
    persist_turns(file_memory, same, user_id="alice")
    persist_turns(file_memory, same, user_id="bob")

    result = ConsolidationPlugin(environ={}).consolidate(file_memory, max_loss_fraction=1.0)

    assert (result.entries_before, result.entries_after) == (2, 2)
    assert result.context["stored"] == {"before": 4, "after": 2}
    items = FileMemory(user_id="alice", base_path=str(tmp_path / "memory")).get_all_memories()
    assert sorted(i["metadata"]["user_id"] for i in items) == ["alice", "bob"]


def test_it_pairs_the_two_copies_the_library_stores_of_each_turn(file_memory):
    english = TURNS["english"]
    persist_turns(file_memory, english + english[2:])  # the last turn said again
    file_memory.store_long_term("User: a note\nAssistant: kept", metadata={"agent_id": "Support"})
    items = {i["id"]: i for i in file_memory.get_all_memories()}

    copies = FileMemoryStore(file_memory).library_copies()

    assert len(items) == 9 and len(copies) == 4  # one pair a turn; the lone note has none
    for short_id, long_id in copies.items():
        short, long = items[short_id], items[long_id]
        assert (short["type"], long["type"]) == ("short_term", "long_term")
        assert short["content"] == long["content"] and short["metadata"] == long["metadata"]
    said_twice = [i for i in copies if items[i]["content"].endswith("You like jazz.")]
    assert len(said_twice) == 2 and len({copies[i] for i in said_twice}) == 2


def test_the_seed_quick_start_applies_and_counts_each_turns_two_copies_as_one(
    file_memory, tmp_path, store_adapters
):
    texts = persist_turns(file_memory, TURNS["english"])

    consolidator = Consolidator()
    result = consolidator.consolidate(file_memory)  # the seed's call, on PraisonAI's own memory

    assert not result.rejected and result.context["applied"] is True, result.reason
    assert (result.entries_before, result.merged, result.loss_fraction) == (3, 6, 0.0)
    items = FileMemory(user_id="alice", base_path=str(tmp_path / "memory")).get_all_memories()
    assert sorted(i["content"] for i in items) == sorted(texts)  # one of each, none lost


def test_a_pass_within_the_loss_budget_applies_only_what_fits(file_memory, tmp_path):
    english = TURNS["english"]
    texts = persist_turns(file_memory, english + english[2:])  # 8 stored, 4 originals

    # jazz was said twice: merging its 4 copies loses one original of 4 (25 % > 20 %)
    result = ConsolidationPlugin(environ={}).consolidate(file_memory, max_loss_fraction=0.2)

    assert not result.rejected and result.context["applied"] is True
    assert (result.entries_before, result.merged, result.loss_fraction) == (4, 4, 0.0)
    assert result.context["stored"] == {"before": 8, "after": 6}
    assert result.reason == (
        "1 operation (merge 1) deferred to the next passes: they do not fit the loss budget"
    )
    items = FileMemory(user_id="alice", base_path=str(tmp_path / "memory")).get_all_memories()
    assert {i["content"] for i in items} == set(texts)

    again = ConsolidationPlugin(environ={}).consolidate(file_memory, max_loss_fraction=0.25)

    assert (again.entries_before, again.merged, again.loss_fraction) == (4, 4, 0.25)
    assert again.context["applied"] is True and again.reason is None
    items = FileMemory(user_id="alice", base_path=str(tmp_path / "memory")).get_all_memories()
    assert sorted(i["content"] for i in items) == sorted(set(texts))


def test_the_plugin_merges_the_copies_and_reconciles_the_update_within_the_guard(
    file_memory, tmp_path
):
    turns = [
        ("Where is Dana's office?", "Dana's office is in Lisbon."),
        ("Any news about Dana?", "Dana moved from Lisbon to Porto."),
        *TURNS["english"],
    ]
    texts = persist_turns(file_memory, turns)  # 10 stored, 5 originals
    plugin = ConsolidationPlugin(environ={})  # guard 0.25

    first = plugin.consolidate(file_memory)
    second = plugin.consolidate(file_memory)

    # first: both Lisbon copies superseded by the move (one original of five: 20 %) and the
    # copies of the turns no question holds merged (nothing lost); the move's event is also
    # asked about the other turns (the update channel offers it down to cosine 0.25: reviewer
    # load, never a loss), which holds their copies until a person answers
    assert (first.context["reconciled"], first.loss_fraction) == (2, 0.2)
    assert first.merged >= 4 and first.merged % 2 == 0
    assert second.loss_fraction == 0.0
    for result in (first, second):
        assert not result.rejected and result.context["applied"] and result.reason is None
    items = FileMemory(user_id="alice", base_path=str(tmp_path / "memory")).get_all_memories()
    kept = sorted(i["content"] for i in items)
    assert set(kept) == set(texts[1:])  # nothing lost but Lisbon, which the move replaced


def test_the_declared_store_adapter_serves_their_memories_and_nothing_else(
    store_adapters, tmp_path
):
    class TeamMemory(FileMemory):  # a subclass finds its base class's adapter
        pass

    memory = TeamMemory(user_id="team", base_path=str(tmp_path / "memory"))
    store, _fieldmap = adapt(memory)
    assert isinstance(store, FileMemoryStore) and store.memory is memory

    class Notes:  # any other memory object: planned as it is
        def get_all_memories(self) -> list[dict]:
            return []

    other = Notes()
    assert adapt(other) == (other, None)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda m: m.long_term_file.write_text("{not json", encoding="utf-8"), "cannot read"),
        (lambda m: m.long_term_file.write_text('{"a": 1}', encoding="utf-8"), "not a JSON list"),
    ],
    ids=["broken-json", "not-a-list"],
)
def test_a_damaged_file_is_a_clear_error_and_nothing_is_written(file_memory, damage, message):
    persist_turns(file_memory, TURNS["english"])
    damage(file_memory)
    before = files(file_memory)
    with pytest.raises(ValueError, match=message):
        ConsolidationPlugin(environ={}).consolidate(file_memory, max_loss_fraction=1.0)
    assert files(file_memory) == before


def test_metadata_that_shadows_an_item_field_is_refused(file_memory):
    file_memory.store_long_term("User: hi\nAssistant: hello", metadata={"importance": "high"})
    before = files(file_memory)
    with pytest.raises(ValueError, match="importance clash"):
        ConsolidationPlugin(environ={}).consolidate(file_memory, max_loss_fraction=1.0)
    assert files(file_memory) == before


def test_a_turn_written_while_a_pass_runs_is_kept(file_memory, tmp_path):
    persist_turns(file_memory, TURNS["english"][:1])
    store = FileMemoryStore(file_memory)
    snapshot = store.get([i["id"] for i in file_memory.get_all_memories()])
    new_id = file_memory.add_long_term("User: I moved.\nAssistant: Noted.")  # the agent, meanwhile

    store.upsert([snapshot[0]])
    store.delete([snapshot[1].id])

    items = FileMemory(user_id="alice", base_path=str(tmp_path / "memory")).get_all_memories()
    assert {i["id"] for i in items} == {snapshot[0].id, new_id}


def test_a_chroma_backed_memory_is_written_with_its_own_vectors(tmp_path, unique_collection):
    memory = Memory(
        {
            "provider": "chroma",
            "rag_db_path": str(tmp_path / "chroma"),
            "collection_name": unique_collection,
        }
    )
    write_praisonai(
        memory.memory_adapter.client,
        [
            PraisonMemory("Alice likes jazz"),
            PraisonMemory("Alice likes jazz"),
            PraisonMemory("Bob plays chess"),
        ],
        unique_collection,
    )
    assert collection_name(memory) == unique_collection

    result = ConsolidationPlugin(environ={}).consolidate(memory, max_loss_fraction=1.0)

    assert (result.entries_before, result.entries_after, result.merged) == (3, 2, 2)
    rows = memory.memory_adapter.collection.get(include=["documents", "embeddings", "metadatas"])
    by_text = dict(zip(rows["documents"], rows["embeddings"], strict=True))
    assert sorted(by_text) == ["Alice likes jazz", "Bob plays chess"]
    # 1536-d, the library's (OpenAI) vector of the text: PraisonAI's own search still works.
    assert np.allclose(by_text["Alice likes jazz"], foreign_vector("Alice likes jazz"), atol=1e-6)
    assert sorted(m["agent_name"] for m in rows["metadatas"]) == ["Agent", "Agent"]


@pytest.fixture
def unique_collection() -> str:
    import uuid

    return f"memory_{uuid.uuid4().hex[:12]}"
