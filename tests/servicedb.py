"""A throw-away database for tests that start their own processes (workers, web, shells).

The default run (``make test``) gives each such test a SQLite file under its ``tmp_path``. The
services run (``make test-services``, env ``DATABASE_URL`` = a PostgreSQL URL) gives it a fresh
PostgreSQL database ``<name>_p<12 hex>`` on that server, created before and dropped (``FORCE``)
after, so the processes of one test never see another test's rows.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


def services_database_url() -> str:
    """The PostgreSQL URL of the services run (env ``DATABASE_URL``), or ``""`` on SQLite."""
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://", "pgsql://")) else ""


@contextmanager
def fresh_database(tmp_path: Path) -> Iterator[str]:
    """Yield the ``DATABASE_URL`` of an empty database for this test's processes.

    SQLite file ``tmp_path/db.sqlite3`` by default; under the services run a new PostgreSQL
    database on the ``DATABASE_URL`` server (dropped afterwards, even with sessions still open).
    """
    base = services_database_url()
    if not base:
        yield f"sqlite:///{tmp_path / 'db.sqlite3'}"
        return
    import psycopg

    parts = urlsplit(base)
    name = f"{(parts.path.strip('/') or 'memoryadmin')[:40]}_p{uuid.uuid4().hex[:12]}"
    admin = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def query(url: str, sql: str, *args: object) -> list[tuple]:
    """Rows of ``sql`` (``%s`` placeholders) on the database at ``url`` (SQLite or PostgreSQL),
    read outside Django: the test's own connection points at pytest-django's test database."""
    if url.startswith("sqlite:///"):
        con = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
        try:
            return con.execute(sql.replace("%s", "?"), args).fetchall()
        finally:
            con.close()
    import psycopg

    pg = urlunsplit(urlsplit(url)._replace(scheme="postgresql"))
    with psycopg.connect(pg, autocommit=True) as con:
        return con.execute(sql, args).fetchall()
