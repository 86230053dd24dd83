"""Collections written the way real agent libraries write them, for attach/shape tests.

Nothing here is written from memory of the libraries: each writer goes through the library's
own Chroma code where that code runs offline, and otherwise builds the exact payload the
library's source builds (file and version cited per function). No network is touched: the
libraries embed with OpenAI (1536-d ``text-embedding-3-small`` by default), so the vectors
here are deterministic stand-ins of the same width (:func:`foreign_vector`).

- :func:`write_mem0` — ``mem0.vector_stores.chroma.ChromaDB.insert`` (mem0ai 2.2.1) with the
  payload of ``mem0/memory/main.py::Memory._create_memory`` as called by
  ``Memory._add_to_vector_store(infer=False)``: text in metadata ``data`` (no document),
  ``hash`` (md5 of the text), ``created_at`` = ``updated_at`` (ISO 8601 UTC),
  ``text_lemmatized`` (``mem0.utils.lemmatization.lemmatize_for_bm25``), ``role`` and the
  session ids (``user_id``/``agent_id``/``run_id``) of ``_build_filters_and_metadata``; the
  collection comes from ``ChromaDB.create_col`` (``get_or_create_collection`` with no
  configuration, so Chroma's default ``l2`` space).
- :func:`write_praisonai` — praisonaiagents 1.7.17 ``memory/memory.py::Memory._init_chroma``
  (collection ``memory_store``, ``{"hnsw:space": "cosine"}``) and ``Memory.store_long_term``
  (``chroma_col.add(documents=[text], metadatas=[sanitize_chroma_metadata(metadata)],
  ids=[str(time.time_ns())], embeddings=[...])``), metadata as ``task/task.py::
  Task.store_in_memory`` passes it (``agent_name``, ``task_id``, ``timestamp`` epoch seconds).
  The payload is built here rather than through ``Memory.store_long_term`` because that
  method embeds through ``litellm`` (the ``memory`` extra: a large dependency that would also
  call OpenAI); ``sanitize_chroma_metadata`` is the library's own function.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

__all__ = [
    "FOREIGN_DIM",
    "Mem0Memory",
    "PraisonMemory",
    "foreign_vector",
    "write_mem0",
    "write_plain",
    "write_praisonai",
]

FOREIGN_DIM = 1536
"""Width of OpenAI ``text-embedding-3-small`` vectors, mem0's and PraisonAI's default embedder."""

# mem0 sends telemetry to PostHog unless told not to (mem0/memory/telemetry.py reads this at
# import); tests never touch the network.
os.environ.setdefault("MEM0_TELEMETRY", "False")


def foreign_vector(text: str, dim: int = FOREIGN_DIM) -> list[float]:
    """A unit vector of width ``dim`` determined by ``text`` (sha256-seeded normal draws).

    Stands in for an OpenAI embedding: same width and norm, no network. Equal texts get equal
    vectors, as a real embedder gives them.
    """
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).astype(np.float32).tolist()


@dataclass(frozen=True)
class Mem0Memory:
    """One ``Memory.add(text, user_id=…, infer=False)`` call's memory."""

    text: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    created_at: datetime | None = None


def write_mem0(client: Any, collection_name: str, memories: Sequence[Mem0Memory]) -> list[str]:
    """Write ``memories`` through mem0's own ``ChromaDB`` class; return their ids (uuid4).

    Payload per mem0ai 2.2.1 ``mem0/memory/main.py`` (``_create_memory``, lines ~1975-1995, and
    ``_add_to_vector_store`` with ``infer=False``, lines ~881-915): the text is only in
    metadata ``data``; no document is written.
    """
    from mem0.utils.lemmatization import lemmatize_for_bm25
    from mem0.vector_stores.chroma import ChromaDB

    store = ChromaDB(collection_name=collection_name, client=client)
    ids, vectors, payloads = [], [], []
    for m in memories:
        meta: dict[str, Any] = {}
        for key in ("user_id", "agent_id", "run_id"):
            if getattr(m, key):
                meta[key] = getattr(m, key)
        meta["role"] = "user"
        meta["data"] = m.text
        meta["hash"] = hashlib.md5(m.text.encode()).hexdigest()
        meta["created_at"] = (m.created_at or datetime.now(UTC)).isoformat()
        meta["updated_at"] = meta["created_at"]
        meta["text_lemmatized"] = lemmatize_for_bm25(m.text)
        ids.append(str(uuid.uuid4()))
        vectors.append(foreign_vector(m.text))
        payloads.append(meta)
    store.insert(vectors=vectors, payloads=payloads, ids=ids)
    return ids


@dataclass(frozen=True)
class PraisonMemory:
    """One ``Task.store_in_memory`` long-term memory."""

    text: str
    agent_name: str = "Agent"
    task_id: str = "task-1"
    timestamp: float | None = None


def write_praisonai(
    client: Any, memories: Sequence[PraisonMemory], collection_name: str = "memory_store"
) -> list[str]:
    """Write ``memories`` as praisonaiagents 1.7.17 ``Memory.store_long_term`` does (module doc).

    Ids are ``str(time.time_ns())`` in the library; here consecutive nanosecond stamps from one
    reading of the clock, so they are unique and ordered the same way.
    """
    import time

    from praisonaiagents.memory.adapters.factories import sanitize_chroma_metadata

    try:
        col = client.get_collection(name=collection_name)
    except Exception:
        col = client.create_collection(name=collection_name, metadata={"hnsw:space": "cosine"})
    start = time.time_ns()
    ids = [str(start + i) for i in range(len(memories))]
    metas = [
        sanitize_chroma_metadata(
            {
                "agent_name": m.agent_name,
                "task_id": m.task_id,
                "timestamp": m.timestamp if m.timestamp is not None else time.time(),
            }
        )
        for m in memories
    ]
    col.add(
        documents=[m.text for m in memories],
        metadatas=metas,
        ids=ids,
        embeddings=[foreign_vector(m.text) for m in memories],
    )
    return ids


def write_plain(client: Any, collection_name: str, texts: Sequence[str]) -> list[str]:
    """A plain log: documents only (no metadata), in a collection made with Chroma's defaults.

    ``client.create_collection(name)`` gives the ``l2`` space and Chroma's default embedding
    function (all-MiniLM-L6-v2, 384-d); the vectors are that model's, computed by our offline
    copy of it (Chroma's own function would download the model, and tests stay offline).
    """
    from consolidation.adapters.embedder import get_default_embedder

    col = client.create_collection(name=collection_name)
    ids = [f"log-{i}" for i in range(len(texts))]
    vectors = np.asarray(get_default_embedder().embed(list(texts)), dtype=np.float32)
    col.add(ids=ids, documents=list(texts), embeddings=vectors)
    return ids


def raw_records(client: Any, collection_name: str) -> dict[str, tuple[str | None, dict, bytes]]:
    """Every record of a collection as Chroma holds it: id → (document or ``None``, metadata,
    the embedding's float32 bytes), for byte-for-byte comparisons before and after a pass."""
    got = client.get_collection(collection_name).get(
        include=["documents", "metadatas", "embeddings"]
    )
    return {
        i: (d, m, np.asarray(e, dtype=np.float32).tobytes())
        for i, d, m, e in zip(
            got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
        )
    }
