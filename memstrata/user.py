"""The per-user handle: everything memstrata keeps about one user, in one namespace.

::

    lin = memory.user("lin", agent="support")
    lin.add([{"role": "user", "content": "I switched from Java to Go"}], session_id="s1")
    lin.remember("Prefers short answers", kind="preference")
    for hit in lin.search("what language do I use?", k=5):
        print(hit.score, hit.text)

A :class:`UserMemory` carries its :class:`~memstrata.types.Scope`, so no call can drift
into another user's or namespace's memory. Each method is one call on the piece that owns
the use case (:class:`~memstrata.parts.Parts`); :class:`memstrata.Memory`'s methods that
take ``user_id`` and ``agent_id`` (:mod:`memstrata.by_user`) delegate here.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .checks import check_count
from .knowledge import Knowledge
from .layers.context import ContextResult
from .layers.episodic import Resume
from .layers.episodic.turns import AddResult
from .layers.semantic.forget import ForgetReport
from .layers.semantic.pipeline import MaintenanceReport
from .layers.semantic.profile import Profile
from .parts import Parts
from .priority import answers_caller as _request
from .requests import ContextRequest, SearchRequest
from .retrieval.search import SearchResult
from .sessions import SessionState
from .stores.base import Job, ProfileVersion, SessionInfo
from .stores.policy import job_statuses
from .types import Filters, ItemVersion, Kind, MemoryItem, Message, Scope, SearchHit, Status, check_id
from .usage import UsageReport, usage_report

__all__ = ["UserMemory", "AddResult", "Parts", "SURFACE", "LOCAL_ONLY"]

#: The per-user methods every face of memstrata offers: :class:`~memstrata.UserMemory`,
#: :class:`memstrata.aio.AsyncUserMemory` and the remote handle of :class:`memstrata.Client`.
SURFACE = ("add", "messages", "sessions", "session", "remember", "get", "list", "update",
           "history", "forget", "forget_all", "feedback", "complete", "undo", "profile",
           "update_profile", "profile_history", "search", "explain", "archive_session",
           "resume", "context", "jobs", "usage")
#: Per-user methods only the in-process faces have (bulk and maintenance work).
LOCAL_ONLY = ("import_conversation", "enqueue_extraction", "maintain", "reindex")



class UserMemory:
    """One user's memory in one namespace. Get one with :meth:`memstrata.Memory.user`."""

    def __init__(self, parts: Parts, scope: Scope) -> None:
        self.parts = parts
        self.scope = scope

    @property
    def user_id(self) -> str:
        return self.scope.user_id

    @property
    def agent_id(self) -> str:
        """The namespace (``""`` for none)."""
        return self.scope.namespace

    def __repr__(self) -> str:
        return f"UserMemory(user_id={self.user_id!r}, agent={self.agent_id!r})"

    @property
    def kb(self) -> Knowledge:
        """The knowledge base this user reads: the namespace's shared one and their
        private one (write there with ``private=True``). See :mod:`memstrata.knowledge`."""
        return Knowledge(self.parts.knowledge_base, self.scope.namespace, self.scope.user_id)

    # -- raw turns (layers/episodic/turns.py: TurnWriter) ------------------------------
    @_request
    def add(self, messages: Any, session_id: str = "default", *, index: bool = True,
            extract: bool | None = None, idempotency_key: str | None = None) -> AddResult:
        """Store chat messages in a session's log and index them.

        OpenAI-format messages (``tool_calls``/``tool_call_id`` included), one such dict
        or a plain string (a user message); ``developer`` is a system message, content
        parts are joined, an empty assistant reply is kept; ``created_at`` (datetime,
        epoch or ISO string) is kept. All are checked before anything is written; the raw
        turns commit — in the main store, whatever the session store — before anything
        derived from them, with an L3 extraction job unless ``extract`` is False or the
        ``extraction`` setting is off (:meth:`memstrata.Memory.flush` waits for it). The
        turns are searchable by their words at once; the job embeds them (``embed_on_add``).

        With ``idempotency_key`` (an id the caller picks per logical add, say a request
        id) a retry never stores twice: an add whose key is recorded returns what that
        add stored (``replayed=True``; indexing it missed is done now); the same key with
        other messages or another session is a :class:`~memstrata.errors.ValidationError`.
        Keys are per user, kept until the user is forgotten."""
        return self.parts.turns.add(self.scope, messages, session_id, index=index, extract=extract,
                                    idempotency_key=idempotency_key)

    def messages(self, session_id: str = "default") -> builtins.list[Message]:
        """A session's raw log, in order (from the main store, whatever the session store)."""
        return self.parts.session_manager.sessions.messages(self.scope, check_id(session_id, "session_id"))

    def sessions(self) -> builtins.list[SessionInfo]:
        """The user's sessions in the main store, oldest first."""
        return self.parts.store.list_sessions(self.scope)

    def session(self, session_id: str = "default") -> SessionState:
        """A session's state: version, status, running summary, recent messages."""
        return self.parts.session_manager.sessions.load(self.scope, check_id(session_id, "session_id"))

    def import_conversation(self, sessions: Iterable[Mapping[str, Any]], *, progress: bool = True,
                            extract: bool = False) -> builtins.list[AddResult]:
        """Import past sessions: ``[{"session_id": ..., "messages": [...]}, ...]``.

        Messages keep their ``created_at``. Every session's turns are stored first, in one
        transaction (an import that fails stores nothing), then embedded and indexed
        ``embed_batch`` turns at a time across sessions, with a progress bar and its ETA.
        Resumable: each session is stored with an idempotency key drawn from its id and
        messages, and vectors are committed batch by batch to the embedding cache, so a
        rerun stores and embeds nothing twice. With ``extract`` each session gets its
        extraction job once indexed, so extraction runs beside the embedding of the later
        sessions (off by default: imports are often benchmarks of raw-turn retrieval)."""
        return self.parts.turns.import_sessions(self.scope, sessions, progress=progress, extract=extract)

    # -- memory items (layers/semantic/items.py: ItemWriter) ---------------------------
    def remember(self, content: str, *, kind: "Kind | str" = Kind.FACT, subject: str | None = None,
                 attribute: str | None = None, value: str | None = None,
                 confidence: float = 0.8, importance: float = 0.5, tags: Sequence[str] = (),
                 metadata: Mapping[str, Any] | None = None, session_id: str | None = None,
                 actor: str = "api", reason: str = "remember() call") -> MemoryItem:
        """Store a memory item directly (no extraction), as version 1. When an active item
        of the same kind already says the same (letter case and spacing aside), that
        item is returned and nothing is stored: remembering a thing twice is one memory."""
        return self.parts.writer.remember(
            self.scope, content, limit=self.parts.max_message_chars, kind=kind, subject=subject,
            attribute=attribute, value=value, confidence=confidence, importance=importance, tags=tags,
            metadata=metadata, session_id=session_id, actor=actor, reason=reason)

    def get(self, item_id: str) -> MemoryItem:
        """One memory item, or NotFoundError."""
        return self.parts.store.get_item(self.scope, check_id(item_id, "item_id"))

    def list(self, *, filters: "Filters | Mapping[str, Any] | None" = None, limit: int = 100,
             offset: int = 0) -> builtins.list[MemoryItem]:
        """Memory items, newest first (active only unless ``filters`` says otherwise)."""
        return self.parts.store.list_items(self.scope, Filters.build(filters),
                                           limit=check_count(limit, "limit"),
                                           offset=check_count(offset, "offset"))

    def update(self, item_id: str, *, actor: str = "api", reason: str = "update() call",
               expected_version: int | None = None, **changes: Any) -> MemoryItem:
        """Edit an item; the change is a new version with the previous values kept. With
        ``expected_version``, a ConflictError when the item changed meanwhile."""
        return self.parts.writer.edit(self.scope, item_id, changes, actor=actor, reason=reason,
                                      limit=self.parts.max_message_chars,
                                      expected_version=expected_version)

    def history(self, item_id: str) -> builtins.list[ItemVersion]:
        """Every version of an item, oldest first: who changed what, when and why."""
        return self.parts.store.history(self.scope, item_id)

    def forget(self, item_id: str, *, messages: bool = False) -> ForgetReport:
        """Forget an item for real: its rows, every version, its index entry and vector,
        the cached embeddings of its texts and, with ``messages``, the raw turns it was
        extracted from wherever a session store holds them (the turns after them are
        re-embedded, their sessions' summaries rebuilt without them). Bytes leave the
        file at the next :meth:`memstrata.Memory.compact`. Returns what was removed, per store."""
        return self.parts.forgetter.forget(self.scope, [item_id], messages=messages)

    delete = forget

    def forget_all(self, *, messages: bool = True) -> ForgetReport:
        """Forget everything of the user (items, versions, jobs, profile, index, cached
        vectors and, with ``messages``, sessions — a Redis session store's keys too — raw
        turns and the user's private knowledge base), and schedule the one compaction
        that takes the bytes out of the files within ``erase_within_s`` (the worker runs
        it; ``Memory.compact()`` does it now). Returns what was removed, per store, and
        when the compaction is due (``erase_by``)."""
        if messages:
            self.parts.knowledge_base.forget_private(self.scope)
        report = self.parts.forgetter.forget_user(self.scope, messages=messages)
        self.parts.turns.wake()  # it runs the compaction forget_user scheduled
        return report

    def feedback(self, item_id: str, signal: str) -> MemoryItem:
        """A thumbs-up (``"up"``) or thumbs-down (``"down"``) on an item's confidence; a
        new version. Maintenance deactivates items whose confidence fell too low."""
        return self.parts.writer.feedback(self.scope, item_id, signal)

    def complete(self, item_id: str) -> MemoryItem:
        """Mark a todo done (todos never decay until then)."""
        return self.parts.writer.set_status(self.scope, item_id, Status.DONE, reason="marked done")

    def undo(self, item_id: str) -> MemoryItem | None:
        """Revert an item's last change (a new version). Undoing a creation deletes the
        item and reactivates the one it superseded, which is returned."""
        return self.parts.writer.undo(self.scope, item_id)

    # -- core profile ---------------------------------------------------------------------
    def profile(self, *, cached: bool = False) -> Profile:
        """The core profile: aggregated from active items, manual edits on top.
        With ``cached``, the snapshot the last maintenance (or ``profile`` job) stored —
        one read instead of an aggregation, for per-prompt use — or, when there is no
        snapshot yet, the live profile."""
        profiles = self.parts.profiles
        return (profiles.cached(self.scope) if cached else None) or profiles.profile(self.scope)

    def update_profile(self, *, actor: str = "api", **fields: Any) -> Profile:
        """Edit profile fields (name, role, goals, current, preferences, language) as a
        new version; an edit beats aggregation until set back to None."""
        return self.parts.profiles.update(self.scope, fields, actor=actor)

    def profile_history(self) -> builtins.list[ProfileVersion]:
        """Every version of the user's profile edits, oldest first."""
        return self.parts.store.profile_versions(self.scope)

    # -- retrieval (retrieval/search.py: Retriever) ------------------------------------
    @_request
    def search(self, query: "str | SearchRequest", **options: Any) -> builtins.list[SearchHit]:
        """Hybrid search over the user's raw turns and memory items; best first.

        ``query`` is the text (or a :class:`~memstrata.requests.SearchRequest`); the
        options are its fields: ``k``, ``filters``, ``recent`` (the last few turns,
        added to the query), ``scoring``, ``mode``, ``now``. Each hit carries
        ``parts``: similarity, dense/lexical parts and ranks, recency, importance,
        layer weight and the scoring preset."""
        return self._search(SearchRequest.build(query, **options), explain=False).hits

    @_request
    def explain(self, query: "str | SearchRequest", **options: Any) -> SearchResult:
        """Like :meth:`search`, but also returns both candidate lists."""
        return self._search(SearchRequest.build(query, **options), explain=True)

    def _search(self, request: SearchRequest, *, explain: bool) -> SearchResult:
        parts = self.parts
        return parts.retriever.search(self.scope, request.checked(parts.max_message_chars),
                                      explain=explain, touch=not parts.read_only)

    # -- sessions and context (layers/episodic, assembly.py: ContextBuilder) -------------
    def archive_session(self, session_id: str = "default") -> SessionState:
        """Close and archive a session now (a last summary step first); its summary and
        messages stay, but it no longer feeds new prompts until written to again."""
        return self.parts.turns.archive(self.scope, check_id(session_id, "session_id"))

    def resume(self, *, exclude_session: str | None = None) -> Resume:
        """Where the user left off: the latest other session's summary, the open todos."""
        return self.parts.turns.resume(self.scope, exclude=exclude_session)

    @_request
    def context(self, session_id: "str | ContextRequest" = "default", messages: Any = None,
                **options: Any) -> ContextResult:
        """The messages to send for the next LLM call, within ``budget`` tokens.

        ``messages`` are what the caller would send (default: the session's recent ones).
        Adds the core profile, the session summary and the memories relevant to ``query``
        (default: the last user message): with ``recall="auto"`` (the default) the
        ``recall_k`` best items and turns of other sessions scoring at least ``min_score``,
        items first, the user's own words unless the message asks what the assistant said,
        and more on a trigger word or when none is strong
        (:func:`~memstrata.layers.context.recall`, docs/retrieval.md); ``recall="deep"``
        always adds more, ``recall="light"`` adds the profile only. ``filters`` and
        ``roles`` narrow the recall, as in :meth:`search`; ``report.reasons`` says why each
        memory line is there. The knowledge quota holds the best ``kb_k`` chunks of the
        knowledge bases the user reads (:attr:`kb`), quoted with their source and counted
        as recalled; the reply passed to :meth:`add` says whether they were used. Options
        are the fields of :class:`~memstrata.requests.ContextRequest`; returns a
        :class:`~memstrata.layers.context.ContextResult` (``messages``, ``report``)."""
        request = (session_id if isinstance(session_id, ContextRequest)
                   else ContextRequest.build(session_id, messages, **options)).checked()
        return self.parts.contexts.build(self.scope, request, self.search)

    # -- write path and maintenance -------------------------------------------------------
    def enqueue_extraction(self, session_id: str, *, from_seq: int = 0) -> Job | None:
        """Queue extraction over a session's turns from ``from_seq`` (e.g. after a session
        store handed its messages to the main store)."""
        return self.parts.turns.enqueue_extraction(self.scope, session_id, from_seq)

    def maintain(self, now: datetime | None = None, *, background: bool = False) -> MaintenanceReport:
        """Decay and capacity, then a refresh of the profile snapshot; see
        :meth:`memstrata.Memory.maintain`."""
        return self.parts.maintain([self.scope], now, background)

    def jobs(self, *, status: str | None = None, limit: int = 1000) -> builtins.list[Job]:
        """The user's background jobs, oldest first."""
        return self.parts.store.list_jobs(self.scope, statuses=job_statuses(status),
                                          limit=check_count(limit, "limit"))

    def usage(self) -> UsageReport:
        """LLM calls, tokens and latency per purpose, and item writes per path."""
        return usage_report(self.parts.store, [self.scope])

    def reindex(self, *, progress: bool = True) -> int:
        """Rebuild the retrieval index from the raw log and the items; returns docs indexed."""
        return self.parts.turns.reindex(self.scope, progress=progress)
