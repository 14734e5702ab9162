"""The embedded default: everything in one SQLite file (``sqlite:///path.db``) or in
memory (``memory://``).

``connection`` holds the connection, its lock, transactions, migrations and the mapping
of SQLite result codes to memstrata errors; ``dialect`` how SQLite speaks the row SQL
shared with PostgreSQL (:mod:`memstrata.stores.sql`: the log, sessions, items, jobs,
metadata, usage, the service's tables, the embedding cache, the knowledge base);
``index`` the FTS5/vector index and its in-process mirrors.
"""

from __future__ import annotations

import os
import sqlite3
import time
from urllib.parse import quote

from ...config import Settings
from ...errors import StoreError
from ...types import Scope
from ..base import CompactReport, Store
from ..knowledge import KnowledgeRows
from ..sql.admin import SQLAdmin
from ..sql.cache import SQLVectorCache
from ..sql.rows import SQLRows
from .connection import explain
from .index import SQLiteIndex

__all__ = ["SQLiteStore", "open_sqlite"]


class SQLiteStore(SQLRows, SQLAdmin, SQLVectorCache, KnowledgeRows, SQLiteIndex, Store):
    """memstrata on one SQLite file or in memory. Open with :func:`open_sqlite`."""

    def __init__(self, path: str, *, index_memory_mb: float = 512.0, read_only: bool = False,
                 durability: str = "full") -> None:
        self.read_only = read_only  # read by the connection as it opens the file
        self.durability = durability
        super().__init__(path, index_memory_mb=index_memory_mb)

    def lock_user(self, scope: Scope) -> None:
        # BEGIN IMMEDIATE took the database's write lock (and self._lock the process's):
        # one writer at a time already, and a transaction reads what committed before it
        with self._lock:
            outside = self._depth == 0
        if outside:
            raise StoreError("lock_user() outside a transaction: it holds the lock until the "
                             "transaction ends, so call it inside `with store.transaction():`")

    def quick_check(self) -> None:
        """``PRAGMA quick_check``: a StoreError naming the first problems when the file's
        pages are damaged (before anything is written to it)."""
        problems = [str(r[0]) for r in self._x("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise StoreError(_damaged_file(self.path, problems))

    def compact(self, *, wait_s: float = 10.0) -> CompactReport:
        start = time.monotonic()
        with self._lock:
            if self.path != ":memory:":
                self.quick_check()  # never rewrite a damaged file
            # FTS5 keeps deleted terms in old segments until they are merged
            self._x("INSERT INTO docs_fts(docs_fts) VALUES ('optimize')")
            if self.path == ":memory:":
                return CompactReport()
            self._x("VACUUM")
            # a reader of another connection on an old snapshot keeps the checkpoint from
            # resetting the -wal, which still holds the deleted rows' pages: the checkpoint
            # waits for it (SQLite's busy handler) up to wait_s
            self._x(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
            try:
                busy, frames, done = self._x("PRAGMA wal_checkpoint(TRUNCATE)").rows[0]
            finally:
                self._x(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            waited = time.monotonic() - start
            if busy == 0:
                return CompactReport(True, waited)
            return CompactReport(False, waited, (
                f"{self.path}-wal could not be truncated: another connection kept a read "
                f"transaction open for over {wait_s:g} s ({done} of {frames} frames "
                "checkpointed); the deleted rows' bytes stay in the -wal until that reader "
                "finishes — close it and run compact() again"))


def open_sqlite(url: str, *, index_memory_mb: float | None = None,
                quick_check: bool | None = None, read_only: bool | None = None,
                durability: str | None = None) -> SQLiteStore:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or ``memory://``;
    ``index_memory_mb`` bounds the in-process search index, ``quick_check`` checks the
    file's pages before anything is written (defaults: the settings). A file that fails
    the check, an SQLite database that is not a memstrata store and one written by a
    newer memstrata are StoreErrors, and nothing is written to them."""
    if url in ("memory://", "sqlite://", "sqlite:///:memory:"):
        path = ":memory:"
    else:
        path = url[len("sqlite:///"):]
        if not path:
            raise StoreError(f"bad SQLite URL {url!r}; use sqlite:///path/to/file.db")
        path = os.path.expanduser(path)
    if index_memory_mb is None or quick_check is None or read_only is None or durability is None:
        settings = Settings.load()
        index_memory_mb = settings.index_memory_mb if index_memory_mb is None else index_memory_mb
        quick_check = settings.quick_check if quick_check is None else quick_check
        read_only = settings.read_only if read_only is None else read_only
        durability = settings.durability if durability is None else durability
    if read_only and (path == ":memory:" or not os.path.exists(path)):
        raise StoreError(f"read_only needs an existing store file, and {path} is none")
    if path != ":memory:" and os.path.exists(path) and os.path.getsize(path) > 0:
        _check_file(path, quick=quick_check)
    store = SQLiteStore(path, index_memory_mb=index_memory_mb, read_only=read_only,
                        durability=durability)
    try:
        store.setup()
    except BaseException:
        store.close()
        raise
    return store


def _check_file(path: str, *, quick: bool) -> None:
    """Before the store's own connection touches the file (setting WAL mode rewrites its
    header): through a read-only connection, refuse a foreign SQLite database and — with
    ``quick`` — one whose pages fail ``PRAGMA quick_check``."""
    try:
        conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise explain(exc, path) from exc
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "schema_migrations" not in tables:
            raise StoreError(f"{path} is an SQLite database but not a memstrata store (it has the "
                             f"tables {', '.join(sorted(tables)[:5])}); nothing was written to it "
                             "— point memstrata at a new file")
        if quick:
            problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
            if problems != ["ok"]:
                raise StoreError(_damaged_file(path, problems))
    except sqlite3.Error as exc:
        raise explain(exc, path) from exc
    finally:
        conn.close()


def _damaged_file(path: str, problems: list[str]) -> str:
    return (f"{path} fails SQLite's integrity check ({'; '.join(problems)}); nothing was written "
            "to it — restore it from a backup or a `memstrata export` copy, or recover it with "
            "`sqlite3 .recover`")
