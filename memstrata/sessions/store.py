"""Sessions in the main store itself, on any backend (SQLite, PostgreSQL).

Built only on the store's seams — :class:`~memstrata.stores.base.MessageLog`,
:class:`~memstrata.stores.base.SessionRows` and its transactions — so every backend has
sessions, progressive summaries and ``resume()`` without Redis. The session row already
holds what a session needs: ``version``, ``status``, ``summary`` (JSON of a
StructuredSummary), ``message_range_end`` and ``updated_at`` (the time of the newest
message, which is the last activity). An append checks the version and writes the
messages to the raw log in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from ..stores.base import Lifecycle, MessageLog, SessionRecord, SessionRows, SummaryVersion
from ..stores.policy import damaged
from ..types import Message, Scope, StructuredSummary, dumps, utcnow
from .base import DEFAULT_WINDOW_MESSAGES, SessionState, SessionStore

__all__ = ["StoreSessionStore"]


class _SessionBackend(Lifecycle, MessageLog, SessionRows, Protocol):
    """What sessions need of a store."""


class StoreSessionStore(SessionStore):
    """Session state in the main store's session rows; messages in its raw log."""

    hot_log = False

    def __init__(self, store: _SessionBackend, *, window: int = DEFAULT_WINDOW_MESSAGES) -> None:
        self.store = store
        self.url = store.url
        self.window = window

    def _state(self, scope: Scope, session_id: str, row: SessionRecord | None) -> SessionState:
        if row is None:
            return SessionState(scope, session_id)
        recent = self.store.get_messages(scope, session_id, start=max(0, row.next_seq - self.window))
        try:
            summary = StructuredSummary.from_dict(json.loads(row.summary)) if row.summary else None
        except (ValueError, KeyError, TypeError) as exc:
            raise damaged("session summary", session_id, exc) from exc
        return SessionState(scope, session_id, version=row.version, status=row.status,
                            message_count=row.next_seq, recent=tuple(recent), summary=summary,
                            message_range_end=row.message_range_end, created_at=row.created_at,
                            active_at=row.updated_at)

    def load(self, scope: Scope, session_id: str) -> SessionState:
        # two reads, no write transaction: a message appended in between only makes
        # ``recent`` one newer than the row, which appends never contradict
        return self._state(scope, session_id, self.store.get_session(scope, session_id))

    def messages(self, scope: Scope, session_id: str, start: int = 0) -> list[Message]:
        return self.store.get_messages(scope, session_id, start=start)

    def append(self, scope: Scope, session_id: str, messages: Sequence[Message],
               expected_version: int) -> tuple[SessionState, list[Message]]:
        with self.store.transaction():
            stored = self.store.append_messages(scope, session_id, messages,
                                                expected_version=expected_version)
            return self._state(scope, session_id, self.store.get_session(scope, session_id)), stored

    def save_summary(self, scope: Scope, session_id: str, summary: StructuredSummary,
                     range_end: int, expected_version: int) -> SessionState:
        with self.store.transaction():
            before = self.store.get_session(scope, session_id)
            row = self.store.update_session(scope, session_id, expected_version,
                                            summary=dumps(summary.to_dict()),
                                            message_range_end=range_end)
            self._keep_version(scope, session_id, summary, before, range_end)
            return self._state(scope, session_id, row)

    def _keep_version(self, scope: Scope, session_id: str, summary: StructuredSummary,
                      before: SessionRecord | None, range_end: int) -> None:
        """Keep the step as version vN with the messages it folded in. A summary that
        folds in no new message (rebuilt from scratch after forgetting) or is empty
        replaces the history: the old steps quote turns that are gone."""
        start = before.message_range_end if before is not None else 0
        if summary.is_empty or range_end <= start:
            self.store.delete_summary_versions(scope, session_id)
            start = 0
        if not summary.is_empty:
            self.store.add_summary_version(scope, session_id, SummaryVersion(
                summary.version, start, range_end, summary.to_dict(), utcnow()))

    def archive(self, scope: Scope, session_id: str) -> tuple[SessionState, list[Message]]:
        with self.store.transaction():
            row = self.store.get_session(scope, session_id)
            if row is None or row.status == "archived":
                return self._state(scope, session_id, row), []
            # the messages are in the raw log already: archiving only changes the status
            row = self.store.update_session(scope, session_id, row.version, status="archived")
            return self._state(scope, session_id, row), []

    def session_ids(self, scope: Scope) -> list[str]:
        return [r.session_id for r in self.store.list_sessions(scope)]

    def expired(self, now: datetime, idle: timedelta, limit: int = 100) -> list[tuple[Scope, str]]:
        return self.store.idle_sessions(now - idle, limit)

    def latest(self, scope: Scope, *, exclude: str | None = None) -> SessionState | None:
        rows = [r for r in self.store.list_sessions(scope)
                if r.summary is not None and r.session_id != exclude]
        if not rows:
            return None
        newest = max(rows, key=lambda r: (r.updated_at, r.session_id))
        return self.load(scope, newest.session_id)
