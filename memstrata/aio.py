"""The async API: :class:`AsyncMemory` and its per-user handle :class:`AsyncUserMemory`.

::

    from memstrata.aio import AsyncMemory

    async with AsyncMemory("sqlite:///memstrata.db") as memory:
        lin = memory.user("lin")
        await lin.add("I switched from Java to Go", session_id="s1")
        hits = await lin.search("which language?", k=5)

Every coroutine runs the synchronous call of :class:`~memstrata.UserMemory` of the same
name in a worker thread (the work is database and model I/O, and the sync core is
thread-safe), so the event loop is never blocked and the two APIs cannot disagree.
The methods are spelled out — for type checkers and ``help()`` — and
``tests/test_async_parity.py`` fails when one's signature or docstring drifts from its
sync twin's.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from .layers.context import ContextResult
from .layers.episodic import Resume
from .layers.semantic.forget import ForgetReport
from .layers.semantic.pipeline import MaintenanceReport
from .layers.semantic.profile import Profile
from .memory import Memory
from .requests import ContextRequest, SearchRequest
from .retrieval.search import SearchResult
from .sessions import SessionState
from .stores.base import Job, ProfileVersion, SessionInfo
from .types import Filters, ItemVersion, Kind, MemoryItem, Message, Scope, SearchHit
from .usage import UsageReport
from .user import LOCAL_ONLY, SURFACE, AddResult, UserMemory

__all__ = ["AsyncMemory", "AsyncUserMemory"]

T = TypeVar("T")

async def _run(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(functools.partial(call, *args, **kwargs))


class AsyncUserMemory:
    """One user's memory, awaitable. Get one with :meth:`AsyncMemory.user`."""

    def __init__(self, handle: UserMemory) -> None:
        self.sync = handle

    @property
    def user_id(self) -> str:
        return self.sync.user_id

    @property
    def agent_id(self) -> str:
        return self.sync.agent_id

    @property
    def scope(self) -> Scope:
        return self.sync.scope

    def __repr__(self) -> str:
        return f"AsyncUserMemory(user_id={self.user_id!r}, agent={self.agent_id!r})"

    async def add(self, messages: Any, session_id: str = "default", *, index: bool = True,
                  extract: bool | None = None, idempotency_key: str | None = None) -> AddResult:
        return await _run(self.sync.add, messages, session_id, index=index, extract=extract,
                          idempotency_key=idempotency_key)

    async def messages(self, session_id: str = "default") -> builtins.list[Message]:
        return await _run(self.sync.messages, session_id)

    async def sessions(self) -> builtins.list[SessionInfo]:
        return await _run(self.sync.sessions)

    async def session(self, session_id: str = "default") -> SessionState:
        return await _run(self.sync.session, session_id)

    async def import_conversation(self, sessions: Iterable[Mapping[str, Any]], *, progress: bool = True,
                                  extract: bool = False) -> builtins.list[AddResult]:
        return await _run(self.sync.import_conversation, sessions, progress=progress, extract=extract)

    async def remember(self, content: str, *, kind: "Kind | str" = Kind.FACT, subject: str | None = None,
                       attribute: str | None = None, value: str | None = None,
                       confidence: float = 0.8, importance: float = 0.5, tags: Any = (),
                       metadata: Mapping[str, Any] | None = None, session_id: str | None = None,
                       actor: str = "api", reason: str = "remember() call") -> MemoryItem:
        return await _run(self.sync.remember, content, kind=kind, subject=subject,
                          attribute=attribute, value=value, confidence=confidence,
                          importance=importance, tags=tags, metadata=metadata,
                          session_id=session_id, actor=actor, reason=reason)

    async def get(self, item_id: str) -> MemoryItem:
        return await _run(self.sync.get, item_id)

    async def list(self, *, filters: "Filters | Mapping[str, Any] | None" = None, limit: int = 100,
                   offset: int = 0) -> builtins.list[MemoryItem]:
        return await _run(self.sync.list, filters=filters, limit=limit, offset=offset)

    async def update(self, item_id: str, *, actor: str = "api", reason: str = "update() call",
                     expected_version: int | None = None, **changes: Any) -> MemoryItem:
        return await _run(self.sync.update, item_id, actor=actor, reason=reason,
                          expected_version=expected_version, **changes)

    async def history(self, item_id: str) -> builtins.list[ItemVersion]:
        return await _run(self.sync.history, item_id)

    async def forget(self, item_id: str, *, messages: bool = False) -> ForgetReport:
        return await _run(self.sync.forget, item_id, messages=messages)

    async def forget_all(self, *, messages: bool = True) -> ForgetReport:
        return await _run(self.sync.forget_all, messages=messages)

    async def feedback(self, item_id: str, signal: str) -> MemoryItem:
        return await _run(self.sync.feedback, item_id, signal)

    async def complete(self, item_id: str) -> MemoryItem:
        return await _run(self.sync.complete, item_id)

    async def undo(self, item_id: str) -> MemoryItem | None:
        return await _run(self.sync.undo, item_id)

    async def profile(self, *, cached: bool = False) -> Profile:
        return await _run(self.sync.profile, cached=cached)

    async def update_profile(self, *, actor: str = "api", **fields: Any) -> Profile:
        return await _run(self.sync.update_profile, actor=actor, **fields)

    async def profile_history(self) -> builtins.list[ProfileVersion]:
        return await _run(self.sync.profile_history)

    async def search(self, query: "str | SearchRequest", **options: Any) -> builtins.list[SearchHit]:
        return await _run(self.sync.search, query, **options)

    async def explain(self, query: "str | SearchRequest", **options: Any) -> SearchResult:
        return await _run(self.sync.explain, query, **options)

    async def archive_session(self, session_id: str = "default") -> SessionState:
        return await _run(self.sync.archive_session, session_id)

    async def resume(self, *, exclude_session: str | None = None) -> Resume:
        return await _run(self.sync.resume, exclude_session=exclude_session)

    async def context(self, session_id: "str | ContextRequest" = "default", messages: Any = None,
                      **options: Any) -> ContextResult:
        return await _run(self.sync.context, session_id, messages, **options)

    async def enqueue_extraction(self, session_id: str, *, from_seq: int = 0) -> Job | None:
        return await _run(self.sync.enqueue_extraction, session_id, from_seq=from_seq)

    async def maintain(self, now: datetime | None = None, *, background: bool = False) -> MaintenanceReport:
        return await _run(self.sync.maintain, now, background=background)

    async def jobs(self, *, status: str | None = None, limit: int = 1000) -> builtins.list[Job]:
        return await _run(self.sync.jobs, status=status, limit=limit)

    async def usage(self) -> UsageReport:
        return await _run(self.sync.usage)

    async def reindex(self, *, progress: bool = True) -> int:
        return await _run(self.sync.reindex, progress=progress)


# one docstring per method: the sync twin's
for _name in SURFACE + LOCAL_ONLY:
    getattr(AsyncUserMemory, _name).__doc__ = getattr(UserMemory, _name).__doc__


class AsyncMemory:
    """:class:`memstrata.Memory` for asyncio: the same arguments, awaitable work.

    Building it opens the store and loads the embedder (blocking, once); use it as
    ``async with`` so :meth:`close` runs in a thread."""

    def __init__(self, store: Any = None, *, embedder: Any = None, llm: Any = None,
                 memory: Memory | None = None, **settings: Any) -> None:
        self.sync = memory if memory is not None else Memory(store, embedder=embedder, llm=llm,
                                                            **settings)

    def user(self, user_id: str, *, agent: str | None = None) -> AsyncUserMemory:
        """The async handle on one user's memory (see :meth:`memstrata.Memory.user`)."""
        return AsyncUserMemory(self.sync.user(user_id, agent=agent))

    async def users(self) -> builtins.list[Scope]:
        """Every (user, namespace) with a session or an item."""
        return await _run(self.sync.users)

    async def flush(self, timeout: float | None = None) -> None:
        """Wait for the background jobs queued so far (see :meth:`memstrata.Memory.flush`)."""
        await _run(self.sync.flush, timeout)

    async def maintain(self, user_id: str | None = None, now: datetime | None = None, *,
                       agent_id: str | None = None, background: bool = False) -> MaintenanceReport:
        """:meth:`memstrata.Memory.maintain`."""
        return await _run(self.sync.maintain, user_id, now, agent_id=agent_id, background=background)

    async def close(self) -> None:
        """Stop the worker and close the store."""
        await _run(self.sync.close)

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
