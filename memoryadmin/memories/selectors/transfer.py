"""Reads of the transfer: an agent's store written out as JSONL (:mod:`consolidation.jsonl`),
for ``manage.py export_memories`` and the agent page's export link."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from consolidation.jsonl import write_jsonl
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores

__all__ = ["Progress", "memories_export_jsonl"]

Progress = Callable[[int, str], None]
"""``progress(n, label)``: ``n`` more memories handled (for a tqdm bar)."""


def memories_export_jsonl(
    *,
    agent: Agent,
    fileobj: IO[str],
    include_embeddings: bool = True,
    progress: Progress | None = None,
) -> int:
    """Write every memory of the agent's store to ``fileobj`` (text) as JSONL; returns the count.

    Reads in the store's pages (at most 5,000 rows, Chroma's safe limit). Raises
    ``StoreUnavailable``.
    """
    store = stores.get_store(agent)
    n = 0
    for page in store.iter_pages(include_embeddings=include_embeddings):
        n += write_jsonl(page, fileobj, include_embeddings=include_embeddings)
        if progress:
            progress(len(page), f"{agent.slug}: {n:,} exported")
    return n
