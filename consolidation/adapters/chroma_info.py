"""What Chroma says about a collection: distance space, embedding function, a record sample.

Observed with chromadb 1.5.9: ``collection.configuration_json`` is a dict whose ``hnsw``
(local/server) or ``spann`` (Chroma Cloud) entry holds ``space`` (``"l2"`` when the creator
gave none, as mem0 does; ``"cosine"`` for PraisonAI's and ours), and whose
``embedding_function`` is ``None`` (created without one) or ``{"type": "known", "name":
"default", …}`` for Chroma's all-MiniLM-L6-v2. Collections from pre-1.0 clients keep the space
in metadata ``hnsw:space`` instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..shapes import CollectionSample
from .chroma_store import decode_metadata, translate_errors

__all__ = ["SAMPLE_SIZE", "collection_embedding_function", "collection_space", "sample_collection"]

SAMPLE_SIZE = 200
"""Records read to detect a collection's shape: enough to see every writer's keys, one page."""


def _config(collection: Any) -> dict[str, Any]:
    try:
        conf = collection.configuration_json
    except Exception:  # older clients: no configuration
        return {}
    return conf if isinstance(conf, dict) else {}


def collection_space(collection: Any) -> str | None:
    """The collection's HNSW/SPANN distance space (``"l2"``, ``"cosine"``, ``"ip"``) or ``None``."""
    conf = _config(collection)
    for index in ("hnsw", "spann"):
        entry = conf.get(index)
        if isinstance(entry, dict) and entry.get("space"):
            return str(entry["space"])
    meta = getattr(collection, "metadata", None) or {}
    space = meta.get("hnsw:space") if isinstance(meta, dict) else None
    return str(space) if space else None


def collection_embedding_function(collection: Any) -> str | None:
    """Name of the collection's configured embedding function (``"default"``…) or ``None``."""
    ef = _config(collection).get("embedding_function")
    if isinstance(ef, dict) and ef.get("name"):
        return str(ef["name"])
    return None


def sample_collection(collection: Any, *, limit: int = SAMPLE_SIZE) -> CollectionSample:
    """The first ``limit`` records (insertion order) with their stored vectors, as a sample.

    Metadata is decoded like the store decodes it. Raises the adapter's ``StoreUnavailable``
    when the server does not answer.
    """
    name = getattr(collection, "name", "?")
    with translate_errors(f"read {name!r}"):
        count = int(collection.count())
        got = collection.get(limit=limit, include=["documents", "metadatas", "embeddings"])
    ids = list(got.get("ids") or [])
    docs = got.get("documents")
    metas = got.get("metadatas")
    embs = got.get("embeddings")
    vectors = [] if embs is None else [np.asarray(e, dtype=np.float32).tolist() for e in embs]
    width = len(vectors[0]) if vectors else None
    return CollectionSample(
        ids=ids,
        documents=[docs[i] if docs is not None else None for i in range(len(ids))],
        metadatas=[
            decode_metadata(metas[i] if metas is not None else None) for i in range(len(ids))
        ],
        vectors=vectors,
        vector_width=width,
        space=collection_space(collection),
        embedding_function=collection_embedding_function(collection),
        count=count,
    )
