"""Shared fixtures: in-process Chroma, django-q2 in sync mode, three users in the role groups,
and an ``agent_with_memories`` factory that writes memories with real embeddings.

- Chroma: ``settings.CHROMA_MODE = "ephemeral"`` (an in-process ``EphemeralClient``). Every
  EphemeralClient of a process shares one state, so each test gets unique collection names
  (``unique_name``).
- django-q2 reads ``Q_CLUSTER["sync"]`` once, at import, into ``django_q.conf.Conf.SYNC``; the
  ``q_sync`` fixture (autouse) sets that attribute, so ``async_task`` runs inline in tests.
- Users: alice (admin), bob (reviewer), carol (viewer); password ``"password"``, hashed with
  MD5 in the test process (``pytest_configure``: PBKDF2 costs 0.27 s a user).
- LoCoMo: ``locomo_path()`` is ``../shared/data/locomo/locomo7.json`` (never copied into the
  repo); it FAILS the test when the file is missing and env ``CI`` is set, and skips otherwise.

The console's furniture:

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

import os
import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryadmin.agents.services.agents import agent_create

PASSWORD = "password"

LOCOMO7 = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / "locomo7.json"
"""The LoCoMo file next to the repository (``../shared/data/locomo/locomo7.json``)."""


def pytest_configure(config: pytest.Config) -> None:
    """Passwords are hashed with MD5 in the test process (Django's "Speeding up the tests"
    advice): the default PBKDF2 costs 0.27 s a hash on this machine kind, paid for every user a
    fixture creates. Servers and workers the slow tests start keep the production hashers."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def locomo_path() -> Path:
    """:data:`LOCOMO7`; the calling test FAILS when it is missing and env ``CI`` is set (the
    data is required in CI) and is skipped otherwise."""
    if not LOCOMO7.exists():
        if os.environ.get("CI"):
            pytest.fail(f"LoCoMo data missing at {LOCOMO7} (required when CI is set)")
        pytest.skip(f"LoCoMo data not found at {LOCOMO7}")
    return LOCOMO7


@pytest.fixture
def locomo_file() -> Path:
    """The LoCoMo file (see :func:`locomo_path`)."""
    return locomo_path()


_EMBED_CACHE: dict[str, np.ndarray] = {}


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """``(len(texts), 384) float32`` from the offline embedder, cached per text for the session."""
    from consolidation.adapters.embedder import get_default_embedder

    todo = sorted({t for t in texts if t not in _EMBED_CACHE})
    if todo:
        for text, vec in zip(todo, get_default_embedder().embed(todo), strict=True):
            _EMBED_CACHE[text] = np.asarray(vec, dtype=np.float32)
    return np.stack([_EMBED_CACHE[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)


def _is_engine_test(request: pytest.FixtureRequest) -> bool:
    # The pure engine's tests never touch Django; keep them free of Django fixtures.
    try:
        parts = request.path.relative_to(request.config.rootpath).parts
    except ValueError:
        parts = request.path.parts
    return parts[:2] == ("tests", "consolidation")


@pytest.fixture(autouse=True)
def chroma_ephemeral(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every console test talks to the in-process Chroma (no server needed)."""
    if _is_engine_test(request):
        yield
        return
    from memoryadmin.core import stores

    request.getfixturevalue("settings").CHROMA_MODE = "ephemeral"
    stores.reset_client_cache()
    yield
    stores.reset_client_cache()


@pytest.fixture(autouse=True)
def q_sync(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """django-q2 runs tasks inline (``Conf.SYNC`` is read at import, so patch the attribute)."""
    if _is_engine_test(request):
        return
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def unique_name() -> Callable[[str], str]:
    """``unique_name("mem")`` → ``"mem-<12 hex>"``: collection/slug names unique in the process."""
    return lambda prefix="t": f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def roles(db: Any) -> dict[str, int]:
    """The viewer/reviewer/admin groups with their permissions."""
    from memoryadmin.core.roles import ensure_roles

    return ensure_roles()


def _user(username: str, role: str) -> Any:
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username, f"{username}@example.org", PASSWORD)
    user.groups.add(Group.objects.get(name=role))
    return User.objects.get(pk=user.pk)  # fresh: no cached permissions


@pytest.fixture
def alice(roles: Any) -> Any:
    """An admin (agents, memories, reviews)."""
    return _user("alice", "admin")


@pytest.fixture
def bob(roles: Any) -> Any:
    """A reviewer (approve/reject/exclude/edit proposals)."""
    return _user("bob", "reviewer")


@pytest.fixture
def carol(roles: Any) -> Any:
    """A viewer (reads only)."""
    return _user("carol", "viewer")


def days_ago(days: float) -> str:
    """ISO timestamp ``days`` before the real current time (passes plan with the real clock)."""
    return (datetime.now(UTC) - timedelta(days=days)).isoformat()


def memory_records(
    texts: Sequence[str], metadatas: Sequence[dict[str, Any]] | None = None, *, prefix: str = "mem"
) -> list[Any]:
    """``MemoryRecord``s ``prefix-000``… with real embeddings and default metadata
    (``created_at`` a day ago, importance 0.5), updated with ``metadatas[i]``."""
    from consolidation import MemoryRecord

    vectors = embed_texts(list(texts))
    out = []
    for i, text in enumerate(texts):
        meta = {"created_at": days_ago(1), "importance": 0.5}
        if metadatas is not None:
            meta.update(metadatas[i])
        out.append(MemoryRecord(f"{prefix}-{i:03d}", text, vectors[i], meta))
    return out


@pytest.fixture
def agent_with_memories(db: Any, unique_name: Callable[[str], str]) -> Callable[..., Any]:
    """Factory: ``agent_with_memories(texts, metadatas=None, **agent_fields) -> Agent``.

    Creates the agent and its collection through ``agent_create`` and writes one memory
    per text (ids ``mem-000``…), embedded by the offline embedder. ``texts`` may be an int N
    for N distinct sentences.
    """
    from memoryadmin.core import stores

    def make(
        texts: Sequence[str] | int = 5,
        metadatas: Sequence[dict[str, Any]] | None = None,
        **fields: Any,
    ) -> Any:
        if isinstance(texts, int):
            texts = DISTINCT_FACTS[:texts]
        slug = fields.pop("slug", None) or unique_name("agent")
        fields.setdefault("name", slug.replace("-", " ").title())
        fields.setdefault("collection_name", unique_name("mem"))
        agent = agent_create(slug=slug, **fields)
        records = memory_records(texts, metadatas)
        if records:
            stores.get_store(agent).upsert(records)
        return agent

    return make


DISTINCT_FACTS = [
    "Caroline moved from Sweden to Boston four years ago.",
    "Melanie ran a charity race for mental health last Saturday.",
    "The team's quarterly planning meeting is every first Monday.",
    "Jon's favourite board game is Settlers of Catan.",
    "The office coffee machine was replaced with an espresso maker.",
    "Gina adopted a grey rescue cat named Pixel.",
    "The database backups run nightly at two in the morning.",
    "Tim is learning to play the cello with a private teacher.",
    "Audrey's sister is getting married in Lisbon next spring.",
    "The project deadline moved from March to the end of April.",
    "Nate prefers window seats on long-haul flights.",
    "The library on Elm Street closes early on Fridays.",
    "Maria is allergic to peanuts and carries an epinephrine pen.",
    "The garden's tomato plants were hit by blight in August.",
    "Evan bought a second-hand electric bike for commuting.",
    "The family reunion is planned for the lake house in July.",
    "Joanna is writing a screenplay about a lighthouse keeper.",
    "Our router firmware was updated to fix a wifi dropout bug.",
    "Deborah volunteers at the animal shelter on weekends.",
    "The bakery downstairs sells sourdough only on Thursdays.",
]
"""Twenty unrelated facts (no two similar enough to merge under the default policy)."""


SERVICES_FILES = (
    "test_views_*.py",
    "test_tasks.py",
    "test_services_concurrency.py",
    "test_services_stack.py",
    "test_chroma_token.py",
)
"""The web, worker and concurrency tests: marked ``services``, so ``make test-services`` runs them
again on PostgreSQL + Redis (``pytest -m services``); the default run runs them on SQLite."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SERVICES_FILES` ``services``."""
    from fnmatch import fnmatch

    for item in items:
        if any(fnmatch(item.path.name, pattern) for pattern in SERVICES_FILES):
            item.add_marker(pytest.mark.services)


# ----- the console's furniture ------------------------------------------------------------

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
    from memoryadmin.agents.models import Agent

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

    from memoryadmin.agents.models import Agent

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
