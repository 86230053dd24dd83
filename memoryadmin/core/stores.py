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
import os
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
from django.conf import settings

from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import StoreUnavailable

if TYPE_CHECKING:
    from consolidation import MemoryRecord
    from consolidation.adapters.chroma_layout import Layout
    from consolidation.adapters.chroma_store import ChromaMemoryStore
    from consolidation.shapes import CollectionSample

__all__ = [
    "collection_exists",
    "collection_sample",
    "create_collection",
    "get_client",
    "get_store",
    "reset_client_cache",
    "embed",
    "embeddings_within_ulp",
    "get_live",
    "llm_writer",
    "looks_unavailable",
    "store_census",
    "store_layout",
    "validate_collection_name",
    "vector_cache",
    "feature_cache",
    "row_cache",
    "drop_row_cache",
    "verdict_cache",
]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_clients: dict[tuple[Any, ...], Any] = {}
_inherited: list[Any] = []


def _after_fork_in_child() -> None:
    """In a process forked from this one (django-q2's task processes, forked by ``run_worker``
    after it resumed passes): a fresh lock, and no HTTP client of the parent's (its keep-alive
    connections would be shared by two processes). The clients are kept referenced, not closed:
    closing would shut the parent's sockets too. The in-process ephemeral client is kept (its
    state is this process's copy). Vector caches reconnect by themselves."""
    global _lock
    _lock = threading.Lock()
    for key in [k for k in _clients if k[0] != "ephemeral"]:
        _inherited.append(_clients.pop(key))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _client_key() -> tuple[Any, ...]:
    mode = settings.CHROMA_MODE
    if mode == "ephemeral":
        return ("ephemeral",)
    return (
        "http",
        settings.CHROMA_HOST,
        settings.CHROMA_PORT,
        settings.CHROMA_SSL,
        settings.CHROMA_TOKEN,
    )


def _where() -> str:
    if settings.CHROMA_MODE == "ephemeral":
        return "the in-process Chroma"
    scheme = "https" if settings.CHROMA_SSL else "http"
    return f"the Chroma server at {scheme}://{settings.CHROMA_HOST}:{settings.CHROMA_PORT}"


def get_client() -> Any:
    """The process's Chroma client for the current settings (cached per settings).

    Built by the adapter's one factory, :func:`consolidation.adapters.chroma_store.make_client`.
    Raises :class:`StoreUnavailable` when the server does not answer or refuses
    ``CHROMA_TOKEN`` (nothing is cached then, so the next call retries).
    """
    from consolidation.adapters.chroma_store import StoreAccessDenied, make_client

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
                    host=settings.CHROMA_HOST,
                    port=settings.CHROMA_PORT,
                    ssl=settings.CHROMA_SSL,
                    token=settings.CHROMA_TOKEN or None,
                )
        except StoreAccessDenied as exc:
            raise StoreUnavailable(
                f"Access denied by {_where()}, check CHROMA_TOKEN: {exc}"
            ) from exc
        except Exception as exc:  # StoreUnavailable from the adapter, or a bad host/port
            raise StoreUnavailable(f"Cannot reach {_where()}: {exc}") from exc
        _clients[key] = client
        return client


def warm_up() -> dict[str, float]:
    """Build the process's Chroma client and load the embedder once, at process start, so the
    first page that needs them does not pay for it (a fresh console took 6.6 s for its first
    agent page, 3.7 s for its first memory detail). Returns the seconds each took
    (``{"chroma": s, "embedder": s}``; a part that failed is left out and logged: the request
    that needs it reports the error as before). Off with ``MEMORYADMIN_WARM_UP=0``; ``wsgi.py``
    (the web process, also under ``runserver``) and ``run_worker`` call it."""
    import time

    out: dict[str, float] = {}
    if not settings.MEMORYADMIN_WARM_UP:
        return out
    t0 = time.perf_counter()
    try:
        get_client()
        out["chroma"] = time.perf_counter() - t0
    except StoreUnavailable as exc:
        log.warning("warm-up: %s", exc)
    t0 = time.perf_counter()
    try:
        from consolidation.adapters.embedder import get_default_embedder

        get_default_embedder().embed(["warm up"])
        out["embedder"] = time.perf_counter() - t0
    except Exception as exc:  # weights not installed: the first embedding request says so
        log.warning("warm-up: embedder not loaded: %s", exc)
    return out


def server_error() -> str:
    """``""`` when the Chroma server answers a heartbeat (one cheap call on the process's
    client), else why not, in words (the :class:`StoreUnavailable` message): what the dashboard
    shows instead of counts that are only the last known ones."""
    try:
        get_client().heartbeat()
    except StoreUnavailable as exc:
        return str(exc)
    except Exception as exc:  # the cached client of a server that went away
        return f"Cannot reach {_where()}: {exc}"
    return ""


def reset_client_cache() -> None:
    """Forget cached clients (tests that change ``CHROMA_*`` settings, or after a server
    restart)."""
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


def collection_sample(name: str) -> CollectionSample:
    """The first records of the existing collection ``name``, with its vector width and space.

    Raises ``ValueError`` when there is no such collection (or Chroma refuses the name),
    :class:`StoreUnavailable` when Chroma is down.
    """
    from consolidation.adapters.chroma_info import sample_collection
    from consolidation.adapters.chroma_store import CollectionNotFound
    from consolidation.adapters.chroma_store import StoreUnavailable as AdapterUnavailable

    name = validate_collection_name(name)
    try:
        return sample_collection(_open(name, create=False))
    except CollectionNotFound as exc:
        raise ValueError(f"There is no collection named {name!r} on {_where()}.") from exc
    except AdapterUnavailable as exc:
        raise StoreUnavailable(f"Cannot read collection {name!r} on {_where()}: {exc}") from exc


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

    namespace: dict[str, Any] = {
        "__doc__": "The adapter's store, raising the console's StoreUnavailable."
    }
    for name in ("count", "get", "query", "upsert", "delete", "unwritable"):
        namespace[name] = translated(name)
    for name in ("iter_pages", "iter_records", "iter_stored"):
        namespace[name] = translated(name, generator=True)
    _ConsoleStore = type("ConsoleStore", (ChromaMemoryStore,), namespace)
    return _ConsoleStore


_ConsoleStore: type | None = None


def get_store(agent: Agent) -> ChromaMemoryStore:
    """The agent's memory store (its collection, records decoded by the adapter).

    The store reads and writes the collection as its writer laid it out
    (:func:`store_layout`: text key, foreign vectors). Every call on the store raises the
    console's :class:`StoreUnavailable` when Chroma stops answering. Raises
    :class:`StoreUnavailable` when Chroma is down or the collection does not exist, and
    ``ValueError`` for an invalid embedder setting.
    """
    from consolidation.adapters.chroma_store import CollectionNotFound

    layout = store_layout(agent)
    try:
        collection = _open(agent.collection_name, create=False)
        return _console_store_class()(collection, layout=layout)
    except CollectionNotFound as exc:
        raise StoreUnavailable(
            f"Collection {agent.collection_name!r} of agent {agent.name!r} does not exist on "
            f"{_where()}."
        ) from exc
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise StoreUnavailable(f"Cannot open the store of agent {agent.name!r}: {exc}") from exc


def store_layout(agent: Agent) -> Layout:
    """Where the agent's collection keeps its text and whose vectors it holds.

    From the agent's field map (``document``: the text key), its ``embedder`` setting (an
    OpenAI-compatible endpoint for the collection's own model; ``own_vectors`` to overrule
    detection by width), our offline embedder and the process's vector cache
    (``settings.VECTOR_CACHE_PATH``). Raises ``ValueError`` for an invalid embedder setting,
    among them a key variable or host the deployment does not allow (then no key is read).
    """
    from consolidation.adapters.chroma_layout import Layout
    from consolidation.adapters.remote_embedder import endpoint_embedder_from_config

    config = agent.get_embedder_config()
    native = endpoint_embedder_from_config(  # the key name and host checked again at each use
        config,
        settings.EMBEDDER_KEYS,
        allowed_key_env=settings.EMBEDDER_KEY_ENV_ALLOWED,
        allowed_hosts=settings.ENDPOINT_HOSTS_ALLOWED,
    )
    own = config.get("own_vectors")
    return Layout(
        agent.collection_name,
        field_map=agent.get_field_map(),
        own_vectors=own if isinstance(own, bool) else None,
        embed=_our_embed,
        native_embed=native.embed if native is not None else None,
        cache=vector_cache(),
    )


def _our_embed(texts: list[str]) -> Any:
    from consolidation.adapters.embedder import get_default_embedder

    return get_default_embedder().embed(texts)


_caches: dict[str, Any] = {}


def vector_cache() -> Any:
    """The process's :class:`~consolidation.adapters.vector_cache.VectorCache` (one per path)."""
    from consolidation.adapters.vector_cache import VectorCache

    path = str(settings.VECTOR_CACHE_PATH)
    with _lock:
        if path not in _caches:
            _caches[path] = VectorCache(path)
        return _caches[path]


def feature_cache() -> Any:
    """The process's :class:`~consolidation.planning.FeatureCache`: the per-memory features of
    every text a pass of this process planned, kept for the next pass (a feature depends only
    on its text, so the stores of all agents share it; bounded by its ``max_texts``). Without
    it an incremental pass reads every stored text again; the plan is the same either way."""
    from consolidation.planning import FeatureCache

    with _lock:
        if "features" not in _caches:
            _caches["features"] = FeatureCache()
        return _caches["features"]


ROW_CACHE_ROWS = 2_000_000
"""Rows the :func:`row_cache` of all stores of a process may hold (≈ 400 bytes a row: 0.8 GB);
above it the least recently planned stores' are dropped first, never the store in hand."""


def row_cache(agent: Agent, *, forgotten: int | None) -> Any:
    """The process's :class:`~consolidation.planning.RowCache` of ``agent``'s store: the
    bounding rows of its memories, kept between its incremental passes (the plan is the same
    without it; with it a pass reads no stored vector for its search). Keyed by the collection
    and ``forgotten``, the id of the agent's last applied forget request
    (:func:`~memoryadmin.memories.selectors.forget.last_applied_forget`), so a forget applied in
    any process starts that store's rows again in every process at its next pass (the rows are
    a part of each embedding). At most :data:`ROW_CACHE_ROWS` rows are kept over all stores.
    The cache keeps the rows' int8 codes, searched with onnxruntime's 8-bit product
    (:mod:`consolidation.adapters.int8_product`: the same pairs, ≈ 2.3× faster at 1M)."""
    from consolidation.adapters.int8_product import int8_product
    from consolidation.planning import RowCache

    stamp = forgotten
    with _lock:
        caches = _caches.setdefault("rows", {})
        held = caches.pop(agent.collection_name, None)
        if held is None or held[0] != stamp:
            held = (stamp, RowCache(product=int8_product()))
        caches[agent.collection_name] = held  # last: the most recently planned
        while len(caches) > 1 and sum(len(c) for _, c in caches.values()) > ROW_CACHE_ROWS:
            caches.pop(next(iter(caches)))
        return held[1]


def drop_row_cache(agent: Agent) -> int:
    """Drop this process's :func:`row_cache` of ``agent``'s store (a forget): rows held."""
    with _lock:
        held = _caches.get("rows", {}).pop(agent.collection_name, None)
    return held[1].clear() if held is not None else 0


def verdict_cache() -> Any:
    """The process's :class:`~consolidation.adapters.verdict_cache.VerdictFileCache` (one per
    path, ``settings.VERDICT_CACHE_PATH``): the LLM judge's answers kept between passes."""
    from consolidation.adapters.verdict_cache import VerdictFileCache

    path = str(settings.VERDICT_CACHE_PATH)
    with _lock:
        if path not in _caches:
            _caches[path] = VerdictFileCache(path)
        return _caches[path]


def llm_writer() -> Any:
    """The configured LLM writer (:class:`~consolidation.adapters.llm.LLMWriter`) or ``None``.

    From the settings ``MEMORYADMIN_LLM_MODEL`` (blank: ``None``, no network),
    ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``MEMORYADMIN_LLM_TIMEOUT`` and
    ``ENDPOINT_HOSTS_ALLOWED``, read at each call and checked by
    :func:`consolidation.adapters.llm.llm_from_env`, which raises ``ValueError`` naming the
    setting that is invalid.
    """
    from consolidation.adapters.llm import llm_from_env

    return llm_from_env(
        {
            "MEMORYADMIN_LLM_MODEL": settings.MEMORYADMIN_LLM_MODEL,
            "OPENAI_BASE_URL": settings.OPENAI_BASE_URL,
            "OPENAI_API_KEY": settings.OPENAI_API_KEY,
            "MEMORYADMIN_LLM_TIMEOUT": str(settings.MEMORYADMIN_LLM_TIMEOUT),
            "ENDPOINT_HOSTS_ALLOWED": ",".join(settings.ENDPOINT_HOSTS_ALLOWED),
        }
    )


def store_census(store: Any) -> dict[str, Any]:
    """Record count and two SHA-256 hashes over the records sorted by id.

    Returns ``{"count": int, "sha256": hex, "content_sha256": hex}``:

    - ``sha256`` covers ids, documents, metadata (canonical JSON) and embeddings as float32
      bytes: equal exactly when the store is byte-identical in what I-2 names.
    - ``content_sha256`` covers ids, documents and metadata only.

    Why two: Chroma's ``cosine`` collections (every agent's default) do not store an embedding
    exactly as written. A written vector reads back within 1 ulp per value (≤ 1.5e-8 for unit
    vectors), and re-writing what was read can move it again: measured on chromadb 1.5 with
    2,000 unit vectors, 557 moved on the first write, 280 when written back, then 124, 55 …
    (``l2``/``ip`` collections are exact). So a pass rolled back, an import undone, or an
    export imported again re-writes records and may change ``sha256`` while ``content_sha256``
    stays equal and every embedding stays within 1 ulp of the original. The census never hides
    that drift (``sha256`` reports it); tests of those paths compare ``content_sha256`` exactly
    and embeddings with :func:`embeddings_within_ulp`.

    The embeddings are the vectors the collection stores (an attached mem0 collection's
    1536-d ones, not our planning embeddings).
    """
    rows: list[tuple[str, str, str, bytes]] = []
    for page in store.iter_stored():
        for r, emb in page:
            meta = json.dumps(r.metadata, sort_keys=True, ensure_ascii=False, default=str)
            rows.append((r.id, r.document, meta, emb))
    rows.sort(key=lambda row: row[0])
    h, content = hashlib.sha256(), hashlib.sha256()
    for rid, doc, meta, emb in rows:
        for part in (rid.encode(), doc.encode(), meta.encode(), emb):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
        for part in (rid.encode(), doc.encode(), meta.encode()):
            content.update(len(part).to_bytes(8, "big"))
            content.update(part)
    return {"count": len(rows), "sha256": h.hexdigest(), "content_sha256": content.hexdigest()}


def embeddings_within_ulp(a: Any, b: Any, *, ulps: int = 1) -> bool:
    """True when two ``(n, 384)`` (or ``(384,)``) float32 arrays differ by at most ``ulps``
    units in the last place in every value: the tolerance of a Chroma cosine-collection
    re-write (see :func:`store_census`)."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    if a.shape != b.shape:
        return False
    return bool(np.all(np.abs(a - b) <= ulps * np.spacing(np.maximum(np.abs(a), np.abs(b)))))


def embed(texts: list[str]) -> np.ndarray:
    """``(n, 384)`` float32 embeddings of ``texts`` by our offline embedder (all-MiniLM-L6-v2);
    ``(0, 384)`` for no texts."""
    from consolidation.adapters.embedder import get_default_embedder

    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return np.asarray(get_default_embedder().embed(texts), dtype=np.float32)


def get_live(store: Any, ids: list[str], *, include_embeddings: bool) -> dict[str, MemoryRecord]:
    """The records of ``ids`` that ``store`` holds now, by id, read 1,000 ids a call (well
    under Chroma's page limit). Raises whatever the store raises."""
    out: dict[str, MemoryRecord] = {}
    for start in range(0, len(ids), 1000):
        for rec in store.get(ids[start : start + 1000], include_embeddings=include_embeddings):
            out[rec.id] = rec
    return out


def looks_unavailable(exc: BaseException) -> bool:
    """True for errors that mean "Chroma is not answering" (connection refused, timeouts)."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(
        k in text
        for k in ("connect", "timeout", "timed out", "unavailable", "unreachable", "refused")
    )
