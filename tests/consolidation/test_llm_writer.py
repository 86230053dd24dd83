"""The LLM writer (consolidation/adapters/llm.py) against a real local OpenAI-compatible server.

Every test talks HTTP to ``tests.llm_stub.StubLLM`` through the ``openai`` SDK (no mocks): what
a request sends (``response_format``, ``max_tokens``), what a reply returns (text, finish
reason, tokens), and how each failure reads (its message and its ``reason`` code).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from consolidation.adapters.llm import DEFAULT_TIMEOUT_SECONDS, LLMWriter, llm_from_env
from consolidation.adapters.llm_errors import retry_after_seconds
from consolidation.distill import LLMOutputError, LLMUnavailable
from tests.conftest import free_port

pytest_plugins = ["tests.llm_stub"]  # the `llm_stub` fixture

if TYPE_CHECKING:
    from tests.llm_stub import StubLLM

SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array"}},
    "required": ["facts"],
    "additionalProperties": False,
}


def writer_for(stub: StubLLM, timeout: float = 2.0, **kw: Any) -> LLMWriter:
    return LLMWriter(stub.base_url, "test-key", "stub-model", timeout, **kw)


def sent_format(stub: StubLLM, i: int) -> str:
    fmt = (stub.requests[i].body or {}).get("response_format")
    if fmt is None:
        return "none"
    return "json_object_schema" if "schema" in fmt else fmt["type"]


# ---------------------------------------------------------------------------------------------
# what a request sends and a reply returns


def test_it_returns_the_text_the_finish_reason_and_the_tokens(llm_stub):
    llm_stub.push_content('{"facts": []}', prompt_tokens=898, completion_tokens=400)
    reply = writer_for(llm_stub).complete("s", "u", schema=SCHEMA, max_tokens=512)
    assert (reply.content, reply.finish_reason, reply.truncated) == ('{"facts": []}', "stop", False)
    assert (reply.prompt_tokens, reply.completion_tokens) == (898, 400)
    assert reply.response_format == "json_schema" and reply.seconds > 0
    body = llm_stub.requests[0].body
    assert body["max_tokens"] == 512
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": SCHEMA, "strict": True},
    }


def test_a_reply_cut_at_the_token_limit_is_returned_as_truncated(llm_stub):
    llm_stub.push_content('{"facts": [{"text": "Caroline paints and"}]}')
    reply = writer_for(llm_stub).complete("s", "u", max_tokens=5)
    assert reply.truncated and reply.finish_reason == "length"
    assert reply.content == '{"facts": [{"text": ' and reply.completion_tokens == 5
    llm_stub.push_content('{"facts": [', finish_reason="length")
    with pytest.raises(LLMOutputError, match="cut off at the token limit") as exc:
        writer_for(llm_stub).complete_json("s", "u")
    assert exc.value.reason == "truncated"


@pytest.mark.parametrize(
    ("refused", "status", "expected"),
    [
        (set(), 400, ["json_schema"]),
        # llama-cpp-python 0.3: json_object with a schema is its grammar form, and it answers
        # "json_schema" with its validation error as HTTP 500
        ({"json_schema"}, 500, ["json_schema", "json_object_schema"]),
        ({"json_schema"}, 422, ["json_schema", "json_object_schema"]),
        (
            {"json_schema", "json_object_schema"},
            400,
            ["json_schema", "json_object_schema", "json_object"],
        ),
        (
            {"json_schema", "json_object_schema", "json_object"},
            400,
            ["json_schema", "json_object_schema", "json_object", "none"],
        ),
    ],
)
def test_it_falls_back_to_the_strongest_response_format_the_server_accepts(
    llm_stub, refused, status, expected
):
    llm_stub.refuse_formats, llm_stub.format_status = refused, status
    writer = writer_for(llm_stub)
    reply = writer.complete("s", "u", schema=SCHEMA)
    assert (reply.content, reply.response_format) == ('{"facts": []}', expected[-1])
    assert [sent_format(llm_stub, i) for i in range(len(llm_stub.requests))] == expected
    writer.complete("s", "u", schema=SCHEMA)
    assert sent_format(llm_stub, len(expected)) == expected[-1]  # remembered, no new refusals
    assert len(llm_stub.requests) == len(expected) + 1


def test_it_falls_back_when_json_mode_is_unsupported(llm_stub):
    llm_stub.push_status(400, "Unknown parameter: response_format")
    llm_stub.push_facts([])
    writer = writer_for(llm_stub)
    assert writer.complete_json("s", "u") == '{"facts": []}'
    assert "response_format" in llm_stub.requests[0].body
    assert "response_format" not in llm_stub.requests[1].body
    writer.complete_json("s", "u")
    assert "response_format" not in llm_stub.requests[2].body  # remembered


def test_it_sends_no_response_format_when_json_mode_is_off(llm_stub):
    writer_for(llm_stub, json_mode=False).complete("s", "u", schema=SCHEMA)
    assert "response_format" not in llm_stub.requests[0].body


def test_a_refusal_that_is_not_about_the_format_is_not_a_format_fallback(llm_stub):
    llm_stub.push_status(400, "temperature must be at most 2")
    writer = writer_for(llm_stub)
    with pytest.raises(LLMUnavailable, match="temperature must be at most 2") as exc:
        writer.complete("s", "u", schema=SCHEMA)
    assert exc.value.reason == "refused" and writer.response_format == "json_schema"
    assert len(llm_stub.requests) == 1


# ---------------------------------------------------------------------------------------------
# failures: message and reason


def test_it_times_out_within_the_limit_and_a_shorter_one_per_request(llm_stub):
    llm_stub.push_slow(10)
    writer = writer_for(llm_stub, timeout=5)
    start = time.monotonic()
    with pytest.raises(LLMUnavailable, match=r"LLM endpoint timed out after 1s") as exc:
        writer.complete("s", "u", timeout_seconds=1)
    assert exc.value.reason == "timeout"
    assert time.monotonic() - start < 2.0


def test_it_never_hangs_on_a_server_that_trickles_bytes(llm_stub):
    llm_stub.push_trickle(10, interval=0.2)  # each read succeeds, so only a deadline stops it
    writer = writer_for(llm_stub, timeout=1)
    start = time.monotonic()
    with pytest.raises(LLMUnavailable, match="timed out after 1s"):
        writer.complete_json("s", "u")
    assert time.monotonic() - start < 2.0
    llm_stub.push_facts([])
    assert writer.complete_json("s", "u") == '{"facts": []}'  # usable again


@pytest.mark.parametrize(
    ("status", "message", "reason"),
    [
        (500, "returned HTTP 500: model crashed", "server_error"),
        (401, "rejected the API key", "auth"),
        (404, "no model 'stub-model'", "not_found"),
        (429, "returned HTTP 429: slow down", "rate_limited"),
        (400, "Requested tokens \\(9000\\) exceed context window of 4096", "too_large"),
        (400, "This model's maximum context length is 8192 tokens", "too_large"),
    ],
)
def test_it_explains_http_errors_with_a_reason(llm_stub, status, message, reason):
    text = {
        500: "model crashed",
        429: "slow down",
    }.get(status, message.replace("\\", ""))
    llm_stub.push_status(status, text)
    with pytest.raises(LLMUnavailable, match=message) as exc:
        writer_for(llm_stub).complete("s", "u")
    assert exc.value.reason == reason
    assert len(llm_stub.requests) == 1  # no silent retries by default


def test_a_rate_limit_says_how_long_to_wait_and_a_retry_waits_that_long(llm_stub):
    llm_stub.push_status(429, "quota", retry_after=1.5)
    with pytest.raises(LLMUnavailable, match="retry after 1.5s") as exc:
        writer_for(llm_stub).complete("s", "u")
    assert (exc.value.reason, exc.value.retry_after) == ("rate_limited", 1.5)
    llm_stub.push_status(429, "quota", retry_after=1)
    start = time.monotonic()
    assert writer_for(llm_stub, max_retries=1).complete("s", "u").content == '{"facts": []}'
    assert time.monotonic() - start >= 1.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_it_reads_retry_after_in_each_form(headers, seconds):
    assert retry_after_seconds(headers) == seconds


def test_it_retries_a_5xx_only_when_asked(llm_stub):
    llm_stub.push_status(503)
    llm_stub.push_facts([])
    assert writer_for(llm_stub, max_retries=1).complete_json("s", "u") == '{"facts": []}'
    assert len(llm_stub.requests) == 2


def test_it_reports_a_refused_connection_as_unreachable():
    port = free_port()  # nobody listens there
    writer = LLMWriter(f"http://127.0.0.1:{port}/v1", None, "m", 1)
    start = time.monotonic()
    with pytest.raises(
        LLMUnavailable, match=f"could not connect to LLM endpoint http://127.0.0.1:{port}/v1"
    ) as exc:
        writer.complete("s", "u")
    assert exc.value.reason == "unreachable"
    assert time.monotonic() - start < 2.0


def test_it_rejects_replies_without_text(llm_stub):
    llm_stub.push_content("   ")
    with pytest.raises(LLMOutputError, match="no text content") as exc:
        writer_for(llm_stub).complete("s", "u")
    assert exc.value.reason == "empty"


def test_it_never_shows_the_api_key():
    writer = LLMWriter("http://127.0.0.1:9/v1", "sk-secret", "m", 1)
    assert "sk-secret" not in repr(writer) and "sk-secret" not in writer.describe()


# ---------------------------------------------------------------------------------------------
# configuration


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_API_KEY": "k"},
        {"MEMORYADMIN_LLM_MODEL": "  "},
    ],
)
def test_it_has_no_llm_when_no_model_is_configured(env):
    assert llm_from_env(env) is None


def test_it_reads_the_llm_from_the_environment(monkeypatch):
    monkeypatch.setenv("MEMORYADMIN_LLM_MODEL", "qwen2.5")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1/")
    monkeypatch.setenv("MEMORYADMIN_LLM_TIMEOUT", "12.5")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    writer = llm_from_env()
    assert (writer.model, writer.base_url, writer.timeout_seconds) == (
        "qwen2.5",
        "http://127.0.0.1:11434/v1",
        12.5,
    )
    hosted = llm_from_env({"MEMORYADMIN_LLM_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": "k"})
    assert hosted.base_url == "https://api.openai.com/v1"
    assert hosted.timeout_seconds == DEFAULT_TIMEOUT_SECONDS


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"MEMORYADMIN_LLM_MODEL": "m"}, "neither OPENAI_BASE_URL nor OPENAI_API_KEY"),
        (
            {
                "MEMORYADMIN_LLM_MODEL": "m",
                "OPENAI_API_KEY": "k",
                "MEMORYADMIN_LLM_TIMEOUT": "soon",
            },
            "MEMORYADMIN_LLM_TIMEOUT",
        ),
        (
            {"MEMORYADMIN_LLM_MODEL": "m", "OPENAI_API_KEY": "k", "MEMORYADMIN_LLM_TIMEOUT": "0"},
            "MEMORYADMIN_LLM_TIMEOUT",
        ),
        ({"MEMORYADMIN_LLM_MODEL": "m", "OPENAI_BASE_URL": "localhost:8000"}, "OPENAI_BASE_URL"),
    ],
)
def test_it_explains_a_half_configured_llm(env, problem):
    with pytest.raises(ValueError, match=problem):
        llm_from_env(env)
