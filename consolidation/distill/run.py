"""The distillation pass: select groups, fit them to the model, ask within the budget, propose.

The offline pass never depends on the LLM: whatever one request does — time out, get rate
limited, be refused, come back as garbage or cut at the token limit — costs at most that group,
which is recorded with its reason (:mod:`.ledger`) and left out of the checkpoint, so a later
pass sends it again. :func:`distill` itself raises only for bad arguments.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..llm_usage import Budget, TokenGauge, utf8_len
from ..plans import Operation
from ..policy import Policy
from ..protocols import ENDPOINT_DOWN_REASONS, JSONWriter, LLMOutputError, LLMReply, LLMUnavailable
from ..records import FieldMap, MemoryRecord
from .fit import halves, split_to_fit
from .groups import DistillGroup, select_groups
from .ledger import DONE, FAILED, SKIPPED, Ledger
from .operations import facts_to_operations, normalise_fact_text
from .prompt import build_messages
from .replies import Fact, facts_schema, parse_facts

__all__ = ["MAX_CONSECUTIVE_FAILURES", "DistillResult", "GroupProgress", "distill"]

MAX_CONSECUTIVE_FAILURES = 3
"""After this many requests in a row fail at the endpoint (timeouts, 5xx, 429s), no further
request is sent this pass: an endpoint that is down or far too slow for its timeout would
otherwise spend the whole budget one timeout at a time."""

MAX_RATE_LIMIT_WAIT = 60.0
"""Longest ``Retry-After`` (seconds) waited for once per group, and only within the budget."""

GroupProgress = Callable[[int, int, str], None]
"""``progress(groups_finished, groups_total, label)`` after every group (and once before)."""


@dataclass
class DistillResult:
    """What :func:`distill` produced.

    - ``operations``: DISTILL operations (additions only), in group then reply order.
    - ``checkpoint``: the input checkpoint plus ``processed_ids``.
    - ``processed_ids``: ids of the groups that were done (including those the model found
      nothing in); a group skipped or failed is not included, so a later pass retries it.
    - ``model``: the writer's model name; ``requests``: LLM requests sent.
    - ``counts``: ``eligible`` (episodic, grouped), ``skipped_checkpointed``,
      ``skipped_no_session``, ``skipped_single``, ``facts``, ``dropped_unknown_evidence``,
      ``dropped_low_confidence``, ``dropped_duplicate``.
    - ``ledger``: every group's outcome, reason and cost (:class:`~.ledger.Ledger`).
    """

    operations: list[Operation]
    checkpoint: frozenset[str]
    processed_ids: list[str]
    model: str
    requests: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    ledger: Ledger | None = None

    @property
    def summary(self) -> str:
        """The ledger's one sentence ("distilled 4 of 25 sessions; …")."""
        return self.ledger.summary() if self.ledger else ""

    def to_context(self) -> dict[str, Any]:
        """JSON-ready figures for ``plan.context["llm"]["distill"]``: the ledger's
        (:meth:`~.ledger.Ledger.to_context`) plus ``model``, ``processed`` and ``counts``."""
        out = self.ledger.to_context() if self.ledger else {}
        out.update(model=self.model, processed=len(self.processed_ids), counts=dict(self.counts))
        return out


class _Pass:
    """One distillation's loop state (see :func:`distill`)."""

    def __init__(self, writer: JSONWriter, policy: Policy, fields: FieldMap, **kw: Any) -> None:
        self.writer, self.policy, self.fields = writer, policy, fields
        self.budget: Budget = kw["budget"]
        self.ledger: Ledger = kw["ledger"]
        self.sleep: Callable[[float], None] = kw["sleep"]
        self.gauge = TokenGauge()
        self.failures_in_a_row = 0

    def ask(self, group: DistillGroup, waited: bool) -> tuple[str, Any]:
        """Send ``group`` once: ``("reply", LLMReply)``, ``("wait", seconds)``, ``("split",
        reason)`` or ``("fail", (reason, detail, seconds))``."""
        system, user = (m["content"] for m in build_messages(group, self.fields))
        self.budget.requests += 1
        started = time.monotonic()
        try:
            reply = self.writer.complete(
                system,
                user,
                schema=facts_schema(group.ids),
                max_tokens=self.policy.llm_max_tokens,
                timeout_seconds=self.budget.remaining(),
            )
        except (LLMUnavailable, LLMOutputError) as exc:
            took = time.monotonic() - started
            self.ledger.usage.add(None, took)
            return self._failed(exc, group, waited, took)
        self.ledger.usage.add(reply, reply.seconds or time.monotonic() - started)
        self.ledger.response_format = reply.response_format
        self.gauge.observe(utf8_len(system) + utf8_len(user), reply.prompt_tokens)
        self.failures_in_a_row = 0
        return "reply", reply

    def _failed(
        self, exc: Exception, group: DistillGroup, waited: bool, took: float
    ) -> tuple[str, Any]:
        reason = getattr(exc, "reason", "unavailable")
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(exc, LLMOutputError):
            return "fail", (reason, str(exc), took)
        if reason == "timeout" and self.budget.exhausted():
            return "fail", ("budget", str(exc), took)  # cut by the budget, not by the model
        if reason == "too_large" and len(group.records) > 1:
            return "split", reason
        if (
            reason == "rate_limited"
            and not waited
            and retry_after is not None
            and retry_after <= min(MAX_RATE_LIMIT_WAIT, self.budget.remaining() - 1.0)
        ):
            return "wait", retry_after
        if reason in ENDPOINT_DOWN_REASONS:
            self.ledger.stop(reason, str(exc))
        else:
            self.failures_in_a_row += 1
            if self.failures_in_a_row >= MAX_CONSECUTIVE_FAILURES:
                self.ledger.stop("endpoint_failing", str(exc))
        return "fail", (reason, str(exc), took)


def _check(min_confidence: float) -> None:
    if (
        isinstance(min_confidence, bool)
        or not isinstance(min_confidence, int | float)
        or not 0.0 <= min_confidence <= 1.0
    ):
        raise ValueError(f"min_confidence must be a number in [0, 1], got {min_confidence!r}")


def _keep(
    facts: list[Fact], min_confidence: float, known: set[str], counts: dict[str, int]
) -> list[Fact]:
    kept: list[Fact] = []
    for fact in facts:
        if fact.confidence < min_confidence:
            counts["dropped_low_confidence"] += 1
            continue
        norm = normalise_fact_text(fact.text)
        if norm in known:
            counts["dropped_duplicate"] += 1
            continue
        known.add(norm)
        kept.append(fact)
    return kept


def _fitted(groups: list[DistillGroup], run: _Pass) -> deque[tuple[DistillGroup, bool, bool]]:
    """Groups split to fit the context; the ones that cannot fit are recorded as skipped.
    Queue items: ``(group, split_already, waited_already)``."""
    queue: deque[tuple[DistillGroup, bool, bool]] = deque()
    for group in groups:
        fitting, too_large = split_to_fit(
            group,
            gauge=run.gauge,
            context_tokens=run.policy.llm_context_tokens,
            max_tokens=run.policy.llm_max_tokens,
            fields=run.fields,
        )
        queue.extend((g, False, False) for g in fitting)
        for g in too_large:
            run.ledger.add(g, SKIPPED, "too_large", detail="one memory is longer than the context")
    return queue


def distill(
    records: Sequence[MemoryRecord],
    writer: JSONWriter,
    *,
    policy: Policy | None = None,
    fields: FieldMap | None = None,
    checkpoint: Collection[str] = (),
    min_confidence: float = 0.0,
    progress: GroupProgress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DistillResult:
    """Distil the snapshot ``records`` into DISTILL operations with ``writer``, within budget.

    Steps (``seeds/003`` "How it works"): select episodic memories not in ``checkpoint``, group
    by session in groups of at most ``policy.distill_group_size`` (:func:`select_groups`),
    split each group until its estimated prompt plus ``policy.llm_max_tokens`` fits
    ``policy.llm_context_tokens`` (:func:`~.fit.split_to_fit`), send each with the facts schema
    as ``response_format`` (:func:`~.replies.facts_schema`) and the reply limit, validate the
    reply (:func:`parse_facts`), drop facts below ``min_confidence`` (in [0, 1]) or whose text
    (case/space-normalised) already exists in ``records`` or earlier in this run, and turn the
    rest into operations (:func:`facts_to_operations`). Makes no request when nothing is
    eligible — so a re-run with the returned checkpoint sends nothing.

    Per group (every outcome recorded in ``result.ledger``): a reply cut at the token limit,
    or a request the server says is too large, is sent again once as two halves; a 429 with a
    ``Retry-After`` of at most a minute is waited for once, within the budget; any other
    failure skips the group. No request is started once ``policy.distill_budget_seconds`` are
    spent (each request's timeout is at most the time left), after an endpoint that cannot be
    reached or rejects the key, or after :data:`MAX_CONSECUTIVE_FAILURES` failures in a row;
    the groups left are recorded as skipped with that reason. ``progress`` is called after
    every group. Raises ``ValueError`` for a bad ``min_confidence`` only.
    """
    _check(min_confidence)
    policy = policy or Policy()
    fields = fields or FieldMap()
    model = str(getattr(writer, "model", "") or "LLM")
    groups, counts = select_groups(
        records, fields=fields, checkpoint=checkpoint, max_group_size=policy.distill_group_size
    )
    counts.update(
        facts=0, dropped_unknown_evidence=0, dropped_low_confidence=0, dropped_duplicate=0
    )
    ledger = Ledger([g.session for g in groups], policy.distill_budget_seconds)
    run = _Pass(
        writer,
        policy,
        fields,
        budget=Budget(policy.distill_budget_seconds),
        ledger=ledger,
        sleep=sleep,
    )
    queue = _fitted(groups, run)
    tell = progress or (lambda done, total, label: None)
    known = {normalise_fact_text(r.document) for r in records}
    operations: list[Operation] = []
    processed: list[str] = []
    tell(0, len(queue), f"Distilling {len(ledger.sessions):,} sessions with {model}")
    while queue:
        group, split, waited = queue.popleft()
        if not ledger.stopped and run.budget.exhausted():
            ledger.stop("budget", run.budget.why())
        if ledger.stopped:
            ledger.add(group, SKIPPED, ledger.stopped, detail=ledger.stopped_detail)
            continue
        kind, got = run.ask(group, waited)
        if kind == "wait":
            sleep(float(got))
            queue.appendleft((group, split, True))
            continue
        retry_smaller = kind == "reply" and got.truncated and not split
        if kind == "split" or (retry_smaller and len(group.records) > 1):
            queue.extendleft((g, True, waited) for g in reversed(halves(group)))
            continue
        if kind == "fail":
            reason, detail, took = got
            if reason == "budget":
                ledger.stop("budget", run.budget.why())
            ledger.add(group, FAILED, reason, detail=detail, requests=1, seconds=took)
        else:
            ops = _answer(group, got, run, counts, min_confidence, known, model)
            if ops is not None:
                operations.extend(ops)
                processed.extend(group.ids)
        tell(len(ledger.rows), len(ledger.rows) + len(queue), f"Distilled {group.session}")
    return DistillResult(
        operations=operations,
        checkpoint=frozenset(checkpoint) | frozenset(processed),
        processed_ids=processed,
        model=model,
        requests=ledger.usage.requests,
        counts=counts,
        ledger=ledger,
    )


def _answer(
    group: DistillGroup,
    reply: LLMReply,
    run: _Pass,
    counts: dict[str, int],
    min_confidence: float,
    known: set[str],
    model: str,
) -> list[Operation] | None:
    """The operations of one reply, recorded in the ledger; ``None`` when the reply failed
    (cut at the token limit again, or not valid)."""
    cost = {
        "requests": 1,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "seconds": reply.seconds,
    }
    if reply.truncated:
        run.ledger.add(group, FAILED, "truncated", detail="cut at the token limit", **cost)
        return None
    try:
        facts, unknown = parse_facts(reply.content, group.ids)
    except LLMOutputError as exc:
        run.ledger.add(group, FAILED, exc.reason, detail=str(exc), **cost)
        return None
    counts["dropped_unknown_evidence"] += unknown
    kept = _keep(facts, min_confidence, known, counts)
    ops = facts_to_operations(
        kept,
        {r.id: r for r in group.records},
        model=model,
        session=group.session,
        shared_metadata=group.shared_metadata,
        fields=run.fields,
    )
    counts["facts"] += len(ops)
    run.ledger.add(group, DONE, "", facts=len(ops), **cost)
    return ops
