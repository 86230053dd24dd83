"""OpenAI-compatible chat client for the LLM paths (distillation), built on the ``openai`` SDK.

Works with any endpoint speaking ``POST {base_url}/chat/completions`` (OpenAI, vLLM, llama.cpp
server, Ollama's ``/v1``, LiteLLM …). Configuration comes from the environment via
:func:`llm_from_env` (docs/ARCHITECTURE.md "Processes": ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``MEMORYADMIN_LLM_MODEL``); with no model configured it returns ``None`` and nothing ever
touches the network (I-8).

Failures are translated into the engine's two exceptions (``consolidation.protocols``):
:class:`~consolidation.protocols.LLMUnavailable` — timeout, connection refused, HTTP 4xx/5xx — and
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

from ..protocols import LLMOutputError, LLMUnavailable

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "LLMWriter", "llm_from_env"]

DEFAULT_TIMEOUT_SECONDS = 60.0
"""Default per-attempt limit (seconds) when ``MEMORYADMIN_LLM_TIMEOUT`` is unset: a 40-memory
group answered by a small hosted model typically takes 5–20 s."""

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

_GRACE_SECONDS = 0.25  # lets the SDK's own (more specific) timeout fire before the watchdog
_PLACEHOLDER_KEY = "unused"  # local endpoints need no key, the SDK insists on one


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


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
        json_mode: send ``response_format={"type": "json_object"}``. If the endpoint answers
            HTTP 400 naming ``response_format``, the request is repeated once without it and json
            mode stays off for this writer; the reply is validated either way.

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
        self.json_mode = json_mode
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
    def complete_json(self, system: str, user: str) -> str:
        """Send ``[system, user]`` chat messages; return the reply's text content (unvalidated).

        Raises :class:`LLMUnavailable` (timeout — ``"LLM endpoint timed out after 30s"`` —,
        connection refused, HTTP error) after ``max_retries`` extra attempts, and
        :class:`LLMOutputError` when the reply has no text (no choices, a refusal, or cut off
        at the token limit).
        """
        attempt = 0
        while True:
            try:
                completion = self._request(system, user)
                break
            except _Retryable as exc:
                if attempt >= self.max_retries:
                    raise exc.error from exc.__cause__
                time.sleep(min(8.0, 0.5 * 2**attempt))
                attempt += 1
        return _content_of(completion)

    def _request(self, system: str, user: str) -> Any:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        }
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        try:
            return self._call_with_deadline(kwargs)
        except openai.BadRequestError as exc:
            if "response_format" in kwargs and "response_format" in str(exc):
                self.json_mode = False
                kwargs.pop("response_format")
                try:
                    return self._call_with_deadline(kwargs)
                except openai.OpenAIError as exc2:
                    raise self._translate(exc2) from exc2
            raise self._translate(exc) from exc
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc

    def _call_with_deadline(self, kwargs: dict[str, Any]) -> Any:
        client = self._get_client()
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = client.chat.completions.create(**kwargs)
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="memoryadmin-llm", daemon=True).start()
        if not done.wait(self.timeout_seconds + _GRACE_SECONDS):
            self._drop_client()
            err = LLMUnavailable(f"LLM endpoint timed out after {self.timeout_seconds:g}s")
            raise _Retryable(err)
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _translate(self, exc: openai.OpenAIError) -> Exception:
        """SDK exception → ``_Retryable(LLMUnavailable)``, ``LLMUnavailable`` or
        ``LLMOutputError``."""
        where = f"LLM endpoint {self.base_url}"
        if isinstance(exc, openai.APITimeoutError):
            return _Retryable(
                LLMUnavailable(f"LLM endpoint timed out after {self.timeout_seconds:g}s")
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f": {cause}" if cause else ""
            return _Retryable(
                LLMUnavailable(_redact(f"could not connect to {where}{detail}", self._api_key))
            )
        if isinstance(exc, openai.APIStatusError):
            msg = _redact(
                f"{where} returned HTTP {exc.status_code}: {_status_detail(exc)}", self._api_key
            )
            if exc.status_code in (401, 403):
                msg = f"{where} rejected the API key (HTTP {exc.status_code})"
            elif exc.status_code == 404:
                msg = f"{where} has no chat/completions route or no model {self.model!r} (HTTP 404)"
            err = LLMUnavailable(msg)
            return _Retryable(err) if exc.status_code == 429 or exc.status_code >= 500 else err
        if isinstance(exc, openai.APIResponseValidationError):
            return LLMOutputError(f"{where} returned a response that is not a chat completion")
        return LLMUnavailable(_redact(f"{where} failed: {exc}", self._api_key))


def _status_detail(exc: openai.APIStatusError) -> str:
    """The server's own error message (OpenAI shape ``{"error": {"message": …}}``), ≤ 300 chars."""
    body = exc.body
    detail: Any = None
    if isinstance(body, dict):
        inner = body.get("error")
        detail = inner.get("message") if isinstance(inner, dict) else None
        detail = detail or body.get("message") or (inner if isinstance(inner, str) else None)
    text = str(detail or exc.message or "").strip() or "no details"
    return text[:300]


class _Retryable(Exception):  # internal carrier, never escapes complete_json
    """Carries an :class:`LLMUnavailable` that another attempt might fix."""

    def __init__(self, error: LLMUnavailable) -> None:
        super().__init__(str(error))
        self.error = error


def _content_of(completion: Any) -> str:
    """The text of the first choice; :class:`LLMOutputError` when there is none usable."""
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise LLMOutputError(
            "LLM endpoint returned a response without choices", excerpt=str(completion)
        )
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    if getattr(choice, "finish_reason", None) == "length":
        raise LLMOutputError(
            "LLM reply was cut off at the token limit; use smaller groups",
            excerpt=str(content or ""),
        )
    if not isinstance(content, str) or not content.strip():
        refusal = getattr(message, "refusal", None)
        why = f" (refusal: {refusal})" if refusal else ""
        raise LLMOutputError(f"LLM reply has no text content{why}")
    return content


def llm_from_env(env: Mapping[str, str] | None = None) -> LLMWriter | None:
    """The configured :class:`LLMWriter`, or ``None`` when the LLM path is not configured.

    Reads (from ``env``, default ``os.environ``):

    - ``MEMORYADMIN_LLM_MODEL`` — required; unset or blank → ``None`` (no LLM, no network).
    - ``OPENAI_BASE_URL`` — endpoint root; when unset, ``https://api.openai.com/v1`` is used
      only if ``OPENAI_API_KEY`` is set.
    - ``OPENAI_API_KEY`` — optional for local endpoints.
    - ``MEMORYADMIN_LLM_TIMEOUT`` — seconds per attempt, default
      :data:`DEFAULT_TIMEOUT_SECONDS`.

    Raises ``ValueError`` naming the variable when the model is set but neither a base URL nor
    a key is, or when the timeout or base URL is invalid. Does no network I/O.
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
