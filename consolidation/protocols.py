"""Protocols: PraisonAI's consolidation protocols, our store, embedder and LLM-writer protocols.

The two consolidation protocols are the seed contract's (``seeds/000``, quoted in
``docs/SOURCES.md``): ``@runtime_checkable``, keyword-only ``max_loss_fraction`` (default 0.25),
and a ``ConsolidationResult`` return annotation that ``typing.get_type_hints`` resolves. The LLM
path's two exceptions (:class:`LLMUnavailable`, :class:`LLMOutputError`) live here, beside
:class:`JSONWriter`, so the engine and the adapter (``consolidation.adapters.llm``) share them
without importing each other."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .records import MemoryRecord
from .result import ConsolidationResult

__all__ = [
    "AsyncMemoryConsolidationProtocol",
    "Embedder",
    "ENDPOINT_DOWN_REASONS",
    "JSONWriter",
    "LLMOutputError",
    "LLMReply",
    "LLMUnavailable",
    "MemoryConsolidationProtocol",
    "MemoryStore",
    "WritableMemoryStore",
]


@runtime_checkable
class MemoryConsolidationProtocol(Protocol):
    """Sync consolidator: ``consolidate(memory, *, max_loss_fraction=0.25)``."""

    def consolidate(
        self, memory: Any, *, max_loss_fraction: float = 0.25
    ) -> ConsolidationResult: ...


@runtime_checkable
class AsyncMemoryConsolidationProtocol(Protocol):
    """Async consolidator: ``await aconsolidate(memory, *, max_loss_fraction=0.25)``."""

    async def aconsolidate(
        self, memory: Any, *, max_loss_fraction: float = 0.25
    ) -> ConsolidationResult: ...


@runtime_checkable
class MemoryStore(Protocol):
    """A readable memory store (e.g. one Chroma collection)."""

    def count(self) -> int:
        """Number of memories in the store."""
        ...

    def iter_pages(
        self, *, page_size: int = 5000, include_embeddings: bool = True
    ) -> Iterator[list[MemoryRecord]]:
        """Yield every memory in pages of at most ``page_size`` (≤ 5,000, Chroma's safe limit)."""
        ...

    def get(self, ids: Sequence[str], *, include_embeddings: bool = True) -> list[MemoryRecord]:
        """The memories with these ids that exist (missing ids are left out)."""
        ...


@runtime_checkable
class WritableMemoryStore(MemoryStore, Protocol):
    """A store the consolidator may write to."""

    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace records (embeddings required), in batches. Idempotent."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records by id; missing ids are ignored. Idempotent."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Text → L2-normalised sentence embeddings."""

    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return ``(len(texts), dim) float32`` L2-normalised rows."""
        ...


class LLMUnavailable(RuntimeError):
    """The LLM endpoint could not answer: timeout, connection refused, HTTP 4xx/5xx.

    The message is readable by an operator, e.g. ``"LLM endpoint timed out after 30s"``.
    ``reason`` is a short code for the pass's figures: ``"timeout"``, ``"unreachable"``
    (connection refused, DNS), ``"rate_limited"`` (HTTP 429), ``"server_error"`` (5xx),
    ``"auth"`` (401/403), ``"not_found"`` (404), ``"too_large"`` (the request does not fit the
    model's context), ``"refused"`` (another 4xx) or ``"unavailable"``. ``retry_after`` is the
    server's ``Retry-After`` in seconds when it sent one (a 429 or 503), else ``None``.

    Raised by the adapter. The distillation and the LLM judge catch it per request: a group or
    pair that failed is skipped with the reason and retried by a later pass; an endpoint that
    cannot be reached at all stops the LLM work of the pass, never the pass itself.
    """

    def __init__(
        self, message: str, *, reason: str = "unavailable", retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after


ENDPOINT_DOWN_REASONS = frozenset({"unreachable", "auth", "not_found"})
"""``LLMUnavailable.reason`` values after which no further request of the pass can succeed."""


class LLMOutputError(ValueError):
    """The LLM answered, but not with JSON of the schema it was asked for.

    ``str(exc)`` says what was wrong (e.g. ``"facts[1].confidence must be a number in [0, 1],
    got 1.5"``); ``excerpt`` holds up to 200 characters of the reply (untrusted text — escape it
    when displaying); ``reason`` is a short code for the figures: ``"not_json"``, ``"schema"``,
    ``"echoed_input"`` (the model repeated the quoted data instead of answering), ``"empty"``,
    ``"truncated"`` (stopped at the token limit) or ``"invalid_reply"``.
    """

    def __init__(self, message: str, *, excerpt: str = "", reason: str = "invalid_reply") -> None:
        super().__init__(message)
        self.excerpt = excerpt[:200]
        self.reason = reason
        self.tokens: dict[str, int] = {}  # estimated tokens of the failed request, when known


@dataclass(frozen=True)
class LLMReply:
    """One chat completion: ``content`` (the reply text, unvalidated, possibly empty),
    ``finish_reason`` (``"stop"``, ``"length"`` when the reply hit ``max_tokens`` …),
    ``prompt_tokens`` / ``completion_tokens`` (the server's ``usage``; 0 when it sent none),
    ``seconds`` (wall time of the request, retries included) and ``response_format`` (what was
    sent: ``"json_schema"``, ``"json_object_schema"`` — JSON mode with a schema, llama-cpp-python's
    grammar form —, ``"json_object"`` or ``"none"``)."""

    content: str
    finish_reason: str | None = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    response_format: str = "none"

    @property
    def truncated(self) -> bool:
        """True when the reply stopped at the token limit (``finish_reason == "length"``)."""
        return self.finish_reason == "length"


@runtime_checkable
class JSONWriter(Protocol):
    """Something that sends a system + user message to a chat model and returns its reply.

    ``model`` names the model (shown in each operation's reason). ``complete`` — what the
    engine calls — sends one
    request: ``schema`` (a JSON Schema dict) asks for a reply of that shape — as a grammar
    where the server supports one, else JSON mode, else nothing (the caller validates the
    reply either way); ``max_tokens`` caps the reply; ``timeout_seconds`` lowers the writer's
    own limit for this request (a pass's remaining budget). Returns an :class:`LLMReply`
    (a reply cut at the token limit is returned, ``truncated``), raises
    :class:`LLMUnavailable` when the endpoint cannot answer in time and
    :class:`LLMOutputError` when the reply has no usable content.
    """

    model: str

    def complete_json(self, system: str, user: str) -> str:
        """The reply text alone, in JSON mode without a schema (raises as ``complete`` does,
        and :class:`LLMOutputError` for a reply cut at the token limit)."""
        ...

    def complete(
        self,
        system: str,
        user: str,
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        timeout_seconds: float | None = None,
    ) -> LLMReply: ...
