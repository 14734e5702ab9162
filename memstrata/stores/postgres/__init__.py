"""PostgreSQL + pgvector: the server-grade backend (``postgresql://user:pw@host/db``).

``connection`` holds the pool, per-thread transactions, migrations and the mapping of
SQLSTATE codes to memstrata errors; ``dialect`` how PostgreSQL speaks the row SQL
shared with SQLite (:mod:`memstrata.stores.sql`: the log, sessions, items, jobs,
metadata, usage, the service's tables, the embedding cache, the knowledge base);
``index`` the documents, their change log and the in-process search mirrors.
"""

from __future__ import annotations

import hashlib
import time

import psycopg

from ...errors import StoreError
from ...types import Scope
from ..base import CompactReport, Store
from ..knowledge import KnowledgeRows
from ..sql.admin import SQLAdmin
from ..sql.cache import SQLVectorCache
from ..sql.rows import SQLRows
from .connection import explain
from .index import PostgresIndex

__all__ = ["PostgresStore", "open_postgres"]

_LOCK_USER_CLASS = 72_617  # advisory lock class of a user's write lock (lock_user)


class PostgresStore(SQLRows, SQLAdmin, SQLVectorCache, KnowledgeRows, PostgresIndex, Store):
    """memstrata on PostgreSQL with pgvector. Open with :func:`open_postgres`."""

    def lock_user(self, scope: Scope) -> None:
        if getattr(self._local, "conn", None) is None:
            raise StoreError("lock_user() outside a transaction: it holds the lock until the "
                             "transaction ends, so call it inside `with store.transaction():`")
        # two int4 keys: a space apart from the single-bigint keys of the other locks; two
        # users whose ids hash alike only take turns more often than they need to
        digest = hashlib.sha256(f"{scope.namespace}\x00{scope.user_id}".encode()).digest()
        self._x("SELECT pg_advisory_xact_lock(%s, %s)",
                (_LOCK_USER_CLASS, int.from_bytes(digest[:4], "big", signed=True)))

    def compact(self, *, wait_s: float = 10.0) -> CompactReport:
        # VACUUM cannot run inside a transaction block: its own autocommit connection.
        # FULL rewrites the tables, so a deleted row's bytes leave the table files too
        # (a plain VACUUM only marks their space free).
        start = time.monotonic()
        try:
            with psycopg.connect(self._conninfo, autocommit=True) as conn:
                conn.execute(f"SET lock_timeout = {max(1, int(wait_s * 1000))}")
                conn.execute("VACUUM FULL")
        except psycopg.errors.LockNotAvailable:
            return CompactReport(False, time.monotonic() - start,
                                 f"VACUUM FULL on {self.url} waited {wait_s:g} s for another "
                                 "session's lock; the deleted rows' bytes stay in the table "
                                 "files until it runs — retry compact() when it is idle")
        except psycopg.Error as exc:
            raise explain(exc, self.url) from exc
        return CompactReport(True, time.monotonic() - start)


def open_postgres(url: str, *, index_memory_mb: float | None = None,
                  durability: str | None = None) -> PostgresStore:
    """``postgresql://user:password@host:port/database`` (libpq URL), migrated;
    ``index_memory_mb`` bounds the in-process search index, ``durability`` says whether
    memstrata's connections set ``synchronous_commit=on`` (defaults: the settings)."""
    if index_memory_mb is None or durability is None:
        from ...config import Settings

        settings = Settings.load()
        index_memory_mb = settings.index_memory_mb if index_memory_mb is None else index_memory_mb
        durability = settings.durability if durability is None else durability
    store = PostgresStore(url, index_memory_mb=index_memory_mb, durability=durability)
    store.setup()
    return store
