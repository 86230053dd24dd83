"""Adapters of the pure engine: the only code in ``consolidation`` that talks to the outside.

* :mod:`.embedder` — offline all-MiniLM-L6-v2 (onnxruntime + tokenizers):
  :class:`OnnxMiniLMEmbedder`, :func:`get_default_embedder` (the one embedder factory).
* :mod:`.onnx_graph` — its model files: the weights' source and the ONNX graph built from them.
* :mod:`.chroma_store` — :class:`ChromaMemoryStore` over a Chroma collection,
  :func:`make_client` (the one Chroma client factory), :func:`open_collection`.

Importing this package is cheap: chromadb, onnxruntime, onnx and tokenizers are imported only
when a client, collection or embedder is actually created.
"""

from __future__ import annotations

from .chroma_store import (
    ChromaMemoryStore,
    CollectionNotFound,
    StoreAccessDenied,
    StoreError,
    StoreUnavailable,
    make_client,
    open_collection,
    validate_collection_name,
)
from .embedder import EmbedderUnavailable, OnnxMiniLMEmbedder, get_default_embedder

__all__ = [
    "ChromaMemoryStore",
    "CollectionNotFound",
    "EmbedderUnavailable",
    "OnnxMiniLMEmbedder",
    "StoreAccessDenied",
    "StoreError",
    "StoreUnavailable",
    "get_default_embedder",
    "make_client",
    "open_collection",
    "validate_collection_name",
]
