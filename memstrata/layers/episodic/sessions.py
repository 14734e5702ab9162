"""L2 session life cycle: progressive summaries, idle archiving and resume over any
:class:`~memstrata.sessions.SessionStore`.

* :meth:`SessionManager.append` writes with optimistic locking and retries on conflict
  (reload, write again), so concurrent writers all land, in some order, none lost.
* :meth:`SessionManager.summarise` is one incremental L2 step: it reads only the
  messages after ``message_range_end``, folds them into the previous summary when at
  least ``every_n`` arrived, and persists the new ``message_range_end``. If an append
  lands meanwhile, the summary is saved against the new version (appends only add at
  the end, so it still covers the same messages); if another summariser won, ours is
  dropped. Either way each message is summarised once.
* :meth:`SessionManager.sweep` archives sessions idle for ``idle`` (default 30 min):
  a last forced summary step, then :meth:`SessionStore.archive`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ...errors import ConflictError
from ...sessions.base import SessionState, SessionStore
from ...stores.policy import Rerun
from ...types import Message, Scope, StructuredSummary
from .summary import DEFAULT_EVERY_N, ExtractiveSummariser, Summariser, plan_incremental

__all__ = ["SessionManager", "Resume", "DEFAULT_IDLE"]

DEFAULT_IDLE = timedelta(minutes=30)


@dataclass(frozen=True, slots=True)
class Resume:
    """Where the user left off: the last session's summary and the open todos."""

    session_id: str | None
    summary: StructuredSummary | None
    open_todos: tuple[str, ...] = ()

    def render(self, language: str | None = None) -> str:
        """A short text for a system prompt; empty when there is nothing to resume."""
        parts = [self.summary.render(language)] if self.summary and not self.summary.is_empty else []
        if self.open_todos:
            zh = language == "zh"
            parts.append(("未完成事项：" if zh else "Open todos:") + "\n"
                         + "\n".join(f"- {t}" for t in self.open_todos))
        return "\n".join(parts)

    def to_dict(self) -> dict:
        return {"session_id": self.session_id,
                "summary": self.summary.to_dict() if self.summary else None,
                "open_todos": list(self.open_todos)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Resume":
        return cls(data.get("session_id"),
                   StructuredSummary.from_dict(data["summary"]) if data.get("summary") else None,
                   tuple(data.get("open_todos") or ()))


class SessionManager:
    """Session life cycle over one store: append, summarise, archive when idle."""

    def __init__(self, sessions: SessionStore, *, summariser: Summariser | None = None,
                 every_n: int = DEFAULT_EVERY_N, idle: timedelta = DEFAULT_IDLE,
                 max_retries: int = 100) -> None:
        self.sessions = sessions
        self.summariser = summariser or ExtractiveSummariser()
        self.every_n = every_n
        self.idle = idle
        self.max_retries = max_retries

    def _retry(self, attempt: int) -> None:
        if attempt >= self.max_retries:
            raise ConflictError(f"gave up after {attempt} optimistic-lock conflicts in a row; "
                                "too many writers on one session")
        time.sleep(random.uniform(0, 0.002 * min(attempt, 10)))  # de-synchronise the racers

    def append(self, scope: Scope, session_id: str,
               messages: Sequence[Message]) -> tuple[SessionState, list[Message]]:
        """Append, reloading and retrying on conflict; returns the state and stored messages."""
        attempt = 0
        while True:
            state = self.sessions.load(scope, session_id)
            try:
                return self.sessions.append(scope, session_id, messages, state.version)
            except ConflictError:
                attempt += 1
                self._retry(attempt)

    def summarise(self, scope: Scope, session_id: str, *, force: bool = False,
                  guard: Callable[[], AbstractContextManager[None]] | None = None) -> SessionState:
        """One incremental summary step; a no-op unless ``every_n`` messages are new
        (or, with ``force``, any are). ``guard()``, when given, is entered around the save
        (the summarise job's: the save happens only if no turn of the user was forgotten
        since the step read them)."""
        state = self.sessions.load(scope, session_id)
        if state.message_count - state.message_range_end < (1 if force else self.every_n):
            return state
        new = self.sessions.messages(scope, session_id, start=state.message_range_end)
        plan = plan_incremental(new, 0, self.every_n, force=force)
        if not plan.due:
            return state
        summary = self.summariser.summarise(state.summary, plan.messages, scope=scope)
        range_end = state.message_range_end + plan.end
        attempt = 0
        while True:
            try:
                with guard() if guard is not None else nullcontext():
                    return self.sessions.save_summary(scope, session_id, summary, range_end,
                                                      state.version)
            except Rerun:
                raise  # the turns it read changed: the job starts over
            except ConflictError:
                attempt += 1
                fresh = self.sessions.load(scope, session_id)
                if fresh.message_range_end != state.message_range_end:
                    return fresh  # another summariser covered these messages
                state = fresh
                self._retry(attempt)

    def rebuild(self, scope: Scope, session_id: str) -> bool:
        """Rebuild a session's summary from the turns it still has (after forgetting),
        over the same ``message_range_end``: extractive, from scratch, so nothing of a
        forgotten turn survives in it and no LLM is called while the forgetter holds the
        write lock (later steps fold new turns in as usual). True when it had one."""
        attempt = 0
        while True:
            state = self.sessions.load(scope, session_id)
            if state.summary is None:
                return False
            covered = [m for m in self.sessions.messages(scope, session_id)
                       if m.seq < state.message_range_end]
            summary = (ExtractiveSummariser().summarise(None, covered, scope=scope) if covered
                       else StructuredSummary())
            try:
                self.sessions.save_summary(scope, session_id, summary, state.message_range_end,
                                           state.version)
                return True
            except ConflictError:
                attempt += 1
                self._retry(attempt)

    def archive(self, scope: Scope, session_id: str) -> tuple[SessionState, list[Message]]:
        """A last summary step over whatever is left, then archive."""
        self.summarise(scope, session_id, force=True)
        return self.sessions.archive(scope, session_id)

    def sweep(self, now: datetime | None = None,
              limit: int = 100) -> list[tuple[Scope, str, list[Message]]]:
        """Archive sessions idle since ``now - idle``; returns (scope, session id, messages
        handed to the main store) for each one archived."""
        now = now or datetime.now(UTC)
        done = []
        for scope, session_id in self.sessions.expired(now, self.idle, limit):
            state = self.sessions.load(scope, session_id)
            if state.active_at is not None and state.active_at > now - self.idle:
                continue  # written after the index said it was idle
            state, handed = self.archive(scope, session_id)
            done.append((scope, session_id, handed))
        return done

    def resume(self, scope: Scope, *, exclude: str | None = None) -> SessionState | None:
        """The user's latest session with a summary, other than ``exclude``."""
        return self.sessions.latest(scope, exclude=exclude)
