"""Chroma adapter: the one Chroma client factory and a ``WritableMemoryStore`` over a collection.

Facts of chromadb 1.5 this module is shaped by (observed with 1.5.9; the ones our code relies on
are exercised by ``tests/consolidation/test_chroma_store.py``):

* ``get(limit, offset)`` returns rows ordered by Chroma's internal row id (insertion order;
  ``SqliteMetadataReader.get`` orders by ``embeddings.id``), so offset paging over an unchanged
  collection returns every id exactly once. A record deleted by someone else during the scan
  shifts later offsets and can make one record be skipped; a record never appears twice.
* A ``get`` of more than ~32K rows with metadata fails: pages are at most 5,000 rows.
* Writes are capped at ``client.get_max_batch_size()`` records per call (5,461 locally).
* ``upsert`` *merges* metadata into an existing record; a key is removed only by sending it
  with the value ``None``. :meth:`ChromaMemoryStore.upsert` therefore reads the stored keys first
  and sends ``None`` for keys the new metadata no longer has, so upsert means *replace*.
* ``add`` of an id that exists leaves the stored record as it is, without an error; upsert
  sends the ids absent at that read through ``add`` (cheaper server-side).
* ``update`` with metadatas alone merges them as upsert does and leaves the document and the
  vector as they are, without re-indexing (3,000 records: 0.18 s against 4.5–5.8 s to upsert
  over them); an id that does not exist is skipped without an error. See ``chroma_writes``.
* Metadata values must be str/int/float/bool or non-empty homogeneous lists of those; keys must
  be non-empty and not start with ``#`` or ``$`` (rejected), nor ``chroma:`` (silently
  dropped!). NaN/±inf floats come back as missing, ``-0.0`` as ``0.0``, ints beyond 64 bits
  as floats.
* ``hnsw space = cosine`` collections store embeddings L2-normalised (in-process and served
  alike): one reads back within 1 ulp of what was written (≤ 1.5e-8 absolute for unit vectors,
  ≤ 2.4e-7 for others), so re-writing a record read back may move its last bit. ``l2``/``ip``
  collections round-trip exactly.
* The HTTP client raises ``httpx.ConnectError`` when the server is down, its constructor
  ``ValueError("Could not connect to a Chroma server...")``: both become
  :class:`StoreUnavailable`. A 401/403 with Chroma's JSON error body (its token auth,
  deploy/nginx-chroma.conf) raises ``AuthorizationError`` / ``ChromaAuthError`` (already in the
  constructor): it becomes :class:`StoreAccessDenied`.

Metadata encoding (nothing is silently lost, every JSON value round-trips exactly): a value
Chroma stores faithfully is stored as is; any other value — ``None``, dicts, empty or mixed or
nested lists, ints outside int64, NaN/±inf, ``-0.0``, and strings that themselves start with the
marker — is stored as the string ``"json:" + json.dumps(value)`` and decoded back on read. A
stored string starting with ``json:`` whose remainder is not valid JSON (written by another
tool) is returned unchanged. Values with no exact JSON form (tuples, sets, bytes, datetimes,
dicts with non-string keys, …) are rejected with ``ValueError`` before anything is written.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..records import EMBEDDING_DIM, MemoryRecord
from .chroma_layout import Layout
from .chroma_metadata import JSON_MARKER, check_text, decode_metadata, encode_metadata
from .chroma_writes import Prepared, write_batch

__all__ = [
    "JSON_MARKER",
    "MAX_PAGE_SIZE",
    "ChromaMemoryStore",
    "CollectionNotFound",
    "StoreAccessDenied",
    "StoreError",
    "StoreUnavailable",
    "decode_metadata",
    "encode_metadata",
    "make_client",
    "open_collection",
    "translate_errors",
    "validate_collection_name",
]

MAX_PAGE_SIZE = 5000
"""Largest page read from Chroma (docs/ARCHITECTURE.md "Chroma facts": larger gets can fail)."""

_DEFAULT_WRITE_BATCH = 1000  # ~2.1 MB per HTTP request with 384-d embeddings (measured)
_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")


class StoreError(Exception):
    """Base class of the errors this adapter raises."""


class StoreUnavailable(StoreError):
    """The Chroma server cannot be reached (refused, reset, timed out, DNS failure) or refuses
    our token (:class:`StoreAccessDenied`)."""


class StoreAccessDenied(StoreUnavailable):
    """The Chroma server, or the proxy in front of it, refused the token (HTTP 401/403)."""


class CollectionNotFound(StoreError, LookupError):
    """The named collection does not exist (and ``create=False``)."""


# --------------------------------------------------------------------------------------------
# Errors from the transport
# --------------------------------------------------------------------------------------------


def _is_unavailable(exc: BaseException) -> bool:
    try:
        import httpx
    except ImportError:  # pragma: no cover - chromadb depends on httpx
        httpx = None  # type: ignore[assignment]
    if httpx is not None and isinstance(exc, httpx.TransportError):
        return True
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return isinstance(exc, ValueError) and "Could not connect to a Chroma server" in str(exc)


def _denied_status(exc: BaseException) -> int | None:
    """401/403 when ``exc`` is chromadb's error for a refused token, else None."""
    from chromadb.errors import AuthorizationError, ChromaAuthError

    if isinstance(exc, AuthorizationError | ChromaAuthError):
        return exc.code()
    return None


@contextmanager
def _translate(action: str) -> Iterator[None]:
    """Turn connection failures into :class:`StoreUnavailable` and a refused token into
    :class:`StoreAccessDenied`; other errors pass through."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        status = _denied_status(exc)
        if status is not None:
            raise StoreAccessDenied(
                f"Chroma refused the token (HTTP {status}) while trying to {action}: {exc}"
            ) from exc
        if _is_unavailable(exc):
            raise StoreUnavailable(
                f"Chroma is unreachable while trying to {action}: {exc}"
            ) from exc
        raise


translate_errors = _translate
"""Public name of :func:`_translate` for the other Chroma adapter modules."""


# --------------------------------------------------------------------------------------------
# Client factory and collections
# --------------------------------------------------------------------------------------------


def make_client(
    host: str | None = None,
    port: int | None = None,
    ssl: bool = False,
    token: str | None = None,
    path: str | None = None,
    ephemeral: bool = False,
    *,
    timeout: float | None = 60.0,
) -> Any:
    """The one Chroma client factory. Exactly one of ``host``, ``path``, ``ephemeral``.

    * ``host`` → ``chromadb.HttpClient`` (``port`` defaults to 8000, Chroma's; ``ssl`` for
      https; ``token`` is sent as ``Authorization: Bearer`` and ``X-Chroma-Token``, the two
      headers Chroma's token auth accepts). Web and worker processes use this.
    * ``path`` → ``chromadb.PersistentClient`` (not process-safe: single-process tools only).
    * ``ephemeral=True`` → ``chromadb.EphemeralClient`` (in memory; all instances in one
      process share state).

    ``timeout`` (seconds) bounds each HTTP request (chromadb's own default is no timeout).
    Raises ``ValueError`` for a bad combination, :class:`StoreUnavailable` when the server does
    not answer, :class:`StoreAccessDenied` when it (or its proxy) refuses the token.
    """
    import chromadb

    chosen = [bool(host), path is not None, bool(ephemeral)]
    if sum(chosen) != 1:
        raise ValueError("make_client needs exactly one of host=, path= or ephemeral=True")
    if ephemeral:
        return chromadb.EphemeralClient()
    if path is not None:
        return chromadb.PersistentClient(path=str(path))
    if port is not None and (isinstance(port, bool) or not 0 < int(port) < 65536):
        raise ValueError(f"port must be in 1..65535, got {port!r}")
    headers = {"Authorization": f"Bearer {token}", "X-Chroma-Token": token} if token else None
    with _translate(f"connect to {host}:{port or 8000}"):
        client = chromadb.HttpClient(
            host=str(host), port=int(port or 8000), ssl=bool(ssl), headers=headers
        )
    _set_http_timeout(client, timeout)
    return client


def _set_http_timeout(client: Any, timeout: float | None) -> None:
    # chromadb builds its httpx.Client with timeout=None (wait forever); bound it when we can
    # reach the session (a private attribute, hence the defensive lookup).
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):
        session.timeout = httpx.Timeout(timeout, connect=min(timeout or 10.0, 10.0))


def validate_collection_name(name: str) -> str:
    """Return ``name`` if Chroma accepts it as a collection name, else raise ``ValueError``.

    Chroma's rules (chromadb 1.5 validation messages): 3–512 characters of ``[a-zA-Z0-9._-]``,
    starting and ending with a letter or digit, no ``..``, not an IPv4 address.
    """
    if not isinstance(name, str):
        raise ValueError(f"collection name must be a string, got {type(name).__name__}")
    if not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"invalid collection name {name!r}: use 3-512 characters from a-z, A-Z, 0-9, '.', "
            "'_' and '-', starting and ending with a letter or digit"
        )
    if ".." in name:
        raise ValueError(f"invalid collection name {name!r}: it must not contain '..'")
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        return name
    raise ValueError(f"invalid collection name {name!r}: it must not be an IPv4 address")


def open_collection(client: Any, name: str, *, create: bool = True) -> Any:
    """Open (or create, with cosine space) the collection ``name`` without an embedding function.

    Chroma never computes embeddings for it: every write passes them explicitly. A collection
    created here uses ``configuration={"hnsw": {"space": "cosine"}}``; an existing one keeps its
    own configuration. Raises ``ValueError`` for an invalid name, :class:`CollectionNotFound`
    when it is missing and ``create`` is false, :class:`StoreUnavailable` when the server is down.
    """
    from chromadb.errors import NotFoundError

    validate_collection_name(name)
    with _translate(f"open collection {name!r}"):
        try:
            return client.get_collection(name, embedding_function=None)
        except NotFoundError as exc:
            if not create:
                raise CollectionNotFound(f"Chroma has no collection named {name!r}") from exc
        except ValueError as exc:  # older clients raise ValueError("... does not exist")
            if "does not exist" not in str(exc):
                raise
            if not create:
                raise CollectionNotFound(f"Chroma has no collection named {name!r}") from exc
        # get_or_create: another process may create it between our get and this call.
        return client.get_or_create_collection(
            name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


def _check_page_size(page_size: Any) -> int:
    if isinstance(page_size, bool) or not isinstance(page_size, int):
        raise ValueError(f"page_size must be an int, got {page_size!r}")
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ValueError(f"page_size must be in 1..{MAX_PAGE_SIZE}, got {page_size}")
    return page_size


def _check_ids(ids: Sequence[str], what: str) -> list[str]:
    if isinstance(ids, str):
        raise TypeError(f"{what} takes a sequence of ids, not a single string")
    ids = list(ids)
    for i in ids:
        if not isinstance(i, str) or not i:
            raise ValueError(f"{what}: ids must be non-empty strings, got {i!r}")
    return ids


class ChromaMemoryStore:
    """One Chroma collection as a ``WritableMemoryStore`` (plus semantic ``query``).

    Args:
        collection: a chromadb ``Collection`` (from :func:`open_collection`).
        page_size: rows per read, 1..5,000 (Chroma's safe limit); used by :meth:`iter_pages`,
            :meth:`iter_records` and :meth:`get`.
        write_batch: records per write call; capped at ``client.get_max_batch_size()``.
            Default 1,000.
        layout: where the text lives and whose vectors the collection holds
            (:class:`~consolidation.adapters.chroma_layout.Layout`); default: memoryadmin's own
            (text in the document, all-MiniLM-L6-v2 vectors).

    Records read back have ``document`` = the memory text (from metadata ``FieldMap.document``
    when the layout says so; ``""`` where there is none), decoded metadata, and ``embedding``
    ``(384,) float32`` when requested: the stored vector, or, for a collection of another
    model's vectors, the engine's embedding of the text. Writes keep the collection's own
    vectors and never write an empty text (``chroma_layout``). Connection failures raise
    :class:`StoreUnavailable`; invalid input raises ``ValueError``/``TypeError`` before
    anything is written.
    """

    def __init__(
        self,
        collection: Any,
        *,
        page_size: int = MAX_PAGE_SIZE,
        write_batch: int | None = None,
        layout: Layout | None = None,
    ) -> None:
        self.collection = collection
        self.layout = layout or Layout(str(collection.name))
        self.page_size = _check_page_size(page_size)
        if write_batch is not None and (
            isinstance(write_batch, bool) or not isinstance(write_batch, int) or write_batch < 1
        ):
            raise ValueError(f"write_batch must be a positive int, got {write_batch!r}")
        limit = self._max_batch_size()
        wanted = write_batch or _DEFAULT_WRITE_BATCH
        self.write_batch = min(wanted, limit) if limit else wanted

    def _max_batch_size(self) -> int | None:
        client = getattr(self.collection, "_client", None)
        getter = getattr(client, "get_max_batch_size", None)
        if getter is None:
            return None
        with _translate("read the server's batch limit"):
            return int(getter())

    @property
    def name(self) -> str:
        """The collection's name."""
        return str(self.collection.name)

    def __repr__(self) -> str:
        return f"ChromaMemoryStore({self.name!r})"

    # ---- reads ---------------------------------------------------------------------------

    def count(self) -> int:
        """Number of records in the collection."""
        with _translate(f"count {self.name!r}"):
            return int(self.collection.count())

    def _records(self, result: Mapping[str, Any], include_embeddings: bool) -> list[MemoryRecord]:
        ids = list(result.get("ids") or [])
        docs = result.get("documents")
        metas = [decode_metadata(m) for m in (result.get("metadatas") or [None] * len(ids))]
        texts = [
            self.layout.text_of(docs[i] if docs is not None else None, metas[i])
            for i in range(len(ids))
        ]
        embs: list[Any] = [None] * len(ids)
        stored = result.get("embeddings") if include_embeddings else None
        if stored is not None:
            with _translate(f"embed the texts of {self.name!r}"):
                embs = self.layout.our_embeddings(
                    ids, texts, [stored[i] if len(stored) > i else None for i in range(len(ids))]
                )
        return [
            MemoryRecord(id=rid, document=texts[i], embedding=embs[i], metadata=metas[i])
            for i, rid in enumerate(ids)
        ]

    @staticmethod
    def _include(include_embeddings: bool) -> list[str]:
        return ["documents", "metadatas", *(["embeddings"] if include_embeddings else [])]

    def iter_pages(
        self, *, page_size: int | None = None, include_embeddings: bool = True
    ) -> Iterator[list[MemoryRecord]]:
        """Yield every record once, in pages of at most ``page_size`` (default: the store's).

        Order: Chroma's insertion order (stable while the collection is unchanged). Each page is
        requested while the previous one is used (one request ahead, in a helper thread).
        Raises ``ValueError`` for a page size outside 1..5,000.
        """
        size = self.page_size if page_size is None else _check_page_size(page_size)
        include = self._include(include_embeddings)
        seen: set[str] = set()
        offset = 0

        def fetch(at: int) -> Mapping[str, Any]:
            return self.collection.get(limit=size, offset=at, include=include)

        # The next page is requested while this one is decoded and used: a server spends about
        # as long reading and serialising a page as the client spends decoding it.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chroma-page") as pool:
            pending = pool.submit(fetch, offset)
            while True:
                with _translate(f"read {self.name!r}"):
                    result = pending.result()
                got = len(result.get("ids") or [])
                if got == size:
                    pending = pool.submit(fetch, offset + got)
                page = [r for r in self._records(result, include_embeddings) if r.id not in seen]
                seen.update(r.id for r in page)
                if page:
                    yield page
                if got < size:
                    return
                offset += got

    def iter_stored(
        self, *, page_size: int | None = None
    ) -> Iterator[list[tuple[MemoryRecord, bytes]]]:
        """Every record (without planning embeddings) with its stored vector as float32 bytes
        (``b""`` when none), in pages: what the collection holds, whatever the vectors' model
        (a census compares these; :meth:`iter_pages` gives the engine's embeddings instead)."""
        size = self.page_size if page_size is None else _check_page_size(page_size)
        offset = 0
        while True:
            with _translate(f"read {self.name!r}"):
                result = self.collection.get(
                    limit=size, offset=offset, include=["documents", "metadatas", "embeddings"]
                )
            got = len(result.get("ids") or [])
            embs = result.get("embeddings")
            records = self._records(result, include_embeddings=False)
            if records:
                yield [
                    (r, b"" if embs is None else np.asarray(embs[i], np.float32).tobytes())
                    for i, r in enumerate(records)
                ]
            if got < size:
                return
            offset += got

    def iter_records(self, *, include_embeddings: bool = True) -> Iterator[MemoryRecord]:
        """Every record, one at a time (paged underneath)."""
        for page in self.iter_pages(include_embeddings=include_embeddings):
            yield from page

    def get(self, ids: Sequence[str], *, include_embeddings: bool = True) -> list[MemoryRecord]:
        """The records with these ids that exist, in the order of ``ids`` (duplicates once;
        missing ids are left out)."""
        wanted = list(dict.fromkeys(_check_ids(ids, "get")))
        found: dict[str, MemoryRecord] = {}
        include = self._include(include_embeddings)
        for start in range(0, len(wanted), self.page_size):
            chunk = wanted[start : start + self.page_size]
            with _translate(f"read {self.name!r}"):
                result = self.collection.get(ids=chunk, include=include)
            for r in self._records(result, include_embeddings):
                found[r.id] = r
        return [found[i] for i in wanted if i in found]

    def query(self, embedding: np.ndarray, k: int = 10) -> list[tuple[MemoryRecord, float]]:
        """The ``k`` records nearest to ``embedding`` (``(384,) float32``), best first.

        Returns ``(record, cosine)`` pairs, cosine in [-1, 1] computed from the stored
        embedding (so it is a true cosine whatever the collection's distance space). Candidates
        come from Chroma's HNSW index (approximate for large collections). Raises ``ValueError``
        for a wrong shape, a non-finite or all-zero vector, or ``k < 1``.
        """
        q = np.asarray(embedding, dtype=np.float64).reshape(-1)
        if q.shape != (EMBEDDING_DIM,):
            raise ValueError(f"query embedding must have shape ({EMBEDDING_DIM},), got {q.shape}")
        if not np.all(np.isfinite(q)):
            raise ValueError("query embedding contains NaN or infinity")
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            raise ValueError("query embedding is all zeros")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        self._see_width()
        if self.layout.foreign():
            return self._scan_query(q / norm, k)
        total = self.count()
        if total == 0:
            return []
        with _translate(f"query {self.name!r}"):
            result = self.collection.query(
                query_embeddings=[q.astype(np.float32)],
                n_results=min(k, total),
                include=["documents", "metadatas", "embeddings"],
            )
        flat = {
            key: (value[0] if isinstance(value, list | tuple) and value else value)
            for key, value in result.items()
            if key in ("ids", "documents", "metadatas", "embeddings")
        }
        records = self._records(flat, include_embeddings=True)
        qn = q / norm
        scored = []
        for r in records:
            e = r.embedding.astype(np.float64) if r.embedding is not None else None
            en = float(np.linalg.norm(e)) if e is not None else 0.0
            cos = float(np.clip(qn @ e / en, -1.0, 1.0)) if e is not None and en > 0 else 0.0
            scored.append((r, cos))
        scored.sort(key=lambda pair: (-pair[1], pair[0].id))
        return scored

    def _scan_query(self, qn: np.ndarray, k: int) -> list[tuple[MemoryRecord, float]]:
        # The index holds another model's vectors: rank by our (cached) embeddings instead,
        # reading the whole collection (O(n); fine for the operator's search box).
        scored = []
        for r in self.iter_records(include_embeddings=True):
            if r.embedding is not None:
                cos = float(np.clip(qn @ r.embedding.astype(np.float64), -1.0, 1.0))
                scored.append((r, cos))
        scored.sort(key=lambda pair: (-pair[1], pair[0].id))
        return scored[:k]

    def unwritable(self, texts: Sequence[str]) -> dict[str, str]:
        """``{text: reason}`` for texts :meth:`upsert` would refuse (empty, or no vector of the
        collection's model for them); the planner leaves their operations out."""
        self._see_width()
        with _translate(f"read {self.name!r}"):
            return self.layout.unwritable(self.collection, texts)

    def _see_width(self) -> None:
        if self.layout.width is None and self.layout.own_vectors is None:
            with _translate(f"read {self.name!r}"):
                got = self.collection.get(limit=1, include=["embeddings"])
            embs = got.get("embeddings")
            self.layout.see_width(len(embs[0]) if embs is not None and len(embs) else None)

    # ---- writes --------------------------------------------------------------------------

    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace ``records`` (document, embedding and metadata replaced whole).

        Every record is validated before the first write (unique ids, a non-empty text, an
        embedding each — or, in a collection of another model's vectors, a vector of that model
        for each text (``chroma_layout``) — and encodable metadata); on bad input
        ``ValueError``/``TypeError`` (``EmptyText``, ``NoVectorForText``) is raised and nothing
        is written. Writes go in batches of ``write_batch``, each one read and up to three
        Chroma calls (:func:`~consolidation.adapters.chroma_writes.write_batch`: ``add`` for
        new ids, ``update`` of the metadata alone for a stored record that already holds this
        document and vector, ``upsert`` for the rest), so a failure part-way leaves earlier
        batches written — re-running is idempotent.
        """
        records = list(records)
        seen: set[str] = set()
        prepared: list[Prepared] = []
        self._see_width()
        foreign = self.layout.foreign()
        for r in records:
            if not isinstance(r, MemoryRecord):
                raise TypeError(f"upsert takes MemoryRecord objects, got {type(r).__name__}")
            if r.id in seen:
                raise ValueError(f"upsert: id {r.id!r} appears more than once")
            seen.add(r.id)
            check_text(r.document, f"document of {r.id!r}")
            document, placed = self.layout.placed(r.id, r.document, r.metadata)
            if not foreign and r.embedding is None:
                raise ValueError(f"upsert: record {r.id!r} has no embedding")
            if r.embedding is not None and not foreign and not np.all(np.isfinite(r.embedding)):
                raise ValueError(f"upsert: record {r.id!r} has a non-finite embedding")
            try:
                meta = encode_metadata(placed)
            except ValueError as exc:
                raise ValueError(f"upsert: record {r.id!r}: {exc}") from exc
            prepared.append((r.id, document, r.embedding, meta))
        if foreign:  # vectors of the collection's own model, all found before the first write
            with _translate(f"read {self.name!r}"):
                native = self.layout.vectors_for(self.collection, [r.document for r in records])
            prepared = [(p[0], p[1], v, p[3]) for p, v in zip(prepared, native, strict=True)]

        for start in range(0, len(prepared), self.write_batch):
            batch = prepared[start : start + self.write_batch]
            ids = [p[0] for p in batch]
            with _translate(f"write to {self.name!r}"):
                self.layout.remember(self.collection, ids)  # foreign: old vectors outlive it
                write_batch(self.collection, batch)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records by id; missing ids are ignored (idempotent). Batched."""
        ids = list(dict.fromkeys(_check_ids(ids, "delete")))
        for start in range(0, len(ids), self.write_batch):
            chunk = ids[start : start + self.write_batch]
            with _translate(f"delete from {self.name!r}"):
                self._see_width()
                self.layout.remember(self.collection, chunk)  # foreign: for reuse and rollback
                self.collection.delete(ids=chunk)
