"""Sessions in the main SQLite file, on the main Store's own connection.

The ``sessions`` table of migration 0001 already has what a session needs: ``version``,
``status``, ``summary`` (JSON of a StructuredSummary), ``message_range_end`` and
``updated_at`` (the time of the newest message, which is the last activity). An append
checks the version and writes the messages to the raw log in one ``BEGIN IMMEDIATE``
transaction, so the check and the write cannot be separated by another process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

from ..errors import ConfigError, ConflictError
from ..layers.summary import StructuredSummary
from ..stores.base import Store
from ..types import Message, Scope, dumps, from_timestamp
from .base import DEFAULT_WINDOW_MESSAGES, SessionState, SessionStore

__all__ = ["SQLiteSessionStore"]


def _conflict(scope: Scope, session_id: str, expected: int, actual: int) -> ConflictError:
    return ConflictError(f"session {session_id!r} of user {scope.user_id!r} is at version "
                         f"{actual}, not {expected}: another writer got there first; reload "
                         "the session and retry")


class SQLiteSessionStore(SessionStore):
    """Session state in the ``sessions`` table of a :class:`~memstrata.stores.sqlite.SQLiteStore`."""

    hot_log = False

    def __init__(self, store: Store, *, window: int = DEFAULT_WINDOW_MESSAGES) -> None:
        from ..stores.sqlite import SQLiteStore

        if not isinstance(store, SQLiteStore):
            raise ConfigError(f"the default session store lives in the main SQLite store, but "
                              f"the store is {store.url!r}; pass sessions='redis://host:6379/0'")
        self.store = store
        self.url = store.url
        self.window = window

    def _row(self, scope: Scope, session_id: str):
        # the main store's connection and lock: one file, one transaction for both
        return self.store._x("SELECT * FROM sessions WHERE namespace=? AND user_id=? AND "
                             "session_id=?", (scope.namespace, scope.user_id, session_id)).fetchone()

    def _count(self, scope: Scope, session_id: str) -> int:
        row = self.store._x("SELECT COALESCE(MAX(seq), -1) FROM messages WHERE namespace=? AND "
                            "user_id=? AND session_id=?",
                            (scope.namespace, scope.user_id, session_id)).fetchone()
        return row[0] + 1

    def _state(self, scope: Scope, session_id: str, row) -> SessionState:
        if row is None:
            return SessionState(scope, session_id)
        count = self._count(scope, session_id)
        recent = self.store.get_messages(scope, session_id, start=max(0, count - self.window))
        summary = StructuredSummary.from_dict(json.loads(row["summary"])) if row["summary"] else None
        return SessionState(scope, session_id, version=row["version"], status=row["status"],
                            message_count=count, recent=tuple(recent), summary=summary,
                            message_range_end=row["message_range_end"],
                            created_at=from_timestamp(row["created_at"]),
                            active_at=from_timestamp(row["updated_at"]))

    def load(self, scope: Scope, session_id: str) -> SessionState:
        with self.store._lock:
            return self._state(scope, session_id, self._row(scope, session_id))

    def messages(self, scope: Scope, session_id: str, start: int = 0) -> list[Message]:
        return self.store.get_messages(scope, session_id, start=start)

    def append(self, scope: Scope, session_id: str, messages: Sequence[Message],
               expected_version: int) -> tuple[SessionState, list[Message]]:
        with self.store.transaction():
            row = self._row(scope, session_id)
            actual = row["version"] if row is not None else 0
            if actual != expected_version:
                raise _conflict(scope, session_id, expected_version, actual)
            stored = self.store.append_messages(scope, session_id, messages)  # version + 1
            self.store._x("UPDATE sessions SET status='open' WHERE namespace=? AND user_id=? AND "
                          "session_id=?", (scope.namespace, scope.user_id, session_id))
            return self._state(scope, session_id, self._row(scope, session_id)), stored

    def _update(self, scope: Scope, session_id: str, expected_version: int, assignments: str,
                params: Sequence[object]) -> SessionState:
        with self.store.transaction():
            cur = self.store._x(f"UPDATE sessions SET {assignments}, version=version+1 WHERE "
                                "namespace=? AND user_id=? AND session_id=? AND version=?",
                                (*params, scope.namespace, scope.user_id, session_id,
                                 expected_version))
            row = self._row(scope, session_id)
            if cur.rowcount != 1:
                raise _conflict(scope, session_id, expected_version, row["version"] if row else 0)
            return self._state(scope, session_id, row)

    def save_summary(self, scope: Scope, session_id: str, summary: StructuredSummary,
                     range_end: int, expected_version: int) -> SessionState:
        return self._update(scope, session_id, expected_version,
                            "summary=?, message_range_end=?", (dumps(summary.to_dict()), range_end))

    def archive(self, scope: Scope, session_id: str) -> tuple[SessionState, list[Message]]:
        with self.store.transaction():
            row = self._row(scope, session_id)
            if row is None or row["status"] == "archived":
                return self._state(scope, session_id, row), []
            # the messages are in the raw log already: archiving only changes the status
            return self._update(scope, session_id, row["version"], "status='archived'", ()), []

    def expired(self, now: datetime, idle: timedelta, limit: int = 100) -> list[tuple[Scope, str]]:
        # a sweep across every user, like list_users: on a sharded store it fans out
        rows = self.store._x("SELECT namespace, user_id, session_id FROM sessions WHERE "
                             "status != 'archived' AND updated_at < ? ORDER BY updated_at LIMIT ?",
                             ((now - idle).timestamp(), limit)).fetchall()
        return [(Scope(r[1], r[0]), r[2]) for r in rows]

    def latest(self, scope: Scope, *, exclude: str | None = None) -> SessionState | None:
        with self.store._lock:
            row = self.store._x("SELECT * FROM sessions WHERE namespace=? AND user_id=? AND "
                                "session_id != ? AND summary IS NOT NULL ORDER BY updated_at DESC "
                                "LIMIT 1", (scope.namespace, scope.user_id,
                                            exclude if exclude is not None else "")).fetchone()
            return self._state(scope, row["session_id"], row) if row is not None else None
