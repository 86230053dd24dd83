"""Recall check: content words, hits, top-k, report, simulated store, guard."""

from __future__ import annotations

import numpy as np
import pytest

from consolidation import MemoryRecord, Operation, OpKind, Plan, summarize
from consolidation.plans import Fate
from consolidation.recall import (
    STOPWORDS,
    Probe,
    answer_hit,
    content_words,
    evaluate_recall,
    recall_guard,
    recall_hold_reason,
    recall_holds,
    simulate_after,
    top_k_indices,
)


def unit(*axes: float) -> np.ndarray:
    """A 384-d unit vector with the given leading components."""
    v = np.zeros(384, dtype=np.float32)
    v[: len(axes)] = axes
    return v / np.linalg.norm(v)


class AxisEmbedder:
    """Deterministic test embedder: a text maps to the axis of its first known keyword."""

    dim = 384

    def __init__(self, vocab: dict[str, np.ndarray]) -> None:
        self.vocab = vocab
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        out = []
        for t in texts:
            for word, vec in self.vocab.items():
                if word in t.lower():
                    out.append(vec)
                    break
            else:
                out.append(unit(*([0.0] * 10 + [1.0])))
        return np.array(out, dtype=np.float32).reshape(len(texts), 384)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7 May 2023", ["7", "may", "2023"]),
        ("The LGBTQ support group", ["lgbtq", "support", "group"]),
        ("Caroline's painting", ["caroline", "painting"]),
        ("She didn't go to the party", ["go", "party"]),
        ("Yes, yes", ["yes"]),
        ("no", []),
        (2022, ["2022"]),
        ("", []),
    ],
)
def test_it_extracts_content_words(text, expected):
    assert content_words(text) == expected


def test_stopword_list_is_fixed_nltk_english():
    assert len(STOPWORDS) == 154
    assert {"the", "a", "and", "is", "don", "t"} <= STOPWORDS
    assert "2023" not in STOPWORDS and "may" not in STOPWORDS


@pytest.mark.parametrize(
    ("answer", "texts", "expected"),
    [
        ("7 May 2023", ["We met on 7 May, 2023."], True),
        ("7 May 2023", ["In May 2023 we met."], True),  # 2 of 3 ≥ half
        ("7 May 2023", ["In May we met."], False),  # 1 of 3 < half
        ("painting pottery", ["She likes painting."], True),  # 1 of 2 = half
        ("art", ["a party"], False),  # whole words only
        ("Art", ["", "ART class"], True),  # case-insensitive, across texts
        ("no", ["no way"], True),  # stopword-only answer falls back to its tokens
        ("no", ["yes"], False),
        ("...", ["anything"], None),  # nothing scorable
        ("2022", [], False),
    ],
)
def test_it_scores_an_answer_hit(answer, texts, expected):
    assert answer_hit(answer, texts) is expected


@pytest.mark.parametrize(
    ("query", "k", "expected"),
    [
        (unit(1, 0, 0), 2, [0, 2]),
        (unit(0, 1, 0), 1, [1]),
        (unit(0, 0, 1), 3, [0, 1, 2]),  # every score ties at 0: store order
        (unit(1, 0, 0), 10, [0, 2, 1]),  # k > n returns n rows
    ],
)
def test_it_retrieves_cosine_top_k_deterministically(query, k, expected):
    matrix = np.stack([unit(1, 0, 0), unit(0, 1, 0), unit(1, 1, 0)])
    assert top_k_indices(matrix, query[None, :], k)[0].tolist() == expected


def test_top_k_rejects_bad_k_and_empty_store_returns_nothing():
    with pytest.raises(ValueError, match="k must be"):
        top_k_indices(np.zeros((1, 384), np.float32), np.zeros((1, 384), np.float32), 0)
    assert top_k_indices(np.zeros((0, 384), np.float32), unit(1)[None, :], 5).shape == (1, 0)


def rec(mid: str, doc: str, vec: np.ndarray, **meta) -> MemoryRecord:
    return MemoryRecord(mid, doc, vec, meta)


STORE = [
    rec(
        "t1",
        "Caroline: I went to the support group yesterday",
        unit(1, 0, 0),
        layer="episodic",
        evidence=["D1:3"],
    ),
    rec(
        "o1",
        "Caroline attended an LGBTQ support group on 7 May 2023",
        unit(0.9, 0.1, 0),
        layer="semantic",
        evidence=["D1:3"],
    ),
    rec(
        "t2",
        "Melanie: I painted a lake sunrise in 2022",
        unit(0, 1, 0),
        layer="episodic",
        evidence=["D1:12"],
    ),
    rec(
        "s1",
        "Session summary: support group, painting, sunrise, 2022, D1:12",
        unit(0, 0.8, 0.6),
        layer="summary",
        evidence=["D1:12", "D1:3"],
    ),
]
PROBES = [
    Probe("When did Caroline go to the support group?", "7 May 2023", ("D1:3",)),
    Probe("When did Melanie paint a sunrise?", "2022", ("D1:12",)),
]
QUERIES = np.stack([unit(1, 0, 0), unit(0, 0.7, 0.7)])


@pytest.mark.parametrize(
    ("k", "recall", "evidence", "chars"),
    [
        # k=1: probe 1 gets t1 (no date → miss); probe 2 gets s1 (summary: hit, but evidence
        # not counted).
        (1, 0.5, 0.5, (len(STORE[0].document) + len(STORE[3].document)) / 2),
        # k=2: probe 1 gets t1+o1 (hit), probe 2 gets s1+t2 (hit; evidence from t2 counts).
        (2, 1.0, 1.0, None),
    ],
)
def test_it_reports_answer_recall_context_and_evidence_recall(k, recall, evidence, chars):
    report = evaluate_recall(STORE, PROBES, k=k, query_embeddings=QUERIES)
    assert report.answer_recall == recall
    assert report.evidence_recall == evidence
    assert report.probes == 2 and report.entries == 4 and report.k == k
    if chars is not None:
        assert report.context_chars == chars
    d = report.to_dict()
    assert set(d) == {
        "k",
        "entries",
        "probes",
        "answer_recall",
        "context_chars",
        "evidence_recall",
        "evidence_probes",
    }


def test_summary_evidence_is_not_counted():
    summary_only = [STORE[3]]
    report = evaluate_recall(summary_only, PROBES, k=10, query_embeddings=QUERIES)
    assert report.answer_recall == 0.5  # the summary holds "2022"
    assert report.evidence_recall == 0.0  # ...but its evidence is not counted


def test_it_accepts_dict_and_model_like_probes_and_embeds_questions():
    emb = AxisEmbedder({"caroline": unit(1, 0, 0), "melanie": unit(0, 0.7, 0.7)})

    class Row:
        question = "When did Melanie paint a sunrise?"
        answer = "2022"
        evidence_ids = ["D1:12"]
        category = 2

    probes = [{"question": PROBES[0].question, "answer": "7 May 2023", "evidence": ["D1:3"]}, Row()]
    report = evaluate_recall(STORE, probes, k=2, embedder=emb)
    assert report.answer_recall == 1.0


def test_empty_probe_set_and_missing_embeddings():
    assert evaluate_recall(STORE, [], k=10).answer_recall is None
    no_vec = [MemoryRecord("x", "text")]
    with pytest.raises(ValueError, match="no embedding"):
        evaluate_recall(no_vec, PROBES, k=1, query_embeddings=QUERIES)


def plan_of(records, ops) -> Plan:
    fates = {r.id: Fate.KEPT for r in records}
    for op in ops:
        for rid in op.removes:
            fates[rid] = Fate.MERGED if op.kind == OpKind.MERGE else Fate.PRUNED
    return Plan(ops, summarize(len(records), ops), fates)


def test_simulate_after_merges_prunes_and_promotes():
    emb = AxisEmbedder({"caroline": unit(1, 0, 0)})
    merge = Operation(
        OpKind.MERGE,
        ["t1", "o1"],
        [STORE[0].content_hash, STORE[1].content_hash],
        ["t1", "o1"],
        "near duplicates",
        "near_duplicate",
        result_id="m-1",
        result_document="Caroline attended an LGBTQ support group on 7 May 2023 (went yesterday)",
        result_metadata={"layer": "semantic", "evidence": ["D1:3"], "merged_from": ["t1", "o1"]},
    )
    prune = Operation(OpKind.PRUNE, ["t2"], [STORE[2].content_hash], ["t2"], "stale", "decay")
    promote = Operation(
        OpKind.PROMOTE,
        ["s1"],
        [STORE[3].content_hash],
        [],
        "durable",
        "sessions",
        result_id="s1",
        result_document=STORE[3].document,
        result_metadata={**STORE[3].metadata, "tier": "curated"},
    )
    after = simulate_after(STORE, plan_of(STORE, [merge, prune, promote]), emb)
    assert [r.id for r in after] == ["s1", "m-1"]
    assert after[0].metadata["tier"] == "curated"
    assert np.array_equal(after[0].embedding, STORE[3].embedding)  # unchanged text: kept
    assert np.allclose(after[1].embedding, unit(1, 0, 0))  # fresh embedding of the merged text
    assert emb.calls == [[merge.result_document]]  # one batch, only the new text
    # The input is untouched (nothing is written while simulating).
    assert [r.id for r in STORE] == ["t1", "o1", "t2", "s1"]


def test_simulate_after_needs_an_embedder_for_new_text():
    op = Operation(
        OpKind.DISTILL,
        ["t1"],
        [STORE[0].content_hash],
        [],
        "d",
        "distill",
        result_id="d-1",
        result_document="new fact",
        result_metadata={},
    )
    with pytest.raises(ValueError, match="embedder"):
        simulate_after(STORE, [op], None)


def test_simulate_after_keeps_the_embedding_of_the_source_whose_text_a_merge_kept():
    # A merge of near-duplicates that keeps one source's text needs no embedder: the merged
    # memory is that source's text, with its embedding (a store-wide pass merges thousands).
    merge = Operation(
        OpKind.MERGE,
        ["t1", "o1"],
        [STORE[0].content_hash, STORE[1].content_hash],
        ["t1", "o1"],
        "near duplicates",
        "near_duplicate",
        result_id="m-1",
        result_document=STORE[1].document,
        result_metadata={"merged_from": ["t1", "o1"]},
    )
    after = simulate_after(STORE, [merge], None)
    merged = next(r for r in after if r.id == "m-1")
    assert merged.document == STORE[1].document
    assert np.array_equal(merged.embedding, STORE[1].embedding)
    assert {"t1", "o1"}.isdisjoint(r.id for r in after)


def test_guard_trips_when_a_plan_prunes_the_probe_evidence():
    # Pruning the observation and the summary that hold the answers: recall 1.0 → 0.0.
    ops = [
        Operation(OpKind.PRUNE, [r.id], [r.content_hash], [r.id], "stale", "decay")
        for r in STORE
        if r.id in {"o1", "s1", "t2"}
    ]
    before = evaluate_recall(STORE, PROBES, k=2, query_embeddings=QUERIES)
    after = evaluate_recall(simulate_after(STORE, ops, None), PROBES, k=2, query_embeddings=QUERIES)
    passed, ratio, reason = recall_guard(before.answer_recall, after.answer_recall, 0.98)
    assert (before.answer_recall, after.answer_recall) == (1.0, 0.0)
    assert passed is False and ratio == 0.0
    assert "1.000" in reason and "0.000" in reason and "98.0%" in reason


@pytest.mark.parametrize(
    ("before", "after", "minimum", "passed", "ratio"),
    [
        (0.80, 0.80, 0.98, True, 1.0),
        (0.80, 0.79, 0.98, True, 0.9875),
        (0.80, 0.78, 0.98, False, 0.975),
        (0.50, 0.49, 0.98, True, 0.98),  # exactly at the threshold passes
        (0.80, 0.10, None, True, 0.125),  # disabled
        (0.0, 0.0, 0.98, True, None),  # nothing to retain
        (None, None, 0.98, True, None),  # no probes
        (0.8, 0.9, 0.98, True, 1.125),  # improvement
    ],
)
def test_recall_guard_table(before, after, minimum, passed, ratio):
    ok, r, reason = recall_guard(before, after, minimum)
    assert ok is passed
    assert (r is None and ratio is None) or r == pytest.approx(ratio)
    assert reason


@pytest.mark.parametrize("bad", [True, -0.1, 1.5, float("nan"), "0.9"])
def test_recall_guard_fails_closed_on_bad_threshold(bad):
    with pytest.raises(ValueError, match="min_recall_retention"):
        recall_guard(0.8, 0.8, bad)


def prune(rid: str) -> Operation:
    r = next(x for x in STORE if x.id == rid)
    return Operation(OpKind.PRUNE, [rid], [r.content_hash], [rid], "stale", "decay")


def test_recall_holds_names_the_operation_that_took_the_answer():
    # k=2: only o1 holds "7 May 2023"; t2 and s1 both hold "2022", so pruning t2 costs nothing.
    ops = [prune("t2"), prune("o1")]
    holds = recall_holds(STORE, ops, PROBES, k=2, query_embeddings=QUERIES)
    assert holds == {1: [0]}
    kept = [o for i, o in enumerate(ops) if i not in holds]
    after = evaluate_recall(
        simulate_after(STORE, kept, None), PROBES, k=2, query_embeddings=QUERIES
    )
    assert after.answer_recall == 1.0  # what is left loses no answer
    reason = recall_hold_reason(PROBES, holds[1])
    assert "probe query 1" in reason and "support group" in reason


def test_recall_holds_blames_a_new_memory_that_pushes_the_answer_out():
    # k=1: probe 2 reads s1 ("2022"); a distilled memory without the year takes its place.
    emb = AxisEmbedder({"melanie paints": unit(0, 0.7, 0.7)})
    distill = Operation(
        OpKind.DISTILL,
        ["t2"],
        [STORE[2].content_hash],
        [],
        "d",
        "distill",
        result_id="d-1",
        result_document="Melanie paints landscapes",
        result_metadata={"layer": "semantic"},
    )
    ops = [prune("t1"), distill]
    assert recall_holds(STORE, ops, PROBES, k=1, embedder=emb, query_embeddings=QUERIES) == {1: [1]}
    assert emb.calls == [["Melanie paints landscapes"]]  # embedded once over the rounds


def test_recall_holds_is_empty_without_probes_or_operations():
    assert recall_holds(STORE, [prune("o1")], [], k=2) == {}
    assert recall_holds(STORE, [], PROBES, k=2, query_embeddings=QUERIES) == {}
