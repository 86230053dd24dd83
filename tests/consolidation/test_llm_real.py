"""The LLM path against a real local model: llama.cpp (llama-cpp-python's server) running the
Gemma 3 270M model on this machine's CPUs — slow, and its answers are poor, which is the point.

Marked ``slow`` and ``llm``: ``make test-llm`` installs the server and the model and runs these;
anywhere else they are skipped with the reason (``make test`` never builds llama.cpp). The
LoCoMo data is required when ``CI`` is set (the test fails without it), as for every LoCoMo test.
Per-group figures (prompt tokens, seconds, outcome) are printed and written to
``var/llm-figures.json``.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest

from consolidation import OpKind, Policy
from consolidation.adapters.chroma_store import ChromaMemoryStore, make_client, open_collection
from consolidation.adapters.llm import LLMWriter
from consolidation.snapshot import plan_snapshot
from tests.conftest import locomo_path
from tests.llama_server import CONTEXT_TOKENS, MODEL_ALIAS, REPO, LlamaServer, missing

from .test_llm_judge import NOW, PAIRS, store_of

pytestmark = [pytest.mark.slow, pytest.mark.llm]

DISTILL_BUDGET = 300.0
"""Seconds of distillation in the LoCoMo pass: a few groups of the real model on two cores."""


@pytest.fixture(scope="module")
def llama():
    why = missing()
    if why:
        pytest.skip(why)
    with LlamaServer() as server:
        yield server


def _writer(server: LlamaServer) -> LLMWriter:
    # The per-request limit is generous: the budget, not the timeout, bounds the pass.
    return LLMWriter(server.base_url, None, MODEL_ALIAS, timeout_seconds=240)


def _locomo_store(sample: str):
    from consolidation.adapters.embedder import get_default_embedder
    from consolidation.locomo import load_locomo

    (conv,) = load_locomo(locomo_path(), conversations=[sample])
    records = [m for m in conv.memories if m.metadata.get("layer") != "summary"]
    vectors = get_default_embedder().embed([r.document for r in records])
    store = ChromaMemoryStore(
        open_collection(make_client(ephemeral=True), f"llm-real-{uuid.uuid4().hex[:10]}")
    )
    store.upsert([r.with_embedding(v) for r, v in zip(records, vectors, strict=True)])
    return store, max(conv.sessions.values()) + timedelta(days=1)


def _print_groups(llm: dict) -> None:
    rows = llm["distill"]["group_log"]
    print(
        f"\n{'session':<22} {'mem':>3} {'outcome':<8} {'reason':<14} {'in':>5} {'out':>5} {'s':>7}"
    )
    for r in rows:
        print(
            f"{r['session']:<22} {r['memories']:>3} {r['outcome']:<8} {r['reason']:<14} "
            f"{r['prompt_tokens']:>5} {r['completion_tokens']:>5} {r['seconds']:>7.1f}"
        )
    print(llm["distill"]["summary"])
    if "judge" in llm:
        print(llm["judge"]["summary"])


def test_a_locomo_pass_with_a_real_model_keeps_its_offline_work_and_accounts_for_each_group(
    llama,
):
    store, now = _locomo_store("conv-26")
    policy = Policy(
        distill_budget_seconds=DISTILL_BUDGET,
        llm_context_tokens=CONTEXT_TOKENS,
        llm_judge=True,
        judge_max_pairs=3,
        judge_budget_seconds=90,
    )
    from consolidation.adapters.embedder import get_default_embedder

    snap = plan_snapshot(
        store, policy, now=now, embedder=get_default_embedder(), writer=_writer(llama)
    )
    plan = snap.plan
    offline = [op for op in plan.operations if op.kind != OpKind.DISTILL and op.rule != "llm_judge"]
    assert offline, "the offline operations of the pass were lost"
    llm = plan.context["llm"]
    d = llm["distill"]
    _print_groups(llm)
    out = REPO / "var" / "llm-figures.json"
    out.write_text(json.dumps(llm, indent=1, ensure_ascii=False))
    groups = d["groups"]
    assert groups["total"] == groups["done"] + groups["skipped"] + groups["failed"]
    assert groups["total"] == len(d["group_log"]) > 0
    for row in d["group_log"]:
        assert row["outcome"] in ("done", "skipped", "failed")
        assert row["outcome"] == "done" or row["reason"], row  # every group accounted for
    assert d["sessions"]["total"] == 19
    assert d["sessions"]["left"] == d["sessions"]["total"] - d["sessions"]["done"]
    assert d["requests"] >= 1 and d["tokens_in"] > 0
    assert d["seconds"] <= DISTILL_BUDGET + 5
    for op in plan.operations:
        if op.kind == OpKind.DISTILL:
            assert op.removes == [] and set(op.source_ids) <= {r.id for r in snap.records}
    assert plan.result.loss_fraction <= policy.max_loss_fraction


def test_the_judge_survives_a_real_small_models_answers(llama):
    store = store_of(*PAIRS.values())
    policy = Policy(llm_judge=True, max_loss_fraction=1.0, judge_budget_seconds=240)
    plan = plan_snapshot(store, policy, now=NOW, writer=_writer(llama)).plan
    judge = plan.context["llm"]["judge"]
    print("\n" + judge["summary"])
    for row in judge["pair_log"]:
        print(row)
    assert judge["pairs"] == 3
    assert judge["judged"] + sum(judge["unsure"].values()) == 3
    for op in plan.operations:
        assert op.scores.get("auto_apply") is False  # whatever it said, a reviewer decides
        assert op.kind in (OpKind.CONFLICT, OpKind.MERGE, OpKind.RECONCILE)
