"""Ask the model about the pairs the rules left unsure, within the pass's judge budget.

Input: the conflict items of a plan (:func:`unsure_pairs`: a pair the rules could not settle
becomes a ``conflict`` operation). Output: one :class:`Judgment` per pair — the model's
validated verdict, or unsure with the reason (a timeout, a refused request, a reply that is
not of the schema, the budget). Answers are cached by the pair's content (:func:`cache_key`),
so an unchanged pair costs no request the next pass. The network call goes through a
:class:`~consolidation.protocols.JSONWriter`; nothing here raises for what the endpoint does.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..llm_usage import Budget, Usage
from ..plans import OpKind, Plan
from ..policy import Policy
from ..protocols import ENDPOINT_DOWN_REASONS, JSONWriter, LLMOutputError, LLMUnavailable
from ..records import FieldMap, MemoryRecord
from ..slots import NAME_RULE
from .prompt import PROMPT_VERSION, VERDICT_SCHEMA, build_messages
from .verdicts import ModelVerdict, parse_verdict

__all__ = [
    "JUDGE_MAX_TOKENS",
    "Judgment",
    "MemoryVerdictCache",
    "UnsurePair",
    "VerdictCache",
    "cache_key",
    "judge_pairs",
    "unsure_pairs",
]

JUDGE_MAX_TOKENS = 160
"""Reply limit of one judge request (tokens): the verdict, the side and one sentence fit in
well under 100 tokens; a model that writes more is rambling and is cut (then unsure)."""


@dataclass(frozen=True)
class UnsurePair:
    """A pair the rules left unsure: the conflict operation at ``index`` of the plan, its two
    memories ``a`` and ``b`` (in the operation's order), the pair's ``cosine`` and what the
    rules said (``rules``: the operation's ``scores["verdict"]``; ``reason``: its reason)."""

    index: int
    a: MemoryRecord
    b: MemoryRecord
    cosine: float | None
    rules: str
    reason: str


@dataclass
class Judgment:
    """The outcome for one :class:`UnsurePair`: ``verdict`` (``None`` = still unsure, with
    ``reason`` a code — ``"budget"``, ``"timeout"``, ``"schema"`` … — and ``detail``),
    whether it came from the cache, and the request's cost (0 when cached or not sent)."""

    pair: UnsurePair
    verdict: ModelVerdict | None
    reason: str = ""
    detail: str = ""
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class VerdictCache(Protocol):
    """Where validated verdicts are kept between passes (``consolidation.adapters.
    verdict_cache.VerdictFileCache`` in the console; :class:`MemoryVerdictCache` otherwise)."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, value: dict[str, Any], texts: Iterable[str] = ()) -> None: ...


class MemoryVerdictCache:
    """A :class:`VerdictCache` in a dict (one process, lost at exit)."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value of ``key`` or ``None``."""
        return self.entries.get(key)

    def put(self, key: str, value: dict[str, Any], texts: Iterable[str] = ()) -> None:
        """Store ``value`` under ``key`` (``texts``, the pair's documents, are not kept: a dict
        in one process needs no forgetting)."""
        self.entries[key] = dict(value)


def unsure_pairs(plan: Plan, records: Sequence[MemoryRecord]) -> list[UnsurePair]:
    """The plan's conflict items of two memories of the snapshot ``records``, in plan order;
    a changed name (rule ``"changed_name"``, :mod:`consolidation.slots`) is never among them:
    a spelling fix and a new person look alike, so a person decides it, never the judge."""
    by_id = {r.id: r for r in records}
    out: list[UnsurePair] = []
    for i, op in enumerate(plan.operations):
        if op.kind != OpKind.CONFLICT or len(op.source_ids) != 2 or op.rule == NAME_RULE:
            continue
        a, b = (by_id.get(s) for s in op.source_ids)
        if a is None or b is None:
            continue
        cos = op.scores.get("cosine")
        cos = float(cos) if isinstance(cos, int | float) and not isinstance(cos, bool) else None
        out.append(UnsurePair(i, a, b, cos, str(op.scores.get("verdict") or "conflict"), op.reason))
    return out


def _side(record: MemoryRecord, fm: FieldMap) -> tuple[str, str | None]:
    when = fm.get_recency(record.metadata)
    return record.document, when.isoformat() if when else None


Side = tuple[str, str | None]


def _canonical(pair: UnsurePair, fm: FieldMap) -> tuple[Side, Side, bool]:
    """The pair's two sides in a fixed order (by text, then time), and whether that swapped
    them, so (a, b) and (b, a) share one cache entry."""
    sa, sb = _side(pair.a, fm), _side(pair.b, fm)
    swapped = (sb[0], sb[1] or "") < (sa[0], sa[1] or "")
    return (sb, sa, True) if swapped else (sa, sb, False)


def cache_key(model: str, first: Side, second: Side) -> str:
    """SHA-256 hex over :data:`~.prompt.PROMPT_VERSION`, the model and the pair as quoted
    (both texts and times, ``first`` then ``second``): same pair, same prompt, same model —
    the same answer."""
    h = hashlib.sha256()
    for part in (PROMPT_VERSION, model, *first, *second):
        h.update((part or "").encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def _swap(v: ModelVerdict, swapped: bool) -> ModelVerdict:
    if not swapped or v.keep == "both":
        return v
    return ModelVerdict(v.verdict, "b" if v.keep == "a" else "a", v.why)


def _ask(
    writer: JSONWriter,
    pair: UnsurePair,
    budget: Budget,
    usage: Usage,
    fm: FieldMap,
    cache: VerdictCache | None,
) -> Judgment:
    """One pair: a cached or fresh :class:`Judgment` (never raises for the endpoint)."""
    model = str(getattr(writer, "model", "") or "LLM")
    first, second, swapped = _canonical(pair, fm)
    key = cache_key(model, first, second)
    hit = cache.get(key) if cache is not None else None
    if hit is not None:
        try:
            got = ModelVerdict(str(hit["verdict"]), str(hit["keep"]), str(hit["why"]))
            return Judgment(pair, _swap(got, swapped), cached=True)
        except (KeyError, TypeError):
            pass  # an unreadable entry is asked again
    system, user = (m["content"] for m in build_messages(*first, *second))
    budget.requests += 1
    started = time.monotonic()
    try:
        reply = writer.complete(
            system,
            user,
            schema=VERDICT_SCHEMA,
            max_tokens=JUDGE_MAX_TOKENS,
            timeout_seconds=budget.remaining(),
        )
    except (LLMUnavailable, LLMOutputError) as exc:
        took = time.monotonic() - started
        usage.add(None, took)
        return Judgment(pair, None, getattr(exc, "reason", "unavailable"), str(exc), seconds=took)
    usage.add(reply, reply.seconds)
    cost: dict[str, Any] = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "seconds": reply.seconds,
    }
    if reply.truncated:
        return Judgment(pair, None, "truncated", "cut at the token limit", **cost)
    try:
        got = parse_verdict(reply.content)
    except LLMOutputError as exc:
        return Judgment(pair, None, exc.reason, str(exc), **cost)
    if cache is not None:
        cache.put(key, got.to_dict(), texts=(first[0], second[0]))
    return Judgment(pair, _swap(got, swapped), **cost)


def judge_pairs(
    pairs: Sequence[UnsurePair],
    writer: JSONWriter,
    *,
    policy: Policy | None = None,
    fieldmap: FieldMap | None = None,
    cache: VerdictCache | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[list[Judgment], Usage, str]:
    """Ask ``writer`` about each pair, in order, within ``policy.judge_max_pairs`` requests and
    ``policy.judge_budget_seconds``: answers from ``cache`` cost neither (without one, a cache
    for this call: pairs of the same two texts — templates, several users — are asked once).

    Returns ``(judgments, usage, stopped)``: one :class:`Judgment` per pair (pairs past the
    budget: ``reason="budget"``; after an endpoint that cannot be reached or rejects the key:
    that reason), the requests' :class:`~consolidation.llm_usage.Usage`, and why it stopped
    sending (``""``, ``"budget"`` or the endpoint's reason). Never raises for the endpoint.
    """
    policy = policy or Policy()
    fm = fieldmap or FieldMap()
    cache = MemoryVerdictCache() if cache is None else cache  # one request per distinct pair
    budget = Budget(policy.judge_budget_seconds, max_requests=policy.judge_max_pairs)
    usage = Usage()
    stopped, detail = "", ""
    out: list[Judgment] = []
    tell = progress or (lambda done, total, label: None)
    for n, pair in enumerate(pairs):
        if not stopped and budget.exhausted():
            stopped, detail = "budget", budget.why()
        if stopped:
            # A cached answer needs no request: still used after the budget is spent.
            j = (
                _ask(writer, pair, budget, usage, fm, cache)
                if _cached(pair, writer, fm, cache)
                else None
            )
            out.append(j or Judgment(pair, None, stopped, detail))
            continue
        j = _ask(writer, pair, budget, usage, fm, cache)
        if j.verdict is None and j.reason in ENDPOINT_DOWN_REASONS:
            stopped, detail = j.reason, j.detail
        elif j.verdict is None and j.reason == "timeout" and budget.exhausted():
            j.reason, j.detail = "budget", budget.why()
        out.append(j)
        tell(n + 1, len(pairs), "Judging unsure pairs")
    return out, usage, stopped


def _cached(pair: UnsurePair, writer: JSONWriter, fm: FieldMap, cache: VerdictCache | None) -> bool:
    if cache is None:
        return False
    model = str(getattr(writer, "model", "") or "LLM")
    first, second, _ = _canonical(pair, fm)
    return cache.get(cache_key(model, first, second)) is not None
