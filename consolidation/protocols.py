"""Protocols: PraisonAI's consolidation protocols, our store, embedder and LLM-writer protocols.

The two consolidation protocols are the seed contract's (``seeds/000``, quoted in
``docs/SOURCES.md``): ``@runtime_checkable``, keyword-only ``max_loss_fraction`` (default 0.25),
and a ``ConsolidationResult`` return annotation that ``typing.get_type_hints`` resolves. The LLM
path's two exceptions (:class:`LLMUnavailable`, :class:`LLMOutputError`) live here, beside
:class:`JSONWriter`, so the engine and the adapter (``consolidation.adapters.llm``) share them
without importing each other."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .records import MemoryRecord
from .result import ConsolidationResult

__all__ = [
    "AsyncMemoryConsolidationProtocol",
    "Embedder",
    "JSONWriter",
    "LLMOutputError",
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

    The message is readable by an operator, e.g. ``"LLM endpoint timed out after 30s"``. Raised
    by the adapter; :func:`distill` never swallows it (a down endpoint stops the pass).
    """


class LLMOutputError(ValueError):
    """The LLM answered, but not with ``{"facts": [...]}`` of the documented schema.

    ``str(exc)`` says what was wrong (e.g. ``"facts[1].confidence must be a number in [0, 1],
    got 1.5"``); ``excerpt`` holds up to 200 characters of the reply (untrusted text — escape it
    when displaying).
    """

    def __init__(self, message: str, *, excerpt: str = "") -> None:
        super().__init__(message)
        self.excerpt = excerpt[:200]


@runtime_checkable
class JSONWriter(Protocol):
    """Something that sends a system + user message to a chat model and returns its reply text.

    ``model`` names the model (shown in each operation's reason). ``complete_json`` returns the
    raw content string (expected to be a JSON object, not yet validated) and raises
    :class:`LLMUnavailable` when the endpoint cannot answer within its timeout, or
    :class:`LLMOutputError` when the reply has no usable content.
    """

    model: str

    def complete_json(self, system: str, user: str) -> str: ...
