"""How memories map onto a collection written by someone else (mem0, PraisonAI, a plain log).

:class:`Layout` is the part of :class:`~consolidation.adapters.chroma_store.ChromaMemoryStore`
that knows, for one collection:

- **where the text lives**: Chroma's document, or a metadata key (``FieldMap.document``; mem0's
  ``data``). A text written back goes to the same place (never a document for mem0), with the
  ``FieldMap.text_hash`` key refreshed (MD5, as mem0 computes it) and ``FieldMap.text_copies``
  keys set to the text.
- **whose vectors it holds**: the engine's own (all-MiniLM-L6-v2, 384-d) or *foreign* ones
  (another model or width, e.g. OpenAI's 1536-d). For a foreign collection, records are read
  with the engine's embedding of their text (planning thresholds are calibrated on it;
  :class:`~consolidation.adapters.vector_cache.VectorCache` keeps it by content hash so an
  unchanged store is never re-embedded), and a record is written with a vector of the
  collection's own width and model: the stored vector of a record with the same text (still in
  the collection, or remembered when it was deleted or overwritten), else one from the
  agent's own embedder for the collection (``native_embed``), else not at all —
  :class:`NoVectorForText` is raised before anything is written, and :meth:`Layout.unwritable`
  lets the planner leave such operations out with the reason.
- **that an empty or whitespace-only text is never written** (:class:`EmptyText`).

The collection's distance space is never changed: the adapter only adds, replaces and deletes
records in the existing collection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..records import EMBEDDING_DIM, FieldMap
from .vector_cache import VectorCache, text_key

__all__ = ["EmptyText", "Layout", "NoVectorForText"]

Embed = Callable[[list[str]], Any]


class EmptyText(ValueError):
    """A record to write has an empty or whitespace-only text (never written: an empty text would
    turn distinct memories into duplicates)."""


class NoVectorForText(ValueError):
    """A text cannot be written to a foreign-vector collection: no vector of its model for it."""


class Layout:
    """Text placement and vector policy of one collection (module docstring).

    Args:
        collection_name: the collection's name (keys the remembered native vectors).
        field_map: the agent's map (``document``, ``text_hash``, ``text_copies`` are used);
            ``None`` = memoryadmin's own layout (text in the document).
        own_vectors: ``True`` when the stored vectors are the engine's all-MiniLM-L6-v2,
            ``False`` when they are another model's; ``None`` decides by width (384 = ours).
        embed: ``list[str] -> (n, 384)``, the engine's embedder (foreign collections only).
        native_embed: ``list[str] -> (n, width)``, the collection's own model, or ``None``.
        cache: where our embeddings and remembered native vectors are kept (``None`` = an
            in-memory cache private to this layout).
    """

    def __init__(
        self,
        collection_name: str,
        *,
        field_map: FieldMap | None = None,
        own_vectors: bool | None = None,
        embed: Embed | None = None,
        native_embed: Embed | None = None,
        cache: VectorCache | None = None,
    ) -> None:
        fm = field_map or FieldMap()
        self.collection_name = collection_name
        self.text_key = fm.document
        self.text_hash = fm.text_hash
        self.text_copies = tuple(fm.text_copies)
        self.own_vectors = own_vectors
        self.embed = embed
        self.native_embed = native_embed
        self._cache = cache
        self.width: int | None = None
        self._ids_by_text: dict[str, str] = {}  # sha256(text) -> id of a record read with it

    @property
    def cache(self) -> VectorCache:
        """The vector cache (created in memory on first use when none was given)."""
        if self._cache is None:
            self._cache = VectorCache(":memory:")
        return self._cache

    @property
    def default(self) -> bool:
        """True for memoryadmin's own layout: text in the document, vectors ours."""
        return not self.text_key and self.own_vectors is not False

    def foreign(self) -> bool:
        """True when the stored vectors are not the engine's (decided once the width is known)."""
        if self.own_vectors is not None:
            return not self.own_vectors
        return self.width is not None and self.width != EMBEDDING_DIM

    def see_width(self, width: int | None) -> None:
        """Record the stored vectors' width the first time one is read."""
        if self.width is None and width:
            self.width = int(width)

    # ---- reading ---------------------------------------------------------------------------

    def text_of(self, document: str | None, meta: Mapping[str, Any]) -> str:
        """The memory text of a stored record ("" when absent or not a string)."""
        if self.text_key:
            value = meta.get(self.text_key)
            return value if isinstance(value, str) else ""
        return document or ""

    def our_embeddings(
        self, ids: Sequence[str], texts: Sequence[str], stored: Sequence[Any | None]
    ) -> list[np.ndarray | None]:
        """The ``(384,)`` embedding each record is planned with.

        Own vectors are returned as stored; for a foreign collection the engine's embedding of
        the text, from the cache or computed once (``None`` for every record when no ``embed``
        was given). Remembers which id holds which text, to reuse its vector on writes.
        """
        widths = [len(v) for v in stored if v is not None]
        self.see_width(widths[0] if widths else None)
        if not self.foreign():
            return [None if v is None else np.asarray(v, dtype=np.float32) for v in stored]
        for rid, text in zip(ids, texts, strict=True):
            self._ids_by_text[text_key(text)] = rid
        if self.embed is None or not texts:
            return [None] * len(texts)
        return list(self.cache.embed(list(texts), self.embed))

    # ---- writing ---------------------------------------------------------------------------

    def placed(
        self, rid: str, text: str, meta: Mapping[str, Any]
    ) -> tuple[str | None, dict[str, Any]]:
        """``(document, metadata)`` to store for a record with ``text``; raises
        :class:`EmptyText` for an empty or whitespace-only text."""
        if not text.strip():
            raise EmptyText(f"record {rid!r}: an empty text is never written")
        meta = dict(meta)
        if self.text_hash:
            meta[self.text_hash] = hashlib.md5(text.encode("utf-8")).hexdigest()
        if not self.text_key:
            return text, meta
        changed = meta.get(self.text_key) != text
        meta[self.text_key] = text
        for key in self.text_copies:
            if changed or key not in meta:
                meta[key] = text
        return None, meta

    def known_vectors(self, collection: Any, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Stored vectors of the collection for these texts, without embedding anything:
        records read with that text that are still there, else vectors remembered when a
        record with that text was deleted or overwritten."""
        wanted = list(dict.fromkeys(texts))
        found: dict[str, np.ndarray] = {}
        ids = {self._ids_by_text[k]: t for t in wanted if (k := text_key(t)) in self._ids_by_text}
        if ids:
            got = collection.get(ids=list(ids), include=["documents", "metadatas", "embeddings"])
            for i, rid in enumerate(got["ids"]):
                text = self.text_of(got["documents"][i], got["metadatas"][i] or {})
                if text == ids[rid] and got["embeddings"] is not None:
                    found[text] = np.asarray(got["embeddings"][i], dtype=np.float32)
        rest = [t for t in wanted if t not in found]
        found.update(self.cache.get_native(self.collection_name, rest))
        return found

    def unwritable(self, collection: Any, texts: Iterable[str]) -> dict[str, str]:
        """``{text: reason}`` for the texts this store could not write (empty; or, in a
        foreign-vector collection without its own embedder, no stored vector to reuse)."""
        texts = list(dict.fromkeys(texts))
        out = {t: "the text is empty" for t in texts if not t.strip()}
        rest = [t for t in texts if t.strip()]
        if not self.foreign() or self.native_embed is not None or not rest:
            return out
        known = self.known_vectors(collection, rest)
        reason = (
            f"the collection holds {self.width}-d vectors of another model and the agent has no "
            "embedder for it, so a new text cannot be written"
        )
        out.update({t: reason for t in rest if t not in known})
        return out

    def vectors_for(self, collection: Any, texts: Sequence[str]) -> list[np.ndarray]:
        """A vector of the collection's own model and width for each text (foreign stores).

        Raises :class:`NoVectorForText` (nothing written) when a text has none and there is no
        ``native_embed``, or ``ValueError`` when ``native_embed`` answers another width.
        """
        found = self.known_vectors(collection, texts)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing and self.native_embed is None:
            raise NoVectorForText(
                f"{len(missing)} new text(s) cannot be written to {self.collection_name!r}: it "
                f"holds {self.width}-d vectors of another model and the agent has no embedder "
                f"for it (first: {missing[0][:80]!r})"
            )
        if missing and self.native_embed is not None:  # None with texts missing raised above
            vecs = np.asarray(self.native_embed(missing), dtype=np.float32)
            if vecs.ndim != 2 or (self.width and vecs.shape[1] != self.width):
                raise ValueError(
                    f"the agent's embedder gives {vecs.shape[-1]}-d vectors; collection "
                    f"{self.collection_name!r} holds {self.width}-d ones"
                )
            found.update(zip(missing, vecs, strict=True))
        return [found[t] for t in texts]

    def remember(self, collection: Any, ids: Sequence[str]) -> None:
        """Keep the stored vectors of these records (about to be deleted or overwritten), by
        text, so a merge or a rollback can write them back."""
        if not self.foreign() or not ids:
            return
        got = collection.get(ids=list(ids), include=["documents", "metadatas", "embeddings"])
        if got.get("embeddings") is None:
            return
        pairs = [
            (self.text_of(got["documents"][i], got["metadatas"][i] or {}), got["embeddings"][i])
            for i in range(len(got["ids"]))
        ]
        self.cache.put_native(self.collection_name, [(t, v) for t, v in pairs if t.strip()])
