"""One SQLite connection shared by the caller's threads and the job worker.

* WAL journal, ``synchronous=FULL`` (the ``durability`` setting; ``normal`` gives
  ``synchronous=NORMAL``), a busy timeout so several processes can share a
  file; explicit ``BEGIN IMMEDIATE`` transactions (nested ones become savepoints).
* Every statement runs under one lock and is read to the end before the lock is
  released (see :meth:`SQLiteConnection._x`).
* Errors are mapped by SQLite's result code, not by their message text.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from ...errors import StoreError
from ...types import Scope
from ..policy import newer_schema, unstorable
from .migrations import SQLITE_MIGRATIONS

__all__ = ["SQLiteConnection", "explain"]

# SQLite primary result codes (https://sqlite.org/rescode.html); the extended code's low
# byte is the primary one.
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 10, 11, 13, 14, 26


# what each primary code means for the caller, and what to do about it
_MEANINGS = {
    _READONLY: "{path} is read-only ({text}); fix the file or directory permissions, or point "
               "memstrata at a writable path",
    _CORRUPT: "{path} is not a memstrata SQLite database or is corrupt ({text}); restore it from "
              "a backup or `memstrata export` copy, or use a new path",
    _BUSY: "{path} stayed locked by another writer ({text}); retry, or raise the busy timeout",
    _CANTOPEN: "cannot open {path} ({text}); check that the directory exists and is writable",
    _FULL: "{path}: the disk is full ({text}); free space and retry — nothing acknowledged was lost",
    _IOERR: "{path}: disk I/O error ({text}); check the disk and retry",
}
_MEANINGS[_NOTADB] = _MEANINGS[_CORRUPT]
_MEANINGS[_LOCKED] = _MEANINGS[_BUSY]


def explain(exc: sqlite3.Error, path: str) -> StoreError:
    """A memstrata error for a sqlite3 one, chosen by its result code."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else -1
    meaning = _MEANINGS.get(primary, "SQLite error on {path}: {text}")
    return StoreError(meaning.format(path=path, text=str(exc)))


@dataclass(frozen=True, slots=True)
class _Rows:
    """A finished statement's rows (read to the end) and counts."""

    rows: list[sqlite3.Row]
    rowcount: int
    lastrowid: int | None

    def fetchone(self) -> sqlite3.Row | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[sqlite3.Row]:
        return self.rows

    def __iter__(self) -> Iterator[sqlite3.Row]:
        return iter(self.rows)


class SQLiteConnection:
    """The connection, its lock, transactions and migrations; the base of the store.

    ``_after_commit`` holds callbacks to run once the outermost transaction commits
    (the in-process index mirrors are updated there, never for rolled-back writes).
    """

    def __init__(self, path: str, *, timeout: float = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self.url = "memory://" if path == ":memory:" else f"sqlite:///{path}"
        if path != ":memory:":
            parent = Path(path).expanduser().resolve().parent
            if not parent.is_dir():
                raise StoreError(f"cannot create {path}: directory {parent} does not exist")
        # read-only (the read_only setting): the file is opened with mode=ro, so nothing
        # — not even the journal mode — is written; the store sets the flag before this runs
        self.read_only = bool(getattr(self, "read_only", False)) and path != ":memory:"
        try:
            if self.read_only:
                self._conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro",
                                             uri=True, timeout=timeout, isolation_level=None,
                                             check_same_thread=False)
            else:
                self._conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                             check_same_thread=False)
            self._conn.row_factory = sqlite3.Row
            if not self.read_only:
                self._conn.execute("PRAGMA journal_mode=WAL")
            # the durability setting: FULL syncs the WAL at every commit (a power loss
            # keeps it); NORMAL syncs at checkpoints only (a process crash keeps it)
            full = getattr(self, "durability", "normal") == "full"
            self._conn.execute(f"PRAGMA synchronous={'FULL' if full else 'NORMAL'}")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        except sqlite3.Error as exc:
            raise explain(exc, path) from exc
        self._lock = threading.RLock()
        self._depth = 0
        self._pending: list[tuple[str, str, object]] = []
        self._hooks: list[tuple[str, Callable[[], None]]] = []  # on_commit, in order

    # -- lifecycle ---------------------------------------------------------------
    def setup(self) -> list[str]:
        applied: list[str] = []
        if self.read_only:
            done = {r[0] for r in self._x("SELECT name FROM schema_migrations")}
            missing = [name for name, _ in SQLITE_MIGRATIONS if name not in done]
            unknown = sorted(done - {name for name, _ in SQLITE_MIGRATIONS})
            if unknown:
                raise StoreError(newer_schema(self.path, unknown))
            if missing:
                raise StoreError(f"{self.path} needs migrations ({', '.join(missing[:3])}) that a "
                                 "read-only store cannot apply; open it once without read_only")
            return applied
        with self._lock, self.transaction():
            tables = {r[0] for r in self._x("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables and "schema_migrations" not in tables:
                raise StoreError(
                    f"{self.path} is an SQLite database but not a memstrata store (it has the "
                    f"tables {', '.join(sorted(tables)[:5])}); nothing was written to it — "
                    "point memstrata at a new file")
            self._x("CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            done = {r[0] for r in self._x("SELECT name FROM schema_migrations")}
            unknown = sorted(done - {name for name, _ in SQLITE_MIGRATIONS})
            if unknown:
                raise StoreError(newer_schema(self.path, unknown))
            for name, sql in SQLITE_MIGRATIONS:
                if name in done:
                    continue
                for statement in sql.split(";\n"):
                    if statement.strip():
                        self._x(statement)
                self._x("INSERT INTO schema_migrations VALUES (?, strftime('%s','now'))", (name,))
                applied.append(name)
        return applied

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass

    # Every statement runs under the lock and is read to the end before the lock is
    # released: the connection is shared by the caller's threads and the job worker, and
    # a half-read SELECT left open by one thread holds a read snapshot that makes another
    # thread's BEGIN IMMEDIATE fail at once with "database is locked" (no busy wait).
    def _x(self, sql: str, params: Sequence[object] = ()) -> _Rows:
        with self._lock:
            try:
                cursor = self._conn.execute(sql, params)
                return _Rows(cursor.fetchall(), cursor.rowcount, cursor.lastrowid)
            except (sqlite3.Error, UnicodeEncodeError) as exc:
                raise self._error(exc) from exc

    def _many(self, sql: str, rows: Sequence[Sequence[object]], *,
              taken: Callable[[object], Exception] | None = None) -> None:
        """``executemany``; with ``taken``, a constraint failure means the caller sent an
        id that is stored already, and ``taken(detail)`` builds the error to raise."""
        with self._lock:
            try:
                self._conn.executemany(sql, rows)
            except (sqlite3.Error, UnicodeEncodeError) as exc:
                raise self._error(exc, taken) from exc

    def _error(self, exc: Exception, taken: Callable[[object], Exception] | None = None) -> Exception:
        if isinstance(exc, UnicodeEncodeError):
            return unstorable(exc)
        if taken is not None and isinstance(exc, sqlite3.IntegrityError):
            return taken(exc)
        assert isinstance(exc, sqlite3.Error)
        return explain(exc, self.path)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            outer = self._depth == 0
            savepoint = f"sp{self._depth}"
            mark = len(self._pending)  # mirror changes made inside this block
            hooks_mark = len(self._hooks)
            self._x("BEGIN IMMEDIATE" if outer else f"SAVEPOINT {savepoint}")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._conn.rollback()
                    self._pending.clear()
                    self._hooks.clear()
                else:
                    self._x(f"ROLLBACK TO {savepoint}")
                    self._x(f"RELEASE {savepoint}")
                    del self._pending[mark:]
                    del self._hooks[hooks_mark:]
                raise
            self._depth -= 1
            if outer:
                self._x("COMMIT")
                self._after_commit()
                hooks, self._hooks = dict(self._hooks), []
                for hook in hooks.values():
                    hook()
            else:
                self._x(f"RELEASE {savepoint}")

    def on_commit(self, name: str, hook: Callable[[], None]) -> None:
        with self._lock:
            if self._depth == 0:
                hook()
            else:
                self._hooks.append((name, hook))

    def _delete_docs(self, scope: Scope, ids: Sequence[str]) -> None:
        """Delete index documents (the index half of the store implements it)."""
        raise NotImplementedError

    def _after_commit(self) -> None:
        """Apply what committed to in-process structures (the index mirrors)."""
        self._pending.clear()
