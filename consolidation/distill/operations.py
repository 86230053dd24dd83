"""Distilled facts → DISTILL operations (additions only) with deterministic ids."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..plans import Operation, OpKind
from ..records import FieldMap, MemoryRecord
from .groups import DERIVED_FROM_KEY, SEMANTIC_LAYER
from .replies import Fact

DISTILL_RULE = "llm_distill"
"""``Operation.rule`` of every distilled fact."""


def distill_id(evidence: Iterable[str], text: str) -> str:
    """Deterministic id of a distilled memory: ``"d-"`` + 24 hex of SHA-256 over the sorted
    evidence ids and the fact text. The same fact from the same sources gets the same id, so a
    retried apply is idempotent (I-3)."""
    h = hashlib.sha256()
    for sid in sorted(set(evidence)):
        h.update(sid.encode("utf-8"))
        h.update(b"\x00")
    h.update(b"\x01")
    h.update(text.encode("utf-8"))
    return "d-" + h.hexdigest()[:24]


def normalise_fact_text(text: str) -> str:
    """``text`` casefolded with runs of whitespace collapsed: the key for duplicate facts."""
    return " ".join(text.casefold().split())


def facts_to_operations(
    facts: Iterable[Fact],
    records: Mapping[str, MemoryRecord],
    *,
    model: str,
    session: str | None = None,
    shared_metadata: Mapping[str, Any] | None = None,
    fields: FieldMap | None = None,
) -> list[Operation]:
    """One DISTILL :class:`Operation` per fact (additions only: ``removes == []``).

    ``records`` maps every evidence id to its record (``KeyError`` otherwise — validate with
    :func:`parse_facts` first). Sources are listed in ``records`` order (chronological for a
    group). The new memory has ``result_id = distill_id(evidence, text)``, ``result_document =
    text`` and metadata (keys via ``fields``):

    - ``layer = "semantic"``; ``derived_from`` = source ids; ``evidence`` = union of the sources'
      own ``evidence`` values (a source without one contributes its id), order kept;
    - ``confidence`` and ``importance`` = the model's confidence in [0, 1];
    - ``created_at`` = the latest source's raw value (same format as the collection), omitted if
      no source has one; ``distill_model`` = ``model``;
    - plus ``shared_metadata`` (the group's session/conversation values, see
      :class:`DistillGroup`). ``session`` is only the label used in the reason.

    Values are Chroma-valid (no ``None``; lists non-empty, of strings). Facts with the same id
    are emitted once.
    """
    fields = fields or FieldMap()
    order = {rid: i for i, rid in enumerate(records)}
    ops: list[Operation] = []
    seen: set[str] = set()
    for fact in facts:
        rid = distill_id(fact.evidence, fact.text)
        if rid in seen:
            continue
        seen.add(rid)
        srcs = sorted((records[e] for e in fact.evidence), key=lambda r: order[r.id])
        source_ids = [r.id for r in srcs]
        evidence: list[str] = []
        for r in srcs:
            evidence.extend(fields.get_list(r.metadata, fields.evidence) or [r.id])
        evidence = list(dict.fromkeys(evidence))
        meta: dict[str, Any] = {
            fields.layer: SEMANTIC_LAYER,
            fields.evidence: evidence,
            DERIVED_FROM_KEY: source_ids,
            "confidence": fact.confidence,
            fields.importance: fact.confidence,
            "distill_model": model,
        }
        latest: tuple[datetime, Any] | None = None
        for r in srcs:
            dt = fields.get_created_at(r.metadata)
            if dt is not None and (latest is None or dt > latest[0]):
                latest = (dt, r.metadata[fields.created_at])
        if latest is not None:
            meta[fields.created_at] = latest[1]
        for k, v in (shared_metadata or {}).items():
            if v is not None and v != "":
                meta.setdefault(k, v)
        n = len(srcs)
        where = f" of session {session!r}" if session else ""
        ops.append(
            Operation(
                kind=OpKind.DISTILL,
                source_ids=source_ids,
                source_hashes=[r.content_hash for r in srcs],
                removes=[],
                reason=(
                    f"{model} distilled this fact from {n} episodic "
                    f"memor{'y' if n == 1 else 'ies'}{where} "
                    f"with confidence {fact.confidence:.2f}"
                ),
                rule=DISTILL_RULE,
                scores={"confidence": fact.confidence, "sources": n},
                result_id=rid,
                result_document=fact.text,
                result_metadata=meta,
            )
        )
    return ops
