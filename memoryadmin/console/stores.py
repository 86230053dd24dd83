"""The one place that opens Chroma for the console: a client factory and ``get_store(agent)``.

``settings.CHROMA_MODE == "ephemeral"`` gives an in-process ``EphemeralClient`` (tests and
single-process tools; every EphemeralClient of a process shares one in-memory state, so tests use
unique collection names). Any other mode gives an ``HttpClient`` to ``CHROMA_HOST:CHROMA_PORT``
(``CHROMA_SSL``, bearer ``CHROMA_TOKEN``): web and worker are separate processes and Chroma's
embedded ``PersistentClient`` is not process-safe (docs/ARCHITECTURE.md "Processes").

Every failure to reach or open a store becomes :class:`StoreUnavailable` with a sentence an
operator can act on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import TYPE_CHECKING, Any

from django.conf import settings

from .errors import StoreUnavailable

if TYPE_CHECKING:
    from consolidation.adapters.chroma_store import ChromaMemoryStore

    from .models import Agent

__all__ = [
    "collection_exists",
    "create_collection",
    "get_client",
    "get_store",
    "reset_client_cache",
    "store_census",
    "validate_collection_name",
]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_clients: dict[tuple[Any, ...], Any] = {}


def _client_key() -> tuple[Any, ...]:
    mode = settings.CHROMA_MODE
    if mode == "ephemeral":
        return ("ephemeral",)
    return ("http", settings.CHROMA_HOST, settings.CHROMA_PORT, settings.CHROMA_SSL, settings.CHROMA_TOKEN)


def _where() -> str:
    if settings.CHROMA_MODE == "ephemeral":
        return "the in-process Chroma"
    scheme = "https" if settings.CHROMA_SSL else "http"
    return f"the Chroma server at {scheme}://{settings.CHROMA_HOST}:{settings.CHROMA_PORT}"


def get_client() -> Any:
    """The process's Chroma client for the current settings (cached per settings).

    Built by the adapter's one factory, :func:`consolidation.adapters.chroma_store.make_client`.
    Raises :class:`StoreUnavailable` when the server does not answer (nothing is cached then, so
    the next call retries).
    """
    from consolidation.adapters.chroma_store import make_client

    key = _client_key()
    with _lock:
        client = _clients.get(key)
        if client is not None:
            return client
        try:
            if key[0] == "ephemeral":
                client = make_client(ephemeral=True)
            else:
                client = make_client(
                    host=settings.CHROMA_HOST, port=settings.CHROMA_PORT, ssl=settings.CHROMA_SSL,
                    token=settings.CHROMA_TOKEN or None,
                )
        except Exception as exc:  # StoreUnavailable from the adapter, or a bad host/port
            raise StoreUnavailable(f"Cannot reach {_where()}: {exc}") from exc
        _clients[key] = client
        return client


def reset_client_cache() -> None:
    """Forget cached clients (tests that change ``CHROMA_*`` settings, or after a server restart)."""
    with _lock:
        _clients.clear()


def validate_collection_name(name: str) -> str:
    """Return ``name`` stripped, or raise ``ValueError`` when Chroma would refuse it (the adapter's
    rules: 3–512 characters of ``[a-zA-Z0-9._-]``, alphanumeric at both ends, no ``..``, not an
    IPv4 address)."""
    from consolidation.adapters.chroma_store import validate_collection_name as validate

    if not isinstance(name, str):
        raise ValueError("A collection name is required.")
    return validate(name.strip())


def _open(name: str, *, create: bool) -> Any:
    from consolidation.adapters.chroma_store import CollectionNotFound, open_collection

    client = get_client()
    try:
        return open_collection(client, name, create=create)
    except CollectionNotFound:
        raise
    except Exception as exc:
        if isinstance(exc, ValueError) and "collection name" in str(exc):
            raise
        raise StoreUnavailable(f"Cannot open collection {name!r} on {_where()}: {exc}") from exc


def collection_exists(name: str) -> bool:
    """True when the collection ``name`` exists. Raises :class:`StoreUnavailable`."""
    from consolidation.adapters.chroma_store import CollectionNotFound

    try:
        _open(name, create=False)
    except CollectionNotFound:
        return False
    return True


def create_collection(name: str) -> None:
    """Create an empty collection ``name`` (cosine space; a no-op when it exists).

    Raises ``ValueError`` for a name Chroma refuses, :class:`StoreUnavailable` when Chroma is down.
    """
    _open(name, create=True)


def _console_store_class() -> type:
    """``ChromaMemoryStore`` whose reads and writes raise *our* :class:`StoreUnavailable`
    (a :class:`ServiceError`, shown to the operator as is) instead of the adapter's."""
    global _ConsoleStore
    if _ConsoleStore is not None:
        return _ConsoleStore
    from consolidation.adapters.chroma_store import ChromaMemoryStore
    from consolidation.adapters.chroma_store import StoreUnavailable as AdapterUnavailable

    def translated(name: str, generator: bool = False) -> Any:
        method = getattr(ChromaMemoryStore, name)

        if generator:
            def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    yield from method(self, *args, **kwargs)
                except AdapterUnavailable as exc:
                    raise StoreUnavailable(str(exc)) from exc
        else:
            def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    return method(self, *args, **kwargs)
                except AdapterUnavailable as exc:
                    raise StoreUnavailable(str(exc)) from exc

        wrapper.__name__ = name
        wrapper.__doc__ = method.__doc__
        return wrapper

    namespace: dict[str, Any] = {"__doc__": "The adapter's store, raising the console's StoreUnavailable."}
    for name in ("count", "get", "query", "upsert", "delete"):
        namespace[name] = translated(name)
    for name in ("iter_pages", "iter_records"):
        namespace[name] = translated(name, generator=True)
    _ConsoleStore = type("ConsoleStore", (ChromaMemoryStore,), namespace)
    return _ConsoleStore


_ConsoleStore: type | None = None


def get_store(agent: Agent) -> ChromaMemoryStore:
    """The agent's memory store (its collection, records decoded by the adapter).

    Every call on the store raises the console's :class:`StoreUnavailable` when Chroma stops
    answering. Raises :class:`StoreUnavailable` when Chroma is down or the collection does not
    exist.
    """
    from consolidation.adapters.chroma_store import CollectionNotFound

    try:
        collection = _open(agent.collection_name, create=False)
        return _console_store_class()(collection)
    except CollectionNotFound as exc:
        raise StoreUnavailable(
            f"Collection {agent.collection_name!r} of agent {agent.name!r} does not exist on "
            f"{_where()}."
        ) from exc
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise StoreUnavailable(f"Cannot open the store of agent {agent.name!r}: {exc}") from exc


def store_census(store: Any) -> dict[str, Any]:
    """Record count and SHA-256 over the sorted ids, documents, metadata and embeddings.

    Two censuses are equal exactly when the store is byte-identical in what I-2 names (ids,
    documents, metadata, embeddings as float32 bytes). Returns ``{"count": int, "sha256": hex}``.
    """
    rows: list[tuple[str, str, str, bytes]] = []
    for page in store.iter_pages(page_size=5000, include_embeddings=True):
        for r in page:
            emb = b"" if r.embedding is None else r.embedding.astype("float32").tobytes()
            meta = json.dumps(r.metadata, sort_keys=True, ensure_ascii=False, default=str)
            rows.append((r.id, r.document, meta, emb))
    rows.sort(key=lambda row: row[0])
    h = hashlib.sha256()
    for rid, doc, meta, emb in rows:
        for part in (rid.encode(), doc.encode(), meta.encode(), emb):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
    return {"count": len(rows), "sha256": h.hexdigest()}
