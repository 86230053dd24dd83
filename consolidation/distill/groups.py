"""Distillation input: which memories are episodic and how they are grouped by session."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..records import FieldMap, MemoryRecord

EPISODIC_LAYER = "episodic"
SEMANTIC_LAYER = "semantic"
"""Values of ``FieldMap.layer`` read (episodic) and written (semantic); names from ``seeds/003``."""

DERIVED_FROM_KEY = "derived_from"
"""Metadata key listing the memory ids a distilled fact was derived from."""

CONVERSATION_KEY = "conversation"
"""Metadata key naming the conversation a memory belongs to (``consolidation.locomo`` writes the
sample id there). Session numbers restart per conversation, so groups are keyed by
(conversation, session). A ``FieldMap.conversation`` attribute, if one is added, takes
precedence."""

DEFAULT_MAX_GROUP_SIZE = 40
"""Memories per LLM request; a longer session is split into balanced consecutive chunks."""


@dataclass
class DistillGroup:
    """Memories of one session sent in one request (chronological order, ≥ 2 records).

    ``session`` is a display label (``"conv-26 session 3"`` or just ``"3"``); ``shared_metadata``
    holds the raw grouping values to stamp on each distilled memory (e.g. ``{"session": 3,
    "conversation": "conv-26"}``, keys per ``FieldMap``).
    """

    session: str
    records: list[MemoryRecord]
    shared_metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        """The record ids, in order."""
        return [r.id for r in self.records]


def is_episodic(record: MemoryRecord, fields: FieldMap | None = None) -> bool:
    """True when ``record`` is raw episodic log material.

    ``FieldMap.layer`` equal to ``"episodic"`` (case-insensitive) → True; any other layer value
    (``"semantic"``, ``"procedural"`` …) → False; no layer value at all → True (collections that
    do not label layers are treated as all-episodic, except memories we derived ourselves, which
    carry ``derived_from``).
    """
    fields = fields or FieldMap()
    layer = record.metadata.get(fields.layer)
    if layer is None or (isinstance(layer, str) and not layer.strip()):
        return not record.metadata.get(DERIVED_FROM_KEY)
    return str(layer).strip().lower() == EPISODIC_LAYER


def _sort_key(record: MemoryRecord, fields: FieldMap) -> tuple[int, float, str]:
    dt = fields.get_created_at(record.metadata)
    return (0, dt.timestamp(), record.id) if dt else (1, 0.0, record.id)


def _chunks(records: list[MemoryRecord], size: int) -> list[list[MemoryRecord]]:
    """Balanced consecutive chunks of at most ``size``; no chunk of 1 when ``size >= 3``, n ≥ 2."""
    n = len(records)
    k = -(-n // size)
    base, extra = divmod(n, k)
    out, start = [], 0
    for i in range(k):
        end = start + base + (1 if i < extra else 0)
        out.append(records[start:end])
        start = end
    return out


def select_groups(
    records: Iterable[MemoryRecord],
    *,
    fields: FieldMap | None = None,
    checkpoint: Collection[str] = (),
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
) -> tuple[list[DistillGroup], dict[str, int]]:
    """Episodic, not-yet-distilled memories grouped by session, ready to send.

    A memory's group is its conversation (:data:`CONVERSATION_KEY`, when present) and the first
    value of ``FieldMap.session`` (``seeds/003`` groups by conversation id); memories without a
    session cannot be grouped and are skipped. Sessions with fewer than two new memories are
    skipped (left for a later run). Records are ordered by ``created_at`` then id; sessions by
    their first memory; a session longer than ``max_group_size`` is split into balanced
    consecutive chunks.

    Returns ``(groups, counts)`` with counts ``eligible``, ``skipped_checkpointed``,
    ``skipped_no_session``, ``skipped_single``. Raises ``ValueError`` when
    ``max_group_size < 3`` (with 3 or more, balanced chunks of a session of ≥ 2 memories never
    leave a chunk of one).
    """
    if (
        isinstance(max_group_size, bool)
        or not isinstance(max_group_size, int)
        or max_group_size < 3
    ):
        raise ValueError(f"max_group_size must be an integer >= 3, got {max_group_size!r}")
    fields = fields or FieldMap()
    done = set(checkpoint)
    counts = {
        "eligible": 0,
        "skipped_checkpointed": 0,
        "skipped_no_session": 0,
        "skipped_single": 0,
    }
    conv_key = str(getattr(fields, "conversation", CONVERSATION_KEY))
    sessions: dict[tuple[str, str], list[MemoryRecord]] = {}
    shared: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in records:
        if not is_episodic(rec, fields):
            continue
        if rec.id in done:
            counts["skipped_checkpointed"] += 1
            continue
        names = fields.get_sessions(rec.metadata)
        if not names or not names[0].strip():
            counts["skipped_no_session"] += 1
            continue
        conv = rec.metadata.get(conv_key)
        conv = str(conv) if isinstance(conv, str | int) and str(conv).strip() else ""
        key = (conv, names[0])
        sessions.setdefault(key, []).append(rec)
        if key not in shared:
            raw = rec.metadata.get(fields.session)
            meta = {fields.session: raw if isinstance(raw, str | int) else names[0]}
            if conv:
                meta[conv_key] = rec.metadata[conv_key]
            shared[key] = meta
    ordered: list[tuple[tuple[int, float, str], tuple[str, str], list[MemoryRecord]]] = []
    for key, recs in sessions.items():
        if len(recs) < 2:
            counts["skipped_single"] += len(recs)
            continue
        recs.sort(key=lambda r: _sort_key(r, fields))
        ordered.append((_sort_key(recs[0], fields), key, recs))
    ordered.sort(key=lambda t: (t[0], t[1]))
    groups: list[DistillGroup] = []
    for _, key, recs in ordered:
        counts["eligible"] += len(recs)
        label = f"{key[0]} session {key[1]}" if key[0] else key[1]
        groups.extend(
            DistillGroup(label, chunk, dict(shared[key])) for chunk in _chunks(recs, max_group_size)
        )
    return groups, counts
