"""The PostgreSQL connection pool, per-thread transactions, migrations, error mapping.

* psycopg 3 with a :class:`psycopg_pool.ConnectionPool` whose connections are checked on
  checkout, so a restarted server costs the calls in flight, not the store.
* Transactions are per thread and nest as savepoints, like the SQLite backend.
* Errors are mapped by SQLSTATE (and, for a connection that never reached the server,
  by psycopg's exception class), never by their message text.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from ...errors import StoreError, StoreUnavailableError
from ...types import dumps
from ..policy import newer_schema, unstorable
from .migrations import PG_MIGRATIONS

__all__ = ["PostgresConnection", "explain", "as_json"]

_LOCK_MIGRATE = 72_616_001  # advisory lock key: one migrator at a time

# SQLSTATE codes (https://www.postgresql.org/docs/current/errcodes-appendix.html)
_BAD_PASSWORD = "28P01"
_BAD_AUTHORIZATION = "28000"  # unknown role, or pg_hba refused it
_UNKNOWN_DATABASE = "3D000"
_SHUTTING_DOWN = ("57P01", "57P02", "57P03")
_NO_FILE, _UNSUPPORTED = "58P01", "0A000"  # a missing extension (pgvector)
_READ_ONLY = "25006"
_NO_PRIVILEGE = "42501"
_DISK_FULL = "53100"
_TOO_MANY_CONNECTIONS = "53300"


def _where(url: str) -> str:
    """The server and database a URL names, without the password (for error messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # a malformed URL (say, an unclosed IPv6 bracket): name no part of it
        return "a malformed PostgreSQL URL"
    host = parts.hostname or "local socket"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.username or 'default user'}@{host}{port}/{parts.path.lstrip('/') or '(default)'}"


# libpq reports a refused *connection* with no SQLSTATE (only the server's FATAL text),
# so for that case alone the code is read back from the message; every error raised
# by a statement carries its SQLSTATE.
_FATAL_CODES = ((re.compile(r"password authentication failed|no password supplied"), _BAD_PASSWORD),
                (re.compile(r'database "[^"]*" does not exist'), _UNKNOWN_DATABASE),
                (re.compile(r'role "[^"]*" does not exist'), _BAD_AUTHORIZATION))


def _sqlstate(exc: BaseException) -> str | None:
    state = getattr(exc, "sqlstate", None)
    if state is None and isinstance(exc, psycopg.OperationalError):
        text = str(exc)
        state = next((code for pattern, code in _FATAL_CODES if pattern.search(text)), None)
    return state


# what each SQLSTATE means for the caller, and what to do about it
_MEANINGS: dict[str, tuple[type[StoreError], str]] = {
    _BAD_PASSWORD: (StoreUnavailableError, "PostgreSQL at {where} refused the password ({text}); "
                                           "fix the password in the URL"),
    _UNKNOWN_DATABASE: (StoreUnavailableError, "PostgreSQL at {where}: unknown database ({text}); "
                                               "create it (createdb) or fix the database name in the URL"),
    _BAD_AUTHORIZATION: (StoreUnavailableError, "PostgreSQL at {where} refused the user ({text}); fix "
                                                "the user name in the URL or the server's pg_hba.conf"),
    _NO_FILE: (StoreError, "PostgreSQL at {where} lacks a server extension the schema needs "
                           "({text}); install pgvector on the server"),
    _READ_ONLY: (StoreError, "PostgreSQL at {where} is read-only ({text}); connect to the primary"),
    _NO_PRIVILEGE: (StoreError, "PostgreSQL at {where}: permission denied ({text}); grant the user "
                                "rights on the memstrata tables"),
    _DISK_FULL: (StoreError, "PostgreSQL at {where}: the disk is full ({text}); free space and retry"),
}
_MEANINGS[_UNSUPPORTED] = _MEANINGS[_NO_FILE]
_UNREACHABLE: tuple[type[StoreError], str] = (
    StoreUnavailableError, "cannot reach PostgreSQL at {where} ({text}); check that the server is "
                           "running and the host and port are right")
_OTHER: tuple[type[StoreError], str] = (StoreError, "PostgreSQL error on {where}: {text}")


def explain(exc: BaseException, url: str) -> StoreError:
    """A memstrata error for a psycopg one, chosen by its SQLSTATE."""
    text = str(exc).strip()
    where = _where(url)
    state = _sqlstate(exc)
    if isinstance(exc, PoolTimeout):
        return StoreUnavailableError(f"PostgreSQL at {where} gave no connection in time ({text}); "
                                     "is the server up, and is the pool large enough?")
    unreachable = state in _SHUTTING_DOWN or state == _TOO_MANY_CONNECTIONS \
        or (state or "").startswith("08") or (state is None and isinstance(exc, psycopg.OperationalError))
    kind, meaning = _UNREACHABLE if unreachable else _MEANINGS.get(state or "", _OTHER)
    return kind(meaning.format(where=where, text=text))


def as_json(value: Any) -> Jsonb:
    """A JSONB parameter, serialised the way every memstrata JSON column is."""
    return Jsonb(value, dumps=dumps)


class PostgresConnection:
    """The pool, per-thread transactions and migrations; the base of the store."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8,
                 timeout: float = 10.0, durability: str = "full") -> None:
        self.url = url
        self.durability = durability
        self._conninfo = url.replace("postgres://", "postgresql://", 1)
        try:  # fail now, with the reason, rather than as a pool timeout later
            psycopg.connect(self._conninfo, connect_timeout=max(1, int(timeout))).close()
        except psycopg.Error as exc:
            raise explain(exc, url) from exc
        self._pool = ConnectionPool(self._conninfo, min_size=min_size, max_size=max_size,
                                    kwargs={"autocommit": True}, configure=self._configure,
                                    check=self._check, timeout=timeout,
                                    open=False, name="memstrata")
        self._local = threading.local()

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of a connection on checkout (one round trip), skipped for a
        checkout whose caller retries on a fresh, checked connection when this one turns
        out dead (``_local.unchecked``: the index's reads, see ``PostgresIndex._read``)."""
        if not getattr(self._local, "unchecked", False):
            ConnectionPool.check_connection(conn)

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET TIME ZONE 'UTC'")  # datetimes come back as SQLite's do
        if self.durability == "full":  # whatever the server's default: a commit waits for its WAL flush
            conn.execute("SET synchronous_commit = on")
        try:
            register_vector(conn)
        except psycopg.ProgrammingError:
            pass  # before the first setup() the extension does not exist yet

    def setup(self) -> list[str]:
        applied: list[str] = []
        try:
            with psycopg.connect(self._conninfo, autocommit=True) as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_MIGRATE,))
                conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                             "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
                done = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
                unknown = sorted(done - {name for name, _ in PG_MIGRATIONS})
                if unknown:
                    raise StoreError(newer_schema(_where(self.url), unknown))
                for name, sql in PG_MIGRATIONS:
                    if name not in done:
                        for statement in sql.split(";\n"):
                            if statement.strip():
                                conn.execute(statement)
                        conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
                        applied.append(name)
        except psycopg.Error as exc:
            raise explain(exc, self.url) from exc
        return applied

    def close(self) -> None:
        if not self._pool.closed:
            self._pool.close()

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        if self._pool.closed:
            self._pool.open(wait=False)
        try:
            with self._pool.connection() as conn:
                yield conn
        except (psycopg.Error, PoolTimeout) as exc:
            raise explain(exc, self.url) from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A transaction on this thread's connection (savepoints when nested). Work
        registered in ``_local.after_commit`` (by name) runs once the outermost one
        commits, never for one that rolled back."""
        with self._conn() as conn:
            outer = getattr(self._local, "conn", None) is None
            self._local.conn = conn
            if outer:
                self._local.after_commit = {}
            try:
                with conn.transaction():  # savepoints when nested
                    yield
            except psycopg.Error as exc:
                raise explain(exc, self.url) from exc
            finally:
                if outer:
                    self._local.conn = None
        if outer:
            hooks, self._local.after_commit = self._local.after_commit, {}
            for hook in hooks.values():
                hook()

    def on_commit(self, name: str, hook: Callable[[], None]) -> None:
        if getattr(self._local, "conn", None) is None:
            hook()
        else:
            self._local.after_commit[name] = hook

    def _x(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        with self._conn() as conn:
            try:
                cur = conn.cursor(row_factory=dict_row)
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else []
            except (psycopg.Error, UnicodeEncodeError) as exc:
                raise self._error(exc) from exc

    def _many(self, sql: str, rows: Sequence[Any], *,
              taken: Callable[[object], Exception] | None = None) -> None:
        """``executemany``; with ``taken``, a unique violation means the caller sent an id
        that is stored already, and ``taken(detail)`` builds the error to raise."""
        if not rows:
            return
        with self._conn() as conn:
            try:
                conn.cursor().executemany(sql, rows)
            except (psycopg.Error, UnicodeEncodeError) as exc:
                raise self._error(exc, taken) from exc

    def _error(self, exc: Exception, taken: Callable[[object], Exception] | None = None) -> Exception:
        if isinstance(exc, UnicodeEncodeError):
            return unstorable(exc)
        if taken is not None and isinstance(exc, psycopg.errors.UniqueViolation):
            return taken(exc)
        return explain(exc, self.url)

    def _delete_docs(self, scope: Any, ids: Sequence[str]) -> None:
        """Delete index documents (the index half of the store implements it)."""
        raise NotImplementedError
