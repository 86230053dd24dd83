"""OpenAI-compatible chat client for the LLM paths (distillation), built on the ``openai`` SDK.

Works with any endpoint speaking ``POST {base_url}/chat/completions`` (OpenAI, vLLM, llama.cpp
server, Ollama's ``/v1``, LiteLLM …). Configuration comes from the environment via
:func:`llm_from_env` (docs/ARCHITECTURE.md "Processes": ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``MEMORYADMIN_LLM_MODEL``); with no model configured it returns ``None`` and nothing ever
touches the network (I-8).

Failures are translated into the engine's two exceptions (``consolidation.protocols``, by
:mod:`.llm_errors`): :class:`~consolidation.protocols.LLMUnavailable` — timeout, connection
refused, HTTP 4xx/5xx, each with a ``reason`` code — and
:class:`~consolidation.protocols.LLMOutputError` — an answer with no usable text. A call never
takes longer than ``timeout_seconds`` per attempt (plus ~0.25 s): besides the SDK's per-phase
timeouts, a watchdog bounds the whole attempt, so a server trickling bytes cannot stall a pass.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import openai

from ..protocols import LLMOutputError, LLMReply, LLMUnavailable
from .endpoints import HOSTS_ENV, check_endpoint_url, hosts_from_env
from .llm_errors import Retryable, refuses_response_format, translate

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "RESPONSE_FORMATS", "LLMWriter", "llm_from_env"]

RESPONSE_FORMATS = ("json_schema", "json_object_schema", "json_object", "none")
"""The ``response_format`` forms a writer tries, strongest first (:meth:`LLMWriter.complete`)."""

DEFAULT_TIMEOUT_SECONDS = 60.0
"""Default per-attempt limit (seconds) when ``MEMORYADMIN_LLM_TIMEOUT`` is unset: a 40-memory
group answered by a small hosted model typically takes 5–20 s."""

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

_GRACE_SECONDS = 0.25  # lets the SDK's own (more specific) timeout fire before the watchdog
_PLACEHOLDER_KEY = "unused"  # local endpoints need no key, the SDK insists on one


class LLMWriter:
    """A chat model behind an OpenAI-compatible endpoint that answers with JSON text.

    Args:
        base_url: endpoint root including the API prefix, e.g. ``"http://127.0.0.1:8000/v1"``
            (``http``/``https`` only).
        api_key: bearer token; empty or ``None`` for endpoints that need none.
        model: model name sent with each request (also shown in proposals).
        timeout_seconds: limit for one attempt, in seconds (finite, > 0). Applies to connect,
            each read and the attempt as a whole.
        max_retries: extra attempts after a timeout, connection error, HTTP 429 or 5xx
            (0 = fail fast; the worst case is ``(max_retries + 1) × timeout_seconds`` plus
            0.5·2^n s back-off between attempts).
        temperature: sampling temperature sent with each request (0.0 for repeatable output);
            ``None`` omits it, for models that reject the parameter.
        json_mode: ask for JSON with ``response_format`` (a schema-constrained form when the
            caller gives a schema, see :meth:`complete`); a form the endpoint refuses is dropped
            and the request repeated. ``False`` never sends ``response_format``. The reply is
            validated by the caller either way.

    Raises ``ValueError`` for invalid arguments. Constructing does no network I/O.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_seconds: float,
        max_retries: int = 0,
        *,
        temperature: float | None = 0.0,
        json_mode: bool = True,
    ) -> None:
        parts = urlsplit(base_url or "")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"LLM base URL must be an http(s) URL, got {base_url!r}")
        if not isinstance(model, str) or not model.strip():
            raise ValueError("LLM model name must be a non-empty string")
        if (
            isinstance(timeout_seconds, bool)
            or not isinstance(timeout_seconds, int | float)
            or not math.isfinite(timeout_seconds)
            or timeout_seconds <= 0
        ):
            raise ValueError(
                f"LLM timeout must be a positive number of seconds, got {timeout_seconds!r}"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"LLM max_retries must be an integer >= 0, got {max_retries!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model.strip()
        self.timeout_seconds = float(timeout_seconds)
        self.max_retries = max_retries
        self.temperature = temperature
        self.response_format = RESPONSE_FORMATS[0] if json_mode else "none"
        self._api_key = api_key or None
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"LLMWriter(model={self.model!r}, base_url={self.base_url!r}, "
            f"timeout={self.timeout_seconds:g}s)"
        )

    def describe(self) -> str:
        """``"<model> at <base_url>"`` for display (never includes the key)."""
        return f"{self.model} at {self.base_url}"

    # -- client lifecycle ----------------------------------------------------------------------
    def _get_client(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                self._client = openai.OpenAI(
                    base_url=self.base_url,
                    api_key=self._api_key or _PLACEHOLDER_KEY,
                    timeout=self.timeout_seconds,
                    max_retries=0,  # retries are ours, so the watchdog bounds every attempt
                )
            return self._client

    def _drop_client(self) -> None:
        """Close the HTTP pool (aborting an abandoned request) and build a fresh one next time."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # best effort on an already-failing path
                client.close()

    def close(self) -> None:
        """Release the HTTP connections. The writer stays usable (reconnects on demand)."""
        self._drop_client()

    # -- requests -----------------------------------------------------------------------------
    def complete(
        self,
        system: str,
        user: str,
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        timeout_seconds: float | None = None,
    ) -> LLMReply:
        """Send ``[system, user]`` chat messages; return the reply (:class:`LLMReply`).

        ``schema`` (a JSON Schema dict) is sent as ``response_format`` in the strongest form
        the endpoint accepts: ``{"type": "json_schema", …}`` (OpenAI, llama.cpp's server,
        vLLM, Ollama: a grammar, so even a small model cannot leave the shape), then
        ``{"type": "json_object", "schema": …}`` (llama-cpp-python's server), then plain JSON
        mode, then nothing; a form the endpoint refuses (HTTP 400/422 naming it, or
        llama-cpp-python's 500 naming the field) is dropped for the rest of this writer's life
        (:attr:`response_format` says which is in use).
        ``max_tokens`` caps the reply (tokens); ``timeout_seconds`` lowers the per-attempt
        limit for this request. A reply cut at the token limit is returned (``truncated``).

        Raises :class:`LLMUnavailable` (with ``reason``: ``"timeout"`` — ``"LLM endpoint
        timed out after 30s"`` —, ``"unreachable"``, ``"rate_limited"`` with ``retry_after``,
        ``"server_error"``, ``"auth"``, ``"not_found"``, ``"too_large"``, ``"refused"``) after
        ``max_retries`` extra attempts, and :class:`LLMOutputError` when the reply has no
        text (no choices, or a refusal without content).
        """
        limit = self.timeout_seconds
        if timeout_seconds is not None:
            limit = max(0.05, min(limit, float(timeout_seconds)))
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                completion, sent = self._request(system, user, schema, max_tokens, limit)
                break
            except Retryable as exc:
                if attempt >= self.max_retries:
                    raise exc.error from exc.__cause__
                wait = exc.error.retry_after
                time.sleep(min(30.0, wait) if wait is not None else min(8.0, 0.5 * 2**attempt))
                attempt += 1
        return _reply_of(completion, sent, time.monotonic() - started)

    def complete_json(self, system: str, user: str) -> str:
        """The reply text of :meth:`complete` in JSON mode (no schema), for callers that only
        want the text. Raises what :meth:`complete` raises, and :class:`LLMOutputError`
        (``reason="truncated"``) when the reply was cut off at the token limit."""
        reply = self.complete(system, user)
        if reply.truncated:
            raise LLMOutputError(
                "LLM reply was cut off at the token limit; use smaller groups",
                excerpt=reply.content,
                reason="truncated",
            )
        return reply.content

    def _format_payload(self, level: str, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if level == "none":
            return None
        if schema is not None and level == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": schema, "strict": True},
            }
        if schema is not None and level == "json_object_schema":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_object"}

    def _request(
        self,
        system: str,
        user: str,
        schema: dict[str, Any] | None,
        max_tokens: int | None,
        limit: float,
    ) -> tuple[Any, str]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        }
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if max_tokens is not None:
            kwargs["max_tokens"] = int(max_tokens)
        while True:
            payload = self._format_payload(self.response_format, schema)
            if payload is None:
                kwargs.pop("response_format", None)
            else:
                kwargs["response_format"] = payload
            sent = "none" if payload is None else str(payload["type"])
            sent = "json_object_schema" if payload and "schema" in payload else sent
            try:
                return self._call_with_deadline(kwargs, limit), sent
            except openai.OpenAIError as exc:
                if payload is None or not refuses_response_format(exc):
                    raise self._translate(exc, limit) from exc
                self._step_down(payload, schema)

    def _step_down(self, refused: dict[str, Any], schema: dict[str, Any] | None) -> None:
        """Move :attr:`response_format` past every level that sends what was just refused."""
        levels = RESPONSE_FORMATS
        i = levels.index(self.response_format)
        while i + 1 < len(levels):
            i += 1
            if self._format_payload(levels[i], schema) != refused:
                break
        self.response_format = levels[i]

    def _call_with_deadline(self, kwargs: dict[str, Any], limit: float) -> Any:
        client = self._get_client()
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = client.chat.completions.create(**kwargs, timeout=limit)
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="memoryadmin-llm", daemon=True).start()
        if not done.wait(limit + _GRACE_SECONDS):
            self._drop_client()
            err = LLMUnavailable(f"LLM endpoint timed out after {limit:g}s", reason="timeout")
            raise Retryable(err)
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _translate(self, exc: openai.OpenAIError, limit: float) -> Exception:
        return translate(
            exc, base_url=self.base_url, model=self.model, timeout=limit, key=self._api_key
        )


def _reply_of(completion: Any, sent: str, seconds: float) -> LLMReply:
    """The first choice as an :class:`LLMReply`; :class:`LLMOutputError` when it has no text
    (a reply cut at the token limit keeps whatever text it has)."""
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise LLMOutputError(
            "LLM endpoint returned a response without choices",
            excerpt=str(completion),
            reason="empty",
        )
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    finish = getattr(choice, "finish_reason", None)
    if finish != "length" and (not isinstance(content, str) or not content.strip()):
        refusal = getattr(message, "refusal", None)
        why = f" (refusal: {refusal})" if refusal else ""
        raise LLMOutputError(f"LLM reply has no text content{why}", reason="empty")
    usage = getattr(completion, "usage", None)
    return LLMReply(
        content=content if isinstance(content, str) else "",
        finish_reason=finish,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        seconds=seconds,
        response_format=sent,
    )


def llm_from_env(env: Mapping[str, str] | None = None) -> LLMWriter | None:
    """The configured :class:`LLMWriter`, or ``None`` when the LLM path is not configured.

    Reads (from ``env``, default ``os.environ``):

    - ``MEMORYADMIN_LLM_MODEL`` — required; unset or blank → ``None`` (no LLM, no network).
    - ``OPENAI_BASE_URL`` — endpoint root; when unset, ``https://api.openai.com/v1`` is used
      only if ``OPENAI_API_KEY`` is set.
    - ``OPENAI_API_KEY`` — optional for local endpoints.
    - ``MEMORYADMIN_LLM_TIMEOUT`` — seconds per attempt, default
      :data:`DEFAULT_TIMEOUT_SECONDS`.
    - ``ENDPOINT_HOSTS_ALLOWED`` — optional host patterns the base URL must match
      (:mod:`consolidation.adapters.endpoints`; unset: any host).

    Raises ``ValueError`` naming the variable when the model is set but neither a base URL nor
    a key is, or when the timeout or base URL is invalid (another scheme, credentials in it, a
    host not allowed). Does no network I/O.
    """
    env = os.environ if env is None else env
    model = (env.get("MEMORYADMIN_LLM_MODEL") or "").strip()
    if not model:
        return None
    base_url = (env.get("OPENAI_BASE_URL") or "").strip()
    api_key = (env.get("OPENAI_API_KEY") or "").strip() or None
    if not base_url:
        if not api_key:
            raise ValueError(
                "MEMORYADMIN_LLM_MODEL is set but neither OPENAI_BASE_URL nor OPENAI_API_KEY is"
            )
        base_url = OPENAI_DEFAULT_BASE_URL
    try:
        base_url = check_endpoint_url(base_url, hosts_from_env(env), what="LLM")
    except ValueError as exc:
        raise ValueError(f"OPENAI_BASE_URL ({HOSTS_ENV}): {exc}") from exc
    raw_timeout = (env.get("MEMORYADMIN_LLM_TIMEOUT") or "").strip()
    timeout = DEFAULT_TIMEOUT_SECONDS
    if raw_timeout:
        try:
            timeout = float(raw_timeout)
        except ValueError:
            timeout = math.nan
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(
                f"MEMORYADMIN_LLM_TIMEOUT must be a positive number of seconds, got {raw_timeout!r}"
            )
    try:
        return LLMWriter(base_url, api_key, model, timeout)
    except ValueError as exc:
        raise ValueError(f"OPENAI_BASE_URL: {exc}") from exc
