"""Auto-apply safe: the part of a pass that may apply on its own, and why the rest waits."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from consolidation import MemoryRecord, Operation, OpKind, Policy
from consolidation.decisions import Constraint, StandingDecisions, operation_signature
from consolidation.planning import plan
from consolidation.review import (
    OperationLoss,
    content_loss,
    model_author,
    model_note,
    operation_risk,
    operation_text,
    split_auto_apply,
)
from consolidation.review.content import loss_totals
from consolidation.review.lost import LostSentence

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def op(kind: str = "merge", ids: tuple[str, ...] = ("a", "b"), **kw) -> Operation:
    removes = [] if kind in ("conflict", "promote") else list(ids)
    return Operation(
        kind=OpKind(kind),
        source_ids=list(ids),
        source_hashes=[f"h-{i}" for i in ids],
        removes=removes if kind != "reconcile" else list(ids[1:]),
        reason="",
        rule=kw.pop("rule", "exact_duplicate"),
        scores=kw.pop("scores", {}),
        result_document=kw.pop("result", "Alice likes jazz." if kind == "merge" else None),
    )


def lost(*words: str, sentences: int = 1) -> OperationLoss:
    return OperationLoss(
        tuple(
            LostSentence("a", f"sentence {k}", (), words if k == 0 else ())
            for k in range(sentences)
        )
    )


NOTHING = OperationLoss()


@pytest.mark.parametrize(
    ("operation", "risk", "loss", "policy", "decisions", "rejected", "codes"),
    [
        (op(), 0.0, NOTHING, Policy(), None, None, ()),
        (op(), 0.25, NOTHING, Policy(), None, None, ()),
        (op(), 0.26, NOTHING, Policy(), None, None, ("risk",)),
        (op(), 0.5, NOTHING, Policy(auto_apply_max_risk=0.6), None, None, ()),
        (op(), 0.0, lost("/cache"), Policy(), None, None, ("content",)),
        (op(), 0.0, lost("nicht mehr"), Policy(max_lost_content_words=1), None, None, ()),
        (op(), 0.0, lost("x > 5"), Policy(max_lost_content_words=None), None, None, ()),
        (op(), 0.0, lost(sentences=6), Policy(), None, None, ("sentences",)),
        (op("conflict"), 1.0, NOTHING, Policy(auto_apply_max_risk=1.0), None, None, ("conflict",)),
        (op(), 0.0, NOTHING, Policy(), None, "REJECTED", ("rejected",)),
        (
            op(rule="llm_judge", scores={"auto_apply": False, "llm_judge": "stub-model"}),
            0.0,
            NOTHING,
            Policy(),
            None,
            None,
            ("model",),
        ),
        (  # the rules agree with the model: still the model's word
            op("reconcile", rule="llm_judge", scores={"auto_apply": True, "judged_by": "m"}),
            0.0,
            NOTHING,
            Policy(),
            None,
            None,
            ("model",),
        ),
        (
            op("conflict", scores={"auto_apply": False}),
            0.0,
            NOTHING,
            Policy(),
            None,
            None,
            ("conflict", "judged"),
        ),
        (
            op(),
            0.0,
            NOTHING,
            Policy(),
            StandingDecisions([Constraint(4, "keep_apart", (("b", "h"), ("z", "h")))]),
            None,
            ("decision",),
        ),
        (
            op("reconcile", rule="decided", scores={"decision": 8}),
            0.3,
            NOTHING,
            Policy(),
            None,
            None,
            ("decision", "risk"),
        ),
        (op("promote", ("小明",), rule="sessions"), 0.0, NOTHING, Policy(), None, None, ()),
    ],
)
def test_each_rule_holds_an_operation_for_review(
    operation, risk, loss, policy, decisions, rejected, codes
):
    rej = (
        {operation_signature(operation): "in pass #4 by alice: too aggressive"}
        if rejected
        else None
    )
    split = split_auto_apply(
        [operation], [risk], [loss], policy, store_sentences=100, decisions=decisions, rejected=rej
    )
    (gate,) = split.gates
    assert gate.codes == codes
    assert gate.safe is (codes == ())
    assert split.safe == ([0] if gate.safe else [])
    assert len(gate.reasons) == max(1, len(codes))
    if rejected:
        assert "in pass #4 by alice" in gate.reasons[0]


def test_the_safe_part_stays_within_the_sentence_budget_in_plan_order():
    ops = [op(ids=(f"a{k}", f"b{k}")) for k in range(4)]
    losses = [lost(sentences=2) for _ in ops]
    split = split_auto_apply(ops, [0.0] * 4, losses, Policy(), store_sentences=100)
    assert split.safe == [0, 1]  # 5 % of 100 sentences: two operations of two each
    assert [g.codes for g in split.waiting] == [("sentences",), ("sentences",)]
    assert split.safe_loss.sentences == 4
    assert split.counts() == {"sentences": 2}


def test_it_refuses_sequences_of_different_lengths():
    with pytest.raises(ValueError, match="differ in length"):
        split_auto_apply([op()], [0.0, 0.1], [NOTHING], Policy(), store_sentences=1)


def vec(k: int, cos: float = 1.0) -> np.ndarray:
    x = np.zeros(384, np.float32)
    x[k], x[k + 1] = cos, np.sqrt(1 - cos * cos)
    return x


def test_a_planned_pass_applies_its_harmless_merges_and_holds_the_harmful_one():
    """The path-prefix merge (cosine 0.978 with MiniLM; 0.98 here) loses ``/cache``: the planner
    no longer proposes it (a raw symbol differs, ``consolidation.verbatim``), and proposed anyway
    (as an older planner did, or a hand-built operation) it waits; the exact duplicates, in two
    scopes and languages, apply."""
    meta = {"created_at": NOW.isoformat()}
    records = [
        MemoryRecord("p1", "Clear the cache with rm -rf ~/cache.", vec(0), dict(meta)),
        MemoryRecord("p2", "Clear the cache with rm -rf /cache.", vec(0, 0.98), dict(meta)),
        MemoryRecord("d1", "Anna mag Jazz", vec(4), {**meta, "user_id": "u1"}),
        MemoryRecord("d2", "anna mag jazz!", vec(4), {**meta, "user_id": "u1"}),
        MemoryRecord("z1", "小明喜欢爵士乐", vec(8), {**meta, "user_id": "u2"}),
        MemoryRecord("z2", "小明喜欢爵士乐。", vec(8), {**meta, "user_id": "u2"}),
    ]
    policy = Policy(trim_to_guard=False)
    p = plan(records, policy, now=NOW)
    assert [sorted(o.source_ids) for o in p.operations] == [["d1", "d2"], ["z1", "z2"]]
    d_op = p.operations[0]
    path_op = replace(
        d_op,
        source_ids=["p1", "p2"],
        source_hashes=[r.content_hash for r in records[:2]],
        removes=["p1", "p2"],
        result_document=records[0].document,
    )
    operations = [d_op, path_op, p.operations[1]]
    docs = {r.id: r.document for r in records}
    texts = [operation_text(o, docs) for o in operations]
    loss = content_loss(texts, docs.items())
    risks = [
        operation_risk(t, lo, policy=policy) for t, lo in zip(texts, loss.operations, strict=True)
    ]
    split = split_auto_apply(
        operations, risks, loss.operations, policy, store_sentences=loss.store_sentences
    )
    assert split.safe == [0, 2], [g.reasons for g in split.gates]
    (held,) = split.waiting
    assert held.codes == ("content",) and "/cache" in held.reasons[0]
    assert split.safe_loss.content_words == 0


def test_an_operation_that_costs_a_probe_its_answer_waits_and_frees_the_content_budget():
    ops = [op(ids=("a", "b")), op(ids=("c", "d"))]
    policy = Policy(max_lost_content_words=1)
    losses = [lost("jazz"), lost("blues")]
    held = {0: "costs probe query 3 its answer: 'What does Alice like?'"}
    split = split_auto_apply(ops, [0.0, 0.0], losses, policy, store_sentences=100, recall_held=held)
    assert split.safe == [1]  # the second one's word fits the budget the first one left
    assert split.waiting[0].codes == ("recall",)
    assert "probe query 3" in split.waiting[0].reasons[0]
    assert split.counts() == {"recall": 1}


def test_a_word_lost_in_two_spellings_is_one_word_in_the_reason_and_the_total():
    """ "Kotlin" in one lost sentence and "kotlin" in another: the operation loses one content
    word, as the pass's total counts it (the auto-apply reason said "loses 2 content words")."""
    loss = OperationLoss(
        (
            LostSentence("a", "Ember uses Kotlin.", (), ("Kotlin",)),
            LostSentence("b", "ember uses kotlin.", (), ("kotlin", "ember")),
        )
    )
    assert loss.content_words == ["Kotlin", "ember"]
    split = split_auto_apply([op()], [0.0], [loss], Policy(max_lost_content_words=1),
                             store_sentences=100)  # fmt: skip
    (gate,) = split.gates
    assert gate.codes == ("content",) and gate.reasons == ("loses 2 content words: Kotlin, ember",)
    assert loss_totals([loss]).content_words == len(loss.content_words) == 2


@pytest.mark.parametrize(
    ("operation", "note"),
    [
        (op("reconcile", rule="llm_judge", scores={"judged_by": "m-1"}), "decided by model m-1"),
        (op(rule="llm_judge", scores={"llm_judge": {"model": "m-2"}}), "decided by model m-2"),
        (
            replace(
                op("distill", ("e",), rule="llm_distill"), result_metadata={"distill_model": "m"}
            ),
            "written by model m",
        ),
        (
            replace(op("summarize", rule="llm_summary"), result_metadata={"summary_writer": "g"}),
            "written by model g",
        ),
        (
            replace(
                op("summarize", rule="extractive_summary"),
                result_metadata={"summary_writer": "extractive"},
            ),
            None,
        ),
        (op(), None),
        (op("conflict", scores={"llm_judge": {"model": "m"}}), None),
    ],
)
def test_a_models_word_waits_in_every_mode_and_says_whose_it_is(operation, note):
    gate = split_auto_apply([operation], [0.0], [NOTHING], Policy(), store_sentences=100).gates[0]
    assert model_note(operation) == note
    assert model_author(operation) == (note.rsplit(" ", 1)[-1] if note else None)
    assert ("model" in gate.codes) is (note is not None)
    if note:
        assert gate.reasons[gate.codes.index("model")] == note
