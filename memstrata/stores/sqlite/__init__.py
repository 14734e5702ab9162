"""The embedded default: everything in one SQLite file (``sqlite:///path.db``) or in
memory (``memory://``).

``connection`` holds the connection, its lock, transactions, migrations and the mapping
of SQLite result codes to memstrata errors; ``rows`` the log, sessions, items, jobs,
metadata and usage; ``index`` the FTS5/vector index and its in-process mirrors.
"""

from __future__ import annotations

import os
import time

from ...config import Settings
from ...errors import StoreError
from ...types import Scope
from ..base import CompactReport, Store
from ..knowledge import KnowledgeRows
from .admin import SQLiteAdmin
from .index import SQLiteIndex
from .rows import SQLiteRows

__all__ = ["SQLiteStore", "open_sqlite"]


class SQLiteStore(SQLiteRows, SQLiteIndex, SQLiteAdmin, KnowledgeRows, Store):
    """memstrata on one SQLite file or in memory. Open with :func:`open_sqlite`."""

    def delete_user(self, scope: Scope, *, messages: bool = True) -> None:
        with self.transaction():
            self._delete_scope_docs(scope, semantic_only=not messages)
            self._delete_user_rows(scope, messages=messages)
            self._delete_user_knowledge(scope, documents=messages)

    def compact(self, *, wait_s: float = 10.0) -> CompactReport:
        start = time.monotonic()
        with self._lock:
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


def open_sqlite(url: str, *, index_memory_mb: float | None = None) -> SQLiteStore:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or ``memory://``;
    ``index_memory_mb`` bounds the in-process search index (default: the setting)."""
    if url in ("memory://", "sqlite://", "sqlite:///:memory:"):
        path = ":memory:"
    else:
        path = url[len("sqlite:///"):]
        if not path:
            raise StoreError(f"bad SQLite URL {url!r}; use sqlite:///path/to/file.db")
        path = os.path.expanduser(path)
    if index_memory_mb is None:
        index_memory_mb = Settings.load().index_memory_mb
    store = SQLiteStore(path, index_memory_mb=index_memory_mb)
    store.setup()
    return store
