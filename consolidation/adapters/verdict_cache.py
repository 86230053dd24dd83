"""The LLM judge's answers, kept between passes in one SQLite file (like the vector cache).

Key: :func:`consolidation.llm_judge.cache_key` — SHA-256 over the prompt version, the model and
the pair as quoted (both texts and times). Value: the validated verdict ``{"verdict", "keep",
"why"}`` as JSON. An unchanged unsure pair therefore costs one request ever per model, not one
per pass. Only validated answers are stored: an unsure reply is asked again next pass.

Why a SQLite file: the same reasons as :mod:`.vector_cache` (no Django in ``consolidation/``,
shared by the web and worker processes, no migration, deleting it loses only requests).
Default location: ``$MEMORYADMIN_VAR_DIR/cache/verdicts.sqlite3`` (chosen by the console).
Fork-safe in the same way: a forked child opens its own connection on first use.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from .forking import forget_after_fork

__all__ = ["VerdictFileCache"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY, value TEXT NOT NULL, stored_at REAL NOT NULL
);
"""


class VerdictFileCache:
    """A :class:`consolidation.llm_judge.VerdictCache` in a SQLite file; thread-, process- and
    fork-safe. ``path``: the file (its directory is created) or ``":memory:"``."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
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
        self._inherited.append(self._db)  # the parent's: never closed here
        self._lock = threading.Lock()
        self._pid = -1

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            self._connect()
        return self._db

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored verdict of ``key``, or ``None`` (absent or unreadable)."""
        db = self._conn
        with self._lock:
            row = db.execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` (JSON-serialisable) under ``key`` (the latest wins)."""
        db = self._conn
        with self._lock, db:
            db.execute(
                "INSERT OR REPLACE INTO verdicts (key, value, stored_at) VALUES (?, ?, ?)",
                (key, json.dumps(value, ensure_ascii=False), time.time()),
            )

    def __len__(self) -> int:
        db = self._conn
        with self._lock:
            return int(db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def close(self) -> None:
        """Close the file (the object is unusable afterwards)."""
        with self._lock:
            self._conn.close()
