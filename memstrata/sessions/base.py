"""The session seam: hot per-session state with a version for optimistic locking.

A session store keeps, per (namespace, user, session): the version, the status
(``open`` → ``closed`` → ``archived``), the L2 running summary with its
``message_range_end``, and the session's messages. The main
:class:`~memstrata.stores.base.Store` is the record: every backend commits each append
there before it returns (Redis only caches the state, see
:mod:`memstrata.sessions.redis`).

Every write names the version it read (``expected_version``); a write against any
other version raises :class:`~memstrata.errors.ConflictError` and changes nothing, so
two writers racing on one session can neither lose nor reorder messages — the loser
reloads and retries. A session never written has version 0.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..types import Message, Scope, StructuredSummary, parse_time

__all__ = ["SessionState", "SessionStore", "STATUSES", "DEFAULT_WINDOW_MESSAGES"]

STATUSES = ("open", "closed", "archived")
DEFAULT_WINDOW_MESSAGES = 50  # recent messages a state carries (Redis: LTRIM 0 49)


@dataclass(frozen=True, slots=True)
class SessionState:
    """One session as last written. ``version`` 0 means the session was never written.

    ``recent`` is the newest messages (at most the store's window), oldest first;
    ``message_count`` counts every message of the session, archived or not;
    ``summary`` covers messages ``[0, message_range_end)``.
    """

    scope: Scope
    session_id: str
    version: int = 0
    status: str = "open"
    message_count: int = 0
    recent: tuple[Message, ...] = ()
    summary: StructuredSummary | None = None
    message_range_end: int = 0
    created_at: datetime | None = None
    active_at: datetime | None = None

    @property
    def exists(self) -> bool:
        """True once anything was written to the session."""
        return self.version > 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (recent messages included)."""
        return {"user_id": self.scope.user_id, "namespace": self.scope.namespace,
                "session_id": self.session_id, "version": self.version, "status": self.status,
                "message_count": self.message_count,
                "recent": [m.to_dict() for m in self.recent],
                "summary": self.summary.to_dict() if self.summary else None,
                "message_range_end": self.message_range_end,
                "created_at": self.created_at.isoformat() if self.created_at else None,
                "active_at": self.active_at.isoformat() if self.active_at else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SessionState":
        """The inverse of :meth:`to_dict`."""
        when = {k: parse_time(data[k]) if data.get(k) else None for k in ("created_at", "active_at")}
        return cls(Scope(data["user_id"], data["namespace"]), data["session_id"], int(data["version"]),
                   data["status"], int(data["message_count"]),
                   tuple(Message.from_dict(m) for m in data["recent"]),
                   StructuredSummary.from_dict(data["summary"]) if data.get("summary") else None,
                   int(data["message_range_end"]), when["created_at"], when["active_at"])


class SessionStore(ABC):
    """Where session state lives. Open one with :func:`memstrata.sessions.open_session_store`.

    ``hot_log`` is a capability flag: True for a store that would hold appended
    messages outside the main Store until :meth:`archive` (none does now: an
    acknowledged turn must be in the main Store); False when :meth:`append` writes
    them to the main Store at once.
    """

    url: str
    hot_log: bool = False

    @abstractmethod
    def load(self, scope: Scope, session_id: str) -> SessionState:
        """The session's state; a never-written session comes back with version 0."""

    @abstractmethod
    def messages(self, scope: Scope, session_id: str, start: int = 0) -> list[Message]:
        """The session's messages from sequence number ``start``, in order (archived
        ones from the main Store, held ones from here)."""

    @abstractmethod
    def append(self, scope: Scope, session_id: str, messages: Sequence[Message],
               expected_version: int) -> tuple[SessionState, list[Message]]:
        """Append messages (a closed or archived session opens again); returns the new
        state and the messages as stored, with ids and sequence numbers.

        Raises ConflictError when the session's version is not ``expected_version``.
        """

    @abstractmethod
    def save_summary(self, scope: Scope, session_id: str, summary: StructuredSummary,
                     range_end: int, expected_version: int) -> SessionState:
        """Persist the running summary and its ``message_range_end``; ConflictError as above."""

    @abstractmethod
    def archive(self, scope: Scope, session_id: str) -> tuple[SessionState, list[Message]]:
        """Close the session and hand every held message to the main Store, then drop the
        hot state; returns the state and the messages handed over (none for SQLite).

        Idempotent and safe to repeat after a crash: a message already handed over is
        never written twice, and one appended meanwhile stays (the session is open again).
        """

    @abstractmethod
    def expired(self, now: datetime, idle: timedelta, limit: int = 100) -> list[tuple[Scope, str]]:
        """Open sessions with no activity since ``now - idle``, oldest first."""

    @abstractmethod
    def latest(self, scope: Scope, *, exclude: str | None = None) -> SessionState | None:
        """The user's most recently active session that has a summary (for resume)."""

    def session_ids(self, scope: Scope) -> list[str]:
        """Every session of the user this store holds state for (default: none beyond
        the main store's own rows)."""
        return []

    def forget_messages(self, scope: Scope, session_id: str, message_ids: Sequence[str]) -> int:
        """Drop held messages by id (forgetting); returns how many were held here. The
        main store's raw log is the forgetter's to delete from: a store that holds
        nothing returns 0."""
        return 0

    def forget_user(self, scope: Scope) -> int:
        """Drop every key this store holds for the user (their sessions, their indexes
        and the entries that name them); returns how many were removed."""
        return 0

    def ping(self) -> None:  # noqa: B027 (the main store's own rows: its check covers them)
        """Raise :class:`~memstrata.errors.StoreUnavailableError` unless the session
        store answers (for ``/readyz``)."""

    def close(self) -> None:  # noqa: B027 (a hook: most stores hold nothing to release)
        """Release connections (the main Store is closed by its owner)."""

    def __enter__(self) -> "SessionStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
