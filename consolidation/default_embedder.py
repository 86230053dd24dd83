"""`DefaultEmbedder`: the offline all-MiniLM-L6-v2 embedder, loaded only when a text is embedded.

``Consolidator()`` without an embedder must still work on memories stored without embeddings
(PraisonAI's ``FileMemory`` and chroma-backed ``Memory`` return none from
``get_all_memories()``), yet the engine core stays free of onnxruntime: this class imports
:func:`consolidation.adapters.embedder.get_default_embedder` inside :meth:`DefaultEmbedder.embed`,
at the first call, so importing the core or planning a store whose memories all carry
embeddings loads neither the adapter nor onnxruntime (``tests/consolidation/
test_import_purity.py`` checks both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .records import EMBEDDING_DIM

__all__ = ["DefaultEmbedder"]


class DefaultEmbedder:
    """An :class:`~consolidation.protocols.Embedder` that is the process-wide offline embedder
    (``consolidation.adapters.get_default_embedder()``), loaded at the first :meth:`embed`.

    ``dim`` is 384 (all-MiniLM-L6-v2). :meth:`embed` raises
    :class:`~consolidation.adapters.EmbedderUnavailable` when the model files are not installed
    (``make install`` installs them), with the adapter's message naming what to install.
    """

    dim: int = EMBEDDING_DIM

    def __init__(self) -> None:
        self._loaded: Any = None

    @property
    def loaded(self) -> bool:
        """Whether the underlying embedder has been loaded (by a call to :meth:`embed`)."""
        return self._loaded is not None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), 384) float32`` L2-normalised rows of the offline all-MiniLM-L6-v2."""
        if self._loaded is None:
            # Deferred on purpose: the core imports no adapter (and no onnxruntime) until a
            # memory without an embedding, or a merged memory, actually needs one.
            from .adapters.embedder import get_default_embedder

            self._loaded = get_default_embedder()
        return self._loaded.embed(texts)

    def __repr__(self) -> str:
        return f"DefaultEmbedder(loaded={self.loaded})"
