"""What the LLM work of one pass may spend and did spend: a budget, usage figures, a token gauge.

Shared by the distillation (:mod:`consolidation.distill`) and the LLM judge
(:mod:`consolidation.llm_judge`), which each get their own :class:`Budget` per pass (policy
``distill_budget_seconds``; ``judge_budget_seconds`` and ``judge_max_pairs``) and report their
:class:`Usage` in ``plan.context["llm"]``. Pure: no network, the clock is injectable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .protocols import LLMReply

__all__ = ["MIN_REQUEST_SECONDS", "Budget", "TokenGauge", "Usage", "utf8_len"]

MIN_REQUEST_SECONDS = 1.0
"""No request is started with less budget left than this: no endpoint answers a chat request
in under a second (the stub server aside), so it would only time out."""


@dataclass
class Budget:
    """Wall time (seconds, > 0) and optionally a number of requests one pass may spend.

    ``remaining()`` is the time left (never negative); ``exhausted()`` is true once the time
    left is below :data:`MIN_REQUEST_SECONDS` or ``max_requests`` were sent; ``why()`` says
    which, for the figures (``"budget 300 s spent"``, ``"20 requests sent, the limit"``).
    ``clock`` is ``time.monotonic`` unless a test passes another.
    """

    seconds: float
    max_requests: int | None = None
    clock: Callable[[], float] = time.monotonic
    requests: int = 0
    started: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ValueError(f"a budget needs a positive number of seconds, got {self.seconds!r}")
        self.started = self.clock()

    def elapsed(self) -> float:
        """Seconds since the budget was made."""
        return self.clock() - self.started

    def remaining(self) -> float:
        """Seconds left, ≥ 0."""
        return max(0.0, self.seconds - self.elapsed())

    def exhausted(self) -> bool:
        """True when no further request may be sent."""
        if self.max_requests is not None and self.requests >= self.max_requests:
            return True
        return self.remaining() < MIN_REQUEST_SECONDS

    def why(self) -> str:
        """Why the budget is exhausted, as shown to a reviewer."""
        if self.max_requests is not None and self.requests >= self.max_requests:
            return f"{self.max_requests:,} requests sent, the limit per pass"
        return f"budget {self.seconds:g} s spent"


@dataclass
class Usage:
    """Requests sent, tokens in and out (the server's ``usage``), seconds waited.

    ``failed`` counts requests that got no usable reply (timeouts, HTTP errors, empty replies).
    """

    requests: int = 0
    failed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0

    def add(self, reply: LLMReply | None, seconds: float) -> None:
        """Count one request: its reply (``None`` when it failed) and its wall time."""
        self.requests += 1
        self.seconds += max(0.0, seconds)
        if reply is None:
            self.failed += 1
            return
        self.tokens_in += reply.prompt_tokens
        self.tokens_out += reply.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """``{"requests", "failed", "tokens_in", "tokens_out", "seconds"}`` (seconds rounded)."""
        return {
            "requests": self.requests,
            "failed": self.failed,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "seconds": round(self.seconds, 2),
        }

    def __iadd__(self, other: Usage) -> Usage:
        self.requests += other.requests
        self.failed += other.failed
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.seconds += other.seconds
        return self


def utf8_len(text: str) -> int:
    """Length of ``text`` in UTF-8 bytes."""
    return len(text.encode("utf-8"))


@dataclass
class TokenGauge:
    """Estimates how many tokens a prompt is before it is sent, learning from the server.

    Starts at ``tokens_per_byte`` = 1/3 (one token per three UTF-8 bytes: conservative for
    English, where BPE tokenizers average ~4 bytes a token, and about right for CJK text, three
    bytes a character and about a token each). After each reply it takes the largest ratio
    ``prompt_tokens / prompt bytes`` the server reported (chat template included), so a
    tokenizer that splits finer than assumed is followed at once and the estimate never
    undershoots what was already seen.
    """

    tokens_per_byte: float = 1.0 / 3.0
    observed: bool = False

    def estimate(self, *texts: str) -> int:
        """Estimated prompt tokens of ``texts`` together (rounded up)."""
        return int(sum(utf8_len(t) for t in texts) * self.tokens_per_byte) + 1

    def observe(self, prompt_bytes: int, prompt_tokens: int) -> None:
        """Learn from one reply's ``usage.prompt_tokens`` for a prompt of ``prompt_bytes``."""
        if prompt_bytes <= 0 or prompt_tokens <= 0:
            return
        ratio = prompt_tokens / prompt_bytes
        self.tokens_per_byte = max(ratio, self.tokens_per_byte) if self.observed else ratio
        self.observed = True
