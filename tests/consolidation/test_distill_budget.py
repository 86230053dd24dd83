"""A slow or confused model never costs the pass: per-group outcomes, the time budget, requests
fitted to the model — against the real local stub server (``tests/llm_stub.py``), no mocks.

Each case is what a real endpoint does (a llama.cpp server on a CPU box, a rate-limited hosted
model, an endpoint that is down) and what a reviewer then reads on the proposal.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from consolidation import OpKind, Policy
from consolidation.adapters.chroma_store import ChromaMemoryStore, make_client, open_collection
from consolidation.adapters.llm import LLMWriter
from consolidation.distill import distill, extract_quoted_data
from consolidation.llm_usage import TokenGauge
from consolidation.records import MemoryRecord
from consolidation.snapshot import plan_snapshot
from tests.conftest import free_port

pytest_plugins = ["tests.llm_stub"]  # the `llm_stub` fixture

if TYPE_CHECKING:
    from tests.llm_stub import StubLLM

NOW = datetime(2025, 1, 1, tzinfo=UTC)

TURNS = {
    "en": "Caroline: I went to the pottery class again and made a blue bowl.",
    "de": "Caroline: Ich war wieder im Töpferkurs und habe eine blaue Schüssel gemacht.",
    "ja": "キャロライン：また陶芸教室に行って、青いお椀を作りました。",
}


def log(n_sessions: int, per_session: int = 3, lang: str = "en") -> list[MemoryRecord]:
    """``n_sessions`` sessions of ``per_session`` episodic turns each, in order."""
    out = []
    for s in range(n_sessions):
        for t in range(per_session):
            out.append(
                MemoryRecord(
                    f"s{s:02d}-t{t:02d}",
                    f"{TURNS[lang]} ({s}.{t})",
                    None,
                    {
                        "session": f"s{s:02d}",
                        "layer": "episodic",
                        "created_at": f"2024-{1 + s % 9:02d}-{1 + s // 9:02d}T10:{t:02d}:00+00:00",
                    },
                )
            )
    return out


def one_fact_each(body: dict[str, Any]) -> str:
    """Stub responder: one fact per memory sent, so a reply grows with its group."""
    data = extract_quoted_data(body["messages"][1]["content"])
    facts = [
        {"text": f"Fact {m['id']} about the pottery class.", "evidence": [m["id"]], "confidence": 1}
        for m in data["memories"]
    ]
    return json.dumps({"facts": facts})


def writer_for(stub: StubLLM, timeout: float = 5.0) -> LLMWriter:
    return LLMWriter(stub.base_url, None, "stub-model", timeout)


def outcomes(result) -> list[tuple[str, str, str]]:
    return [(r.session, r.outcome, r.reason) for r in result.ledger.rows]


# ---------------------------------------------------------------------------------------------
# one group's failure is that group's only


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (lambda s: s.push_slow(3), "timeout"),
        (lambda s: s.push_status(500, "model crashed"), "server_error"),
        (lambda s: s.push_status(400, "Bad request: stop sequence too long"), "refused"),
        (lambda s: s.push_status(429, "quota", retry_after=600), "rate_limited"),
        (lambda s: s.push_echo(cut_at=300), "truncated"),  # cut: retried smaller, then again
        (lambda s: s.push_echo(cut_at=None), "echoed_input"),
        (lambda s: s.push_content('{"facts": [{"text": 3}]}'), "schema"),
        (lambda s: s.push_content("I cannot help with that."), "not_json"),
        (lambda s: s.push_content("  "), "empty"),
    ],
)
def test_a_failing_group_is_skipped_with_its_reason_and_the_others_are_distilled(
    llm_stub, script, reason
):
    llm_stub.respond_with(one_fact_each)
    script(llm_stub)
    if reason == "truncated":  # both halves of the retried group are cut too
        script(llm_stub), script(llm_stub)
    result = distill(log(3), writer_for(llm_stub, timeout=1), policy=Policy())
    first = [r for r in result.ledger.rows if r.session == "s00"]
    assert {r.outcome for r in first} == {"failed"} and {r.reason for r in first} == {reason}
    assert [(s, o) for s, o, _ in outcomes(result) if s != "s00"] == [
        ("s01", "done"),
        ("s02", "done"),
    ]
    assert not any(i.startswith("s00") for i in result.checkpoint)  # a later pass retries it
    assert len(result.operations) == 6
    ctx = result.to_context()
    assert ctx["sessions"] == {"total": 3, "done": 2, "left": 1}
    assert ctx["reasons"]["failed"] == {reason: len(first)}
    assert ctx["summary"].startswith("distilled 2 of 3 sessions;")
    assert "1 left for later passes" in ctx["summary"]


def test_a_short_rate_limit_is_waited_for_once_within_the_budget(llm_stub):
    llm_stub.respond_with(one_fact_each)
    llm_stub.push_status(429, "slow down", retry_after=1)
    start = time.monotonic()
    result = distill(log(1), writer_for(llm_stub), policy=Policy())
    assert time.monotonic() - start >= 1.0
    assert outcomes(result) == [("s00", "done", "")] and len(llm_stub.requests) == 2
    assert result.to_context()["failed"] == 1  # the 429 is counted as a request that failed


def test_a_reply_cut_at_the_token_limit_is_retried_once_as_two_smaller_groups(llm_stub):
    llm_stub.respond_with(one_fact_each)  # ~23 tokens a fact: 4 do not fit in 64, 2 do
    result = distill(log(1, per_session=4), writer_for(llm_stub), policy=Policy(llm_max_tokens=64))
    sizes = [len(extract_quoted_data(r.message("user"))["memories"]) for r in llm_stub.requests]
    assert sizes == [4, 2, 2]
    assert outcomes(result) == [("s00", "done", ""), ("s00", "done", "")]
    assert len(result.operations) == 4 and result.summary.startswith("distilled 1 of 1 session")
    assert all(r.body["max_tokens"] == 64 for r in llm_stub.requests)


def test_an_endpoint_that_cannot_be_reached_stops_the_distillation_not_the_pass():
    writer = LLMWriter(f"http://127.0.0.1:{free_port()}/v1", None, "m", 1)
    result = distill(log(4), writer, policy=Policy())
    assert result.requests == 1 and result.operations == []
    assert outcomes(result)[0] == ("s00", "failed", "unreachable")
    assert {o[1:] for o in outcomes(result)[1:]} == {("skipped", "unreachable")}
    assert result.summary.startswith("distilled 0 of 4 sessions; stopped: endpoint unreachable")


def test_an_endpoint_that_keeps_failing_is_given_up_on_after_three_groups(llm_stub):
    for _ in range(3):
        llm_stub.push_status(503, "overloaded")
    result = distill(log(6), writer_for(llm_stub), policy=Policy())
    assert len(llm_stub.requests) == 3
    assert [o[1:] for o in outcomes(result)] == [("failed", "server_error")] * 3 + [
        ("skipped", "endpoint_failing")
    ] * 3


def test_the_time_budget_stops_sending_and_says_how_far_it_got(llm_stub):
    for _ in range(5):
        llm_stub.push_slow(1.6)
    policy = Policy(distill_budget_seconds=4.0)
    start = time.monotonic()
    result = distill(log(5), writer_for(llm_stub), policy=policy)
    assert time.monotonic() - start < 4.0 + 1.0  # the budget bounds the pass
    assert len(llm_stub.requests) == 2
    assert [o[1:] for o in outcomes(result)] == [("done", "")] * 2 + [("skipped", "budget")] * 3
    assert result.summary == "distilled 2 of 5 sessions; budget 4 s spent; 3 left for later passes"
    ctx = result.to_context()
    assert ctx["budget_spent"] is True and ctx["groups"] == {
        "total": 5,
        "done": 2,
        "skipped": 3,
        "failed": 0,
    }
    assert ctx["requests"] == 2 and ctx["seconds"] >= 3.2


def test_a_request_never_waits_longer_than_the_budget_left(llm_stub):
    llm_stub.push_slow(30)
    start = time.monotonic()
    result = distill(
        log(2), writer_for(llm_stub, timeout=30), policy=Policy(distill_budget_seconds=2)
    )
    assert time.monotonic() - start < 3.5
    assert [o[1:] for o in outcomes(result)] == [("failed", "budget"), ("skipped", "budget")]
    assert result.summary == "distilled 0 of 2 sessions; budget 2 s spent; 2 left for later passes"


# ---------------------------------------------------------------------------------------------
# fitting the request to the model


@pytest.mark.parametrize("lang", ["en", "de", "ja"])
def test_groups_are_split_to_fit_the_context_before_they_are_sent(llm_stub, lang):
    llm_stub.context_tokens = 1200  # the server refuses anything larger
    llm_stub.respond_with(lambda body: '{"facts": []}')
    records = log(1, per_session=12, lang=lang)
    policy = Policy(distill_group_size=12, llm_max_tokens=256, llm_context_tokens=1200)
    result = distill(records, writer_for(llm_stub), policy=policy)
    sent = [
        m["id"]
        for r in llm_stub.requests
        for m in extract_quoted_data(r.message("user"))["memories"]
    ]
    assert sent == [r.id for r in records]  # every memory once, in order, nothing refused
    assert len(llm_stub.requests) > 1
    assert {o[1] for o in outcomes(result)} == {"done"}


def test_a_memory_too_long_for_the_context_is_skipped_with_that_reason(llm_stub):
    records = log(1, per_session=3)
    records[1] = MemoryRecord(
        records[1].id, "Caroline: " + "blah " * 2000, None, dict(records[1].metadata)
    )
    policy = Policy(llm_max_tokens=256, llm_context_tokens=1024)
    result = distill(records, writer_for(llm_stub), policy=policy)
    assert ("s00", "skipped", "too_large") in outcomes(result)
    assert "too large for the model's context 1" in result.summary


def test_a_server_that_says_the_prompt_is_too_large_gets_smaller_groups(llm_stub):
    llm_stub.context_tokens = 700  # smaller than the policy says: the server's refusal decides
    policy = Policy(distill_group_size=8, llm_max_tokens=128, llm_context_tokens=8192)
    result = distill(log(1, per_session=8), writer_for(llm_stub), policy=policy)
    assert {o[1] for o in outcomes(result)} == {"done"}
    assert len(llm_stub.requests) > 1 and len(result.ledger.rows) > 1


@pytest.mark.parametrize(
    ("text", "seen", "tokens"),
    [
        ("x" * 100, [], 34),  # one token per 3 bytes until the server says otherwise
        ("陶" * 10, [], 11),  # CJK: 3 bytes a character, about a token each
        ("x" * 100, [(1000, 250)], 26),  # the server's own count replaces the default
        ("x" * 100, [(1000, 500), (1000, 250)], 51),  # and never undershoots what was seen
    ],
)
def test_the_token_gauge_learns_from_the_servers_counts(text, seen, tokens):
    gauge = TokenGauge()
    for prompt_bytes, prompt_tokens in seen:
        gauge.observe(prompt_bytes, prompt_tokens)
    assert gauge.estimate(text) == tokens


# ---------------------------------------------------------------------------------------------
# the pass: the offline operations are proposed whatever the endpoint does


def chroma_store(records: list[MemoryRecord]) -> ChromaMemoryStore:
    coll = open_collection(make_client(ephemeral=True), f"llm-{uuid.uuid4().hex[:12]}")
    store = ChromaMemoryStore(coll)
    rng = np.random.default_rng(7)
    with_vectors = []
    for i, r in enumerate(records):
        v = rng.standard_normal(384).astype(np.float32)
        if i and r.document == records[i - 1].document:
            v = with_vectors[-1].embedding  # an exact duplicate: same text, same vector
        with_vectors.append(r.with_embedding(v / np.linalg.norm(v)))
    store.upsert(with_vectors)
    return store


@pytest.mark.parametrize(
    "script",
    [
        lambda s: [s.push_slow(5) for _ in range(4)],
        lambda s: [s.push_content("garbage") for _ in range(4)],
        lambda s: [s.push_status(429, "quota", retry_after=900) for _ in range(4)],
    ],
)
def test_a_pass_with_a_failing_model_still_proposes_its_offline_operations(llm_stub, script):
    records = log(4)
    records.append(MemoryRecord("dup-1", "Alice prefers green tea.", None, {"user_id": "u1"}))
    records.append(MemoryRecord("dup-2", "Alice prefers green tea.", None, {"user_id": "u1"}))
    records.append(MemoryRecord("dup-3", "Alice prefers green tea.", None, {"user_id": "u2"}))
    store = chroma_store(records)
    script(llm_stub)
    snap = plan_snapshot(store, Policy(), now=NOW, writer=writer_for(llm_stub, timeout=1))
    merges = [sorted(op.source_ids) for op in snap.plan.operations if op.kind == OpKind.MERGE]
    assert ["dup-1", "dup-2"] in merges  # never across the two users
    assert not any("dup-3" in m for m in merges)
    llm = snap.plan.context["llm"]
    d = llm["distill"]
    assert d["groups"]["total"] == 4 and d["groups"]["done"] == 0
    assert d["groups"]["failed"] + d["groups"]["skipped"] == 4
    assert all(row["reason"] for row in d["group_log"])  # every group accounted for
    assert llm["totals"]["requests"] == d["requests"] >= 1
    assert d["summary"].startswith("distilled 0 of 4 sessions")
