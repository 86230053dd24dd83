"""Input checks the console shares: forms, services, selectors and the JSON API validate a note,
a memory text, a policy, a field map, a cron expression or a probe's evidence ids here, so each
limit and each message is written once.

Each check returns the clean value or raises ``ValueError`` with a sentence for the operator,
before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from consolidation import MAX_DOCUMENT_CHARS, FieldMap, Policy
from consolidation.jsonl import MAX_ID_CHARS

__all__ = [
    "DB_INT_MAX",
    "MAX_DOCUMENT_CHARS",
    "MAX_EVIDENCE_IDS",
    "MAX_NOTE_CHARS",
    "AUTO_APPLY_MODES",
    "parse_evidence_ids",
    "validate_auto_apply",
    "validate_cron",
    "validate_document",
    "validate_field_map",
    "validate_policy",
]

DB_INT_MAX = 2**63 - 1
"""Largest integer SQLite and PostgreSQL (bigint) store: every integer a request names (an id, a
page, an index) is bounded by it in the API and MCP schemas, so a larger one is a 422, not an
``OverflowError`` in the driver (``memoryadmin.middleware`` answers any that slips past: 400)."""

MAX_NOTE_CHARS = 5_000
"""Longest note a reviewer may give to an approve, reject or rollback (the web form, the API and
the MCP tools alike)."""


def validate_document(document: Any, *, limit: int = MAX_DOCUMENT_CHARS) -> str:
    if not isinstance(document, str):
        raise ValueError("The memory text must be a string.")
    text = document.strip()
    if not text:
        raise ValueError("The memory text cannot be empty.")
    if len(text) > limit:
        raise ValueError(f"The memory text is {len(text):,} characters; the limit is {limit:,}.")
    return text


def validate_policy(policy: Policy | Mapping[str, Any] | None) -> dict[str, Any]:
    if isinstance(policy, Policy):
        return policy.to_dict()
    try:
        return Policy.from_dict(dict(policy or {})).to_dict()
    except TypeError as exc:
        raise ValueError(f"Invalid policy: {exc}") from exc


def validate_field_map(field_map: FieldMap | Mapping[str, Any] | None) -> dict[str, Any]:
    """The agent's field map as stored: only keys that differ from :class:`FieldMap`'s defaults.

    Raises ``ValueError`` for unknown keys.
    """
    if isinstance(field_map, FieldMap):
        return field_map.to_dict()
    fm = FieldMap.from_dict(dict(field_map or {}))
    defaults = FieldMap().to_dict()
    return {k: v for k, v in fm.to_dict().items() if v != defaults[k]}


AUTO_APPLY_MODES = ("off", "safe", "all")
"""``Agent.auto_apply``: off (every proposal waits), safe (the safe part applies, the rest
waits), all (everything applies except operations rejected before)."""


def validate_auto_apply(value: Any) -> str:
    """An auto-apply mode of :data:`AUTO_APPLY_MODES` (case-insensitive). A boolean reads as
    the migration of the old switch reads it: ``True`` → ``"safe"``, ``False``/``None`` →
    ``"off"``. Raises ``ValueError`` for anything else."""
    if value is None or value is False:
        return "off"
    if value is True:
        return "safe"
    mode = str(value).strip().lower()
    if mode not in AUTO_APPLY_MODES:
        raise ValueError(f"Auto-apply is one of off, safe or all (got {value!r}).")
    return mode


def validate_cron(cron: Any) -> str:
    """Return a 5-field cron expression stripped, or raise ``ValueError`` (validated with
    croniter)."""
    from croniter import croniter

    if not isinstance(cron, str) or len(cron.split()) != 5:
        raise ValueError(
            f"A schedule is a 5-field cron expression like '0 3 * * *' (got {cron!r})."
        )
    cron = " ".join(cron.split())
    if not croniter.is_valid(cron):
        raise ValueError(f"Invalid cron expression: {cron!r}.")
    return cron


MAX_EVIDENCE_IDS = 100
"""Most evidence ids on one probe (LoCoMo's most is under 10)."""


_SPLIT = re.compile(r"[\s,]+")


def parse_evidence_ids(text: str | Iterable[str] | None) -> list[str]:
    """Evidence ids from a comma/space-separated string (or an iterable of ids).

    Returns the ids in order, duplicates dropped. Raises ``ValueError`` for more than
    :data:`MAX_EVIDENCE_IDS` ids or an id longer than :data:`MAX_ID_CHARS` characters (the
    memory id limit of the JSONL format).
    """
    if text is None:
        return []
    parts = _SPLIT.split(text) if isinstance(text, str) else [str(p).strip() for p in text]
    ids = list(dict.fromkeys(p for p in parts if p))
    if len(ids) > MAX_EVIDENCE_IDS:
        raise ValueError(f"At most {MAX_EVIDENCE_IDS} evidence ids per probe ({len(ids)} given).")
    long = next((i for i in ids if len(i) > MAX_ID_CHARS), None)
    if long is not None:
        raise ValueError(f"Evidence id “{long[:40]}…” is longer than {MAX_ID_CHARS} characters.")
    return ids
