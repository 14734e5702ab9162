"""The by-``user_id`` compatibility surface: :class:`memstrata.Memory`'s per-user calls.

Before :meth:`memstrata.Memory.user` handed out a :class:`~memstrata.user.UserMemory`,
every per-user call took ``user_id`` (and ``agent_id``, the namespace). Those signatures
stay, here and only here, each one line: the handle of ``user_id`` does the work. New
code takes a handle (``memory.user("lin")``) and calls it.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import Any

from .layers.context import ContextResult
from .layers.episodic import Resume
from .layers.semantic.forget import ForgetReport
from .layers.semantic.profile import Profile
from .requests import SearchRequest
from .retrieval.search import SearchResult
from .sessions import SessionState
from .stores.base import Job, ProfileVersion, SessionInfo
from .types import ItemVersion, MemoryItem, Message, SearchHit
from .user import AddResult, UserMemory

__all__ = ["ByUserId"]


class ByUserId:
    """The per-user API by user id: ``memory.add(messages, "lin")`` is
    ``memory.user("lin").add(messages)``."""

    def user(self, user_id: str, *, agent: str | None = None) -> UserMemory:
        """The handle on one user's memory (:meth:`memstrata.Memory.user`)."""
        raise NotImplementedError

    def add(self, messages: Any, user_id: str, session_id: str = "default", *,
            agent_id: str | None = None, index: bool = True,
            extract: bool | None = None, idempotency_key: str | None = None) -> AddResult:
        """:meth:`UserMemory.add` for ``user_id``."""
        return self.user(user_id, agent=agent_id).add(messages, session_id, index=index,
                                                      extract=extract,
                                                      idempotency_key=idempotency_key)

    def messages(self, user_id: str, session_id: str = "default", *,
                 agent_id: str | None = None) -> builtins.list[Message]:
        """:meth:`UserMemory.messages` for ``user_id``."""
        return self.user(user_id, agent=agent_id).messages(session_id)

    def sessions(self, user_id: str, *, agent_id: str | None = None) -> builtins.list[SessionInfo]:
        """:meth:`UserMemory.sessions` for ``user_id``."""
        return self.user(user_id, agent=agent_id).sessions()

    def session(self, user_id: str, session_id: str = "default", *,
                agent_id: str | None = None) -> SessionState:
        """:meth:`UserMemory.session` for ``user_id``."""
        return self.user(user_id, agent=agent_id).session(session_id)

    def import_conversation(self, sessions: Iterable[Mapping[str, Any]], user_id: str, *,
                            agent_id: str | None = None, progress: bool = True,
                            extract: bool = False) -> builtins.list[AddResult]:
        """:meth:`UserMemory.import_conversation` for ``user_id``."""
        return self.user(user_id, agent=agent_id).import_conversation(
            sessions, progress=progress, extract=extract)

    def remember(self, content: str, user_id: str, *, agent_id: str | None = None,
                 **fields: Any) -> MemoryItem:
        """:meth:`UserMemory.remember` for ``user_id``."""
        return self.user(user_id, agent=agent_id).remember(content, **fields)

    def get(self, item_id: str, user_id: str, *, agent_id: str | None = None) -> MemoryItem:
        """:meth:`UserMemory.get` for ``user_id``."""
        return self.user(user_id, agent=agent_id).get(item_id)

    def list(self, user_id: str, *, agent_id: str | None = None, **options: Any) -> builtins.list[MemoryItem]:
        """:meth:`UserMemory.list` for ``user_id`` (``filters``, ``limit``, ``offset``)."""
        return self.user(user_id, agent=agent_id).list(**options)

    def update(self, item_id: str, user_id: str, *, agent_id: str | None = None,
               **changes: Any) -> MemoryItem:
        """:meth:`UserMemory.update` for ``user_id``."""
        return self.user(user_id, agent=agent_id).update(item_id, **changes)

    def history(self, item_id: str, user_id: str, *,
                agent_id: str | None = None) -> builtins.list[ItemVersion]:
        """:meth:`UserMemory.history` for ``user_id``."""
        return self.user(user_id, agent=agent_id).history(item_id)

    def forget(self, item_id: str, user_id: str, *, messages: bool = False,
               agent_id: str | None = None) -> ForgetReport:
        """:meth:`UserMemory.forget` for ``user_id``."""
        return self.user(user_id, agent=agent_id).forget(item_id, messages=messages)

    def delete(self, item_id: str, user_id: str, *, agent_id: str | None = None) -> None:
        """Hard delete an item (the same as :meth:`forget` without its messages)."""
        self.user(user_id, agent=agent_id).forget(item_id)

    def forget_user(self, user_id: str, *, messages: bool = True,
                    agent_id: str | None = None) -> ForgetReport:
        """:meth:`UserMemory.forget_all` for ``user_id``."""
        return self.user(user_id, agent=agent_id).forget_all(messages=messages)

    def feedback(self, item_id: str, user_id: str, signal: str, *,
                 agent_id: str | None = None) -> MemoryItem:
        """:meth:`UserMemory.feedback` for ``user_id``."""
        return self.user(user_id, agent=agent_id).feedback(item_id, signal)

    def complete(self, item_id: str, user_id: str, *, agent_id: str | None = None) -> MemoryItem:
        """:meth:`UserMemory.complete` for ``user_id``."""
        return self.user(user_id, agent=agent_id).complete(item_id)

    def undo(self, item_id: str, user_id: str, *, agent_id: str | None = None) -> MemoryItem | None:
        """:meth:`UserMemory.undo` for ``user_id``."""
        return self.user(user_id, agent=agent_id).undo(item_id)

    def profile(self, user_id: str, *, agent_id: str | None = None,
                cached: bool = False) -> Profile:
        """:meth:`UserMemory.profile` for ``user_id``."""
        return self.user(user_id, agent=agent_id).profile(cached=cached)

    def update_profile(self, user_id: str, *, agent_id: str | None = None, actor: str = "api",
                       **fields: Any) -> Profile:
        """:meth:`UserMemory.update_profile` for ``user_id``."""
        return self.user(user_id, agent=agent_id).update_profile(actor=actor, **fields)

    def profile_history(self, user_id: str, *, agent_id: str | None = None) -> builtins.list[ProfileVersion]:
        """:meth:`UserMemory.profile_history` for ``user_id``."""
        return self.user(user_id, agent=agent_id).profile_history()

    def search(self, query: "str | SearchRequest", user_id: str, *, agent_id: str | None = None,
               **options: Any) -> builtins.list[SearchHit]:
        """:meth:`UserMemory.search` for ``user_id``."""
        return self.user(user_id, agent=agent_id).search(query, **options)

    def explain(self, query: "str | SearchRequest", user_id: str, *, agent_id: str | None = None,
                **options: Any) -> SearchResult:
        """:meth:`UserMemory.explain` for ``user_id``."""
        return self.user(user_id, agent=agent_id).explain(query, **options)

    def archive_session(self, user_id: str, session_id: str = "default", *,
                        agent_id: str | None = None) -> SessionState:
        """:meth:`UserMemory.archive_session` for ``user_id``."""
        return self.user(user_id, agent=agent_id).archive_session(session_id)

    def resume(self, user_id: str, *, exclude_session: str | None = None,
               agent_id: str | None = None) -> Resume:
        """:meth:`UserMemory.resume` for ``user_id``."""
        return self.user(user_id, agent=agent_id).resume(exclude_session=exclude_session)

    def context(self, user_id: str, session_id: str = "default", messages: Any = None, *,
                agent_id: str | None = None, **options: Any) -> ContextResult:
        """:meth:`UserMemory.context` for ``user_id``."""
        return self.user(user_id, agent=agent_id).context(session_id, messages, **options)

    def enqueue_extraction(self, user_id: str, session_id: str, *, agent_id: str | None = None,
                           from_seq: int = 0) -> Job | None:
        """:meth:`UserMemory.enqueue_extraction` for ``user_id``."""
        return self.user(user_id, agent=agent_id).enqueue_extraction(session_id, from_seq=from_seq)

    def reindex(self, user_id: str, *, agent_id: str | None = None, progress: bool = True) -> int:
        """:meth:`UserMemory.reindex` for ``user_id``."""
        return self.user(user_id, agent=agent_id).reindex(progress=progress)
