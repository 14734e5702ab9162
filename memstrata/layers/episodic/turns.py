"""The one writer of raw turns: add, replay, import, and the jobs they queue.

Beside :class:`~memstrata.layers.semantic.items.ItemWriter` (every item change), the
:class:`TurnWriter` owns every way a turn enters a session's log:

* :meth:`TurnWriter.add` — the messages checked (all of them, before anything is
  written), then one transaction: the raw turns, their extraction job and the
  idempotency key; then the turns' words indexed (their vectors wait for the job when
  ``embed_on_add="background"``), a summary step (inline offline, a job with an LLM);
* a retry with a recorded idempotency key is answered with what the first add stored
  (:meth:`TurnWriter.replay`), an add that repeats the session's last turns exactly is
  not stored twice;
* :meth:`TurnWriter.import_sessions` — every session's turns in one transaction, each
  with an idempotency key drawn from its id and messages, then embedded across sessions
  ``embed_batch`` at a time into the embedding cache and indexed;
* the jobs: ``extract`` over a span of turns, ``summarise`` when a summary is due, and
  after an archive ``extract`` then ``consolidate``.

The worker is woken through the ``wake`` callable and the knowledge base told of an
assistant's reply through ``replied``; both are handed in by :class:`memstrata.Memory`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from ...checks import check_count
from ...config import Settings
from ...errors import ConflictError, ValidationError
from ...retrieval.indexer import Indexer, cache_key, embed_uncached, turn_dense_texts
from ...stores.base import IdempotentAdd, Job, Store
from ...stores.jobs import ConsolidatePayload, ExtractPayload, JobKind, SummarisePayload, enqueue
from ...stores.policy import UNFINISHED
from ...types import Filters, Message, Role, Scope, Status, check_id, utcnow
from ...providers.embedders import Embedder
from ...sessions.base import SessionState
from .sessions import Resume, SessionManager

__all__ = ["TurnWriter", "TurnSettings", "AddResult", "add_fingerprint", "parse_messages"]

log = logging.getLogger("memstrata")
_EVERY_STATUS = Filters(statuses=tuple(Status))


@dataclass(frozen=True, slots=True)
class AddResult:
    """What :meth:`UserMemory.add` stored. ``replayed``: a retry with the idempotency
    key of an add that was stored before, answered with what that add stored (nothing
    was stored again)."""

    session_id: str
    messages: list[Message]
    replayed: bool = False

    @property
    def message_ids(self) -> list[str]:
        return [m.id for m in self.messages]


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """The settings the turn writer reads (:meth:`from_settings` picks them)."""

    extraction: bool  # ``extraction`` is not "off"
    embed_in_background: bool  # ``embed_on_add="background"``
    max_message_chars: int
    embed_batch: int
    summary_jobs: bool  # an LLM writes the summaries: a job, not a step in add()

    @classmethod
    def from_settings(cls, s: Settings, *, summary_jobs: bool = False) -> "TurnSettings":
        return cls(extraction=s.extraction != "off", embed_in_background=s.embed_on_add == "background",
                   max_message_chars=s.max_message_chars, embed_batch=s.embed_batch,
                   summary_jobs=summary_jobs)


def parse_messages(messages: Any, max_chars: int) -> list[Message]:
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


def _timed(messages: Any) -> list[bool]:
    """For each message sent to add(): whether it carries its own time."""
    if isinstance(messages, (Mapping, str, Message)):
        messages = [messages]
    return [isinstance(m, Message) or (isinstance(m, Mapping) and any(
        m.get(k) is not None for k in ("created_at", "timestamp", "time"))) for m in messages]


def add_fingerprint(session_id: str, messages: Sequence[Message]) -> str:
    """The digest an idempotency key is recorded with: the session and each message's
    role, content, name, tool calls and metadata (not its time, which defaults to now
    and so differs on every retry)."""
    canonical = [{**m.to_openai(), "metadata": dict(m.metadata)} for m in messages]
    data = json.dumps([session_id, canonical], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def _check_sessions(sessions: Any) -> list[Mapping[str, Any]]:
    """The sessions of an import, each a dict with ``messages``, or ValidationError."""
    if isinstance(sessions, (str, bytes, Mapping)) or not isinstance(sessions, Iterable):
        raise ValidationError("sessions must be a list of dicts like {'session_id': ..., "
                              f"'messages': [...]}}, not {type(sessions).__name__}")
    sessions = list(sessions)
    for i, session in enumerate(sessions):
        if not isinstance(session, Mapping) or "messages" not in session:
            raise ValidationError(f"session {i} must be a dict with 'messages' "
                                  "(and optionally 'session_id')")
    return sessions


class TurnWriter:
    """Every write of raw turns, for every user, over one store and one session manager."""

    def __init__(self, store: Store, sessions: SessionManager, indexer: Indexer, embedder: Embedder,
                 settings: TurnSettings | None = None, *,
                 wake: Callable[[], None] = lambda: None,
                 replied: Callable[[Scope, str, str], object] = lambda scope, session_id, reply: None,
                 ) -> None:
        self.store = store
        self.sessions = sessions
        self.indexer = indexer
        self.embedder = embedder
        self.settings = settings or TurnSettings.from_settings(Settings())
        self.wake = wake
        self.replied = replied

    # -- add --------------------------------------------------------------------------
    def add(self, scope: Scope, messages: Any, session_id: str = "default", *, index: bool = True,
            extract: bool | None = None, idempotency_key: str | None = None) -> AddResult:
        """:meth:`memstrata.UserMemory.add` for ``scope`` (its docstring is the contract)."""
        s = self.settings
        if extract is None:
            extract = s.extraction
        session_id = _check_session(session_id)
        parsed = parse_messages(messages, s.max_message_chars)
        key = None if idempotency_key is None else check_id(idempotency_key, "idempotency_key")
        fingerprint = add_fingerprint(session_id, parsed) if key is not None else ""
        if key is not None and (prior := self.store.idempotent_add(scope, key)) is not None:
            return self.replay(scope, prior, fingerprint, session_id, index)
        if key is None and (same := self._repeated(scope, session_id, parsed, _timed(messages))):
            log.info("add to %r/%s: the same %d message(s) as the session's last; not stored "
                     "again", scope.user_id, session_id, len(same))
            return AddResult(session_id, same, replayed=True)
        try:
            stored, job = self._append(scope, session_id, parsed, extract, key, fingerprint)
        except ConflictError:
            # a concurrent add with the same key committed first: answer with its result
            if key is None or (prior := self.store.idempotent_add(scope, key)) is None:
                raise
            return self.replay(scope, prior, fingerprint, session_id, index)
        if index:
            # with an extraction job coming, the words are indexed now and the vectors by
            # the job: embedding is most of a write's cost (see docs/benchmarks.md)
            later = job is not None and s.embed_in_background
            self.indexer.index_turns(scope, session_id, stored, vectors=not later)
        if not s.summary_jobs:
            self.sessions.summarise(scope, session_id)
        else:  # an LLM summary: in the background, not in add()
            job = self.enqueue_summary(scope, session_id) or job
        if job is not None:
            self.wake()
        replies = [msg.content for msg in stored if msg.role is Role.ASSISTANT and msg.content]
        if replies:  # knowledge chunks recalled for this reply: were they used?
            self.replied(scope, session_id, "\n".join(replies))
        log.info("add %d message(s) to %r/%s%s", len(stored), scope.user_id, session_id,
                 " (extraction queued)" if job is not None else "")
        return AddResult(session_id, stored)

    def _append(self, scope: Scope, session_id: str, parsed: Sequence[Message], extract: bool,
                key: str | None, fingerprint: str) -> tuple[list[Message], Job | None]:
        """The raw turns, their extraction job and key: one unit."""
        with self.store.transaction():
            _, stored = self.sessions.append(scope, session_id, parsed)
            job = (self.enqueue_extract(scope, session_id, stored[0].seq, stored[-1].seq)
                   if extract and stored and not self.sessions.sessions.hot_log else None)
            if key is not None:
                self.store.record_idempotent_add(scope, IdempotentAdd(
                    key, fingerprint, session_id, tuple(msg.id for msg in stored), utcnow()))
        return stored, job

    def _repeated(self, scope: Scope, session_id: str, parsed: Sequence[Message],
                  timed: Sequence[bool]) -> list[Message]:
        """The session's last turns when ``parsed`` repeats them exactly — an add sent
        twice (a retry without an idempotency key, a double submit) — else ``[]``. A turn
        meant to be stored again carries its own ``created_at``, which then must match."""
        state = self.sessions.sessions.load(scope, session_id)
        if not 0 < len(parsed) <= len(state.recent):
            return []
        tail = state.recent[-len(parsed):]
        if all(_turn_key(old, t) == _turn_key(new, t) for old, new, t in zip(tail, parsed, timed)):
            return list(tail)
        return []

    def replay(self, scope: Scope, prior: IdempotentAdd, fingerprint: str, session_id: str,
               index: bool) -> AddResult:
        """The result of the add ``prior`` recorded, for a retry with its key."""
        if prior.fingerprint != fingerprint:
            raise ValidationError(
                f"idempotency key {prior.key!r} was used on {prior.created_at:%Y-%m-%d %H:%M:%S} "
                f"UTC for an add of other messages (to session {prior.session_id!r}); a retry "
                "must send the same messages to the same session — use a new key for a new add")
        wanted = set(prior.message_ids)
        stored = [msg for msg in self.sessions.sessions.messages(scope, _check_session(session_id))
                  if msg.id in wanted]
        if index and stored:  # what the first attempt committed but did not index
            indexed = self.store.doc_info(scope, [msg.id for msg in stored])
            missing = [msg for msg in stored if msg.id not in indexed and msg.role is not Role.SYSTEM]
            if missing:
                self.indexer.index_turns(scope, session_id, missing)
        log.info("add to %r/%s replayed for idempotency key %r (%d message(s))", scope.user_id,
                 session_id, prior.key, len(stored))
        return AddResult(session_id, stored, replayed=True)

    # -- import -----------------------------------------------------------------------
    def import_sessions(self, scope: Scope, sessions: Iterable[Mapping[str, Any]], *,
                        progress: bool = True, extract: bool = False) -> list[AddResult]:
        """:meth:`memstrata.UserMemory.import_conversation` for ``scope``."""
        checked = _check_sessions(sessions)
        keyed = []
        for i, session in enumerate(checked):  # every session checked before anything is stored
            sid = _check_session(_import_session_id(session, i))
            key = _import_key(sid, parse_messages(session["messages"], self.settings.max_message_chars),
                              _timed(session["messages"]))
            keyed.append((session["messages"], sid, key))
        with self.store.transaction():
            results = [self.add(scope, messages, sid, index=False, extract=False, idempotency_key=key)
                       for messages, sid, key in keyed]
        self._index_imported(scope, results, progress, extract=extract and self.settings.extraction
                             and not self.sessions.sessions.hot_log)
        return results

    def _index_imported(self, scope: Scope, results: Sequence[AddResult], progress: bool, *,
                        extract: bool) -> None:
        """Index the imported turns not indexed yet, session after session: their vectors
        embedded ``embed_batch`` at a time across sessions into the cache (the progress
        bar, with its ETA), and each session indexed as soon as all of its vectors are
        there. With ``extract`` a session's extraction job is queued once it is indexed,
        so the worker extracts from the sessions done while the import embeds the next
        ones (a job queued with the turns would embed them a second time, beside the
        import); a session that has its job from an earlier run of the same import does
        not get another."""
        batch = self.settings.embed_batch
        queued = {(j.payload.get("session_id"), j.payload.get("from_seq"), j.payload.get("to_seq"))
                  for j in self.store.list_jobs(scope, limit=10**6) if j.kind == JobKind.EXTRACT} \
            if extract else set()

        def done(result: AddResult, turns: Sequence[Message]) -> None:
            for start in range(0, len(turns), batch):
                self.indexer.index_turns(scope, result.session_id, turns[start:start + batch])
            span = (result.session_id, result.messages[0].seq, result.messages[-1].seq) \
                if result.messages else None
            if extract and span is not None and span not in queued:
                with self.store.transaction():
                    self.enqueue_extract(scope, *span)
                self.wake()

        todo = self._unindexed(scope, results)
        missing, total = self._uncached(scope, todo)
        ready = 0  # the sessions before this one have every vector in the cache
        with tqdm(total=total, desc=f"embedding {scope.user_id}", unit="msg",
                  disable=not progress, leave=False) as bar:
            bar.update(total - len(missing))
            for start in range(0, len(missing), batch):
                chunk = missing[start:start + batch]
                embed_uncached(self.store, self.embedder, [(scope, text) for _, text in chunk], batch=batch)
                bar.update(len(chunk))
                upto = missing[start + batch][0] if start + batch < len(missing) else len(todo)
                for r, msgs in todo[ready:upto]:
                    done(r, msgs)
                ready = max(ready, upto)
            for r, msgs in todo[ready:]:
                done(r, msgs)

    def _unindexed(self, scope: Scope, results: Sequence[AddResult]
                   ) -> list[tuple[AddResult, list[Message]]]:
        """Each imported session with its turns that have no index document yet."""
        indexed: set[str] = set()
        every = [msg.id for r in results for msg in r.messages]
        for start in range(0, len(every), 500):
            indexed.update(self.store.doc_info(scope, every[start:start + 500]))
        return [(r, [msg for msg in r.messages if msg.id not in indexed and msg.role is not Role.SYSTEM])
                for r in results]

    def _uncached(self, scope: Scope, todo: Sequence[tuple[AddResult, list[Message]]]
                  ) -> tuple[list[tuple[int, str]], int]:
        """Each distinct dense text of ``todo`` not in the embedding cache yet, in the
        sessions' order, with its session's place; and how many texts there are in all."""
        texts = [(k, text) for k, (r, msgs) in enumerate(todo) if msgs
                 for text in turn_dense_texts(self._session_turns(scope, r.session_id, msgs),
                                              {x.id for x in msgs})]
        keys = [cache_key(scope, text) for _, text in texts]
        cached = set(self.store.cached_vectors(self.embedder.name, sorted(set(keys)))) if keys else set()
        missing: list[tuple[int, str]] = []
        for (k, text), key in zip(texts, keys):
            if key not in cached:
                cached.add(key)
                missing.append((k, text))
        return missing, len(texts)

    def _session_turns(self, scope: Scope, session_id: str, part: Sequence[Message]) -> list[Message]:
        """``part`` (turns of one session, in order) with the turns before it that its
        dense texts read (the two before it that are not system turns)."""
        first = part[0].seq
        back = min(first, 6)  # as Indexer.index_turns reads them (system turns do not count)
        earlier = self.store.get_messages(scope, session_id, start=first - back,
                                          limit=back) if back else []
        return [*earlier, *part]

    # -- the jobs ---------------------------------------------------------------------
    def enqueue_extract(self, scope: Scope, session_id: str, from_seq: int, to_seq: int) -> Job:
        """Persist an extraction job over ``[from_seq, to_seq]`` of a session."""
        return enqueue(self.store, scope, ExtractPayload(session_id, from_seq, to_seq))

    def enqueue_summary(self, scope: Scope, session_id: str) -> Job | None:
        """Persist an LLM summary job when one is due and none is pending."""
        state = self.sessions.sessions.load(scope, session_id)
        if state.message_count - state.message_range_end < self.sessions.every_n:
            return None
        if any(j.kind == JobKind.SUMMARISE and j.payload.get("session_id") == session_id
               for j in self.store.list_jobs(scope, statuses=UNFINISHED)):
            return None
        return enqueue(self.store, scope, SummarisePayload(session_id))

    def enqueue_extraction(self, scope: Scope, session_id: str, from_seq: int = 0) -> Job | None:
        """:meth:`memstrata.UserMemory.enqueue_extraction` for ``scope``."""
        last = self.store.get_messages(scope, _check_session(session_id),
                                       start=check_count(from_seq, "from_seq"))
        if not last or not self.settings.extraction:
            return None
        job = self.enqueue_extract(scope, session_id, from_seq, last[-1].seq)
        self.wake()
        return job

    def archive(self, scope: Scope, session_id: str) -> SessionState:
        """Close and archive a session now (a last summary step first), then what follows
        an archive (:meth:`archived`); a session never written (or forgotten) has nothing
        to consolidate."""
        state, handed = self.sessions.archive(scope, session_id)
        if state.exists:
            self.archived(scope, session_id, handed)
        return state

    def resume(self, scope: Scope, *, exclude: str | None = None) -> Resume:
        """Where the user left off: the latest other session's summary, the open todos."""
        state = self.sessions.resume(scope, exclude=exclude)
        todos = self.store.list_items(scope, Filters.build({"kinds": ["todo"], "statuses": ["active"]}),
                                      limit=20)
        return Resume(state.session_id if state else None, state.summary if state else None,
                      tuple(t.content for t in todos))

    def archived(self, scope: Scope, session_id: str, handed: list[Message]) -> None:
        """After an archive: index what a session store handed to the main store only now
        (turns an earlier memstrata held in Redis), and queue the session's extraction
        and, after it, its consolidation (the scope is the session's own)."""
        if handed:
            self.indexer.index_turns(scope, session_id, self.store.get_messages(
                scope, session_id, start=handed[0].seq))
        self.enqueue_extraction(scope, session_id)
        if self.settings.extraction:  # after the session's extraction job
            enqueue(self.store, scope, ConsolidatePayload(session_id))
            self.wake()

    def reindex(self, scope: Scope, *, progress: bool = True) -> int:
        """Rebuild ``scope``'s retrieval index from its raw log and its items (every
        status); returns the documents indexed."""
        batch = self.settings.embed_batch
        count = 0
        for info in tqdm(self.store.list_sessions(scope), desc="reindex", disable=not progress):
            msgs = self.store.get_messages(scope, info.session_id)
            for start in range(0, len(msgs), batch):
                self.indexer.index_turns(scope, info.session_id, msgs[start:start + batch])
            count += len(msgs)
        items = self.store.list_items(scope, _EVERY_STATUS, limit=10**9)
        for item in items:
            self.indexer.index_item(scope, item)
        return count + len(items)
