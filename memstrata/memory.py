"""The public entry point: :class:`Memory`.

::

    from memstrata import Memory

    with Memory("sqlite:///memstrata.db") as memory:
        memory.add([{"role": "user", "content": "I switched from Java to Go"}],
                   user_id="alice", session_id="s1")
        memory.remember("Prefers short answers", user_id="alice", kind="preference")
        for hit in memory.search("what language does she use?", user_id="alice", k=5):
            print(hit.score, hit.layer.value, hit.text)

Raw messages are written (and committed) before anything derived from them; the
retrieval index follows. If indexing fails (say, an embedding endpoint is down) the
messages are kept and :meth:`Memory.reindex` rebuilds the index from them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from .assist import Assist, LLMSummariser, UsageReport, usage_report
from .config import Settings
from .errors import ConfigError, JobError, ValidationError
from .jobs import UNFINISHED, Worker, wait_for
from .layers.semantic.pipeline import MaintenanceReport, Pipeline, PipelineConfig
from .layers.semantic.profile import Profile
from .providers.embedders import Embedder, parse_embedder
from .providers.llm import LLM, parse_provider
from .retrieval.scoring import ScoringPreset
from .retrieval.search import Mode, Retriever, SearchResult
from .stores import open_store
from .stores.base import Job, ProfileVersion, SessionInfo, Store
from .sessions import Resume, SessionManager, SessionState, open_session_store
from .types import (Filters, ItemVersion, Kind, Layer, MemoryItem, Message, Role, Scope,
                    SearchHit, Status, new_id, utcnow)

__all__ = ["Memory", "AddResult"]

if TYPE_CHECKING:
    from .layers.context import ContextResult

log = logging.getLogger("memstrata")

_EDITABLE = ("content", "kind", "subject", "attribute", "value", "confidence", "importance",
             "status", "tags", "metadata")


@dataclass(frozen=True, slots=True)
class AddResult:
    """What :meth:`Memory.add` stored."""

    session_id: str
    messages: list[Message]

    @property
    def message_ids(self) -> list[str]:
        return [m.id for m in self.messages]


def _check_text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise ValidationError(f"{what} is empty")
    if len(value) > limit:
        raise ValidationError(f"{what} is {len(value):,} characters, over the limit of {limit:,}; "
                              "shorten it or raise the max_message_chars setting")
    return value


def _unit(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValidationError(f"{what} must be a number between 0 and 1, got {value!r}")
    return float(value)


class Memory:
    """Layered long-term memory for one store and one embedder.

    ``store`` is a URL (``sqlite:///memstrata.db``, ``memory://``) or a Store;
    ``embedder`` a provider string (``local:e5-small``, ``hash:256``,
    ``openai-compatible:http://host/v1#model``) or an Embedder. Other keyword arguments
    are settings (see :mod:`memstrata.config`).
    """

    def __init__(self, store: "str | Store | None" = None, *,
                 embedder: "str | Embedder | None" = None, llm: "str | LLM | None" = None,
                 **settings: Any) -> None:
        self.settings = Settings.load(
            store=store if isinstance(store, str) else None,
            embedder=embedder if isinstance(embedder, str) else None,
            llm=llm if isinstance(llm, str) else None, **settings)
        self.store = open_store(store if isinstance(store, Store) else self.settings.store)
        self.embedder = embedder if embedder is not None and not isinstance(embedder, str) \
            else parse_embedder(self.settings.embedder)
        self._check_embedder()
        s = self.settings
        self.retriever = Retriever(self.store, self.embedder, s)
        self._session_manager: SessionManager | None = None
        if s.sessions or self.store.url.startswith(("sqlite", "memory")):
            self._session_manager = SessionManager(
                open_session_store(s.sessions or None, self.store, window=s.session_window),
                every_n=s.summary_every, idle=timedelta(minutes=s.session_idle_minutes))
        self.llm, self.assist = self._open_llm(llm)
        if self.assist is not None and self._session_manager is not None:
            self._session_manager.summariser = LLMSummariser(self.assist)

        self.pipeline = Pipeline(self.store, self.embedder, self.retriever,
                                 PipelineConfig.from_settings(s), assist=self.assist)
        if s.worker not in ("thread", "off"):
            raise ConfigError(f"worker must be 'thread' or 'off', not {s.worker!r}")
        if s.extraction not in ("rules", "off"):
            raise ConfigError(f"extraction must be 'rules' or 'off', not {s.extraction!r}")
        if s.embed_on_add not in ("background", "inline"):
            raise ConfigError(f"embed_on_add must be 'background' or 'inline', not {s.embed_on_add!r}")
        self.worker = Worker(self.store, {"extract": self.pipeline.run_extract,
                                          "maintain": self.pipeline.run_maintain,
                                          "profile": self.pipeline.run_profile},
                             lease_s=s.job_lease_s, max_attempts=s.job_max_attempts)
        self.worker.handlers["summarise"] = self._run_summary
        if s.worker == "thread" and self.store.list_jobs(statuses=UNFINISHED, limit=1):
            self.worker.start()  # resume what a previous process left pending

    def _open_llm(self, llm: "str | LLM | None") -> "tuple[LLM | None, Assist | None]":
        s = self.settings
        if llm is not None and not isinstance(llm, str):
            self._owns_llm = False
        elif s.llm:
            llm = parse_provider(s.llm, timeout_s=s.llm_timeout_s)
            self._owns_llm = True
        else:
            return None, None  # offline: not one LLM call
        return llm, Assist(llm, self.store, daily_budget=s.llm_daily_budget,
                           max_tokens=s.llm_max_tokens)

    def _check_embedder(self) -> None:
        recorded = self.store.get_meta("embedder")
        if recorded is None:
            self.store.set_meta("embedder", self.embedder.name)
        elif recorded != self.embedder.name:
            raise ConfigError(
                f"this store was indexed with embedder {recorded!r}, not {self.embedder.name!r}; "
                "open it with the same embedder, or run `memstrata reindex` to re-embed everything")

    # -- lifecycle ---------------------------------------------------------------
    def close(self) -> None:
        self.worker.stop()
        if self.llm is not None and self._owns_llm:
            self.llm.close()  # type: ignore[attr-defined]
        if self._session_manager is not None:
            self._session_manager.sessions.close()
        self.store.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _scope(self, user_id: str, agent_id: str | None) -> Scope:
        return Scope(user_id, self.settings.namespace if agent_id is None else agent_id)

    # -- raw turns ------------------------------------------------------------------
    def add(self, messages: "Sequence[Mapping[str, Any] | Message] | Mapping[str, Any]",
            user_id: str, session_id: str = "default", *, agent_id: str | None = None,
            index: bool = True, extract: bool | None = None) -> AddResult:
        """Store chat messages (OpenAI format) in a session's log and index them.

        Each message may carry ``created_at`` (datetime, epoch or ISO string) for
        imports. The whole list is validated before anything is written. Unless
        ``extract`` is False (or the ``extraction`` setting is off), an L3 extraction job
        is stored in the same transaction as the messages and runs in the background:
        :meth:`flush` waits for it. The turns are searchable by their words at once; with
        ``embed_on_add="background"`` (the default) that job also embeds them, so vector
        search sees them after it ran (``flush()``).
        """
        if extract is None:
            extract = self.settings.extraction != "off"
        scope = self._scope(user_id, agent_id)
        if isinstance(messages, Mapping):
            messages = [messages]
        if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
            raise ValidationError("messages must be a non-empty list of dicts like "
                                  "{'role': 'user', 'content': '...'}")
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValidationError("session_id must be a non-empty string")
        now = utcnow()
        parsed = [Message.from_dict(m, default_time=now, index=i,
                                    max_chars=self.settings.max_message_chars)
                  for i, m in enumerate(messages)]
        manager = self._session_manager
        with self.store.transaction():  # the raw turns and their extraction job: one unit
            if manager is None:
                stored = self.store.append_messages(scope, session_id, parsed)
            else:
                _, stored = manager.append(scope, session_id, parsed)
            job = (self._enqueue(scope, session_id, stored[0].seq, stored[-1].seq)
                   if extract and stored and not (manager and manager.sessions.hot_log) else None)
        if index:
            # with an extraction job coming, the words are indexed now and the vectors by
            # the job: embedding is most of a write's cost (see docs/benchmarks.md)
            later = job is not None and self.settings.embed_on_add == "background"
            self.pipeline.index_turns(scope, session_id, stored, vectors=not later)
        if manager is not None and self.assist is None:
            manager.summarise(scope, session_id)
        elif manager is not None:  # an LLM summary: in the background, not in add()
            job = self._enqueue_summary(scope, session_id) or job
        if job is not None and self.settings.worker == "thread":
            self.worker.start()
            self.worker.wake()
        return AddResult(session_id, stored)

    def messages(self, user_id: str, session_id: str = "default", *,
                 agent_id: str | None = None) -> list[Message]:
        """A session's raw log, in order (with messages a Redis session still holds)."""
        if self._session_manager is not None:
            return self._session_manager.sessions.messages(self._scope(user_id, agent_id), session_id)
        return self.store.get_messages(self._scope(user_id, agent_id), session_id)

    def sessions(self, user_id: str, *, agent_id: str | None = None) -> list[SessionInfo]:
        return self.store.list_sessions(self._scope(user_id, agent_id))

    def import_conversation(self, sessions: Iterable[Mapping[str, Any]], user_id: str, *,
                            agent_id: str | None = None, progress: bool = True,
                            extract: bool = False) -> list[AddResult]:
        """Import past sessions: ``[{"session_id": ..., "messages": [...]}, ...]``.

        Messages keep their original ``created_at``. Raw logs of all sessions are stored
        first, then indexed in embedding batches (with a progress bar). With ``extract``
        each session also gets an extraction job (off by default: imports are often
        benchmarks of raw-turn retrieval).
        """
        sessions = list(sessions)
        results = []
        for i, session in enumerate(sessions):
            if not isinstance(session, Mapping) or "messages" not in session:
                raise ValidationError(f"session {i} must be a dict with 'messages' "
                                      "(and optionally 'session_id')")
            results.append(self.add(session["messages"], user_id,
                                    str(session.get("session_id") or f"import-{i}"),
                                    agent_id=agent_id, index=False, extract=extract))
        scope = self._scope(user_id, agent_id)
        total = sum(len(r.messages) for r in results)
        with tqdm(total=total, desc=f"indexing {user_id}", unit="msg", disable=not progress,
                  leave=False) as bar:
            for result in results:
                batch = self.settings.embed_batch
                msgs = result.messages
                for start in range(0, len(msgs), batch):
                    self.pipeline.index_turns(scope, result.session_id, msgs[start:start + batch])
                    bar.update(len(msgs[start:start + batch]))
        return results

    # -- memory items ---------------------------------------------------------------
    def remember(self, content: str, user_id: str, *, kind: "Kind | str" = Kind.FACT,
                 subject: str | None = None, attribute: str | None = None,
                 value: str | None = None, confidence: float = 0.8, importance: float = 0.5,
                 tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None,
                 session_id: str | None = None, agent_id: str | None = None,
                 actor: str = "api", reason: str = "remember() call") -> MemoryItem:
        """Store a memory item directly (no extraction), as version 1."""
        scope = self._scope(user_id, agent_id)
        content = _check_text(content, "content", self.settings.max_message_chars)
        try:
            kind = Kind(kind)
        except ValueError:
            raise ValidationError(f"kind {kind!r} is not one of "
                                  f"{', '.join(k.value for k in Kind)}") from None
        now = utcnow()
        item = MemoryItem(id=new_id("mem"), user_id=scope.user_id, namespace=scope.namespace,
                          kind=kind, content=content.strip(), subject=subject, attribute=attribute,
                          value=value, confidence=_unit(confidence, "confidence"),
                          importance=_unit(importance, "importance"), created_at=now,
                          updated_at=now, source_session_id=session_id,
                          tags=tuple(tags), metadata=dict(metadata or {}))
        with self.store.transaction():
            self.store.write_item(scope, item, ItemVersion(item.id, 1, "create", actor, reason, now,
                                                           None, item.to_dict()))
            self.pipeline.index_item(scope, item)
        return item

    def get(self, item_id: str, user_id: str, *, agent_id: str | None = None) -> MemoryItem:
        """One memory item, or NotFoundError."""
        return self.store.get_item(self._scope(user_id, agent_id), item_id)

    def list(self, user_id: str, *, filters: "Filters | Mapping[str, Any] | None" = None,
             limit: int = 100, offset: int = 0, agent_id: str | None = None) -> list[MemoryItem]:
        """Memory items, newest first (active only unless ``filters`` says otherwise)."""
        return self.store.list_items(self._scope(user_id, agent_id), Filters.build(filters),
                                     limit=limit, offset=offset)

    def update(self, item_id: str, user_id: str, *, agent_id: str | None = None,
               actor: str = "api", reason: str = "update() call", **changes: Any) -> MemoryItem:
        """Edit an item; the change is a new version with the previous values kept."""
        unknown = set(changes) - set(_EDITABLE)
        if unknown:
            raise ValidationError(f"cannot update {sorted(unknown)}; editable: {', '.join(_EDITABLE)}")
        scope = self._scope(user_id, agent_id)
        if "content" in changes:
            changes["content"] = _check_text(changes["content"], "content",
                                             self.settings.max_message_chars).strip()
        for key in ("confidence", "importance"):
            if key in changes:
                changes[key] = _unit(changes[key], key)
        try:
            if "kind" in changes:
                changes["kind"] = Kind(changes["kind"])
            if "status" in changes:
                changes["status"] = Status(changes["status"])
        except ValueError as exc:
            raise ValidationError(str(exc)) from None
        if "tags" in changes:
            changes["tags"] = tuple(changes["tags"])
        with self.store.transaction():
            old = self.store.get_item(scope, item_id)
            now = utcnow()
            new = old.evolve(**changes, version=old.version + 1, updated_at=now)
            self.store.write_item(scope, new, ItemVersion(item_id, new.version, "edit", actor, reason,
                                                          now, old.to_dict(), new.to_dict()))
            if {"content", "kind", "subject", "attribute", "value", "tags", "status"} & set(changes):
                self.pipeline.index_item(scope, new)
        return new

    def delete(self, item_id: str, user_id: str, *, agent_id: str | None = None) -> None:
        """Hard delete: the item, its history, its index entry and its vector."""
        self.store.delete_item(self._scope(user_id, agent_id), item_id)

    def history(self, item_id: str, user_id: str, *, agent_id: str | None = None) -> list[ItemVersion]:
        """Every version of an item, oldest first: who changed what, when and why."""
        return self.store.history(self._scope(user_id, agent_id), item_id)

    # -- L3 write path (logic in layers.semantic.pipeline and jobs) -------------------
    def _enqueue(self, scope: Scope, session_id: str, from_seq: int, to_seq: int) -> Job:
        return self.store.enqueue_job(scope, "extract", {"session_id": session_id,
                                                         "from_seq": from_seq, "to_seq": to_seq})

    def enqueue_extraction(self, user_id: str, session_id: str, *, agent_id: str | None = None,
                           from_seq: int = 0) -> Job | None:
        """Queue extraction over a session's turns from ``from_seq`` (e.g. after a session
        store handed its messages to the main store)."""
        scope = self._scope(user_id, agent_id)
        last = self.store.get_messages(scope, session_id, start=from_seq)
        if not last or self.settings.extraction == "off":
            return None
        job = self._enqueue(scope, session_id, from_seq, last[-1].seq)
        if self.settings.worker == "thread":
            self.worker.start()
            self.worker.wake()
        return job

    def flush(self, timeout: float | None = None) -> None:
        """Block until every background job enqueued before this call is finished
        (including jobs a previous process left behind). Raises JobError when one of
        them failed since the last flush, or after ``timeout`` seconds."""
        if self.settings.worker == "thread" and self.store.list_jobs(statuses=UNFINISHED, limit=1):
            self.worker.start()
        wait_for(self.store, created_before=utcnow(), timeout=timeout, worker=self.worker,
                 inline=self.settings.worker != "thread")
        failures, self.worker.failures = self.worker.failures, []
        if failures:
            job, error = failures[-1]
            raise JobError(f"{len(failures)} background job attempt(s) failed; last: {job.kind} "
                           f"job {job.id} of user {job.user_id!r}: {error} (see memory.jobs())")

    wait = flush

    def _enqueue_summary(self, scope: Scope, session_id: str) -> Job | None:
        manager = self._sessions()
        state = manager.sessions.load(scope, session_id)
        if state.message_count - state.message_range_end < manager.every_n:
            return None
        pending = self.store.list_jobs(scope, statuses=UNFINISHED)
        if any(j.kind == "summarise" and j.payload.get("session_id") == session_id
               for j in pending):
            return None
        return self.store.enqueue_job(scope, "summarise", {"session_id": session_id})

    def _run_summary(self, job: Job) -> None:
        # Idempotent without a shared transaction: the step saves against the persisted
        # message_range_end, so a rerun after a crash finds nothing due.
        assert self.assist is not None
        with self.assist.scoped(job.scope):
            self._sessions().summarise(job.scope, job.payload["session_id"])
        with self.store.transaction():
            self.store.finish_job(job)

    def usage(self, user_id: str | None = None, *, agent_id: str | None = None) -> UsageReport:
        """LLM calls, tokens and latency per purpose (extract, conflict, summary), calls
        the daily budget skipped, and item writes per path (rule, llm, api…) — for one
        user or all. All zero offline: no LLM call is ever made without ``llm``."""
        scopes = [self._scope(user_id, agent_id)] if user_id is not None else self.users()
        return usage_report(self.store, scopes)

    def jobs(self, user_id: str | None = None, *, status: str | None = None,
             agent_id: str | None = None, limit: int = 1000) -> list[Job]:
        """Background jobs, oldest first (all users unless ``user_id``)."""
        scope = self._scope(user_id, agent_id) if user_id is not None else None
        return self.store.list_jobs(scope, statuses=(status,) if status else (), limit=limit)

    def forget(self, item_id: str, user_id: str, *, messages: bool = False,
               agent_id: str | None = None) -> None:
        """Forget an item for real: its rows, every version, its index entry and vector,
        the cached embeddings of its texts and, with ``messages``, the raw turns it was
        extracted from. Bytes leave the file at the next :meth:`compact`."""
        self.pipeline.forget(self._scope(user_id, agent_id), [item_id], messages=messages)

    def forget_user(self, user_id: str, *, messages: bool = True,
                    agent_id: str | None = None) -> None:
        """Forget everything of a user (items, versions, jobs, profile, index, cached
        vectors and, with ``messages``, sessions and raw turns), then compact the store."""
        self.pipeline.forget_user(self._scope(user_id, agent_id), messages=messages)

    def compact(self) -> None:
        """Reclaim deleted rows so their bytes leave the database files."""
        self.store.compact()

    def feedback(self, item_id: str, user_id: str, signal: str, *,
                 agent_id: str | None = None) -> MemoryItem:
        """A thumbs-up (``"up"``) or thumbs-down (``"down"``) on an item's confidence;
        a new version. :meth:`maintain` deactivates items whose confidence fell too low."""
        return self.pipeline.feedback(self._scope(user_id, agent_id), item_id, signal)

    def complete(self, item_id: str, user_id: str, *, agent_id: str | None = None) -> MemoryItem:
        """Mark a todo done (todos never decay until then)."""
        return self.pipeline.set_status(self._scope(user_id, agent_id), item_id, Status.DONE,
                                        reason="marked done")

    def undo(self, item_id: str, user_id: str, *, agent_id: str | None = None) -> MemoryItem | None:
        """Revert an item's last change (a new version). Undoing a creation deletes the
        item and reactivates the one it superseded, which is returned."""
        return self.pipeline.undo(self._scope(user_id, agent_id), item_id)

    def maintain(self, user_id: str | None = None, now: datetime | None = None, *,
                 agent_id: str | None = None, background: bool = False) -> MaintenanceReport:
        """Decay and capacity (R3.7, R3.8) for one user or every user, then a refresh of
        each user's profile snapshot; idempotent.

        With ``background`` nothing runs here: one ``maintain`` and one ``profile`` job per
        user go to the jobs table (none when that user already has one pending) for the
        worker thread or ``memstrata worker``; the report lists them in ``queued``.
        """
        scopes = [self._scope(user_id, agent_id)] if user_id is not None else self.users()
        now = now or utcnow()
        if not background:
            report = self.pipeline.maintain(scopes, now)
            for scope in scopes:
                self.pipeline.refresh_profile(scope)
            return report
        queued: list[str] = []
        with self.store.transaction():
            for scope in scopes:
                pending = {j.kind for j in self.store.list_jobs(scope, statuses=("pending",))}
                if "maintain" not in pending:
                    queued.append(self.store.enqueue_job(scope, "maintain",
                                                         {"now": now.isoformat()}).id)
                if "profile" not in pending:
                    queued.append(self.store.enqueue_job(scope, "profile", {}).id)
        if queued and self.settings.worker == "thread":
            self.worker.start()
            self.worker.wake()
        return MaintenanceReport(users=len(scopes), queued=tuple(queued))

    def profile(self, user_id: str, *, agent_id: str | None = None,
                cached: bool = False) -> Profile:
        """The core profile (R3.10): aggregated from active items, manual edits on top.

        With ``cached`` it is the snapshot the last :meth:`maintain` (or ``profile`` job)
        stored — one read instead of an aggregation, for per-prompt use — falling back
        to the live profile when there is no snapshot yet."""
        scope = self._scope(user_id, agent_id)
        if cached:
            snapshot = self.pipeline.cached_profile(scope)
            if snapshot is not None:
                return snapshot
        return self.pipeline.profile(scope)

    def update_profile(self, user_id: str, *, agent_id: str | None = None, actor: str = "api",
                       **fields: Any) -> Profile:
        """Edit profile fields (name, role, goals, current, preferences, language) as a
        new version; an edit beats aggregation until set back to None."""
        return self.pipeline.update_profile(self._scope(user_id, agent_id), fields, actor=actor)

    def profile_history(self, user_id: str, *, agent_id: str | None = None) -> list[ProfileVersion]:
        """Every version of the user's profile edits, oldest first."""
        return self.store.profile_versions(self._scope(user_id, agent_id))

    # -- retrieval ------------------------------------------------------------------
    def search(self, query: str, user_id: str, *, k: int = 10,
               filters: "Filters | Mapping[str, Any] | None" = None, recent: Sequence[str] = (),
               agent_id: str | None = None, scoring: "str | ScoringPreset | None" = None,
               mode: Mode = "hybrid", now: datetime | None = None) -> list[SearchHit]:
        """Hybrid search over the user's raw turns and memory items; best first.

        ``recent`` are the last few turns (their text), added to the query (R5.4).
        Each hit carries ``parts``: similarity, dense/lexical parts and ranks, recency,
        importance, layer weight and the scoring preset.
        """
        return self.explain(query, user_id, k=k, filters=filters, recent=recent,
                            agent_id=agent_id, scoring=scoring, mode=mode, now=now,
                            _explain=False).hits

    def explain(self, query: str, user_id: str, *, k: int = 10,
                filters: "Filters | Mapping[str, Any] | None" = None, recent: Sequence[str] = (),
                agent_id: str | None = None, scoring: "str | ScoringPreset | None" = None,
                mode: Mode = "hybrid", now: datetime | None = None,
                _explain: bool = True) -> SearchResult:
        """Like :meth:`search`, but also returns both candidate lists (R5.6)."""
        _check_text(query, "query", self.settings.max_message_chars)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
            raise ValidationError(f"k must be an integer between 1 and 1000, got {k!r}")
        if mode not in ("hybrid", "lexical", "dense"):
            raise ValidationError(f"mode must be hybrid, lexical or dense, not {mode!r}")
        return self.retriever.search(self._scope(user_id, agent_id), query, k=k,
                                     filters=Filters.build(filters), recent=list(recent),
                                     preset=scoring or self.settings.scoring, mode=mode, now=now,
                                     explain=_explain)

    # -- sessions and context (logic in memstrata.sessions and layers.context) ------
    def _sessions(self) -> SessionManager:
        if self._session_manager is None:
            raise ConfigError(f"sessions need a session store: the main store {self.store.url!r} "
                              "has none built in; pass sessions='redis://host:6379/0'")
        return self._session_manager

    def session(self, user_id: str, session_id: str = "default", *,
                agent_id: str | None = None) -> SessionState:
        """A session's state: version, status, running summary, recent messages."""
        return self._sessions().sessions.load(self._scope(user_id, agent_id), session_id)

    def archive_session(self, user_id: str, session_id: str = "default", *,
                        agent_id: str | None = None) -> SessionState:
        """Close and archive a session now (a last summary step first); its summary and
        messages stay, but it no longer feeds new prompts until written to again."""
        scope = self._scope(user_id, agent_id)
        with self.assist.scoped(scope) if self.assist is not None else nullcontext():
            state, handed = self._sessions().archive(scope, session_id)
        self._after_archive(scope, session_id, handed)
        return state

    def archive_idle(self, now: datetime | None = None, *, limit: int = 100) -> list[tuple[Scope, str]]:
        """Archive every session idle for ``session_idle_minutes``; call it from a
        scheduler or worker. Returns (scope, session id) of each one archived."""
        done = self._sessions().sweep(now, limit)
        for scope, session_id, handed in done:
            self._after_archive(scope, session_id, handed)
        return [(scope, session_id) for scope, session_id, _ in done]

    def _after_archive(self, scope: Scope, session_id: str, handed: list[Message]) -> None:
        if handed:  # messages a Redis session held: index what the main store now has
            self.pipeline.index_turns(scope, session_id, self.store.get_messages(
                scope, session_id, start=handed[0].seq))
        extract = getattr(self, "enqueue_extraction", None)
        if callable(extract):  # the background write pipeline, when this Memory has one
            extract(scope.user_id, session_id, agent_id=scope.namespace or None)

    def resume(self, user_id: str, *, exclude_session: str | None = None,
               agent_id: str | None = None) -> Resume:
        """Where the user left off (R2.5): the latest other session's summary and the
        open todos."""
        scope = self._scope(user_id, agent_id)
        state = self._sessions().resume(scope, exclude=exclude_session)
        todos = self.list(user_id, filters={"kinds": ["todo"], "statuses": ["active"]},
                          limit=20, agent_id=agent_id)
        return Resume(state.session_id if state else None, state.summary if state else None,
                      tuple(t.content for t in todos))

    def _profile_text(self, user_id: str, agent_id: str | None) -> str | None:
        from .layers.semantic.profile import aggregate, render

        get = getattr(self, "profile", None)
        if callable(get):
            profile = get(user_id, agent_id=agent_id) if agent_id else get(user_id)
        else:
            profile = aggregate(self.list(user_id, limit=500, agent_id=agent_id))
        if profile.is_empty:
            return None
        return render(profile, "zh" if profile.language == "zh" else "en")

    def context(self, user_id: str, session_id: str = "default",
                messages: "Sequence[Mapping[str, Any] | Message] | None" = None, *,
                budget: int = 4000, quotas: Any = None, query: str | None = None,
                recall: str = "auto", k: int = 10, policy: str = "repair",
                tokenizer: Any = None, agent_id: str | None = None) -> "ContextResult":
        """The messages to send for the next LLM call, within ``budget`` tokens (R6).

        ``messages`` are what the caller would send (default: the session's recent
        messages). Adds the core profile, the session summary and — on a trigger word in
        ``query`` or the last user message, or with ``recall="deep"`` — memories found by
        :meth:`search`; ``recall="light"`` adds the profile only. ``quotas`` are
        (short-term, long-term, knowledge) shares, default 0.4/0.2/0.4. Returns a
        :class:`~memstrata.layers.context.ContextResult` (``messages``, ``report``).
        """
        from .layers.context import MemoryLine, assemble, find_trigger
        from .tokens import get_tokenizer

        if recall not in ("auto", "light", "deep"):
            raise ValidationError(f"recall must be auto, light or deep, not {recall!r}")
        scope = self._scope(user_id, agent_id)
        state = self._session_manager.sessions.load(scope, session_id) \
            if self._session_manager is not None else None
        if messages is None:
            messages = [m.to_openai() for m in state.recent] if state else []
        if isinstance(messages, Mapping) or isinstance(messages, str):
            raise ValidationError("messages must be a list of OpenAI-format dicts")
        messages = list(messages)
        text = query
        if text is None:
            users = [Message.from_dict(m, index=i) for i, m in enumerate(messages)]
            users = [m for m in users if m.role is Role.USER and m.content]
            text = users[-1].content if users else ""
        triggers = [w.strip() for w in self.settings.trigger_words.split(",") if w.strip()]
        trigger = find_trigger(text or "", triggers)
        deep = recall == "deep" or (recall == "auto" and trigger is not None)
        lines: list[MemoryLine] = []
        if deep and text and text.strip():
            recent = [m.get("content") for m in messages[-7:-1] if isinstance(m, Mapping)
                      and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)]
            for hit in self.search(text, user_id, k=k, recent=recent[-self.settings.query_turns:],
                                   agent_id=agent_id):
                if hit.layer is Layer.EPISODIC and hit.session_id == session_id:
                    continue  # this session's turns are in the window or the summary
                lines.append(MemoryLine(hit.id, hit.text, hit.score, hit.created_at.date().isoformat()))
        summary = None
        if state is not None and state.summary is not None and state.status == "open":
            summary = state.summary.render()
        return assemble(messages, budget=budget, profile=self._profile_text(user_id, agent_id),
                        summary=summary, memories=lines, quotas=quotas,
                        recall="deep" if deep else "light", trigger=trigger,
                        tokenizer=get_tokenizer(tokenizer), policy=policy)  # type: ignore[arg-type]

    # -- maintenance ----------------------------------------------------------------
    def users(self) -> list[Scope]:
        return self.store.list_users()

    def reindex(self, user_id: str, *, agent_id: str | None = None, progress: bool = True) -> int:
        """Rebuild a user's retrieval index from the raw log and the items; returns docs indexed."""
        scope = self._scope(user_id, agent_id)
        count = 0
        for info in tqdm(self.store.list_sessions(scope), desc="reindex", disable=not progress):
            msgs = self.store.get_messages(scope, info.session_id)
            for start in range(0, len(msgs), self.settings.embed_batch):
                self.pipeline.index_turns(scope, info.session_id,
                                          msgs[start:start + self.settings.embed_batch])
            count += len(msgs)
        items = self.store.list_items(scope, Filters(statuses=tuple(Status)), limit=10**9)
        for item in items:
            self.pipeline.index_item(scope, item)
        return count + len(items)
