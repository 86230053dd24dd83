"""Memories as the API and the MCP tools show them (view → schema, reads only)."""

from __future__ import annotations

from memoryadmin.api import schemas as s
from memoryadmin.memories.selectors.memories import MemoryView


def memory_out(m: MemoryView) -> s.MemoryOut:
    """A browser :class:`MemoryView` as the API's memory."""
    return s.MemoryOut(
        id=m.id,
        document=m.document,
        metadata=m.metadata,
        tier=m.tier,
        pinned=m.pinned,
        score=m.score,
    )
