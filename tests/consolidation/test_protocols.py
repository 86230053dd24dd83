"""PraisonAI's consolidation protocols: runtime-checkable, resolvable return annotations."""

from __future__ import annotations

import inspect
import typing

import numpy as np
import pytest

from consolidation import (
    AsyncMemoryConsolidationProtocol,
    ConsolidationResult,
    Consolidator,
    Embedder,
    MemoryConsolidationProtocol,
    MemoryStore,
    WritableMemoryStore,
)


class SyncOnly:
    def consolidate(self, memory, *, max_loss_fraction=0.25) -> ConsolidationResult:
        return ConsolidationResult()


class AsyncOnly:
    async def aconsolidate(self, memory, *, max_loss_fraction=0.25) -> ConsolidationResult:
        return ConsolidationResult()


class Nothing:
    pass


class ReadStore:
    def count(self):
        return 0

    def iter_pages(self, *, page_size=5000, include_embeddings=True):
        return iter(())

    def get(self, ids, *, include_embeddings=True):
        return []


class WriteStore(ReadStore):
    def upsert(self, records):
        pass

    def delete(self, ids):
        pass


class FakeEmbedder:
    dim = 384

    def embed(self, texts):
        return np.zeros((len(texts), 384), np.float32)


@pytest.mark.parametrize(
    ("obj", "protocol", "expected"),
    [
        (SyncOnly(), MemoryConsolidationProtocol, True),
        (SyncOnly(), AsyncMemoryConsolidationProtocol, False),
        (AsyncOnly(), AsyncMemoryConsolidationProtocol, True),
        (AsyncOnly(), MemoryConsolidationProtocol, False),
        (Nothing(), MemoryConsolidationProtocol, False),
        (Consolidator(), MemoryConsolidationProtocol, True),
        (Consolidator(), AsyncMemoryConsolidationProtocol, True),
        (ReadStore(), MemoryStore, True),
        (ReadStore(), WritableMemoryStore, False),
        (WriteStore(), WritableMemoryStore, True),
        (FakeEmbedder(), Embedder, True),
        (Nothing(), Embedder, False),
    ],
)
def test_it_checks_protocols_at_runtime(obj, protocol, expected):
    assert isinstance(obj, protocol) is expected


@pytest.mark.parametrize(
    "func",
    [
        MemoryConsolidationProtocol.consolidate,
        AsyncMemoryConsolidationProtocol.aconsolidate,
        Consolidator.consolidate,
        Consolidator.aconsolidate,
    ],
)
def test_it_resolves_the_return_annotation(func):
    hints = typing.get_type_hints(func)
    assert hints["return"] is ConsolidationResult
    param = inspect.signature(func).parameters["max_loss_fraction"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY
    assert param.default == 0.25


def test_it_makes_aconsolidate_a_coroutine():
    assert inspect.iscoroutinefunction(Consolidator.aconsolidate)
    assert inspect.iscoroutinefunction(AsyncMemoryConsolidationProtocol.aconsolidate)
