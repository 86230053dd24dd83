"""The one snapshot path (``consolidation.snapshot``): read with the store's own pages, embed only
what is missing, plan with the checkpoint, leave out what the store cannot write."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from consolidation import MemoryRecord, Policy
from consolidation.snapshot import embed_missing, plan_snapshot, read_all

from ._vectors import basis
from .test_consolidator import CountingEmbedder, DictStore

NOW = datetime(2025, 1, 1, tzinfo=UTC)
META = {"created_at": "2024-12-30T00:00:00+00:00", "importance": 0.5}


def records() -> list[MemoryRecord]:
    """Two exact duplicates (a, b), two unrelated memories (c, d) — one stored without an
    embedding."""
    return [
        MemoryRecord("a", "Alice likes jazz", basis(0), dict(META)),
        MemoryRecord("b", "Alice likes jazz", basis(0), dict(META)),
        MemoryRecord("c", "Bob plays chess", basis(1), dict(META)),
        MemoryRecord("d", "Carol has a cat", None, dict(META)),
        *(MemoryRecord(f"x{i}", f"Fact number {i}", basis(10 + i), dict(META)) for i in range(6)),
    ]


class PagedStore(DictStore):
    """Records the page sizes it was asked for (``None``: its own)."""

    def __init__(self, recs):
        super().__init__(recs)
        self.asked: list[int | None] = []

    def iter_pages(self, *, page_size: int | None = None, include_embeddings: bool = True):
        self.asked.append(page_size)
        yield from super().iter_pages(page_size=page_size or 3)


def test_it_reads_every_page_at_the_stores_own_size_and_reports_progress():
    store, seen = PagedStore(records()), []
    got = read_all(store, progress=lambda f, label: seen.append(f))
    assert [r.id for r in got] == sorted(r.id for r in records())
    assert store.asked == [None] and seen == [0.3, 0.6, 0.9, 1.0]


def test_it_embeds_only_the_memory_stored_without_an_embedding():
    embedder = CountingEmbedder()
    out = embed_missing(records(), embedder)
    assert embedder.calls == [["Carol has a cat"]] and all(r.embedding is not None for r in out)
    with pytest.raises(ValueError, match="memory 'd' has no embedding.*get_default_embedder"):
        embed_missing(records(), None)


def test_a_checkpoint_keeps_old_duplicates_out_of_the_search():
    store = PagedStore(records())
    full = plan_snapshot(store, Policy(), now=NOW, embedder=CountingEmbedder())
    assert [sorted(op.source_ids) for op in full.plan.operations] == [["a", "b"]]
    seen = {r.id: r.content_hash for r in full.records}
    again = plan_snapshot(store, Policy(), now=NOW, embedder=CountingEmbedder(), checkpoint=seen)
    assert again.plan.operations == [] and len(again.records) == 10


def test_it_leaves_out_operations_the_store_cannot_write():
    class NoJazz(PagedStore):
        def unwritable(self, texts):
            return {t: "this store refuses jazz" for t in texts if "jazz" in t}

    snap = plan_snapshot(NoJazz(records()), Policy(), now=NOW, embedder=CountingEmbedder())
    assert snap.plan.operations == [] and snap.plan.result.merged == 0
    assert snap.plan.context["left_out"][0]["reason"] == "this store refuses jazz"
