"""How an OpenAI-compatible endpoint's failures read: SDK exceptions → the engine's two errors.

The LLM writer (:mod:`.llm`) sends; this module says what a failure *was*, so the distillation
and the LLM judge can record a per-request reason (``LLMUnavailable.reason``) and decide to skip
one group, wait for a rate limit, split a request that is too large, or stop asking an endpoint
that cannot be reached. Servers word the same failure differently, so the patterns below are
the wordings of the servers people point this at (OpenAI, llama.cpp's own server and
llama-cpp-python's, vLLM, Ollama's ``/v1``, LiteLLM), each named where it is matched.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from typing import Any

import openai

from ..protocols import LLMOutputError, LLMUnavailable

__all__ = [
    "Retryable",
    "refuses_response_format",
    "retry_after_seconds",
    "translate",
]

_TOO_LARGE = re.compile(
    # OpenAI "maximum context length is 8192 tokens" / code context_length_exceeded; vLLM the
    # same words; llama-cpp-python "Requested tokens (3000) exceed context window of 2048";
    # llama.cpp server "the request exceeds the available context size".
    r"context[_ ](length|window|size)|maximum context|exceeds? (the )?(available )?context"
    r"|too many tokens|prompt is too long",
    re.IGNORECASE,
)
_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object|schema|grammar", re.I)


class Retryable(Exception):  # internal carrier, never escapes the writer
    """Carries an :class:`LLMUnavailable` that another attempt might fix."""

    def __init__(self, error: LLMUnavailable) -> None:
        super().__init__(str(error))
        self.error = error


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` replaced by ``***`` (an API key never reaches a message)."""
    return text.replace(secret, "***") if secret else text


def retry_after_seconds(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait from a response's ``retry-after-ms`` or ``Retry-After`` header (a number
    of seconds or an HTTP date, RFC 9110 §10.2.3), ``None`` when absent or unreadable; never
    negative."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            value = float(raw_ms) / 1000.0
            return max(0.0, value) if math.isfinite(value) else None
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def status_detail(exc: openai.APIStatusError) -> str:
    """The server's own error message, ≤ 300 chars: OpenAI's ``{"error": {"message": …}}``,
    a bare ``{"message": …}``, or FastAPI's ``{"detail": …}`` (llama-cpp-python's 422)."""
    body = exc.body
    detail: Any = None
    if isinstance(body, dict):
        inner = body.get("error")
        detail = inner.get("message") if isinstance(inner, dict) else None
        detail = detail or body.get("message") or (inner if isinstance(inner, str) else None)
        detail = detail or (str(body["detail"]) if body.get("detail") else None)
    text = str(detail or exc.message or "").strip() or "no details"
    return text[:300]


def refuses_response_format(exc: openai.OpenAIError) -> bool:
    """True when the endpoint rejected the request *because of* its ``response_format``: HTTP
    400 or 422 whose message names it (``"Unknown parameter: response_format"``, FastAPI's
    validation error on ``body.response_format.type``, "json_schema is not supported" …), or
    a 500 that names the field itself (llama-cpp-python 0.3 answers its own validation error
    on ``('body', 'response_format', 'type')`` with HTTP 500)."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    text = status_detail(exc) + " " + str(exc.message or "")
    if exc.status_code in (400, 422):
        return bool(_FORMAT_WORDS.search(text))
    return exc.status_code == 500 and "response_format" in text


def translate(
    exc: openai.OpenAIError, *, base_url: str, model: str, timeout: float, key: str | None
) -> Exception:
    """An SDK exception as ``Retryable(LLMUnavailable)``, ``LLMUnavailable`` or
    ``LLMOutputError`` with a readable message and a ``reason`` code (``LLMUnavailable``).

    Retryable: timeout, connection error, 429, 5xx. A 429 or 503 carries ``retry_after`` from
    the response headers. A 400 saying the prompt does not fit the context is ``too_large``.
    """
    where = f"LLM endpoint {base_url}"
    if isinstance(exc, openai.APITimeoutError):
        return Retryable(
            LLMUnavailable(f"LLM endpoint timed out after {timeout:g}s", reason="timeout")
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {cause}" if cause else ""
        msg = redact(f"could not connect to {where}{detail}", key)
        return Retryable(LLMUnavailable(msg, reason="unreachable"))
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        detail = status_detail(exc)
        msg = redact(f"{where} returned HTTP {code}: {detail}", key)
        retry_after = retry_after_seconds(getattr(exc.response, "headers", None))
        if code in (401, 403):
            return LLMUnavailable(f"{where} rejected the API key (HTTP {code})", reason="auth")
        if code == 404:
            return LLMUnavailable(
                f"{where} has no chat/completions route or no model {model!r} (HTTP 404)",
                reason="not_found",
            )
        if code == 429:
            wait = f"; retry after {retry_after:g}s" if retry_after is not None else ""
            return Retryable(
                LLMUnavailable(msg + wait, reason="rate_limited", retry_after=retry_after)
            )
        if code >= 500:
            return Retryable(LLMUnavailable(msg, reason="server_error", retry_after=retry_after))
        if code in (400, 413, 422) and _TOO_LARGE.search(detail):
            return LLMUnavailable(msg, reason="too_large")
        return LLMUnavailable(msg, reason="refused")
    if isinstance(exc, openai.APIResponseValidationError):
        return LLMOutputError(f"{where} returned a response that is not a chat completion")
    return LLMUnavailable(redact(f"{where} failed: {exc}", key))
