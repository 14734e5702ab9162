"""A private PostgreSQL 16 + pgvector for the test suite, from the PyPI package ``pgserver``.

``MEMSTRATA_TEST_POSTGRES_URL`` (a role allowed to CREATE DATABASE on a server with
pgvector) takes precedence; otherwise one server is started in a temporary directory
for the whole session, listening on a Unix socket only. Debian's system PostgreSQL is
never used: it has no pgvector. Each test gets a database of its own, dropped after.

Import the fixtures into a test module: ``from pgserver_fixture import pg_server, pg_url``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

__all__ = ["PgServer", "pg_server", "pg_url", "database_url"]


@dataclass
class PgServer:
    """The server the suite uses: its admin URL, and ``restart`` when we own it."""

    url: str
    pgdata: Path | None = None
    system_user: str | None = None

    def restart(self) -> None:
        """Restart the server (fast shutdown: every client connection is cut)."""
        from pgserver._commands import pg_ctl

        assert self.pgdata is not None, "only a server started by the suite can be restarted"
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self.pgdata, user=self.system_user)

    def execute(self, sql: str, database: str | None = None) -> None:
        """Run one statement in autocommit on ``database`` (default: the admin database)."""
        import psycopg

        url = database_url(self.url, database) if database else self.url
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)


def database_url(url: str, database: str) -> str:
    """``url`` with its database replaced."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL (started here unless MEMSTRATA_TEST_POSTGRES_URL is set)."""
    external = os.environ.get("MEMSTRATA_TEST_POSTGRES_URL")
    if external:
        yield PgServer(external)
        return
    import pgserver  # a missing wheel is an error here, not a skip: CI must run these

    root = Path(tempfile.mkdtemp(prefix="memstrata-pg-"))
    server = pgserver.get_server(root / "pgdata", cleanup_mode="stop")
    try:
        yield PgServer(server.get_uri(), server.pgdata, server.system_user)
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A URL to a fresh, empty database on the session's server, dropped after the test."""
    name = f"memstrata_test_{uuid.uuid4().hex[:12]}"
    pg_server.execute(f"CREATE DATABASE {name}")
    try:
        yield database_url(pg_server.url, name)
    finally:
        pg_server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
