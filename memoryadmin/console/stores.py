"""The one place that opens Chroma for the console: a client factory and ``get_store(agent)``.

``settings.CHROMA_MODE == "ephemeral"`` gives an in-process ``EphemeralClient`` (tests and
single-process tools; every EphemeralClient of a process shares one in-memory state, so tests use
unique collection names). Any other mode gives an ``HttpClient`` to ``CHROMA_HOST:CHROMA_PORT``
(``CHROMA_SSL``, bearer ``CHROMA_TOKEN``): web and worker are separate processes and Chroma's
embedded ``PersistentClient`` is not process-safe (ARCHITECTURE.md "Processes").

Every failure to reach or open a store becomes :class:`StoreUnavailable` with a sentence an
operator can act on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from typing import TYPE_CHECKING, Any

from django.conf import settings

from .errors import StoreUnavailable

if TYPE_CHECKING:
    from consolidation.adapters.chroma_store import ChromaMemoryStore

    from .models import Agent

__all__ = [
    "COLLECTION_NAME_RE",
    "collection_exists",
    "create_collection",
    "get_client",
    "get_store",
    "reset_client_cache",
    "store_census",
    "validate_collection_name",
]

log = logging.getLogger(__name__)

COLLECTION_NAME_RE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9._-]{1,510})[a-zA-Z0-9]$")
"""Chroma's collection-name rule: 3–512 chars of ``[a-zA-Z0-9._-]``, alphanumeric at both ends
(ARCHITECTURE.md "Chroma facts"); Chroma also refuses ``..``."""

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

    Raises :class:`StoreUnavailable` when the server does not answer (nothing is cached then, so
    the next call retries).
    """
    key = _client_key()
    with _lock:
        client = _clients.get(key)
        if client is not None:
            return client
        try:
            import chromadb

            if key[0] == "ephemeral":
                client = chromadb.EphemeralClient()
            else:
                headers = {"Authorization": f"Bearer {settings.CHROMA_TOKEN}"} if settings.CHROMA_TOKEN else None
                client = chromadb.HttpClient(
                    host=settings.CHROMA_HOST, port=settings.CHROMA_PORT,
                    ssl=settings.CHROMA_SSL, headers=headers,
                )
                client.heartbeat()
        except Exception as exc:  # chromadb raises ValueError/httpx errors for a dead server
            raise StoreUnavailable(f"Cannot reach {_where()}: {exc}") from exc
        _clients[key] = client
        return client


def reset_client_cache() -> None:
    """Forget cached clients (tests that change ``CHROMA_*`` settings, or after a server restart)."""
    with _lock:
        _clients.clear()


def validate_collection_name(name: str) -> str:
    """Return ``name`` stripped, or raise ``ValueError`` when Chroma would refuse it."""
    name = (name or "").strip()
    if not COLLECTION_NAME_RE.match(name) or ".." in name:
        raise ValueError(
            "Collection names are 3–512 characters of letters, digits, '.', '_' or '-', "
            f"starting and ending with a letter or digit (got {name!r})."
        )
    return name


def collection_exists(name: str) -> bool:
    """True when the collection ``name`` exists. Raises :class:`StoreUnavailable`."""
    client = get_client()
    try:
        return name in {getattr(c, "name", c) for c in client.list_collections()}
    except Exception as exc:
        raise StoreUnavailable(f"Cannot list collections on {_where()}: {exc}") from exc


def create_collection(name: str) -> None:
    """Create an empty collection ``name`` (cosine space). Raises :class:`StoreUnavailable`."""
    from consolidation.adapters.chroma_store import open_collection

    try:
        open_collection(get_client(), name, create=True)
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise StoreUnavailable(f"Cannot create collection {name!r} on {_where()}: {exc}") from exc


def get_store(agent: Agent) -> ChromaMemoryStore:
    """The agent's memory store (its collection read through ``agent.field_map``).

    Raises :class:`StoreUnavailable` when Chroma is down or the collection does not exist.
    """
    from consolidation.adapters.chroma_store import ChromaMemoryStore, open_collection
    from consolidation.adapters.chroma_store import StoreUnavailable as AdapterUnavailable

    client = get_client()
    try:
        collection = open_collection(client, agent.collection_name, create=False)
    except AdapterUnavailable as exc:
        raise StoreUnavailable(str(exc)) from exc
    except Exception as exc:
        raise StoreUnavailable(
            f"Cannot open collection {agent.collection_name!r} of agent {agent.name!r} on "
            f"{_where()}: {exc}"
        ) from exc
    return ChromaMemoryStore(collection)


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
