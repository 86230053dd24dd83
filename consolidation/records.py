"""`MemoryRecord` and `FieldMap`: the one place that knows the metadata keys.

A record is one memory as a store holds it. Metadata values follow Chroma's rules
(str/int/float/bool or homogeneous lists); non-scalar values are JSON strings in the store and
decoded by the adapter. Timestamps are ISO 8601 strings (UTC assumed when naive) or epoch seconds.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

__all__ = [
    "EMBEDDING_DIM",
    "MAX_DOCUMENT_CHARS",
    "RESERVED_KEY_PREFIXES",
    "FieldMap",
    "MemoryRecord",
    "content_hash",
    "metadata_key_problem",
    "parse_timestamp",
]

EMBEDDING_DIM = 384
"""Width of all-MiniLM-L6-v2 sentence embeddings (Chroma's default model)."""

MAX_DOCUMENT_CHARS = 100_000
"""Longest memory text accepted anywhere: a JSONL import (:mod:`consolidation.jsonl`), an
operator's edit of a memory, the console's upload. One limit, so every memory that imports can
also be edited. A memory is a fact or a turn, not a book: 100,000 characters is ~25,000 tokens,
far beyond what an agent retrieves per memory (MiniLM itself reads only the first 256 tokens),
so anything longer is almost surely a mistake (a whole file pasted as one memory)."""


RESERVED_KEY_PREFIXES = ("#", "$", "chroma:")
"""Metadata key prefixes Chroma refuses (``#``, ``$``) or silently drops (``chroma:``)."""


def metadata_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a stored metadata key (empty, reserved prefix), else ``None``."""
    if not key:
        return "metadata keys must not be empty"
    if key.startswith(RESERVED_KEY_PREFIXES):
        return (
            f"metadata key {key!r} is reserved by Chroma (keys may not start with '#', '$' "
            "or 'chroma:')"
        )
    return None


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def content_hash(document: str, metadata: Mapping[str, Any] | None) -> str:
    """SHA-256 hex digest of ``document`` + canonical JSON of ``metadata``.

    Used to detect that a memory changed between planning and apply (docs/ARCHITECTURE.md, I-4).
    """
    h = hashlib.sha256()
    h.update(document.encode("utf-8"))
    h.update(b"\x00")
    h.update(_canonical_json(dict(metadata or {})).encode("utf-8"))
    return h.hexdigest()


def _shown(value: Any) -> str:
    """``value`` as JSON for a message, at most 40 characters."""

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def parse_timestamp(value: Any) -> datetime | None:
    """Parse an ISO 8601 string or epoch seconds (int/float) into an aware UTC datetime.

    Returns ``None`` for ``None``, empty strings, bools and unparseable values (never raises),
    because attached collections carry whatever their writers put there.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if not math.isfinite(float(value)):
            return None
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            return None
        return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    return None


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One memory: ``id``, ``document`` text, ``embedding`` and ``metadata``.

    ``embedding`` is a ``(384,) float32`` L2-normalised vector (all-MiniLM-L6-v2) or ``None`` when
    not yet computed. ``metadata`` is a plain dict (decoded; lists and dicts allowed), the
    record's own copy: treat it as read-only (:attr:`content_hash` is computed once).
    """

    id: str
    document: str
    embedding: np.ndarray | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    _hash: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"memory id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.document, str):
            raise ValueError(f"memory {self.id!r}: document must be a string")
        if self.embedding is not None:
            emb = np.asarray(self.embedding, dtype=np.float32).reshape(-1)
            if emb.shape != (EMBEDDING_DIM,):
                raise ValueError(
                    f"memory {self.id!r}: embedding must have shape ({EMBEDDING_DIM},), "
                    f"got {emb.shape}"
                )
            object.__setattr__(self, "embedding", emb)
        object.__setattr__(self, "metadata", dict(self.metadata or {}))

    @property
    def content_hash(self) -> str:
        """SHA-256 of document + metadata (see :func:`content_hash`); embeddings excluded.

        Computed on first use and kept (a record is immutable): the checkpoint, the planner
        and the snapshot all ask for it, and at 1M records one pass over them costs seconds.
        """
        try:
            h = self._hash
        except AttributeError:  # a record unpickled from before the cache
            h = None
        if h is None:
            h = content_hash(self.document, self.metadata)
            object.__setattr__(self, "_hash", h)
        return h

    def with_embedding(self, embedding: np.ndarray) -> MemoryRecord:
        """Copy with ``embedding`` set (``(384,) float32``)."""
        return MemoryRecord(self.id, self.document, embedding, self.metadata)


_KEY_LISTS = ("scope", "text_copies")  # FieldMap fields holding several keys


@dataclass(frozen=True)
class FieldMap:
    """Which metadata keys hold the fields the engine reads and writes.

    Attached collections name their keys differently; the console stores one ``FieldMap`` per
    agent. Defaults are the keys memoryadmin itself writes.

    - ``document``: metadata key that holds the memory text when the collection stores no
      document (mem0 writes its text to metadata ``data``); ``""`` means Chroma's document.
    - ``updated_at``: last-rewrite time; it wins over ``created_at`` when deciding which of two
      memories is newer (:meth:`get_recency`).
    - ``scope``: metadata keys that partition a collection (mem0 writes ``user_id``,
      ``agent_id``, ``run_id``; ``actor_id`` for multi-party chats). Memories whose scope values
      differ are never compared (:meth:`scope_key`).
    - ``text_hash``: metadata key holding the MD5 hex digest of the text, refreshed whenever the
      store writes a text (mem0 deduplicates new memories by its ``hash``); ``""`` = none.
    - ``text_copies``: metadata keys holding a derived copy of the text, set to the new text when
      the store writes one (mem0's ``text_lemmatized``, whose value is the text itself when
      mem0 runs without spaCy: ``mem0/utils/lemmatization.py``).
    """

    created_at: str = "created_at"
    importance: str = "importance"
    tier: str = "tier"
    pinned: str = "pinned"
    access_count: str = "access_count"
    last_accessed_at: str = "last_accessed_at"
    session: str = "session"
    evidence: str = "evidence"
    merged_from: str = "merged_from"
    layer: str = "layer"
    speaker: str = "speaker"
    supersedes: str = "supersedes"
    updated_at: str = "updated_at"
    document: str = ""
    scope: tuple[str, ...] = ("user_id", "agent_id", "run_id", "actor_id")
    text_hash: str = ""
    text_copies: tuple[str, ...] = ()

    def format_problems(self, meta: Mapping[str, Any]) -> list[str]:
        """What in ``meta`` breaks the formats docs/API.md's metadata table gives for the keys
        this map names — one sentence per bad key, naming it: ``created_at`` / ``updated_at`` /
        ``last_accessed_at`` ISO 8601 or epoch seconds (what :func:`parse_timestamp` reads),
        ``importance`` a number in [0, 1], ``pinned`` ``true``/``false``, ``access_count`` a
        whole number ≥ 0. Absent or ``null`` keys are fine; ``[]`` when all hold. The importer
        refuses such lines (an attached collection's readers stay lenient)."""
        problems = []
        for key in dict.fromkeys((self.created_at, self.updated_at, self.last_accessed_at)):
            v = meta.get(key) if key else None
            if v is not None and (isinstance(v, bool) or parse_timestamp(v) is None):
                problems.append(
                    f"metadata {key!r} is {_shown(v)}: expected an ISO 8601 time "
                    "(2026-03-01T09:30:00+00:00) or epoch seconds"
                )
        v = meta.get(self.importance) if self.importance else None
        if v is not None and (
            isinstance(v, bool)
            or not isinstance(v, int | float)
            or not math.isfinite(v)
            or not 0 <= v <= 1
        ):
            problems.append(
                f"metadata {self.importance!r} is {_shown(v)}: expected a number in [0, 1]"
            )
        v = meta.get(self.pinned) if self.pinned else None
        if v is not None and not isinstance(v, bool):
            problems.append(f"metadata {self.pinned!r} is {_shown(v)}: expected true or false")
        v = meta.get(self.access_count) if self.access_count else None
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            problems.append(
                f"metadata {self.access_count!r} is {_shown(v)}: expected a whole number ≥ 0"
            )
        return problems

    def get_created_at(self, meta: Mapping[str, Any]) -> datetime | None:
        """Creation time (aware UTC) or ``None`` when absent/unparseable."""
        return parse_timestamp(meta.get(self.created_at))

    def get_updated_at(self, meta: Mapping[str, Any]) -> datetime | None:
        """Last-rewrite time (aware UTC) or ``None`` when absent/unparseable."""
        return parse_timestamp(meta.get(self.updated_at))

    def get_recency(self, meta: Mapping[str, Any]) -> datetime | None:
        """When the memory last said what it says: ``updated_at`` if set, else ``created_at``.

        ``None`` when neither is known; a pair with an unknown recency cannot be ordered, so the
        planner treats it as unsure.
        """
        return self.get_updated_at(meta) or self.get_created_at(meta)

    def scope_key(self, meta: Mapping[str, Any]) -> tuple[str, ...]:
        """The memory's scope as a tuple of ``key=value`` strings (absent keys are left out).

        Two memories may be compared only when their scope keys are equal: a memory of
        ``user_id=alice`` never merges with one of ``user_id=bob``, nor with one that has no
        ``user_id`` at all.
        """
        return tuple(f"{k}={meta[k]}" for k in self.scope if meta.get(k) not in (None, ""))

    def get_last_accessed_at(self, meta: Mapping[str, Any]) -> datetime | None:
        """Last access time (aware UTC) or ``None``."""
        return parse_timestamp(meta.get(self.last_accessed_at))

    def get_importance(self, meta: Mapping[str, Any], default: float = 0.5) -> float:
        """Importance in [0, 1]; ``default`` (0.5, neutral) when absent or not a finite number."""
        v = meta.get(self.importance)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            try:
                v = float(v) if isinstance(v, str) else None
            except ValueError:
                v = None
            if v is None or not math.isfinite(v):
                return default
        return max(0.0, min(1.0, float(v)))

    def get_tier(self, meta: Mapping[str, Any]) -> str:
        """Tier name (``"working"`` when absent)."""
        v = meta.get(self.tier)
        return str(v) if v not in (None, "") else "working"

    def is_pinned(self, meta: Mapping[str, Any]) -> bool:
        """True for ``True``, 1, or the strings "true"/"1"/"yes"."""
        v = meta.get(self.pinned)
        if isinstance(v, str):
            return v.strip().lower() in {"true", "1", "yes"}
        return bool(v) if isinstance(v, bool | int) else False

    def get_access_count(self, meta: Mapping[str, Any]) -> int:
        """Non-negative access count (0 when absent)."""
        v = meta.get(self.access_count)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return 0
        return max(0, int(v))

    def get_list(self, meta: Mapping[str, Any], key: str) -> list[str]:
        """A list-valued field as strings; accepts a list, a JSON list string or a scalar."""
        v = meta.get(key)
        if v is None or v == "":
            return []
        if isinstance(v, str):
            s = v.strip()
            if s.startswith("["):
                try:
                    parsed = json.loads(s)
                except ValueError:
                    return [v]
                return [str(x) for x in parsed] if isinstance(parsed, list) else [v]
            return [v]
        if isinstance(v, list | tuple):
            return [str(x) for x in v]
        return [str(v)]

    def get_sessions(self, meta: Mapping[str, Any]) -> list[str]:
        """Sessions the memory was seen in (``session`` may be a scalar or list)."""
        return self.get_list(meta, self.session)

    def to_dict(self) -> dict[str, Any]:
        """The mapping as a plain JSON-able dict (for storing per agent); tuples are lists."""
        return {
            k: list(getattr(self, k)) if k in _KEY_LISTS else getattr(self, k)
            for k in self.__dataclass_fields__
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> FieldMap:
        """Build from a dict; unknown keys raise ``ValueError``; empty values keep defaults.

        ``scope`` may be a list of keys or a comma-separated string; an explicit empty list
        means "no scope keys" (the whole collection is one scope).
        """
        data = dict(data or {})
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown field-map keys: {sorted(unknown)}")
        kwargs: dict[str, Any] = {}
        for k, v in data.items():
            if k in _KEY_LISTS:
                if v is None:
                    continue
                keys = v.split(",") if isinstance(v, str) else list(v)
                kwargs[k] = tuple(str(x).strip() for x in keys if str(x).strip())
            elif v:
                kwargs[k] = str(v)
        return cls(**kwargs)
