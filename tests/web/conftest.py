"""Furniture shared by the console's tests: XSS payloads, a free TCP port, the bare agent and
a logged-in client.

- ``XSS`` / ``XSS_ESCAPED``: a script tag and the bytes Django's autoescape renders it as.
- ``XSS_MIXED``: a script tag plus an ``<img onerror>`` (attribute-borne script), for pages that
  show memory text.
- ``free_port()``: a TCP port on 127.0.0.1 free at the time of the call (for servers the slow
  tests start).
- ``bare_agent``: factory for an ``Agent`` row with no collection behind it (pages that do not
  read the store, or that must cope with a missing store).
- ``login(client, user)``: ``client`` logged in as ``user``.
- ``locomo_agent``: factory ``locomo_agent("conv-26") -> Agent``, one LoCoMo conversation
  imported with ``import_locomo`` (memories and probe queries) into collections of its own.

The LoCoMo path (``locomo_path()``) lives in ``tests/conftest.py``: the engine's tests use it too.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

XSS = "<script>alert(1)</script>"
XSS_ESCAPED = b"&lt;script&gt;alert(1)&lt;/script&gt;"
XSS_MIXED = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def login(client: Any, user: Any) -> Any:
    """``client`` (a Django test ``Client``) logged in as ``user``; returns the client."""
    client.force_login(user)
    return client


@pytest.fixture
def bare_agent(db: Any, unique_name: Callable[[str], str]) -> Callable[..., Any]:
    """Factory: ``bare_agent(**fields) -> Agent``, a row whose collection was never created.

    Defaults: name "Bare agent", a unique slug and collection name; ``fields`` override them.
    """
    from memoryadmin.console.models import Agent

    def make(**fields: Any) -> Any:
        fields.setdefault("name", "Bare agent")
        fields.setdefault("slug", unique_name("a"))
        fields.setdefault("collection_name", unique_name("c"))
        return Agent.objects.create(**fields)

    return make


@pytest.fixture
def locomo_agent(
    db: Any, locomo_file: Any, unique_name: Callable[[str], str]
) -> Callable[[str], Any]:
    """Factory: ``locomo_agent(conversation) -> Agent`` (slug ``locomo-<conversation>``), the
    conversation imported by ``manage.py import_locomo`` from the LoCoMo file."""
    from io import StringIO

    from django.core.management import call_command

    from memoryadmin.console.models import Agent

    def make(conversation: str) -> Any:
        prefix = unique_name("lc") + "-"
        call_command(
            "import_locomo",
            str(locomo_file),
            "--conversation",
            conversation,
            "--collection-prefix",
            prefix,
            stdout=StringIO(),
        )
        return Agent.objects.get(slug=f"locomo-{conversation}")

    return make
