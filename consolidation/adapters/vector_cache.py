"""A process-safe file cache of vectors keyed by the SHA-256 of the exact text.

Two uses, both for attached collections whose stored vectors are not the engine's
all-MiniLM-L6-v2 (mem0's and PraisonAI's 1536-d OpenAI vectors):

- **Our embeddings** (table ``ours``, key = model tag + sha256(text)): planning always compares
  texts with the engine's own 384-d embeddings, because every threshold of the policy was
  calibrated on them. Embedding a 50,000-memory store takes minutes on two cores (~250
  texts/s, ``embedder.py``), so a pass must not re-embed an unchanged store: a text's
  embedding depends only on the text, so it is looked up by content hash and computed once.
- **The collection's own vectors** (table ``native``, key = collection + sha256(text)): a
  merged memory whose text equals a source's is written with that source's stored vector, and
  a rollback restores an original with the vector it had. The store saves a record's vector
  here just before deleting or overwriting it, so the vector outlives the record.

Why a SQLite file and not a Django table: the adapter lives in ``consolidation/`` (no Django),
the web and worker processes share it (SQLite locks across processes; WAL lets readers run
beside a writer), it needs no migration, and deleting the file loses nothing but time (every
entry can be recomputed from text, except native vectors of records already deleted, which
only matters for rolling back passes applied before the deletion). Default location:
``$MEMORYADMIN_VAR_DIR/cache/vectors.sqlite3`` (chosen by the console).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from .forking import forget_after_fork

__all__ = ["VectorCache", "text_key"]


def text_key(text: str) -> str:
    """SHA-256 hex of the exact UTF-8 text (no normalisation: the embedding depends on it)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS ours (key TEXT PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS native (
    collection TEXT NOT NULL, key TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY (collection, key)
);
"""
_CHUNK = 500  # SQLite's default limit on host parameters is 999


class VectorCache:
    """Vectors by text hash in one SQLite file (module docstring). Thread- and process-safe.

    Fork-safe: a child process forked after the cache was opened opens its own connection to
    the file on first use (SQLite forbids carrying a connection across ``fork()``); the
    parent's connection is left untouched in the child, never closed there.

    Args:
        path: the SQLite file (its directory is created); ``":memory:"`` for a private cache.
        model_tag: names the embedding model of the ``ours`` table, so a model change never
            returns stale vectors.
    """

    def __init__(self, path: str | Path, *, model_tag: str = "all-MiniLM-L6-v2") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.model_tag = model_tag
        self._lock = threading.Lock()
        self._inherited: list[sqlite3.Connection] = []
        self._connect()
        forget_after_fork(self)

    def _connect(self) -> None:
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        with self._lock, self._db:
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        self._pid = os.getpid()

    def _after_fork_in_child(self) -> None:
        # Keep the parent's connection referenced: closing (or collecting) it here could
        # checkpoint or delete the parent's WAL file.
        self._inherited.append(self._db)
        self._lock = threading.Lock()
        self._pid = -1  # reconnect on first use (see _conn)

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            self._connect()  # a ":memory:" cache starts empty in the child: only costs time
        return self._db

    def close(self) -> None:
        """Close the file (the object is unusable afterwards)."""
        with self._lock:
            self._conn.close()

    # ---- our embeddings ------------------------------------------------------------------

    def _ours_key(self, text: str) -> str:
        return f"{self.model_tag}:{text_key(text)}"

    def embed(self, texts: Sequence[str], embed: Callable[[list[str]], object]) -> np.ndarray:
        """``(len(texts), d) float32``: cached embeddings, computing only the missing texts.

        ``embed`` (``list[str] -> (n, d)``) is called once with the distinct missing texts
        (not at all when every text is cached). Its errors propagate; nothing is cached then.
        """
        keys = [self._ours_key(t) for t in texts]
        found = self._get("ours", None, keys)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        if missing:
            vecs = np.asarray(embed(missing), dtype=np.float32)
            rows = [(self._ours_key(t), v.tobytes()) for t, v in zip(missing, vecs, strict=True)]
            db = self._conn
            with self._lock, db:
                db.executemany("INSERT OR REPLACE INTO ours (key, vec) VALUES (?, ?)", rows)
            for (k, _), v in zip(rows, vecs, strict=True):
                found[k] = v
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32)

    # ---- the collection's own vectors ----------------------------------------------------

    def put_native(self, collection: str, pairs: Iterable[tuple[str, np.ndarray]]) -> None:
        """Remember ``(text, vector)`` pairs of ``collection`` (the latest vector wins)."""
        rows = [
            (collection, text_key(t), np.asarray(v, dtype=np.float32).tobytes()) for t, v in pairs
        ]
        if rows:
            db = self._conn
            with self._lock, db:
                db.executemany(
                    "INSERT OR REPLACE INTO native (collection, key, vec) VALUES (?, ?, ?)", rows
                )

    def get_native(self, collection: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """``{text: vector}`` for the texts of ``collection`` whose vector was remembered."""
        by_key = {text_key(t): t for t in texts}
        found = self._get("native", collection, list(by_key))
        return {by_key[k]: v for k, v in found.items()}

    # ---- forgetting ----------------------------------------------------------------------

    def forget(self, texts: Sequence[str], collections: Sequence[str] = ()) -> int:
        """Delete every row of ``texts``: our embeddings (this cache's model tag) and the native
        vectors of ``collections``; returns the rows deleted. Deleted pages are overwritten
        (``secure_delete``) and the WAL truncated, so the file keeps no copy of the vectors."""
        keys = list(dict.fromkeys(text_key(t) for t in texts))
        deleted = 0
        db = self._conn
        with self._lock, db:
            db.execute("PRAGMA secure_delete = ON")
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                ours = [f"{self.model_tag}:{c}" for c in chunk]
                deleted += db.execute(f"DELETE FROM ours WHERE key IN ({marks})", ours).rowcount
                for collection in collections:
                    deleted += db.execute(
                        f"DELETE FROM native WHERE collection = ? AND key IN ({marks})",
                        [collection, *chunk],
                    ).rowcount
        # a reader holding the WAL: the next checkpoint truncates it
        with self._lock, contextlib.suppress(sqlite3.Error):
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return deleted

    def _get(self, table: str, collection: str | None, keys: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        distinct = list(dict.fromkeys(keys))
        for start in range(0, len(distinct), _CHUNK):
            chunk = distinct[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            args: list[str | None]
            if table == "ours":
                sql, args = f"SELECT key, vec FROM ours WHERE key IN ({marks})", [*chunk]
            else:
                sql = f"SELECT key, vec FROM native WHERE collection = ? AND key IN ({marks})"
                args = [collection, *chunk]
            db = self._conn
            with self._lock:
                rows = db.execute(sql, args).fetchall()
            for key, blob in rows:
                out[key] = np.frombuffer(blob, dtype=np.float32).copy()
        return out
