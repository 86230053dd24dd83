"""The memory pyramid: scope, stability across passes, levels, the extractive writer, policy.

Cluster structure comes from hand-built embeddings with known cosines (``_vectors``); the
summaries a pass writes are embedded by the real offline embedder when a pass is applied in
memory (:func:`consolidation.recall.simulate_after`), as the console's apply does.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from consolidation import MemoryRecord, OpKind, Policy, summarize
from consolidation.pyramid import (
    CHILDREN_KEY,
    CITATIONS_KEY,
    DIGEST_KEY,
    EXTRACTIVE_RULE,
    LEVEL_KEY,
    SUMMARY_LAYER,
    build_pyramid,
    cluster_rows,
    extractive_summary,
    summary_level,
)
from consolidation.recall import simulate_after
from consolidation.snapshot import plan_snapshot
from tests.consolidation._vectors import at_cosine, basis, random_unit

NOW = datetime(2025, 3, 1, tzinfo=UTC)
ON = Policy(summarize=True, summary_levels=1)

TOPICS = {
    "en": [
        "Alice adopted a beagle named Rex in March.",
        "Rex the beagle loves long walks by the river.",
        "Alice takes Rex to the vet every spring.",
        "Rex learned to fetch the newspaper.",
    ],
    "de": [
        "Jonas fährt jeden Sommer mit dem Rad an die Ostsee.",
        "Jonas hat ein neues Rennrad für 1200 Euro gekauft.",
        "Jonas trainiert dienstags im Radverein Kiel.",
        "Jonas plant eine Radtour durch Dänemark.",
    ],
    "zh": [
        "小明每天早上六点去公园跑步。",
        "小明报名参加了上海马拉松。",
        "小明买了一双新的跑鞋。",
        "小明的跑步教练姓王。",
    ],
}


class Memory:
    """A PraisonAI-style memory: ``get_all_memories()`` dicts with their embeddings."""

    def __init__(self, records: list[MemoryRecord]) -> None:
        self.records = records

    def get_all_memories(self) -> list[dict[str, Any]]:
        return [
            {"id": r.id, "text": r.document, "metadata": r.metadata, "embedding": r.embedding}
            for r in self.records
        ]


def topic(prefix: str, texts: list[str], axis: int, **meta: Any) -> list[MemoryRecord]:
    """One topic: pairwise cosine 0.72 inside (0.85 to the topic's axis each), 0 to others."""
    out = []
    for i, text in enumerate(texts):
        md = {"created_at": f"2025-01-{i + 1:02d}T10:00:00Z", **meta}
        out.append(
            MemoryRecord(f"{prefix}{i}", text, at_cosine(axis, 0.85, 200 + axis * 8 + i), md)
        )
    return out


def noise(n: int, seed: int = 7, prefix: str = "z", **meta: Any) -> list[MemoryRecord]:
    """Unrelated memories (random directions: no cluster)."""
    rows = random_unit(np.random.default_rng(seed), n)
    return [
        MemoryRecord(f"{prefix}{i}", f"Unrelated note number {i}.", rows[i], dict(meta))
        for i in range(n)
    ]


def apply(records: list[MemoryRecord], ops) -> list[MemoryRecord]:
    from consolidation.adapters.embedder import get_default_embedder

    return simulate_after(records, ops, get_default_embedder())


@pytest.mark.parametrize("lang", sorted(TOPICS))
def test_it_summarises_a_topic_in_the_summary_layer_and_removes_nothing(lang):
    records = topic("t", TOPICS[lang], 0) + noise(5)
    res = build_pyramid(records, ON)
    (op,) = res.operations
    assert op.kind == OpKind.SUMMARIZE and op.removes == [] and op.rule == EXTRACTIVE_RULE
    meta = op.result_metadata
    assert meta["layer"] == SUMMARY_LAYER and meta[LEVEL_KEY] == 1
    assert meta[CHILDREN_KEY] == [f"t{i}" for i in range(4)] == op.source_ids
    cites = json.loads(meta[CITATIONS_KEY])
    docs = {r.id: r.document for r in records}
    sentences = [s for s in TOPICS[lang] if s in op.result_document]
    assert len(sentences) == len(cites) >= 2  # every sentence verbatim from the child it cites
    for (cid,), sentence in zip(cites, sentences, strict=True):
        assert sentence == docs[cid]
    assert len(op.result_document) <= ON.summary_max_chars
    r = summarize(len(records), res.operations)
    assert r.loss_fraction == 0.0 and r.entries_after == len(records) + 1


@pytest.mark.parametrize(
    ("key", "owners"),
    [("user_id", ["alice", "bob"]), ("agent_id", ["support", "sales"])],
)
def test_it_never_summarises_across_scopes(key, owners):
    """Two owners with the same topic (same texts, same vectors): one summary each, each with
    its owner's children and scope value only."""
    records = []
    for n, owner in enumerate(owners):
        records += topic(f"{owner}-", TOPICS["en"], 0, **{key: owner})
        records += noise(3, seed=n, prefix=f"{owner}-z", **{key: owner})
    ops = build_pyramid(records, ON).operations
    assert len(ops) == 2
    owner_of = {r.id: r.metadata[key] for r in records}
    for op in ops:
        assert len({owner_of[c] for c in op.source_ids}) == 1
        assert op.result_metadata[key] == owner_of[op.source_ids[0]]
    assert len({op.result_id for op in ops}) == 2


def test_the_same_memories_give_the_same_summary_and_no_operation_on_the_next_pass():
    records = topic("a", TOPICS["en"], 0) + topic("b", TOPICS["de"], 1) + noise(4)
    first = build_pyramid(records, ON).operations
    again = build_pyramid(list(reversed(records)), ON).operations
    assert [(o.result_id, o.result_document) for o in first] == [
        (o.result_id, o.result_document) for o in again
    ]  # input order never matters
    store = apply(records, first)
    res = build_pyramid(store, ON)
    assert res.operations == [] and res.levels[1]["unchanged"] == 2


@pytest.mark.parametrize("change", ["edit", "add", "drop"])
def test_a_summary_whose_children_changed_is_rewritten_as_an_update_of_itself(change):
    records = topic("a", TOPICS["en"], 0) + noise(4)
    (first,) = build_pyramid(records, ON).operations
    store = apply(records, [first])
    if change == "edit":
        store = [
            MemoryRecord(r.id, "Rex the beagle now swims in the lake.", r.embedding, r.metadata)
            if r.id == "a1"
            else r
            for r in store
        ]
    elif change == "add":
        store.append(MemoryRecord("a9", "Rex got a red collar.", at_cosine(0, 0.85, 260), {}))
    else:
        store = [r for r in store if r.id != "a3"]
    res = build_pyramid(store, ON)
    (op,) = res.operations
    assert op.result_id == first.result_id and op.source_ids[-1] == first.result_id
    assert op.removes == [] and op.scores["rewrites"] is True
    assert summarize(len(store), [op]).entries_after == len(store)  # rewritten, not added
    children = op.result_metadata[CHILDREN_KEY]
    expected = {"edit": 4, "add": 5, "drop": 3}[change]
    assert len(children) == expected and first.result_id not in children
    assert op.result_metadata[DIGEST_KEY] != first.result_metadata[DIGEST_KEY]
    assert op.reason.startswith(f"Rewrites {first.result_id}")


def test_levels_grow_one_per_pass_and_stop():
    from consolidation.adapters.embedder import get_default_embedder

    embedder = get_default_embedder()
    themes = [
        ["My dog Rex loves the park.", "Rex the dog chews bones.", "The dog Rex sleeps a lot."],
        ["My cat Tom hunts mice.", "Tom the cat purrs loudly.", "The cat Tom hides in boxes."],
        ["I hike in the Alps.", "Hiking trails in the Alps are steep.", "Alpine hikes take hours."],
        ["I ski in Zermatt.", "Skiing in Zermatt is costly.", "Zermatt ski slopes are icy."],
    ]
    records = []
    for t, texts in enumerate(themes):
        for i, (text, vec) in enumerate(zip(texts, embedder.embed(texts), strict=True)):
            records.append(MemoryRecord(f"m{t}{i}", text, vec, {}))
    policy = Policy(
        summarize=True,
        summary_levels=3,
        summary_min_cluster=2,
        summary_max_cluster=4,
        summary_threshold=0.4,
    )
    store, levels = records, []
    for _ in range(5):
        ops = build_pyramid(store, policy).operations
        if not ops:
            break
        levels.append(sorted({op.scores["level"] for op in ops}))
        for op in ops:
            lv = op.scores["level"]
            kids = op.result_metadata[CHILDREN_KEY]
            below = {r.id: summary_level(r.metadata) or 0 for r in store}
            assert all(below[k] == lv - 1 for k in kids)  # a level covers the level below
        store = apply(store, ops)
    assert levels == [[1], [2], [3]]  # topics (pets, sports …), themes, the profile
    assert build_pyramid(store, policy).operations == []
    one = policy.with_(summary_levels=1)
    assert build_pyramid(store, one).operations == []  # no level 2 when one level is asked


@pytest.mark.parametrize(
    ("budget", "cited"),
    [(400, 4), (100, 2), (60, None)],
)
@pytest.mark.parametrize("lang", sorted(TOPICS))
def test_the_extractive_summary_fits_its_budget_and_cites_at_least_two_children(
    lang, budget, cited
):
    children = topic("c", TOPICS[lang], 0)
    budget = budget if lang != "zh" else budget // 3  # Chinese sentences are short
    draft = extractive_summary(children, budget)
    if cited is None:
        assert draft is None or (len(draft.text) <= budget and len(draft.cited) >= 2)
        return
    assert draft is not None and len(draft.text) <= budget
    assert len(draft.cited) >= min(cited, 2)
    docs = {c.id: c.document for c in children}
    for sentence, (cid,) in zip(draft.sentences, draft.citations, strict=True):
        assert sentence in docs[cid]


def test_the_extractive_summary_gives_none_when_one_child_only_would_fit():
    children = [
        MemoryRecord("a", "Short one.", basis(0), {}),
        MemoryRecord("b", "x " * 300, basis(0), {}),
    ]
    assert extractive_summary(children, 50) is None


@pytest.mark.parametrize("method", ["average", "complete", "hdbscan"])
def test_clusters_respect_the_size_bounds(method):
    rows = np.stack(
        [at_cosine(0, 0.9, 100 + i) for i in range(20)]
        + [at_cosine(1, 0.9, 150 + i) for i in range(3)]
    )
    clusters = cluster_rows(rows, threshold=0.55, min_size=3, max_size=6, method=method)
    assert clusters and all(3 <= len(c) <= 6 for c in clusters)
    assert len({i for c in clusters for i in c}) == sum(len(c) for c in clusters)  # disjoint


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"summary_levels": 4}, "summary_levels"),
        ({"summary_levels": 0}, "summary_levels"),
        ({"summary_min_cluster": 1}, "summary_min_cluster"),
        ({"summary_min_cluster": 5, "summary_max_cluster": 4}, "summary_max_cluster"),
        ({"summary_writer": "gpt"}, "summary_writer"),
        ({"summary_threshold": 1.5}, "summary_threshold"),
        ({"summary_max_chars": 10}, "summary_max_chars"),
        ({"summarize": "yes"}, "summarize"),
    ],
)
def test_bad_pyramid_policies_are_refused_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        Policy(**changes)


def test_the_pyramid_is_off_by_default_and_a_pass_with_it_adds_summaries_only():
    records = topic("a", TOPICS["en"], 0) + noise(4)
    off = plan_snapshot(Memory(records), Policy(), now=NOW).plan
    assert not off.by_kind(OpKind.SUMMARIZE) and "pyramid" not in off.context
    on = plan_snapshot(Memory(records), Policy(summarize=True), now=NOW).plan
    (op,) = on.by_kind(OpKind.SUMMARIZE)
    assert on.result.loss_fraction == off.result.loss_fraction
    assert on.result.entries_after == off.result.entries_after + 1
    assert on.context["pyramid"]["levels"]["1"]["new"] == 1


def test_memories_a_pass_merges_away_are_no_children_and_summaries_are_never_merged():
    dup = MemoryRecord("a0-copy", TOPICS["en"][0], at_cosine(0, 0.85, 200), {})
    records = topic("a", TOPICS["en"], 0) + [dup] + noise(4)
    snap = plan_snapshot(Memory(records), Policy(summarize=True, summary_levels=1), now=NOW)
    removed = {rid for op in snap.plan.operations for rid in op.removes}
    assert removed  # the exact duplicate is merged
    (op,) = snap.plan.by_kind(OpKind.SUMMARIZE)
    assert not set(op.source_ids) & removed
    # a summary is protected: a memory with its exact text is not merged with it
    store = apply(records, [op])
    twin = MemoryRecord("twin", op.result_document, store[-1].embedding, {})
    again = plan_snapshot(Memory([*store, twin]), Policy(), now=NOW).plan
    assert all(op.result_id not in o.removes for o in again.operations)


def test_a_pass_asking_for_llm_summaries_without_an_llm_is_refused():
    with pytest.raises(ValueError, match="no LLM endpoint"):
        plan_snapshot(
            Memory(topic("a", TOPICS["en"], 0)),
            Policy(summarize=True, summary_writer="llm"),
            now=NOW,
        )


def test_a_checkpointed_pass_with_nothing_new_does_not_cluster_again():
    records = topic("a", TOPICS["en"], 0) + noise(4)
    store = apply(records, build_pyramid(records, ON).operations)
    checkpoint = {r.id: r.content_hash for r in store}
    res = build_pyramid(store, ON, checkpoint=checkpoint)
    assert res.operations == [] and res.levels == {}
    store.append(MemoryRecord("a9", "Rex got a red collar.", at_cosine(0, 0.85, 260), {}))
    (op,) = build_pyramid(store, ON, checkpoint=checkpoint).operations
    assert "a9" in op.source_ids and op.scores["rewrites"]


def test_the_consolidator_writes_summaries_to_chroma_and_the_next_pass_writes_nothing():
    import uuid

    from consolidation import Consolidator
    from consolidation.adapters.chroma_store import ChromaMemoryStore, make_client, open_collection
    from consolidation.adapters.embedder import get_default_embedder

    store = ChromaMemoryStore(
        open_collection(make_client(ephemeral=True), f"pyramid-{uuid.uuid4().hex[:8]}")
    )
    records = topic("a", TOPICS["de"], 0, user_id="jonas") + noise(4, user_id="jonas")
    store.upsert(records)
    policy = Policy(summarize=True, summary_levels=1, trim_to_guard=False)
    run = Consolidator(policy, embedder=get_default_embedder(), clock=lambda: NOW)
    first = run.consolidate(store, max_loss_fraction=0.25)
    assert first.context["applied"] is True and first.entries_after == len(records) + 1
    (summary,) = [r for r in store.iter_records() if summary_level(r.metadata) == 1]
    assert summary.metadata["user_id"] == "jonas" and summary.embedding is not None
    assert summary.metadata[CHILDREN_KEY] == [f"a{i}" for i in range(4)]
    again = run.consolidate(store, max_loss_fraction=0.25)
    assert again.context.get("write_skipped") == "nothing to do"
    assert store.count() == len(records) + 1
