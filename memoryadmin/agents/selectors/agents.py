"""Reads of an agent: its store's memory count (or why it cannot be read), the census of its
store and archive, and the shape of a collection to attach.

Store failures are reported as values (:class:`StoreStatus`), never raised into a page, so a
Chroma outage shows "unavailable" instead of a 500.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from consolidation.adapters.chroma_metadata import decode_metadata
from consolidation.shapes import ShapeReport
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.memories.models import ArchivedMemory

__all__ = [
    "PyramidLevel",
    "StoreStatus",
    "SummaryView",
    "agent_census",
    "agent_pyramid",
    "collection_shape",
    "store_status",
]

logger = logging.getLogger(__name__)


@dataclass
class StoreStatus:
    """Memory count of a store, or why it could not be read (``count is None``; ``last_known``:
    the count last sampled, when there is one)."""

    count: int | None
    error: str = ""
    last_known: int | None = None


def store_status(agent: Agent) -> StoreStatus:
    """Count the agent's memories; a store error becomes ``StoreStatus(None, reason)``."""
    try:
        return StoreStatus(int(stores.get_store(agent).count()))
    except Exception as exc:  # a dashboard must render whatever Chroma does
        logger.warning("store of agent %s unavailable: %s", agent.slug, exc)
        return StoreStatus(None, str(exc) or exc.__class__.__name__)


@dataclass(frozen=True)
class SummaryView:
    """One summary memory of the pyramid: its ``id``, ``text``, ``level`` (1–3) and the ids of
    the memories it covers (``children``)."""

    id: str
    text: str
    level: int
    children: tuple[str, ...]


@dataclass(frozen=True)
class PyramidLevel:
    """The summaries of one ``level`` (1 over memories, 2 over level-1 summaries, 3 over
    level-2 ones), largest cluster first, and how many memories they cover together."""

    level: int
    summaries: tuple[SummaryView, ...]

    @property
    def covered(self) -> int:
        """Distinct children of this level's summaries."""
        return len({c for s in self.summaries for c in s.children})


PYRAMID_PAGE_LIMIT = 500
"""Summaries the agent page reads at most (one filtered Chroma ``get``; a level-1 summary covers
3–12 memories by default, so 500 summaries cover a store of several thousand memories)."""


def agent_pyramid(
    agent: Agent, *, limit: int = PYRAMID_PAGE_LIMIT
) -> tuple[list[PyramidLevel], str]:
    """The agent's memory pyramid as its store holds it: ``(levels, error)``, levels lowest
    first, each of at most ``limit`` summaries in all (the pyramid's ``summary`` layer read by
    one Chroma ``get`` filtered on the layer key of the agent's field map). A store error gives
    ``([], reason)``, never raises; a store without summaries gives ``([], "")``."""
    from consolidation.pyramid import CHILDREN_KEY, SUMMARY_LAYER, summary_level

    fm = agent.get_field_map()
    try:
        store = stores.get_store(agent)
        got = store.collection.get(
            where={fm.layer: SUMMARY_LAYER}, include=["documents", "metadatas"], limit=limit
        )
    except Exception as exc:  # a page must render whatever Chroma does
        logger.warning("pyramid of agent %s unavailable: %s", agent.slug, exc)
        return [], str(exc) or exc.__class__.__name__
    by_level: dict[int, list[SummaryView]] = {}
    for rid, doc, meta in zip(
        got["ids"] or [], got["documents"] or [], got["metadatas"] or [], strict=True
    ):
        decoded = decode_metadata(meta)
        level = summary_level(decoded)
        if level is None:
            continue
        text = store.layout.text_of(doc, decoded)
        children = tuple(str(c) for c in fm.get_list(decoded, CHILDREN_KEY))
        view = SummaryView(str(rid), text, level, children)
        by_level.setdefault(level, []).append(view)
    return [
        PyramidLevel(lv, tuple(sorted(views, key=lambda v: (-len(v.children), v.id))))
        for lv, views in sorted(by_level.items())
    ], ""


def agent_census(*, agent: Agent) -> dict[str, Any]:
    """The store's and the archive's count + SHA-256 (used by tests and ``manage.py census``).

    ``{"agent": slug, "store": {"count", "sha256"}, "archive": {"count", "sha256"}}``; the archive
    hash covers memory id, document, metadata, embedding and action of every archived row.
    """
    store = stores.get_store(agent)
    h = hashlib.sha256()
    rows = ArchivedMemory.objects.filter(agent=agent).order_by("memory_id", "archived_at", "id")
    count = 0
    for a in rows.iterator():
        count += 1
        meta = json.dumps(a.metadata, sort_keys=True, ensure_ascii=False, default=str)
        for part in (
            a.memory_id.encode(),
            a.document.encode(),
            meta.encode(),
            bytes(a.embedding or b""),
            a.action.encode(),
        ):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
    return {
        "agent": agent.slug,
        "store": stores.store_census(store),
        "archive": {"count": count, "sha256": h.hexdigest()},
    }


def collection_shape(*, collection_name: str, preset: str = "auto") -> ShapeReport:
    """How the existing collection was written and the field map to attach it with.

    Samples its first records (:func:`stores.collection_sample`) and runs
    :func:`consolidation.shapes.detect_shape` with our embedder, so the report says whether our
    all-MiniLM-L6-v2 produces the stored vectors. Raises ``ValueError`` for a missing
    collection, an unknown preset or one the records contradict; :class:`StoreUnavailable` when
    Chroma is down.
    """
    from consolidation.shapes import detect_shape

    sample = stores.collection_sample(collection_name)

    def embed(texts: list[str]) -> np.ndarray:
        from consolidation.adapters.embedder import get_default_embedder

        return np.asarray(get_default_embedder().embed(texts), dtype=np.float32)

    return detect_shape(sample, preset=preset, embed=embed)
