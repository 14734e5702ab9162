"""The public entry point: :class:`Memory`, and its per-user handle :meth:`Memory.user`.

::

    from memstrata import Memory

    with Memory("sqlite:///memstrata.db") as memory:
        lin = memory.user("lin")
        lin.add([{"role": "user", "content": "I switched from Java to Go"}], session_id="s1")
        lin.remember("Prefers short answers", kind="preference")
        for hit in lin.search("what language does she use?", k=5):
            print(hit.score, hit.layer.value, hit.text)

``Memory`` builds the parts every user shares once — the store, the embedder, the
retriever, the turn and item writers, the context builder, the write pipeline, the
session manager, the LLM and the job worker — and does the work that spans users (flush,
maintenance sweeps, idle archiving, usage). Everything about one user goes through
:class:`~memstrata.user.UserMemory`; the methods that take ``user_id`` (and
``agent_id``) are the same calls, delegated, in :mod:`memstrata.by_user`.

Raw messages are written (and committed) before anything derived from them; the
retrieval index follows. If indexing fails (say, an embedding endpoint is down) the
messages are kept and :meth:`Memory.reindex` rebuilds the index from them.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .assembly import ContextBuilder, ContextSettings
from .by_user import ByUserId
from .checks import check_count, check_seconds
from .config import Settings
from .errors import ConfigError, JobError, StoreError
from .jobs import Periodic, Worker, wait_for
from .knowledge import Knowledge, KnowledgeBase
from .knowledge.settings import KnowledgeSettings
from .layers.episodic import SessionManager
from .layers.episodic.llm import LLMSummariser
from .layers.episodic.turns import TurnSettings, TurnWriter
from .layers.semantic.consolidate import Consolidator
from .layers.semantic.forget import ERASE_DUE, Forgetter
from .layers.semantic.items import ItemWriter
from .layers.semantic.llm import LLMExtractor
from .layers.semantic.pipeline import MaintenanceReport, Pipeline, PipelineConfig
from .layers.semantic.profiles import Profiles
from .providers.embedders import Embedder, parse_embedder
from .providers.llm import LLM, parse_provider
from .providers.rerank import parse_reranker
from .providers.metered import MeteredLLM
from .priority import Foreground
from .retrieval.indexer import Indexer, cache_key, embed_uncached, turn_dense_texts
from .retrieval.search import Retriever
from .retrieval.settings import RetrieverSettings
from .sessions import open_session_store
from .stores import open_store
from .stores.base import CompactReport, Job, Store
from .stores.jobs import ExtractPayload, JobKind, MaintainPayload, ProfilePayload, SummarisePayload, enqueue
from .stores.policy import UNFINISHED, Rerun, job_statuses
from .types import Message, Scope, check_id, parse_time, utcnow
from .usage import UsageReport, usage_report
from .user import AddResult, Parts, UserMemory

__all__ = ["Memory", "AddResult", "UserMemory"]

log = logging.getLogger("memstrata")
_Work = TypeVar("_Work")


_DEBUG_NOTICE = threading.Event()


def _debug_notice() -> None:
    """Say once per process, when memstrata logs at DEBUG, that the log will hold memory
    content: INFO and above carry ids, counts, timings and scores only."""
    if log.isEnabledFor(logging.DEBUG) and not _DEBUG_NOTICE.is_set():
        _DEBUG_NOTICE.set()
        log.warning("memstrata logs at DEBUG: the log will hold memory content (queries, turns, "
                    "items, profile values) — keep it where that content may be; INFO and above "
                    "carry ids, counts, timings and scores only")


class Memory(ByUserId):
    """Layered long-term memory for one store and one embedder.

    ``store`` is a URL (``sqlite:///memstrata.db``, ``memory://``,
    ``postgresql://…``) or a Store; ``embedder`` a provider string (``local:e5-small``,
    ``hash:256``, ``openai-compatible:http://host/v1#model``) or an Embedder; ``llm`` a
    provider string or an LLM (none: offline rules). Other keyword arguments are
    settings (see :mod:`memstrata.config`), checked here: a wrong value is a
    :class:`~memstrata.errors.ConfigError` that lists the allowed ones.
    """

    def __init__(self, store: "str | Store | None" = None, *,
                 embedder: "str | Embedder | None" = None, llm: "str | LLM | None" = None,
                 **settings: Any) -> None:
        self.settings = s = Settings.load(
            store=store if isinstance(store, str) else None,
            embedder=embedder if isinstance(embedder, str) else None,
            llm=llm if isinstance(llm, str) else None, **settings)
        self.store = open_store(store if isinstance(store, Store) else s.store,
                                index_memory_mb=s.index_memory_mb, quick_check=s.quick_check,
                                read_only=s.read_only or None, durability=s.durability)
        try:
            self._build(embedder, llm)
        except BaseException:
            self.store.close()
            raise
        _debug_notice()

    def _build(self, embedder: "str | Embedder | None", llm: "str | LLM | None") -> None:
        s = self.settings
        self.embedder = embedder if embedder is not None and not isinstance(embedder, str) \
            else parse_embedder(s.embedder)
        self._check_embedder()
        self.indexer = Indexer(self.store, self.embedder)
        self.retriever = Retriever(self.store, self.embedder, RetrieverSettings.from_settings(s))
        config = PipelineConfig.from_settings(s)
        self.writer = ItemWriter(self.store, self.indexer, config.feedback)
        self.profiles = Profiles(self.store)
        self.knowledge_base = KnowledgeBase(self.store, self.indexer, self.embedder,
                                            KnowledgeSettings.from_settings(s))
        self.llm = self._open_llm(llm)
        self.retriever.reranker = self._owned_reranker = parse_reranker(
            s.reranker, llm=self.llm.llm if self.llm is not None else None, metered=self.llm)
        self.session_manager = SessionManager(
            open_session_store(s.sessions or None, self.store, window=s.session_window),
            every_n=s.summary_every, idle=timedelta(minutes=s.session_idle_minutes))
        self.forgetter = Forgetter(self.store, self.embedder, self.indexer, self.profiles,
                                   self.session_manager.sessions, self.session_manager.rebuild,
                                   compact_wait_s=s.compact_wait_s, erase_within_s=s.erase_within_s)
        if self.llm is not None:
            self.session_manager.summariser = LLMSummariser(self.llm)
        # requests before jobs: a job waits (boundedly) while a request is in flight
        self.foreground = Foreground(max_wait_s=s.background_wait_ms / 1000)
        self.turns = TurnWriter(self.store, self.session_manager, self.indexer, self.embedder,
                                TurnSettings.from_settings(s, summary_jobs=self.llm is not None),
                                wake=self.wake_worker, replied=self.knowledge_base.replied)
        self.parts = Parts(
            max_message_chars=s.max_message_chars, read_only=s.read_only, store=self.store,
            turns=self.turns, writer=self.writer,
            contexts=ContextBuilder(self.session_manager, self.profiles, self.knowledge_base,
                                    ContextSettings.from_settings(s)),
            retriever=self.retriever, forgetter=self.forgetter, profiles=self.profiles,
            knowledge_base=self.knowledge_base, session_manager=self.session_manager,
            foreground=self.foreground,
            maintain=lambda scopes, now, background: self.maintain_scopes(scopes, now,
                                                                           background=background))
        self.pipeline = Pipeline(self.store, self.embedder, self.retriever, self.writer,
                                 self.forgetter, self.profiles, config,
                                 extractor=LLMExtractor(self.llm) if self.llm is not None else None)
        handlers = {JobKind.EXTRACT: self.pipeline.run_extract, JobKind.MAINTAIN: self.pipeline.run_maintain,
                    JobKind.PROFILE: self.pipeline.run_profile, JobKind.SUMMARISE: self._run_summary,
                    JobKind.CONSOLIDATE: Consolidator(self.pipeline, self.session_manager.sessions).run}
        self.worker = Worker(self.store, {kind: self._in_background(run) for kind, run in handlers.items()},
                             lease_s=s.job_lease_s, max_attempts=s.job_max_attempts,
                             prepare=self._in_background(self._prepare_jobs))
        if s.session_sweep_minutes > 0:
            self.worker.periodic.append(Periodic("the idle-session sweep", s.session_sweep_minutes * 60,
                                                 self._sweep))
        # the compaction a forget scheduled (erase_within_s): off the request path, checked
        # every 5 s between jobs, run by one process
        self.worker.periodic.append(Periodic("erasing the pages forgetting freed", 5.0,
                                             self.forgetter.erase_if_due))
        if s.worker == "thread" and not s.read_only and (
                self.store.list_jobs(statuses=UNFINISHED, limit=1) or self.store.get_meta(ERASE_DUE)
                or (s.session_sweep_minutes > 0 and self.store.idle_sessions(utcnow(), limit=1))):
            self.worker.start()  # resume what a previous process left pending, sweep open sessions

    def _in_background(self, run: Callable[[_Work], None]) -> Callable[[_Work], None]:
        """``run`` (a job handler, or the preparing of queued jobs) as background work:
        it starts once no request is in flight (or ``background_wait_ms`` passed), and
        its yield points give way to requests (:mod:`memstrata.priority`)."""
        def background(work: _Work) -> None:
            with self.foreground.background():
                self.foreground.pause()
                run(work)
        return background

    def _prepare_jobs(self, jobs: list[Job]) -> None:
        """Embed what queued extraction jobs will embed, together, ``embed_batch`` texts
        per call: their turns and their candidates' probes into the embedding cache,
        their slot texts into the slot matcher's, where each job then finds its vectors.
        A user's vectors are kept only if nothing of theirs was forgotten since their
        turns were read (else their job embeds what is left itself)."""
        texts: list[tuple[Scope, str]] = []
        slots: dict[Scope, list[str]] = {}
        seen: dict[Scope, str] = {}
        window = self.pipeline.config.window
        for job in jobs:
            if job.kind != JobKind.EXTRACT:
                continue
            self.foreground.pause()  # reading turns and running the rules: Python, the GIL
            scope = job.scope
            if scope not in seen:
                seen[scope] = self.forgetter.epoch(scope)  # before reading a turn
            span = ExtractPayload.read(job)
            sid, lo, hi = span.session_id, span.from_seq, span.to_seq
            # the turns before, as Indexer.embed_turns and the job read them
            start = max(0, lo - max(6, window))
            turns = self.store.get_messages(scope, sid, start=start, limit=hi - start + 1)
            texts += [(scope, t) for t in turn_dense_texts(turns, {m.id for m in turns if m.seq >= lo})]
            context = [m for m in turns if m.seq >= lo - window]
            probes, slot_texts = self.pipeline.foreseen(scope, sid, context, lo)
            texts += [(scope, t) for t in probes]
            slots.setdefault(scope, []).extend(slot_texts)

        def keep(scope: Scope, vectors: dict[str, Any]) -> None:
            try:
                with self.forgetter.unchanged(scope, seen[scope]):
                    self.store.cache_vectors(self.embedder.name, vectors)
            except Rerun:
                pass

        batch = self.settings.embed_batch
        polite = self.foreground.polite(self.embedder)
        done = embed_uncached(self.store, polite, texts, batch=batch, keep=keep)
        # a slot text is often the statement itself, whose probe vector is in the cache now
        every: list[tuple[Scope, str]] = []
        for scope, wanted in slots.items():
            wanted = list(dict.fromkeys(wanted))
            keys = [cache_key(scope, t) for t in wanted]
            cached = self.store.cached_vectors(self.embedder.name, sorted(set(keys)))
            known = [(t, cached[k]) for t, k in zip(wanted, keys) if k in cached]
            self._keep_slots(scope, seen[scope], [t for t, _ in known], [v for _, v in known])
            every += [(scope, t) for t, k in zip(wanted, keys) if k not in cached]
        for start in range(0, len(every), batch):
            chunk = every[start:start + batch]
            vectors = polite.embed([t for _, t in chunk], kind="passage")
            for scope in dict.fromkeys(s for s, _ in chunk):
                self._keep_slots(scope, seen[scope], [t for s, t in chunk if s == scope],
                                 [v for (s, _), v in zip(chunk, vectors) if s == scope])
        log.debug("prepared %d job(s): %d text(s) embedded, %d slot text(s)", len(jobs), done, len(every))

    def _keep_slots(self, scope: Scope, seen: str, texts: list[str], vectors: list[Any]) -> None:
        """Slot vectors prepared for a user's jobs, kept unless a forget of theirs
        committed since their turns were read."""
        if not texts:
            return
        try:
            with self.forgetter.unchanged(scope, seen):
                self.pipeline.slots.keep(texts, vectors)
        except Rerun:
            pass

    def _open_llm(self, llm: "str | LLM | None") -> MeteredLLM | None:
        s = self.settings
        self._owned_llm: Any = None
        if llm is None or isinstance(llm, str):
            if not s.llm:
                return None  # offline: not one LLM call
            llm = self._owned_llm = parse_provider(s.llm, timeout_s=s.llm_timeout_s)
        return MeteredLLM(llm, self.store, daily_budget=s.llm_daily_budget,
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
        if self._owned_llm is not None:
            self._owned_llm.close()
        if self._owned_reranker is not None and hasattr(self._owned_reranker, "close"):
            self._owned_reranker.close()
        self.session_manager.sessions.close()
        self.store.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def user(self, user_id: str, *, agent: str | None = None) -> UserMemory:
        """The handle on one user's memory, in namespace ``agent`` (default: the
        ``namespace`` setting)."""
        check_id(user_id, "user_id")  # a caller's id: never one of memstrata's own
        return UserMemory(self.parts, Scope(user_id, self.settings.namespace if agent is None else agent))

    @property
    def kb(self) -> Knowledge:
        """The shared knowledge base of the default namespace (see :meth:`knowledge`)."""
        return self.knowledge()

    def knowledge(self, agent_id: str | None = None, user_id: str | None = None) -> Knowledge:
        """A knowledge base handle: the shared one of namespace ``agent_id`` (default: the
        ``namespace`` setting) — read by every user of it — and, with ``user_id``, that
        user's private one too (the same as ``memory.user(user_id, agent=...).kb``)."""
        namespace = (self.settings.namespace if agent_id is None
                     else check_id(agent_id, "agent_id", empty=True))
        return Knowledge(self.knowledge_base, namespace,
                         None if user_id is None else check_id(user_id, "user_id"))

    def users(self) -> builtins.list[Scope]:
        """Every (user, namespace) with a session or an item."""
        return self.store.list_users()

    def compact(self) -> CompactReport:
        """Reclaim deleted rows so their bytes leave the database files. On SQLite it
        waits up to ``compact_wait_s`` for readers in other connections to leave old
        snapshots; a StoreError when the ``-wal`` still holds deleted bytes after that."""
        report = self.store.compact(wait_s=self.settings.compact_wait_s)
        if not report.checkpointed:
            raise StoreError(report.detail)
        return report

    # -- background jobs ------------------------------------------------------------------
    def wake_worker(self) -> None:
        """Start the worker thread if it runs in process, and tell it a job is waiting."""
        if self.settings.worker == "thread" and not self.settings.read_only:
            self.worker.start()
            self.worker.wake()

    def enqueue_extract(self, scope: Scope, session_id: str, from_seq: int, to_seq: int) -> Job:
        """Persist an extraction job over ``[from_seq, to_seq]`` of a session."""
        return self.turns.enqueue_extract(scope, session_id, from_seq, to_seq)

    def enqueue_summary(self, scope: Scope, session_id: str) -> Job | None:
        """Persist an LLM summary job when one is due and none is pending."""
        return self.turns.enqueue_summary(scope, session_id)

    def _run_summary(self, job: Job) -> None:
        # Idempotent without a shared transaction: the step saves against the persisted
        # message_range_end, so a rerun after a crash finds nothing due.
        seen = self.forgetter.epoch(job.scope)  # before it reads a turn: see Forgetter.unchanged
        self.session_manager.summarise(job.scope, SummarisePayload.read(job).session_id,
                                       guard=lambda: self.forgetter.unchanged(job.scope, seen))
        with self.store.transaction():
            self.store.finish_job(job)

    def flush(self, timeout: float | None = None) -> None:
        """Block until every background job enqueued before this call is finished
        (including jobs a previous process left behind). Raises JobError when one of
        them ended failed (after its last attempt) since the last flush — not for an
        attempt that a retry then finished — or after ``timeout`` seconds."""
        timeout = None if timeout is None else check_seconds(timeout, "timeout")
        if self.settings.worker == "thread" and not self.settings.read_only \
                and self.store.list_jobs(statuses=UNFINISHED, limit=1):
            self.worker.start()
        wait_for(self.store, created_before=utcnow(), timeout=timeout, worker=self.worker,
                 inline=self.settings.worker != "thread")
        failures, self.worker.failures = self.worker.failures, []
        final: dict[str, tuple[Job, str]] = {}
        for scope in dict.fromkeys(job.scope for job, _ in failures):
            failed = {j.id for j in self.store.list_jobs(scope, statuses=("failed",))}
            final.update({j.id: (j, e) for j, e in failures if j.id in failed})
        if final:
            job, error = list(final.values())[-1]
            raise JobError(f"{len(final)} background job(s) failed after every attempt; last: "
                           f"{job.kind} job {job.id} of user {job.user_id!r}: {error} "
                           "(see memory.jobs())")

    wait = flush

    def jobs(self, user_id: str | None = None, *, status: str | None = None,
             agent_id: str | None = None, limit: int = 1000) -> builtins.list[Job]:
        """Background jobs, oldest first (all users unless ``user_id``)."""
        if user_id is not None:
            return self.user(user_id, agent=agent_id).jobs(status=status, limit=limit)
        return self.store.list_jobs(None, statuses=job_statuses(status),
                                    limit=check_count(limit, "limit"))

    def usage(self, user_id: str | None = None, *, agent_id: str | None = None) -> UsageReport:
        """LLM calls, tokens and latency per purpose (extract, conflict, summary), calls
        the daily budget skipped, and item writes per path (rule, llm, api…) — for one
        user or all. All zero offline: no LLM call is ever made without ``llm``."""
        if user_id is not None:
            return self.user(user_id, agent=agent_id).usage()
        return usage_report(self.store, self.users())

    # -- maintenance and sessions across users --------------------------------------------
    def maintain(self, user_id: str | None = None, now: datetime | None = None, *,
                 agent_id: str | None = None, background: bool = False) -> MaintenanceReport:
        """Decay and capacity for one user or every user, then a refresh of
        each user's profile snapshot; idempotent.

        With ``background`` nothing runs here: one ``maintain`` and one ``profile`` job per
        user go to the jobs table (none when that user already has one pending) for the
        worker thread or ``memstrata worker``; the report lists them in ``queued``.
        """
        scopes = [self.user(user_id, agent=agent_id).scope] if user_id is not None else self.users()
        return self.maintain_scopes(scopes, now, background=background)

    def maintain_scopes(self, scopes: Sequence[Scope], now: datetime | None = None, *,
                        background: bool = False) -> MaintenanceReport:
        """:meth:`maintain` for the given scopes."""
        now = utcnow() if now is None else parse_time(now, what="now")
        if not background:
            report = self.pipeline.maintain(scopes, now)
            for scope in scopes:
                self.profiles.refresh(scope)
            return report
        queued: list[str] = []
        with self.store.transaction():
            for scope in scopes:
                pending = {j.kind for j in self.store.list_jobs(scope, statuses=("pending",))}
                if JobKind.MAINTAIN not in pending:
                    queued.append(enqueue(self.store, scope, MaintainPayload(now)).id)
                if JobKind.PROFILE not in pending:
                    queued.append(enqueue(self.store, scope, ProfilePayload()).id)
        if queued:
            self.wake_worker()
        return MaintenanceReport(users=len(scopes), queued=tuple(queued))

    def archive_idle(self, now: datetime | None = None, *,
                     limit: int = 100) -> builtins.list[tuple[Scope, str]]:
        """Archive every session idle for ``session_idle_minutes``; call it from a
        scheduler or worker. Returns (scope, session id) of each one archived."""
        now = None if now is None else parse_time(now, what="now")
        done = self.session_manager.sweep(now, check_count(limit, "limit"))
        for scope, session_id, handed in done:
            self.after_archive(scope, session_id, handed)
        return [(scope, session_id) for scope, session_id, _ in done]

    def _sweep(self) -> None:
        archived = self.archive_idle(limit=1000)
        if archived:
            log.info("archived %d idle session(s)", len(archived))

    def after_archive(self, scope: Scope, session_id: str, handed: list[Message]) -> None:
        """Index what a session store handed to the main store only now (turns an
        earlier memstrata held in Redis), and queue the session's extraction (the scope
        is the session's own, whatever this Memory's default namespace)."""
        self.turns.archived(scope, session_id, handed)
