"""The console's process-wide caches survive django-q2 forking its task processes after
``run_worker`` used them in its main process (recovering passes)."""

from __future__ import annotations

import os
import select
import threading
from pathlib import Path
from typing import Any

import numpy as np

from memoryadmin.core import stores


def _in_child(body: Any, timeout: float = 60.0) -> str:
    """Run ``body()`` in a forked child; its return value (a str) or the error, via a pipe.
    A child that does not answer within ``timeout`` seconds is killed and fails the test."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            out = str(body())
        except BaseException as exc:
            out = f"error: {type(exc).__name__}: {exc}"
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], timeout)
        if not ready:
            os.kill(pid, 9)
            raise AssertionError(f"the forked child hung for {timeout:g} s")
        return os.read(read, 65536).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)


def test_it_uses_the_vector_cache_in_a_child_forked_while_the_store_lock_was_held(
    settings: Any, tmp_path: Path
) -> None:
    settings.VECTOR_CACHE_PATH = tmp_path / "vectors.sqlite3"
    cache = stores.vector_cache()
    cache.embed(["parent text"], lambda texts: np.ones((len(texts), 4), dtype=np.float32))
    held = threading.Event()
    release = threading.Event()

    def hold_lock() -> None:  # another thread of the parent is inside a store call
        with stores._lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold_lock)
    holder.start()
    held.wait(10)
    try:

        def child() -> str:
            got = stores.vector_cache().embed(
                ["parent text", "child text"],
                lambda texts: np.full((len(texts), 4), 2.0, dtype=np.float32),
            )
            return str(got[:, 0].tolist())

        answer = _in_child(child)
    finally:
        release.set()
        holder.join()
    assert answer == "[1.0, 2.0]"
    # The child's entry is in the shared file: the parent reads it without computing.
    again = cache.embed(["child text"], lambda texts: 1 / 0)
    assert again[0, 0] == 2.0
