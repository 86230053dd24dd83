"""Per-process state that must not cross ``fork()``.

The worker (``run_worker``) resumes interrupted passes in its main process — embedding texts,
reading the vector cache, talking to Chroma — and then django-q2 forks its task processes. A
child gets a copy of every object but only the forking thread: a ``ThreadPoolExecutor`` made in
the parent has no threads in the child (``embed()`` waited on it forever), a lock held by
another parent thread stays held, and a SQLite connection or an HTTP keep-alive socket would be
shared by two processes. Objects holding such state register here and rebuild it lazily in
the child (``os.register_at_fork(after_in_child=...)``, CPython ≥ 3.7, POSIX).
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["ForkAware", "forget_after_fork"]


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None:
        """Drop threads, locks, sessions and connections copied from the parent (never close
        them: they still belong to the parent). Runs in the child right after ``fork()``, with
        only the forking thread alive: no locks may be taken, nothing may block."""


_registered: weakref.WeakSet[ForkAware] = weakref.WeakSet()


def forget_after_fork(obj: ForkAware) -> None:
    """Call ``obj._after_fork_in_child()`` in every child process forked from now on (held
    weakly: a collected object is forgotten)."""
    _registered.add(obj)


def _run_hooks() -> None:
    for obj in list(_registered):
        obj._after_fork_in_child()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork()
    os.register_at_fork(after_in_child=_run_hooks)
