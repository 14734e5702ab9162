"""The per-user handle: everything memstrata keeps about one user, in one namespace.

::

    lin = memory.user("lin", agent="support")
    lin.add([{"role": "user", "content": "I switched from Java to Go"}], session_id="s1")
    lin.remember("Prefers short answers", kind="preference")
    for hit in lin.search("what language do I use?", k=5):
        print(hit.score, hit.text)

A :class:`UserMemory` carries its :class:`~memstrata.types.Scope`, so no call can drift
into another user's or namespace's memory. :class:`memstrata.Memory`'s methods that take
``user_id`` and ``agent_id`` delegate here.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from tqdm import tqdm

from .checks import check_count
from .config import Settings
from .errors import ConflictError, NotFoundError, ValidationError
from .knowledge import Knowledge, KnowledgeBase, KnowledgeHit
from .layers.context import (ContextResult, MemoryLine, Quotas, RecallPolicy, assemble, quoted_block,
                             read_turn, recall, turn_search)
from .layers.episodic import Resume, SessionManager
from .layers.semantic.forget import Forgetter, ForgetReport
from .layers.semantic.items import ItemWriter, new_item
from .layers.semantic.pipeline import MaintenanceReport
from .layers.semantic.profile import Profile, render
from .layers.semantic.profiles import Profiles
from .providers.embedders import Embedder
from .providers.metered import MeteredLLM
from .quoting import quote_data
from .requests import ContextRequest, SearchRequest
from .retrieval.indexer import Indexer, cache_key, embed_uncached, turn_dense_texts
from .retrieval.search import Retriever, SearchResult
from .sessions import SessionState
from .stores.base import IdempotentAdd, Job, ProfileVersion, SessionInfo, Store
from .stores.jobs import JobKind
from .stores.policy import job_statuses
from .text import tokenize
from .tokens import get_tokenizer
from .types import (PARTS, Filters, ItemVersion, Kind, Layer, MemoryItem, Message, Role, Scope, SearchHit,
                    Status, StructuredSummary, check_id, utcnow)
from .usage import UsageReport, usage_report

__all__ = ["UserMemory", "AddResult", "Engine", "SURFACE", "LOCAL_ONLY"]

log = logging.getLogger("memstrata")
_EVERY_STATUS = Filters(statuses=tuple(Status))

#: The per-user methods every face of memstrata offers: :class:`~memstrata.UserMemory`,
#: :class:`memstrata.aio.AsyncUserMemory` and the remote handle of :class:`memstrata.Client`.
SURFACE = ("add", "messages", "sessions", "session", "remember", "get", "list", "update",
           "history", "forget", "forget_all", "feedback", "complete", "undo", "profile",
           "update_profile", "profile_history", "search", "explain", "archive_session",
           "resume", "context", "jobs", "usage")
#: Per-user methods only the in-process faces have (bulk and maintenance work).
LOCAL_ONLY = ("import_conversation", "enqueue_extraction", "maintain", "reindex")




@dataclass(frozen=True, slots=True)
class AddResult:
    """What :meth:`UserMemory.add` stored. ``replayed``: a retry with the idempotency
    key of an add that was stored before, answered with what that add stored (nothing
    was stored again)."""

    session_id: str
    messages: list[Message]
    replayed: bool = False

    @property
    def message_ids(self) -> builtins.list[str]:
        return [m.id for m in self.messages]


def _parse_messages(messages: Any, max_chars: int) -> builtins.list[Message]:
    """OpenAI-format messages, a single dict, or a plain string (a user message)."""
    if isinstance(messages, (Mapping, str, Message)):
        messages = [messages]
    if not isinstance(messages, Sequence) or not messages:
        raise ValidationError("messages must be a non-empty list of dicts like "
                              "{'role': 'user', 'content': '...'} (or one such dict, or a string)")
    now = utcnow()
    return [Message.from_dict(m, default_time=now, index=i, max_chars=max_chars)
            for i, m in enumerate(messages)]


def _check_session(session_id: Any) -> str:
    return check_id(session_id, "session_id")


def _import_session_id(session: Mapping[str, Any], i: int) -> Any:
    """An imported session's id: its ``session_id`` (a number as its digits) or
    ``import-<i>``; add() checks it."""
    given = session.get("session_id")
    if isinstance(given, int) and not isinstance(given, bool):
        return str(given)
    return given or f"import-{i}"


def _import_key(session_id: str, messages: Sequence[Message], timed: Sequence[bool]) -> str:
    """The idempotency key of one imported session: its id and checked messages, with the
    times the caller gave, hashed (the same session imported again is recognised,
    whatever the session store holds)."""
    times = [m.created_at.isoformat() if t else "" for m, t in zip(messages, timed)]
    data = json.dumps([add_fingerprint(session_id, messages), times])
    return "import-" + hashlib.sha256(data.encode()).hexdigest()[:40]


def _turn_key(message: Message, timed: bool) -> str:
    """What makes two turns the same turn: role, content, name, tool calls, metadata —
    and the time, when the caller gave one (a time that defaults to now says nothing)."""
    data = {**message.to_openai(), "metadata": dict(message.metadata)}
    if timed:
        data["created_at"] = message.created_at.isoformat()
    return json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)


def _timed(messages: Any) -> builtins.list[bool]:
    """For each message sent to add(): whether it carries its own time."""
    if isinstance(messages, (Mapping, str, Message)):
        messages = [messages]
    return [isinstance(m, Message) or (isinstance(m, Mapping) and any(
        m.get(k) is not None for k in ("created_at", "timestamp", "time"))) for m in messages]


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def add_fingerprint(session_id: str, messages: Sequence[Message]) -> str:
    """The digest an idempotency key is recorded with: the session and each message's
    role, content, name, tool calls and metadata (not its time, which defaults to now
    and so differs on every retry)."""
    canonical = [{**m.to_openai(), "metadata": dict(m.metadata)} for m in messages]
    data = json.dumps([session_id, canonical], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def _replayed(message: Message) -> dict[str, Any]:
    """A stored turn as context() sends it again: a system turn stored in the session
    is quoted data in a block of its own, never a system message with its authority."""
    if message.role is Role.SYSTEM:
        return {"role": "system", "content": quoted_block(
            "a system message stored in this session's log, replayed", message.content or "")}
    return message.to_openai()


def _quoted_profile(profile: Profile) -> Profile:
    """The profile with every field through :func:`~memstrata.quoting.quote_data` (one
    line each: a line break in a field must not start a line of the prompt)."""
    def each(values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(q for v in values if (q := quote_data(v)))

    return replace(profile, name=quote_data(profile.name) if profile.name else profile.name,
                   role=quote_data(profile.role) if profile.role else profile.role,
                   goals=each(profile.goals), current=each(profile.current),
                   preferences=each(profile.preferences), people=each(profile.people),
                   facts=each(profile.facts),
                   language=quote_data(profile.language) if profile.language else profile.language)


def _quoted_summary(summary: StructuredSummary) -> StructuredSummary:
    """The session summary with every part through :func:`~memstrata.quoting.quote_data`."""
    return StructuredSummary.clipped(max_chars=summary.max_chars, version=summary.version,
                                     **{p: quote_data(getattr(summary, p)) for p in PARTS})


class Engine(Protocol):
    """What a handle needs of :class:`memstrata.Memory`: the shared parts and the work
    that is queued for the worker."""

    settings: Settings
    store: Store
    embedder: Embedder
    indexer: Indexer
    retriever: Retriever
    writer: ItemWriter
    forgetter: Forgetter
    knowledge_base: KnowledgeBase
    profiles: Profiles
    session_manager: SessionManager
    llm: MeteredLLM | None

    def enqueue_extract(self, scope: Scope, session_id: str, from_seq: int, to_seq: int) -> Job: ...

    def enqueue_summary(self, scope: Scope, session_id: str) -> Job | None: ...

    def wake_worker(self) -> None: ...

    def after_archive(self, scope: Scope, session_id: str, handed: list[Message]) -> None: ...

    def maintain_scopes(self, scopes: Sequence[Scope], now: datetime | None = None, *,
                        background: bool = False) -> MaintenanceReport: ...


class UserMemory:
    """One user's memory in one namespace. Get one with :meth:`memstrata.Memory.user`."""

    def __init__(self, memory: Engine, scope: Scope) -> None:
        self.memory = memory
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
        return Knowledge(self.memory.knowledge_base, self.scope.namespace, self.scope.user_id)

    # -- raw turns ------------------------------------------------------------------
    def add(self, messages: Any, session_id: str = "default", *, index: bool = True,
            extract: bool | None = None, idempotency_key: str | None = None) -> AddResult:
        """Store chat messages in a session's log and index them.

        Takes OpenAI-format messages (``tool_calls``/``tool_call_id`` included), one
        such dict, or a plain string (a user message); ``developer`` is a system
        message, content parts are joined as text, an empty assistant reply is kept as
        empty. Each message may carry ``created_at`` (datetime, epoch or ISO string) for
        imports. The whole list is validated before anything is written; the raw turns
        commit before anything derived from them. Unless ``extract`` is False (or the
        ``extraction`` setting is off), an L3 extraction job is stored in the same
        transaction and runs in the background (:meth:`memstrata.Memory.flush` waits
        for it). The turns are searchable by their words at once; with
        ``embed_on_add="background"`` (the default) that job also embeds them.

        With ``idempotency_key`` (any id-like string the caller picks per logical add,
        say a request id) a retry never stores the messages twice: the key is recorded
        with the messages, in their transaction, and an add with a key already recorded
        returns what that add stored (``replayed=True``; indexing it missed, say because
        the embedder failed after the commit, is done now). The same key with other
        messages or another session is a :class:`~memstrata.errors.ValidationError`.
        Keys are per user, kept until the user is forgotten. Whatever the session
        store, the turns are committed in the main store before this returns (Redis
        only caches the session's state).
        """
        m = self.memory
        if extract is None:
            extract = m.settings.extraction != "off"
        session_id = _check_session(session_id)
        parsed = _parse_messages(messages, m.settings.max_message_chars)
        key = None if idempotency_key is None else check_id(idempotency_key, "idempotency_key")
        fingerprint = add_fingerprint(session_id, parsed) if key is not None else ""
        if key is not None and (prior := m.store.idempotent_add(self.scope, key)) is not None:
            return self._replay(prior, fingerprint, session_id, index)
        if key is None and (same := self._repeated(session_id, parsed, _timed(messages))):
            log.info("add to %r/%s: the same %d message(s) as the session's last; not stored "
                     "again", self.user_id, session_id, len(same))
            return AddResult(session_id, same, replayed=True)
        manager = m.session_manager
        try:
            with m.store.transaction():  # the raw turns, their extraction job and key: one unit
                _, stored = manager.append(self.scope, session_id, parsed)
                job = (m.enqueue_extract(self.scope, session_id, stored[0].seq, stored[-1].seq)
                       if extract and stored and not manager.sessions.hot_log else None)
                if key is not None:
                    m.store.record_idempotent_add(self.scope, IdempotentAdd(
                        key, fingerprint, session_id, tuple(msg.id for msg in stored), utcnow()))
        except ConflictError:
            # a concurrent add with the same key committed first: answer with its result
            if key is None or (prior := m.store.idempotent_add(self.scope, key)) is None:
                raise
            return self._replay(prior, fingerprint, session_id, index)
        if index:
            # with an extraction job coming, the words are indexed now and the vectors by
            # the job: embedding is most of a write's cost (see docs/benchmarks.md)
            later = job is not None and m.settings.embed_on_add == "background"
            m.indexer.index_turns(self.scope, session_id, stored, vectors=not later)
        if m.llm is None:
            manager.summarise(self.scope, session_id)
        else:  # an LLM summary: in the background, not in add()
            job = m.enqueue_summary(self.scope, session_id) or job
        if job is not None:
            m.wake_worker()
        replies = [msg.content for msg in stored if msg.role is Role.ASSISTANT and msg.content]
        if replies:  # knowledge chunks recalled for this reply: were they used? (R4.3)
            m.knowledge_base.replied(self.scope, session_id, "\n".join(replies))
        log.info("add %d message(s) to %r/%s%s", len(stored), self.user_id, session_id,
                 " (extraction queued)" if job is not None else "")
        return AddResult(session_id, stored)

    def _repeated(self, session_id: str, parsed: Sequence[Message],
                  timed: Sequence[bool]) -> builtins.list[Message]:
        """The session's last turns when ``parsed`` repeats them exactly — an add sent
        twice (a retry without an idempotency key, a double submit) — else ``[]``. A turn
        meant to be stored again carries its own ``created_at``, which then must match."""
        state = self.memory.session_manager.sessions.load(self.scope, session_id)
        if not 0 < len(parsed) <= len(state.recent):
            return []
        tail = state.recent[-len(parsed):]
        if all(_turn_key(old, t) == _turn_key(new, t) for old, new, t in zip(tail, parsed, timed)):
            return builtins.list(tail)
        return []

    def _replay(self, prior: IdempotentAdd, fingerprint: str, session_id: str,
                index: bool) -> AddResult:
        """The result of the add ``prior`` recorded, for a retry with its key."""
        if prior.fingerprint != fingerprint:
            raise ValidationError(
                f"idempotency key {prior.key!r} was used on {prior.created_at:%Y-%m-%d %H:%M:%S} "
                f"UTC for an add of other messages (to session {prior.session_id!r}); a retry "
                "must send the same messages to the same session — use a new key for a new add")
        wanted = set(prior.message_ids)
        stored = [msg for msg in self.messages(session_id) if msg.id in wanted]
        if index and stored:  # what the first attempt committed but did not index
            indexed = self.memory.store.doc_info(self.scope, [msg.id for msg in stored])
            missing = [msg for msg in stored if msg.id not in indexed and msg.role is not Role.SYSTEM]
            if missing:
                self.memory.indexer.index_turns(self.scope, session_id, missing)
        log.info("add to %r/%s replayed for idempotency key %r (%d message(s))", self.user_id,
                 session_id, prior.key, len(stored))
        return AddResult(session_id, stored, replayed=True)

    def messages(self, session_id: str = "default") -> builtins.list[Message]:
        """A session's raw log, in order (from the main store, whatever the session store)."""
        return self.memory.session_manager.sessions.messages(self.scope, _check_session(session_id))

    def sessions(self) -> builtins.list[SessionInfo]:
        """The user's sessions in the main store, oldest first."""
        return self.memory.store.list_sessions(self.scope)

    def session(self, session_id: str = "default") -> SessionState:
        """A session's state: version, status, running summary, recent messages."""
        return self.memory.session_manager.sessions.load(self.scope, _check_session(session_id))

    def import_conversation(self, sessions: Iterable[Mapping[str, Any]], *, progress: bool = True,
                            extract: bool = False) -> builtins.list[AddResult]:
        """Import past sessions: ``[{"session_id": ..., "messages": [...]}, ...]``.

        Messages keep their original ``created_at``. Raw logs of all sessions are stored
        first, in one transaction — an import that fails stores nothing — then embedded
        and indexed in batches of ``embed_batch`` turns across sessions, with a progress
        bar and its ETA. An import is resumable: each session is stored with an
        idempotency key drawn from its id and messages, so running the same import
        again stores no session twice, and only the turns not indexed yet are indexed —
        their vectors committed batch by batch in the embedding cache, so nothing an
        interrupted run embedded is embedded again. With ``extract`` each session also
        gets an extraction job, queued as soon as its turns are indexed, so extraction
        runs beside the embedding of the later sessions (off by default: imports are
        often benchmarks of raw-turn retrieval).
        """
        if isinstance(sessions, (str, bytes, Mapping)) or not isinstance(sessions, Iterable):
            raise ValidationError("sessions must be a list of dicts like {'session_id': ..., "
                                  f"'messages': [...]}}, not {type(sessions).__name__}")
        sessions = list(sessions)
        for i, session in enumerate(sessions):
            if not isinstance(session, Mapping) or "messages" not in session:
                raise ValidationError(f"session {i} must be a dict with 'messages' "
                                      "(and optionally 'session_id')")
        m = self.memory
        keyed = []
        for i, session in enumerate(sessions):  # every session checked before anything is stored
            sid = _check_session(_import_session_id(session, i))
            key = _import_key(sid, _parse_messages(session["messages"], m.settings.max_message_chars),
                              _timed(session["messages"]))
            keyed.append((session["messages"], sid, key))
        with m.store.transaction():
            results = [self.add(messages, sid, index=False, extract=False, idempotency_key=key)
                       for messages, sid, key in keyed]
        self._index_imported(results, progress, extract=extract and m.settings.extraction != "off"
                             and not m.session_manager.sessions.hot_log)
        return results

    def _index_imported(self, results: Sequence[AddResult], progress: bool, *, extract: bool) -> None:
        """Index the imported turns not indexed yet, session after session: their vectors
        embedded ``embed_batch`` at a time across sessions into the cache (the progress
        bar, with its ETA), and each session indexed as soon as all of its vectors are
        there. With ``extract`` a session's extraction job is queued once it is indexed,
        so the worker extracts from the sessions done while the import embeds the next
        ones (a job queued with the turns would embed them a second time, beside the
        import); a session that has its job from an earlier run of the same import does
        not get another."""
        m = self.memory
        batch = m.settings.embed_batch
        queued = {(j.payload.get("session_id"), j.payload.get("from_seq"), j.payload.get("to_seq"))
                  for j in m.store.list_jobs(self.scope, limit=10**6) if j.kind == JobKind.EXTRACT} \
            if extract else set()

        def done(result: AddResult, turns: Sequence[Message]) -> None:
            for start in range(0, len(turns), batch):
                m.indexer.index_turns(self.scope, result.session_id, turns[start:start + batch])
            span = (result.session_id, result.messages[0].seq, result.messages[-1].seq) \
                if result.messages else None
            if extract and span is not None and span not in queued:
                with m.store.transaction():
                    m.enqueue_extract(self.scope, *span)
                m.wake_worker()

        indexed: set[str] = set()
        every = [msg.id for r in results for msg in r.messages]
        for start in range(0, len(every), 500):
            indexed.update(m.store.doc_info(self.scope, every[start:start + 500]))
        todo = [(r, [msg for msg in r.messages if msg.id not in indexed and msg.role is not Role.SYSTEM])
                for r in results]
        # each distinct text not cached yet, in the sessions' order, with its session's place
        texts = [(k, text) for k, (r, msgs) in enumerate(todo) if msgs
                 for text in turn_dense_texts(self._session_turns(r.session_id, msgs), {x.id for x in msgs})]
        keys = [cache_key(self.scope, text) for _, text in texts]
        cached = set(m.store.cached_vectors(m.embedder.name, sorted(set(keys)))) if keys else set()
        missing: list[tuple[int, str]] = []
        for (k, text), key in zip(texts, keys):
            if key not in cached:
                cached.add(key)
                missing.append((k, text))
        ready = 0  # the sessions before this one have every vector in the cache
        with tqdm(total=len(texts), desc=f"embedding {self.user_id}", unit="msg",
                  disable=not progress, leave=False) as bar:
            bar.update(len(texts) - len(missing))
            for start in range(0, len(missing), batch):
                chunk = missing[start:start + batch]
                embed_uncached(m.store, m.embedder, [(self.scope, text) for _, text in chunk], batch=batch)
                bar.update(len(chunk))
                upto = missing[start + batch][0] if start + batch < len(missing) else len(todo)
                for r, msgs in todo[ready:upto]:
                    done(r, msgs)
                ready = max(ready, upto)
            for r, msgs in todo[ready:]:
                done(r, msgs)

    def _session_turns(self, session_id: str, part: Sequence[Message]) -> builtins.list[Message]:
        """``part`` (turns of one session, in order) with the turns before it that its
        dense texts read (the two before it that are not system turns)."""
        first = part[0].seq
        back = min(first, 6)  # as Indexer.index_turns reads them (system turns do not count)
        earlier = self.memory.store.get_messages(self.scope, session_id, start=first - back,
                                                 limit=back) if back else []
        return [*earlier, *part]

    # -- memory items ---------------------------------------------------------------
    def remember(self, content: str, *, kind: "Kind | str" = Kind.FACT, subject: str | None = None,
                 attribute: str | None = None, value: str | None = None,
                 confidence: float = 0.8, importance: float = 0.5, tags: Sequence[str] = (),
                 metadata: Mapping[str, Any] | None = None, session_id: str | None = None,
                 actor: str = "api", reason: str = "remember() call") -> MemoryItem:
        """Store a memory item directly (no extraction), as version 1. When an active item
        of the same kind already says the same (letter case and spacing aside), that
        item is returned and nothing is stored: remembering a thing twice is one memory."""
        same = self._same_item(content, kind)
        if same is not None:
            log.info("remember for %r: item %s already says this; not stored again",
                     self.user_id, same.id)
            return same
        item = new_item(self.scope, content, limit=self.memory.settings.max_message_chars,
                        kind=kind, subject=subject, attribute=attribute, value=value,
                        confidence=confidence, importance=importance, tags=tags,
                        metadata=metadata, session_id=session_id)
        return self.memory.writer.create(self.scope, item, actor=actor, reason=reason)

    def _same_item(self, content: Any, kind: "Kind | str") -> MemoryItem | None:
        """The active item of ``kind`` whose text is ``content``, found through the
        lexical index (an item is indexed when written), or None."""
        if not isinstance(content, str) or not content.strip() or not isinstance(kind, str):
            return None  # new_item says what is wrong with it
        try:
            wanted = Kind(kind)
        except ValueError:
            return None
        store = self.memory.store
        # an exact repeat has every term of the text: it ranks among the first
        found = store.lexical_search(self.scope, tokenize(content), Filters(
            kinds=(wanted,), layers=(Layer.SEMANTIC,), statuses=(Status.ACTIVE,)), 20)
        for doc_id, _ in found:
            try:
                item = store.get_item(self.scope, doc_id)
            except NotFoundError:
                continue
            if item.kind is wanted and item.status is Status.ACTIVE and _same_text(item.content, content):
                return item
        return None

    def get(self, item_id: str) -> MemoryItem:
        """One memory item, or NotFoundError."""
        return self.memory.store.get_item(self.scope, check_id(item_id, "item_id"))

    def list(self, *, filters: "Filters | Mapping[str, Any] | None" = None, limit: int = 100,
             offset: int = 0) -> builtins.list[MemoryItem]:
        """Memory items, newest first (active only unless ``filters`` says otherwise)."""
        return self.memory.store.list_items(self.scope, Filters.build(filters),
                                            limit=check_count(limit, "limit"),
                                            offset=check_count(offset, "offset"))

    def update(self, item_id: str, *, actor: str = "api", reason: str = "update() call",
               expected_version: int | None = None, **changes: Any) -> MemoryItem:
        """Edit an item; the change is a new version with the previous values kept. With
        ``expected_version``, a ConflictError when the item changed meanwhile."""
        return self.memory.writer.edit(self.scope, item_id, changes, actor=actor, reason=reason,
                                       limit=self.memory.settings.max_message_chars,
                                       expected_version=expected_version)

    def history(self, item_id: str) -> builtins.list[ItemVersion]:
        """Every version of an item, oldest first: who changed what, when and why."""
        return self.memory.store.history(self.scope, item_id)

    def forget(self, item_id: str, *, messages: bool = False) -> ForgetReport:
        """Forget an item for real: its rows, every version, its index entry and vector,
        the cached embeddings of its texts and, with ``messages``, the raw turns it was
        extracted from wherever a session store holds them (the turns after them are
        re-embedded, their sessions' summaries rebuilt without them). Bytes leave the
        file at the next :meth:`memstrata.Memory.compact`. Returns what was removed, per
        store (a :class:`~memstrata.layers.semantic.forget.ForgetReport`)."""
        return self.memory.forgetter.forget(self.scope, [item_id], messages=messages)

    delete = forget

    def forget_all(self, *, messages: bool = True) -> ForgetReport:
        """Forget everything of the user (items, versions, jobs, profile, index, cached
        vectors and, with ``messages``, sessions — a Redis session store's keys too — raw
        turns and the user's private knowledge base), and schedule the one compaction
        that takes the bytes out of the files within ``erase_within_s`` (the worker runs
        it; ``Memory.compact()`` does it now). Returns what was removed, per store, and
        when the compaction is due (``erase_by``)."""
        if messages:
            self.memory.knowledge_base.forget_private(self.scope)
        report = self.memory.forgetter.forget_user(self.scope, messages=messages)
        self.memory.wake_worker()  # it runs the compaction forget_user scheduled
        return report

    def feedback(self, item_id: str, signal: str) -> MemoryItem:
        """A thumbs-up (``"up"``) or thumbs-down (``"down"``) on an item's confidence; a
        new version. Maintenance deactivates items whose confidence fell too low."""
        return self.memory.writer.feedback(self.scope, item_id, signal)

    def complete(self, item_id: str) -> MemoryItem:
        """Mark a todo done (todos never decay until then)."""
        return self.memory.writer.set_status(self.scope, item_id, Status.DONE, reason="marked done")

    def undo(self, item_id: str) -> MemoryItem | None:
        """Revert an item's last change (a new version). Undoing a creation deletes the
        item and reactivates the one it superseded, which is returned."""
        return self.memory.writer.undo(self.scope, item_id)

    # -- core profile -------------------------------------------------------------------
    def profile(self, *, cached: bool = False) -> Profile:
        """The core profile (R3.10): aggregated from active items, manual edits on top.

        With ``cached`` it is the snapshot the last maintenance (or ``profile`` job)
        stored — one read instead of an aggregation, for per-prompt use — falling back
        to the live profile when there is no snapshot yet."""
        profiles = self.memory.profiles
        return (profiles.cached(self.scope) if cached else None) or profiles.profile(self.scope)

    def update_profile(self, *, actor: str = "api", **fields: Any) -> Profile:
        """Edit profile fields (name, role, goals, current, preferences, language) as a
        new version; an edit beats aggregation until set back to None."""
        return self.memory.profiles.update(self.scope, fields, actor=actor)

    def profile_history(self) -> builtins.list[ProfileVersion]:
        """Every version of the user's profile edits, oldest first."""
        return self.memory.store.profile_versions(self.scope)

    # -- retrieval ------------------------------------------------------------------
    def search(self, query: "str | SearchRequest", **options: Any) -> builtins.list[SearchHit]:
        """Hybrid search over the user's raw turns and memory items; best first.

        ``query`` is the text (or a :class:`~memstrata.requests.SearchRequest`); the
        options are its fields: ``k``, ``filters``, ``recent`` (the last few turns,
        added to the query, R5.4), ``scoring``, ``mode``, ``now``. Each hit carries
        ``parts``: similarity, dense/lexical parts and ranks, recency, importance,
        layer weight and the scoring preset.
        """
        return self._search(SearchRequest.build(query, **options), explain=False).hits

    def explain(self, query: "str | SearchRequest", **options: Any) -> SearchResult:
        """Like :meth:`search`, but also returns both candidate lists (R5.6)."""
        return self._search(SearchRequest.build(query, **options), explain=True)

    def _search(self, request: SearchRequest, *, explain: bool) -> SearchResult:
        m = self.memory
        request = request.checked(m.settings.max_message_chars)
        return m.retriever.search(self.scope, request, explain=explain,
                                  touch=not m.settings.read_only)

    # -- sessions and context (logic in layers.episodic and layers.context) -----------
    def archive_session(self, session_id: str = "default") -> SessionState:
        """Close and archive a session now (a last summary step first); its summary and
        messages stay, but it no longer feeds new prompts until written to again."""
        session_id = _check_session(session_id)
        state, handed = self.memory.session_manager.archive(self.scope, session_id)
        if state.exists:  # a session never written (or forgotten) has nothing to consolidate
            self.memory.after_archive(self.scope, session_id, handed)
        return state

    def resume(self, *, exclude_session: str | None = None) -> Resume:
        """Where the user left off (R2.5): the latest other session's summary and the
        open todos."""
        state = self.memory.session_manager.resume(self.scope, exclude=exclude_session)
        todos = self.list(filters={"kinds": ["todo"], "statuses": ["active"]}, limit=20)
        return Resume(state.session_id if state else None, state.summary if state else None,
                      tuple(t.content for t in todos))

    def context(self, session_id: "str | ContextRequest" = "default", messages: Any = None,
                **options: Any) -> ContextResult:
        """The messages to send for the next LLM call, within ``budget`` tokens (R6).

        ``messages`` are what the caller would send (default: the session's recent
        messages). Adds the core profile, the session summary and the memories relevant
        to ``query`` (default: the last user message) — by default (``recall="auto"``)
        on every call the ``recall_k`` best memory items and turns of other sessions
        scoring at least ``min_score``, items first, the user's own words only unless the
        message asks what the assistant said; more on a trigger word or when none is
        strong (:func:`~memstrata.layers.context.recall`, docs/retrieval.md);
        ``recall="deep"`` always adds more, ``recall="light"`` adds the profile
        only. ``filters`` and ``roles`` narrow what is recalled, as in :meth:`search`;
        ``report.reasons`` says why each memory line is there. The knowledge quota is
        filled with the best ``kb_k`` chunks of the knowledge bases the user reads (see
        :attr:`kb`), quoted with their source; chunks that make it in are counted as
        recalled, and the reply passed to :meth:`add` says whether they were used.
        Options are the fields
        of :class:`~memstrata.requests.ContextRequest` (``budget``, ``quotas``,
        ``query``, ``recall``, ``k``, ``policy``, ``tokenizer``, ``filters``,
        ``min_score``, ``roles``). Returns a
        :class:`~memstrata.layers.context.ContextResult` (``messages``, ``report``).
        """
        request = (session_id if isinstance(session_id, ContextRequest)
                   else ContextRequest.build(session_id, messages, **options)).checked()
        m = self.memory
        s = m.settings
        state = m.session_manager.sessions.load(self.scope, request.session_id)
        sent = list(request.messages) if request.messages is not None \
            else [_replayed(msg) for msg in state.recent]
        turn = read_turn(sent, request.query, query_turns=s.query_turns, roles=request.roles,
                         triggers=[w.strip() for w in s.trigger_words.split(",") if w.strip()])
        text, trigger = turn.text, turn.trigger
        policy = RecallPolicy(k=s.recall_k, deep_k=request.k, deep_below=s.deep_below,
                              min_score=s.recall_min_score if request.min_score is None
                              else request.min_score, asked_min_score=request.min_score or 0.0)
        lines, recalled_by = recall(turn_search(self.search, turn, request.filters), text,
                                    mode=request.recall, trigger=trigger, policy=policy,
                                    session_id=request.session_id)
        summary = _quoted_summary(state.summary).render() \
            if state.summary is not None and state.status == "open" else None
        knowledge = self._knowledge(text, request.quotas)
        result = assemble(sent, budget=request.budget, profile=self._profile_text(),
                          summary=summary, memories=lines, quotas=request.quotas,
                          knowledge=[MemoryLine(h.id, h.content, h.score, h.label,
                                                f"knowledge base, score {h.score:.2f}")
                                     for h in knowledge],
                          recall=recalled_by, trigger=trigger,
                          tokenizer=get_tokenizer(request.tokenizer),
                          policy=request.policy)  # type: ignore[arg-type]
        kept = set(result.report.kept_ids)
        recalled = [(h.kb, h.id) for h in knowledge if h.id in kept]
        if recalled and not m.settings.read_only:  # settled by the reply passed to add() (R4.3)
            m.knowledge_base.recalled(self.scope, request.session_id, recalled, text)
        return result

    def _knowledge(self, text: str, quotas: Any) -> builtins.list[KnowledgeHit]:
        """The knowledge-base chunks for this turn (none when the knowledge quota is 0,
        ``kb_k`` is 0 or neither knowledge base has a document)."""
        k = self.memory.settings.kb_k
        if not k or not text.strip() or Quotas.build(quotas).knowledge <= 0 or self.kb.is_empty():
            return []
        return self.kb.search(text, k=k)

    def _profile_text(self) -> str | None:
        profile = self.profile()
        if profile.is_empty:
            return None
        return render(_quoted_profile(profile), "zh" if profile.language == "zh" else "en")

    # -- write path and maintenance -------------------------------------------------------
    def enqueue_extraction(self, session_id: str, *, from_seq: int = 0) -> Job | None:
        """Queue extraction over a session's turns from ``from_seq`` (e.g. after a session
        store handed its messages to the main store)."""
        m = self.memory
        last = m.store.get_messages(self.scope, _check_session(session_id),
                                    start=check_count(from_seq, "from_seq"))
        if not last or m.settings.extraction == "off":
            return None
        job = m.enqueue_extract(self.scope, session_id, from_seq, last[-1].seq)
        m.wake_worker()
        return job

    def maintain(self, now: datetime | None = None, *, background: bool = False) -> MaintenanceReport:
        """Decay and capacity (R3.7, R3.8), then a refresh of the profile snapshot; see
        :meth:`memstrata.Memory.maintain`."""
        return self.memory.maintain_scopes([self.scope], now, background=background)

    def jobs(self, *, status: str | None = None, limit: int = 1000) -> builtins.list[Job]:
        """The user's background jobs, oldest first."""
        return self.memory.store.list_jobs(self.scope, statuses=job_statuses(status),
                                           limit=check_count(limit, "limit"))

    def usage(self) -> UsageReport:
        """LLM calls, tokens and latency per purpose, and item writes per path."""
        return usage_report(self.memory.store, [self.scope])

    def reindex(self, *, progress: bool = True) -> int:
        """Rebuild the retrieval index from the raw log and the items; returns docs indexed."""
        m = self.memory
        count = 0
        for info in tqdm(m.store.list_sessions(self.scope), desc="reindex", disable=not progress):
            msgs = m.store.get_messages(self.scope, info.session_id)
            for start in range(0, len(msgs), m.settings.embed_batch):
                m.indexer.index_turns(self.scope, info.session_id,
                                      msgs[start:start + m.settings.embed_batch])
            count += len(msgs)
        items = m.store.list_items(self.scope, _EVERY_STATUS, limit=10**9)
        for item in items:
            m.indexer.index_item(self.scope, item)
        return count + len(items)

