"""Shared helpers of the import/CLI management commands (not a command: leading underscore)."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import CommandError

from memoryadmin.agents.models import Agent

BAD_INPUT = 2
"""Exit status for bad input (unknown agent, bad policy, invalid file), so scripts can tell it from
a failure."""
FAILED = 1
"""Exit status when the command could not do its work (e.g. Chroma unreachable)."""


def bad_input(message: str) -> CommandError:
    """A ``CommandError`` that exits 2 with ``message`` as its one stderr line."""
    return CommandError(message.replace("\n", " "), returncode=BAD_INPUT)


def failed(message: str) -> CommandError:
    """A ``CommandError`` that exits 1 with ``message`` as its one stderr line."""
    return CommandError(message.replace("\n", " "), returncode=FAILED)


def get_agent(slug: str) -> Agent:
    """The agent with this slug, or a bad-input error naming the known slugs."""
    agent = Agent.objects.filter(slug=slug).first()
    if agent is None:
        known = list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:12])
        hint = f" Known agents: {', '.join(known)}." if known else " There are no agents yet."
        raise bad_input(f"Unknown agent {slug!r}.{hint}")
    return agent


def is_terminal(stream: Any) -> bool:
    """True when ``stream`` (a Django OutputWrapper or file) is an interactive terminal."""
    inner = getattr(stream, "_out", stream)
    try:
        return bool(inner.isatty())
    except (AttributeError, ValueError):
        return False


def progress_bar(total: int, desc: str, enabled: bool) -> Any:
    """A tqdm bar on stderr when ``enabled`` (a terminal, not --json); else a no-op object."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, unit="", dynamic_ncols=True, leave=False)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass
