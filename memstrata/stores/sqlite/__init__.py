"""The embedded default: everything in one SQLite file (``sqlite:///path.db``) or in
memory (``memory://``).

``connection`` holds the connection, its lock, transactions, migrations and the mapping
of SQLite result codes to memstrata errors; ``rows`` the log, sessions, items, jobs,
metadata and usage; ``index`` the FTS5/vector index and its in-process mirrors.
"""

from __future__ import annotations

import os

from ...config import Settings
from ...errors import StoreError
from ...types import Scope
from ..base import Store
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

    def compact(self) -> None:
        with self._lock:
            # FTS5 keeps deleted terms in old segments until they are merged
            self._x("INSERT INTO docs_fts(docs_fts) VALUES ('optimize')")
            if self.path != ":memory:":
                self._x("VACUUM")
                self._x("PRAGMA wal_checkpoint(TRUNCATE)")


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
