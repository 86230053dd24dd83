"""The distillation pass: select groups, ask the writer, validate, propose."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..plans import Operation
from ..protocols import JSONWriter, LLMOutputError
from ..records import FieldMap, MemoryRecord
from .groups import DEFAULT_MAX_GROUP_SIZE, select_groups
from .operations import facts_to_operations, normalise_fact_text
from .prompt import build_messages
from .replies import Fact, parse_facts


@dataclass
class DistillResult:
    """What :func:`distill` produced.

    - ``operations``: DISTILL operations (additions only), in group then reply order.
    - ``checkpoint``: the input checkpoint plus ``processed_ids`` — persist it with the proposal
      so the next run skips these memories.
    - ``processed_ids``: ids sent in a request that succeeded (including those the model found
      nothing in); ids of failed groups and of sessions with a single new memory are not included,
      so they are retried on the next run.
    - ``model``: the writer's model name; ``requests``: LLM calls made.
    - ``counts``: ``eligible`` (episodic, grouped), ``skipped_checkpointed``,
      ``skipped_no_session``, ``skipped_single`` (a session with one new memory), ``facts``,
      ``dropped_unknown_evidence``, ``dropped_low_confidence``, ``dropped_duplicate`` (text
      already in the store or repeated).
    - ``errors``: one readable line per group whose reply failed validation (only with
      ``on_error="skip"``).
    """

    operations: list[Operation]
    checkpoint: frozenset[str]
    processed_ids: list[str]
    model: str
    requests: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def to_context(self) -> dict[str, Any]:
        """JSON-ready telemetry for ``Plan.context["distill"]``."""
        return {
            "model": self.model,
            "requests": self.requests,
            "processed": len(self.processed_ids),
            "counts": dict(self.counts),
            "errors": list(self.errors),
        }


def distill(
    records: Sequence[MemoryRecord],
    writer: JSONWriter,
    *,
    fields: FieldMap | None = None,
    checkpoint: Collection[str] = (),
    min_confidence: float = 0.0,
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
    on_error: Literal["raise", "skip"] = "raise",
) -> DistillResult:
    """Distil the snapshot ``records`` into DISTILL operations with ``writer``.

    Steps (``seeds/003`` "How it works"): select episodic memories not in ``checkpoint``, group
    by session (:func:`select_groups`), send each group of ≥ 2 (:func:`build_messages`),
    validate the reply (:func:`parse_facts`), drop facts below ``min_confidence`` (in [0, 1]) or
    whose text (case/space-normalised) already exists in ``records`` or earlier in this run, and
    turn the rest into operations (:func:`facts_to_operations`). Makes no request when nothing
    is eligible — so a re-run with the returned checkpoint sends nothing.

    Errors: :class:`LLMUnavailable` from the writer always propagates (the endpoint is down;
    nothing is proposed). A reply that fails validation raises :class:`LLMOutputError` (prefixed
    with the session) when ``on_error="raise"``; with ``"skip"`` the group is recorded in
    ``errors``, yields no operations and stays out of the checkpoint. ``ValueError`` for a bad
    ``min_confidence``/``max_group_size``/``on_error``.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f'on_error must be "raise" or "skip", got {on_error!r}')
    if (
        isinstance(min_confidence, bool)
        or not isinstance(min_confidence, int | float)
        or not 0.0 <= min_confidence <= 1.0
    ):
        raise ValueError(f"min_confidence must be a number in [0, 1], got {min_confidence!r}")
    fields = fields or FieldMap()
    model = str(getattr(writer, "model", "") or "LLM")
    groups, counts = select_groups(
        records, fields=fields, checkpoint=checkpoint, max_group_size=max_group_size
    )
    counts.update(
        facts=0, dropped_unknown_evidence=0, dropped_low_confidence=0, dropped_duplicate=0
    )
    known_texts = {normalise_fact_text(r.document) for r in records}
    operations: list[Operation] = []
    processed: list[str] = []
    errors: list[str] = []
    requests = 0
    for group in groups:
        messages = build_messages(group, fields)
        requests += 1
        try:
            content = writer.complete_json(messages[0]["content"], messages[1]["content"])
            facts, unknown = parse_facts(content, group.ids)
        except LLMOutputError as exc:
            msg = f"session {group.session!r}: {exc}"
            if on_error == "raise":
                raise LLMOutputError(msg, excerpt=exc.excerpt) from exc
            errors.append(msg)
            continue
        counts["dropped_unknown_evidence"] += unknown
        kept: list[Fact] = []
        for fact in facts:
            if fact.confidence < min_confidence:
                counts["dropped_low_confidence"] += 1
                continue
            norm = normalise_fact_text(fact.text)
            if norm in known_texts:
                counts["dropped_duplicate"] += 1
                continue
            known_texts.add(norm)
            kept.append(fact)
        by_id = {r.id: r for r in group.records}
        ops = facts_to_operations(
            kept,
            by_id,
            model=model,
            session=group.session,
            shared_metadata=group.shared_metadata,
            fields=fields,
        )
        counts["facts"] += len(ops)
        operations.extend(ops)
        processed.extend(group.ids)
    return DistillResult(
        operations=operations,
        checkpoint=frozenset(checkpoint) | frozenset(processed),
        processed_ids=processed,
        model=model,
        requests=requests,
        counts=counts,
        errors=errors,
    )
