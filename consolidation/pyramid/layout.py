"""How a summary memory is written: its metadata keys, its id, the digest of its children.

The one place that knows the pyramid's metadata keys (the planner asks :func:`summary_level`
to keep summaries out of its merges and prunes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

SUMMARY_LAYER = "summary"
"""``FieldMap.layer`` value of every summary memory (the word the LoCoMo session summaries and
the recall check's evidence rule already use)."""

LEVEL_KEY = "summary_level"
"""Metadata key: the summary's level, an int (1 over memories, 2 over level-1 summaries, 3 over
level-2 ones)."""

CHILDREN_KEY = "summary_children"
"""Metadata key: the ids of the memories the summary covers (a non-empty list of strings)."""

DIGEST_KEY = "summary_digest"
"""Metadata key: :func:`children_digest` of the children as the summary was written; a child
whose text changed since makes the summary due for a rewrite."""

WRITER_KEY = "summary_writer"
"""Metadata key: ``"extractive"`` or the model name that wrote the text."""

CITATIONS_KEY = "summary_citations"
"""Metadata key: a JSON list, one entry per sentence of the text, of the child ids the sentence
cites (Chroma metadata holds no nested lists, so it is a JSON string)."""

MAX_LEVEL = 3
"""Highest level: a profile of the scope (the user, or the agent's domain) over its themes."""


def summary_level(metadata: Mapping[str, Any]) -> int | None:
    """The level of a summary memory written by the pyramid, or ``None`` for any other memory
    (a LoCoMo session summary, a fact, a turn). A level outside 1..:data:`MAX_LEVEL`, a bool or a
    non-integer is not a pyramid summary."""
    v = metadata.get(LEVEL_KEY)
    if isinstance(v, bool):
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v.strip())
    return v if isinstance(v, int) and 1 <= v <= MAX_LEVEL else None


def text_hash(document: str) -> str:
    """SHA-256 hex of a memory's text: what a summary depends on (metadata-only changes such as a
    promotion do not make a summary stale)."""
    return hashlib.sha256(document.encode("utf-8")).hexdigest()


def children_digest(children: Iterable[tuple[str, str]]) -> str:
    """24 hex of SHA-256 over ``(child id, child text)`` pairs, in id order: equal digests mean
    the same children with the same texts."""
    h = hashlib.sha256()
    for cid, doc in sorted(children):
        h.update(cid.encode("utf-8"))
        h.update(b"\x00")
        h.update(text_hash(doc).encode("ascii"))
        h.update(b"\x01")
    return h.hexdigest()[:24]


def summary_id(scope: tuple[str, ...], level: int, child_ids: Iterable[str]) -> str:
    """Deterministic id of a new summary: ``"s<level>-"`` + 24 hex of SHA-256 over the scope,
    the level and the sorted child ids. The same cluster proposed again gets the same id, so a
    retried apply is idempotent (I-3); once written, the summary keeps its id through every
    rewrite (its cluster is matched to it by its children, :mod:`.run`)."""
    h = hashlib.sha256()
    for part in scope:
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    h.update(f"\x02{level}\x02".encode("ascii"))
    for cid in sorted(set(child_ids)):
        h.update(cid.encode("utf-8"))
        h.update(b"\x01")
    return f"s{level}-" + h.hexdigest()[:24]
