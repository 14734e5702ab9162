"""The storage seams: small protocols, each one concern, that every backend implements.

A backend (SQLite, PostgreSQL) stores, for each scope (namespace, user): the raw session
log and its session rows, memory items with their version history, durable jobs, a
retrieval index of *documents* — one per raw turn (episodic layer) and one per memory
item (semantic layer), searchable lexically (pre-analysed tokens, see
:mod:`memstrata.text`) and by vector — an embedding cache, LLM usage records, profile
versions and store-wide metadata. Fusion, scoring, sessions, the write path and
everything else above these seams are shared by all backends.

=================  =====================================================  ==========================
protocol           methods                                                used by
=================  =====================================================  ==========================
:class:`Lifecycle`  setup, close, transaction, compact, list_users,        Memory
                    delete_user
:class:`MessageLog` append_messages, get_messages, delete_messages,        sessions, indexer, forget,
                    idempotent_add, record_idempotent_add                  add
:class:`SessionRows` list_sessions, get_session, update_session,           sessions (any backend)
                    idle_sessions, restore_session, summary_versions,
                    add_summary_version, delete_summary_versions
:class:`ItemStore`  write_item, get_item, list_items, history,             the item writer
                    delete_item, touch_items
:class:`JobQueue`   enqueue_job, claim_job, finish_job, list_jobs,         the worker
                    restore_jobs
:class:`SearchIndex` index, set_vectors, lexical_search, vector_search,   the retriever, indexer
                    doc_info, one_search
:class:`VectorCache` cached_vectors, cache_vectors, forget_vectors         embedding through a cache
:class:`UsageStore`   record_llm_usage, llm_usage, version_actors           metered LLM, usage report
:class:`MetaStore`  get_meta, set_meta, profile_versions,                  profile, embedder check
                    add_profile_version
:class:`AdminStore` put_key, get_key, list_keys, revoke_key,               the HTTP service,
                    append_audit, list_audit, pseudonymise_audit, hit_rate  forget_user
:class:`~.knowledge.KnowledgeStore`  write_knowledge, get/list/delete      the knowledge base
                    documents, knowledge_chunks, usage and recalls
=================  =====================================================  ==========================

:class:`Store` is all of them together: what :func:`memstrata.stores.open_store`
returns. Code above the seam asks for the narrowest protocol it needs.

Every method takes the :class:`~memstrata.types.Scope` first, and every row a backend
writes carries (namespace, user_id): the schema shards by user without changes.
Backend-neutral rules (job state transitions, error wording, the default visibility of
documents) live in :mod:`memstrata.stores.policy`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from ..types import Filters, ItemVersion, Layer, MemoryItem, Message, Scope, UsageRecord, parse_time
from .knowledge import KnowledgeStore

__all__ = ["Store", "Lifecycle", "MessageLog", "SessionRows", "ItemStore", "JobQueue",
           "SearchIndex", "VectorCache", "UsageStore", "MetaStore", "IndexDoc", "DocInfo",
           "SessionInfo", "SessionRecord", "Job", "ProfileVersion", "AdminStore", "ApiKey",
           "AuditEntry", "ROLES", "KnowledgeStore", "CompactReport", "SummaryVersion",
           "IdempotentAdd"]


# ---------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class IndexDoc:
    """One retrieval document. ``body``/``context`` are analysed tokens joined by spaces.

    ``vector`` None on an update keeps the stored vector (e.g. when only the context of
    a turn changes because its next turn arrived).
    """

    id: str  # the message id or item id it points to
    layer: Layer
    text: str  # what a hit shows
    body: str
    context: str
    created_at: datetime
    session_id: str | None = None
    kind: str | None = None
    status: str | None = None
    tags: tuple[str, ...] = ()
    importance: float | None = None
    vector: np.ndarray | None = None

    def same_entry(self, other: "IndexDoc") -> bool:
        """True when ``other`` would store exactly this entry (the vector aside)."""
        return all(getattr(self, f) == getattr(other, f) for f in _ENTRY_FIELDS)


_ENTRY_FIELDS = ("id", "layer", "text", "body", "context", "created_at", "session_id", "kind",
                 "status", "tags", "importance")


@dataclass(frozen=True, slots=True)
class DocInfo:
    """What a backend returns about a document when building hits."""

    id: str
    layer: Layer
    text: str
    created_at: datetime
    session_id: str | None
    kind: str | None
    status: str | None
    importance: float
    tags: tuple[str, ...] = ()
    #: epoch seconds from which what the document states is no longer true: a superseded
    #: item, or a turn that stated a fact since superseded (None: current or unknown).
    #: Filled by the retriever (:mod:`memstrata.retrieval.currency`), read by rankers.
    stale_since: float | None = None
    #: the item that holds the current value instead (for a stale document)
    replaced_by: str | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """A durable background job (extraction, maintenance…) of one user.

    ``status`` is ``pending`` → ``running`` (claimed by ``worker`` until ``lease_until``)
    → ``done`` or ``failed``; a failed attempt goes back to ``pending`` until the
    attempts run out (:func:`memstrata.stores.policy.job_outcome`). A running job whose
    lease expired (its worker died) is claimable again. Jobs of one user run one at a
    time, oldest first.
    """

    id: str
    namespace: str
    user_id: str
    kind: str
    payload: Mapping[str, Any]
    status: str
    attempts: int
    created_at: datetime
    updated_at: datetime
    worker: str | None = None
    lease_until: datetime | None = None
    last_error: str | None = None
    #: what a finished job did, without content (e.g. how many items and turns a spoken
    #: "forget that" deleted); None for jobs that record nothing
    result: Mapping[str, Any] | None = None

    @property
    def scope(self) -> Scope:
        return Scope(self.user_id, self.namespace)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"id": self.id, "namespace": self.namespace, "user_id": self.user_id,
                "kind": self.kind, "payload": dict(self.payload), "status": self.status,
                "attempts": self.attempts, "created_at": self.created_at.isoformat(),
                "updated_at": self.updated_at.isoformat(), "worker": self.worker,
                "lease_until": self.lease_until.isoformat() if self.lease_until else None,
                "last_error": self.last_error,
                "result": dict(self.result) if self.result is not None else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Job":
        return cls(data["id"], data["namespace"], data["user_id"], data["kind"], dict(data["payload"]),
                   data["status"], int(data["attempts"]), parse_time(data["created_at"]),
                   parse_time(data["updated_at"]), data.get("worker"),
                   parse_time(data["lease_until"]) if data.get("lease_until") else None,
                   data.get("last_error"))


@dataclass(frozen=True, slots=True)
class ProfileVersion:
    """One version of a user's core-profile overrides (manual edits beat aggregation)."""

    version: int
    data: Mapping[str, Any]
    actor: str
    reason: str
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"version": self.version, "data": dict(self.data), "actor": self.actor,
                "reason": self.reason, "at": self.at.isoformat()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ProfileVersion":
        return cls(int(data["version"]), dict(data["data"]), data["actor"], data["reason"],
                   parse_time(data["at"], what="at"))


@dataclass(frozen=True, slots=True)
class SummaryVersion:
    """One step of a session's progressive summary: version vN, the messages
    ``[range_start, range_end)`` the step folded in, the summary as it then read."""

    version: int
    range_start: int
    range_end: int
    summary: Mapping[str, Any]
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"version": self.version, "range_start": self.range_start,
                "range_end": self.range_end, "summary": dict(self.summary), "at": self.at.isoformat()}


#: API key roles, most powerful first: ``admin`` (keys and audit of its tenant, and
#: everything ``app`` may), ``app`` (any user of its tenant), ``read-only`` (reads of any
#: user of its tenant), ``end-user`` (one user id, reads and writes of that user only).
ROLES = ("admin", "app", "read-only", "end-user")


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key of the HTTP service, as stored: the secret only as its SHA-256.

    ``tenant`` is the namespace every request made with the key is scoped to;
    ``user_id`` is set for (and only for) the ``end-user`` role; ``rate_limit`` is
    requests per minute (None: the server's default, 0: unlimited)."""

    id: str
    tenant: str
    role: str
    name: str
    secret_hash: str
    created_at: datetime
    user_id: str | None = None
    rate_limit: int | None = None
    created_by: str | None = None
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, without the hash."""
        return {"id": self.id, "tenant": self.tenant, "role": self.role, "name": self.name,
                "user_id": self.user_id, "rate_limit": self.rate_limit,
                "created_at": self.created_at.isoformat(), "created_by": self.created_by,
                "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None}


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One mutation made through the HTTP service: who (key, role), when, what (action,
    target, HTTP method and path), on which user, and how it ended (status). Content is
    never recorded, and forgetting a user replaces their id with a pseudonym
    (:meth:`AdminStore.pseudonymise_audit`). ``seq`` is assigned by the
    store and orders the log."""

    at: datetime
    tenant: str
    key_id: str
    role: str
    action: str
    method: str
    path: str
    status: int
    user_id: str | None = None
    target: str | None = None
    request_id: str | None = None
    seq: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"seq": self.seq, "at": self.at.isoformat(), "tenant": self.tenant,
                "key_id": self.key_id, "role": self.role, "action": self.action,
                "method": self.method, "path": self.path, "status": self.status,
                "user_id": self.user_id, "target": self.target, "request_id": self.request_id}


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session row in full: what :meth:`SessionRows.list_sessions` returns and
    :meth:`SessionRows.restore_session` writes back. ``summary`` is the stored JSON of
    the L2 summary; ``message_count`` counts the messages in the main store's log and
    ``next_seq`` is the sequence number the next one gets (they differ once messages
    were forgotten)."""

    session_id: str
    created_at: datetime
    updated_at: datetime
    status: str
    version: int
    message_count: int = 0
    summary: str | None = None
    message_range_end: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    next_seq: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the summary left as stored)."""
        return {"session_id": self.session_id, "created_at": self.created_at.isoformat(),
                "updated_at": self.updated_at.isoformat(), "status": self.status,
                "version": self.version, "message_count": self.message_count,
                "message_range_end": self.message_range_end, "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SessionRecord":
        """The inverse of :meth:`to_dict` (which leaves out the summary and next_seq)."""
        return cls(data["session_id"], parse_time(data["created_at"]), parse_time(data["updated_at"]),
                   data["status"], int(data["version"]), int(data["message_count"]),
                   message_range_end=int(data["message_range_end"]),
                   metadata=dict(data.get("metadata") or {}))


@dataclass(frozen=True, slots=True)
class IdempotentAdd:
    """What an ``add(..., idempotency_key=key)`` stored: a digest of the request (its
    session and messages, never their text), the session and the ids of the messages
    it appended. A retry with the key answers from this instead of storing them again."""

    key: str
    fingerprint: str
    session_id: str
    message_ids: tuple[str, ...]
    created_at: datetime


#: What :meth:`memstrata.Memory.sessions` returns: the session rows.
SessionInfo = SessionRecord


@dataclass(frozen=True, slots=True)
class CompactReport:
    """How a :meth:`Lifecycle.compact` went. ``checkpointed`` is False when the bytes of
    deleted rows may still be in a file — SQLite's ``-wal`` while a reader in another
    connection kept an old snapshot for longer than the wait — and ``detail`` says why
    and what to do."""

    checkpointed: bool = True
    waited_s: float = 0.0
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"checkpointed": self.checkpointed, "waited_s": round(self.waited_s, 3),
                "detail": self.detail}


# ---------------------------------------------------------------- the seams


class Lifecycle(Protocol):
    """Opening, transactions, reclaiming space, and whole users."""

    url: str

    @abstractmethod
    def setup(self) -> list[str]:
        """Apply pending named migrations; return the names applied."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """All writes inside commit together or not at all. Nests (savepoints)."""

    @abstractmethod
    def on_commit(self, name: str, hook: Callable[[], None]) -> None:
        """Run ``hook`` once the outermost open transaction commits (at once when none
        is open; never when it rolls back). A later hook of the same ``name`` in the
        same transaction replaces the earlier one. For caches outside the store (the
        Redis session cache): they must only ever see committed state."""

    @abstractmethod
    def lock_user(self, scope: Scope) -> None:
        """Inside a transaction: hold ``scope``'s write lock until the transaction ends,
        so a forget and a background job's writes of one user take turns and each reads
        what the other committed (SQLite: the transaction's own write lock — ``BEGIN
        IMMEDIATE`` — already serialises every writer, so nothing more; PostgreSQL: a
        transaction-level advisory lock on the scope)."""

    @abstractmethod
    def compact(self, *, wait_s: float = 10.0) -> CompactReport:
        """Reclaim the space of deleted rows so their bytes leave the files
        (SQLite: FTS5 optimize, VACUUM, then a WAL checkpoint that truncates the
        ``-wal``, waiting up to ``wait_s`` for readers of other connections to move off
        old snapshots; PostgreSQL: VACUUM FULL). The report says whether it finished."""

    @abstractmethod
    def list_users(self) -> list[Scope]:
        """Every scope with a session or an item, in (namespace, user) order."""

    @abstractmethod
    def delete_user(self, scope: Scope, *, messages: bool = True) -> None:
        """Hard delete everything of a scope: items, versions, index documents, vectors,
        jobs, profile versions, usage and (with ``messages``) sessions and raw messages."""


class MessageLog(Protocol):
    """The raw session log: append-only, the source of truth."""

    @abstractmethod
    def append_messages(self, scope: Scope, session_id: str, messages: Sequence[Message], *,
                        expected_version: int | None = None) -> list[Message]:
        """Append to a session's log, assigning ids and sequence numbers; the session row
        is created or bumped (version + 1, status ``open``). Durable on return.

        With ``expected_version`` (0: a session never written) the append happens only
        if the session row is at that version, checked atomically with the write;
        otherwise :class:`~memstrata.errors.ConflictError` and nothing is written."""

    @abstractmethod
    def get_messages(self, scope: Scope, session_id: str, *, start: int = 0,
                     limit: int | None = None) -> list[Message]:
        """A session's messages in order, from sequence number ``start``."""

    @abstractmethod
    def delete_messages(self, scope: Scope, message_ids: Sequence[str]) -> None:
        """Hard delete raw messages and their index documents."""

    @abstractmethod
    def idempotent_add(self, scope: Scope, key: str) -> IdempotentAdd | None:
        """What the add with idempotency key ``key`` stored, or None."""

    @abstractmethod
    def record_idempotent_add(self, scope: Scope, record: IdempotentAdd) -> None:
        """Record an add's key (inside the transaction that appends its messages);
        :class:`~memstrata.errors.ConflictError` when the key is recorded already (a
        concurrent add with it committed first)."""


class SessionRows(Protocol):
    """Session rows: version (optimistic locking), status, the stored summary."""

    @abstractmethod
    def list_sessions(self, scope: Scope) -> list[SessionRecord]:
        """The scope's sessions, oldest first (then by id)."""

    @abstractmethod
    def get_session(self, scope: Scope, session_id: str) -> SessionRecord | None:
        """One session row, or None when the session was never written."""

    @abstractmethod
    def update_session(self, scope: Scope, session_id: str, expected_version: int, *,
                       status: str | None = None, summary: str | None = None,
                       message_range_end: int | None = None) -> SessionRecord:
        """Change the given fields and bump the version, only if the row is at
        ``expected_version``; otherwise :class:`~memstrata.errors.ConflictError` and no
        change."""

    @abstractmethod
    def idle_sessions(self, before: datetime, limit: int = 100) -> list[tuple[Scope, str]]:
        """Sessions of every user not archived and not written since ``before``,
        oldest first (a sweep across users: on a sharded store it fans out)."""

    @abstractmethod
    def summary_versions(self, scope: Scope, session_id: str) -> list[SummaryVersion]:
        """Every stored summary step of a session, oldest first."""

    @abstractmethod
    def add_summary_version(self, scope: Scope, session_id: str, version: SummaryVersion) -> None:
        """Record a summary step (one of the same version number is replaced)."""

    @abstractmethod
    def delete_summary_versions(self, scope: Scope, session_id: str) -> None:
        """Forget every stored summary step of a session (its turns were forgotten)."""

    @abstractmethod
    def restore_session(self, scope: Scope, session: SessionRecord,
                        messages: Sequence[Message]) -> None:
        """Write a session row and its messages exactly as given — ids, sequence numbers,
        times, version — for restoring an export. The retrieval index is not touched:
        rebuild it with :meth:`memstrata.Memory.reindex`."""


class ItemStore(Protocol):
    """Memory items and their version history."""

    @abstractmethod
    def write_item(self, scope: Scope, item: MemoryItem, version: ItemVersion) -> None:
        """Insert or replace an item and append its version row, atomically. The index
        is not touched: :class:`memstrata.layers.semantic.items.ItemWriter` owns that."""

    @abstractmethod
    def get_item(self, scope: Scope, item_id: str) -> MemoryItem:
        """The item, or :class:`~memstrata.errors.NotFoundError`."""

    @abstractmethod
    def list_items(self, scope: Scope, filters: Filters, *, limit: int = 100,
                   offset: int = 0) -> list[MemoryItem]:
        """Items, newest first, narrowed by ``filters`` (kinds, statuses, tags, time)."""

    @abstractmethod
    def list_slot_items(self, scope: Scope, prefix: str, *, among: int) -> list[MemoryItem]:
        """The active items whose attribute starts with ``prefix`` (``"family:"``) among
        the user's newest ``among`` active items, newest first: what :meth:`list_items`
        and a filter on the attribute give, without reading every item into Python."""

    @abstractmethod
    def history(self, scope: Scope, item_id: str) -> list[ItemVersion]:
        """Every version row of an item, oldest first."""

    @abstractmethod
    def delete_item(self, scope: Scope, item_id: str) -> None:
        """Hard delete: the item, its versions, its index document and vector."""

    @abstractmethod
    def touch_items(self, scope: Scope, item_ids: Sequence[str], at: datetime) -> None:
        """Access statistics: last_accessed = at, access_count += 1."""

    @abstractmethod
    def items_state(self, scope: Scope) -> tuple[int, int, int]:
        """A cheap mark of the user's items that changes with every write and delete
        (not with access statistics): how many items, the sum of their versions and the
        newest version row's id. What is derived from all the items (the profile) is
        kept while it holds."""


class JobQueue(Protocol):
    """Durable background jobs, one queue per user."""

    @abstractmethod
    def enqueue_job(self, scope: Scope, kind: str, payload: Mapping[str, Any]) -> Job:
        """Persist a pending job (inside the caller's transaction, if any)."""

    @abstractmethod
    def claim_job(self, worker: str, lease_s: float, *, now: datetime | None = None,
                  max_attempts: int | None = None,
                  dead_workers: Sequence[str] = ()) -> Job | None:
        """Claim the oldest runnable job: the head of some user's queue that is pending,
        or running with an expired lease or a holder in ``dead_workers``. Sets status
        running, ``worker``, the lease and attempts + 1 (durably, before the handler
        runs). A running job taken back from a dead holder after ``max_attempts``
        attempts is marked failed instead. None when nothing is runnable."""

    @abstractmethod
    def renew_job(self, job: Job, lease_s: float) -> bool:
        """Extend the lease of a job ``job.worker`` still holds (the worker's heartbeat);
        False when it no longer holds it."""

    @abstractmethod
    def finish_job(self, job: Job, *, error: str | None = None, max_attempts: int = 3,
                   result: Mapping[str, Any] | None = None) -> None:
        """Mark a claimed job done, with ``result`` (a JSON-ready dict, or None) stored
        with it — or, with ``error``, pending again or failed after ``max_attempts``.
        Raises :class:`~memstrata.errors.ConflictError` when the job is no longer claimed
        by ``job.worker`` (its lease expired and another worker took it): call it inside
        the transaction that applies the job's writes, so a job's effects commit once."""

    @abstractmethod
    def list_jobs(self, scope: Scope | None = None, *, statuses: Sequence[str] = (),
                  created_before: datetime | None = None, limit: int = 1000) -> list[Job]:
        """Jobs oldest first, of one scope or all, narrowed by status and creation time."""

    @abstractmethod
    def restore_jobs(self, scope: Scope, jobs: Sequence[Job]) -> None:
        """Write jobs exactly as given — ids, statuses, attempts, leases, times — queued in
        the given order, for restoring an export."""


class SearchIndex(Protocol):
    """The retrieval index: documents searchable by BM25 and by cosine."""

    @abstractmethod
    def index(self, scope: Scope, docs: Sequence[IndexDoc]) -> None:
        """Insert or update documents (incrementally: nothing is rebuilt)."""

    @abstractmethod
    def set_vectors(self, scope: Scope, vectors: Mapping[str, np.ndarray]) -> None:
        """Store the vectors of documents already indexed, their words and fields as
        they are (a turn's background job embeds what ``add()`` indexed by its words);
        ids that are not indexed are skipped."""

    @abstractmethod
    def lexical_search(self, scope: Scope, query: str, filters: Filters, limit: int, *,
                       context_weight: float = 0.3,
                       body_weight: float = 1.0) -> list[tuple[str, float]]:
        """BM25 over analysed ``query`` tokens; (doc id, score) best first, score > 0.

        FTS5's ``bm25()`` with field weights: a term's frequency in a document is
        ``body_weight·tf(body) + context_weight·tf(context)``, saturated once with the
        document's whole length."""

    @abstractmethod
    def vector_search(self, scope: Scope, vector: np.ndarray, filters: Filters,
                      limit: int) -> list[tuple[str, float]]:
        """Cosine similarity; (doc id, cosine) best first."""

    @abstractmethod
    def doc_info(self, scope: Scope, ids: Sequence[str]) -> dict[str, DocInfo]:
        """What a hit shows, for the ids still indexed."""

    @contextmanager
    def one_search(self, scope: Scope) -> Iterator[None]:
        """The reads of one search of ``scope`` (its lexical, vector and expansion
        queries): inside the block an index may bring the scope up to date once, at its
        first read, instead of at each — every write committed before the block began
        is visible to all of them. The default does nothing special."""
        yield


class VectorCache(Protocol):
    """Embeddings by content hash, so a text is embedded once per model."""

    @abstractmethod
    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def cache_vectors(self, model: str, vectors: dict[str, np.ndarray]) -> None: ...

    @abstractmethod
    def forget_vectors(self, model: str, hashes: Sequence[str]) -> None:
        """Drop embedding-cache rows (the vectors of forgotten texts)."""


class UsageStore(Protocol):
    """What the LLM cost, per user, and which path wrote each version."""

    @abstractmethod
    def record_llm_usage(self, scope: Scope, record: UsageRecord) -> None:
        """Persist one LLM call of the scope (or a skipped one: ``error="budget"``)."""

    @abstractmethod
    def llm_usage(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        """The scope's LLM usage records, oldest first, from ``since`` on."""

    @abstractmethod
    def version_actors(self, scope: Scope) -> dict[str, int]:
        """How many version rows of the scope's items each actor wrote
        (``rule:<id>``, ``llm:<model>``, ``api``, ``user``…)."""


class MetaStore(Protocol):
    """Store-wide settings and each user's profile overrides."""

    @abstractmethod
    def get_meta(self, key: str) -> str | None:
        """A store-wide setting, e.g. the embedder the index was built with."""

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    @abstractmethod
    def profile_versions(self, scope: Scope) -> list[ProfileVersion]:
        """Every version of the user's profile overrides, oldest first."""

    @abstractmethod
    def add_profile_version(self, scope: Scope, version: ProfileVersion) -> None:
        """Append a profile version; ConflictError if that version number exists."""


class AdminStore(Protocol):
    """API keys, the audit log and rate-limit counters of the HTTP service (store-wide
    tables, not per user: a key belongs to a tenant, not to a user's memory)."""

    @abstractmethod
    def put_key(self, key: ApiKey) -> None:
        """Store a new key; ConflictError when its id is taken."""

    @abstractmethod
    def get_key(self, key_id: str) -> ApiKey | None:
        """One key (revoked ones included), or None."""

    @abstractmethod
    def list_keys(self, tenant: str | None = None) -> list[ApiKey]:
        """Keys oldest first, of one tenant or all, revoked ones included."""

    @abstractmethod
    def revoke_key(self, key_id: str, at: datetime) -> ApiKey:
        """Mark a key revoked (idempotent: the first time stays); NotFoundError if unknown."""

    @abstractmethod
    def append_audit(self, entry: AuditEntry) -> AuditEntry:
        """Append to the audit log; returns the entry with its ``seq``."""

    @abstractmethod
    def list_audit(self, tenant: str, *, user_id: str | None = None, key_id: str | None = None,
                   action: str | None = None, since: datetime | None = None,
                   before_seq: int | None = None, limit: int = 100) -> list[AuditEntry]:
        """A tenant's audit entries, newest first, narrowed by user, key, action (a prefix:
        ``items`` matches ``items.update``), time, and ``seq < before_seq`` (pagination)."""

    @abstractmethod
    def pseudonymise_audit(self, tenant: str, user_id: str, pseudonym: str) -> int:
        """Replace a forgotten user's id in the tenant's audit entries — their
        ``user_id`` and the paths that name it — with ``pseudonym``; returns how many
        entries changed. The log keeps what was done, no longer to whom."""

    @abstractmethod
    def revoke_user_keys(self, tenant: str, user_id: str, pseudonym: str, at: datetime) -> int:
        """Revoke the tenant's end-user keys bound to a forgotten user (at ``at``, unless
        revoked before) and make them name ``pseudonym`` instead; returns how many."""

    @abstractmethod
    def hit_rate(self, bucket: str, window: int) -> int:
        """Count one request in ``bucket`` (a key id) for the minute ``window`` (epoch
        minutes), atomically; return the count so far. Older windows of the bucket are
        dropped."""


class Store(Lifecycle, MessageLog, SessionRows, ItemStore, JobQueue, SearchIndex, VectorCache,
            UsageStore, MetaStore, AdminStore, KnowledgeStore, ABC):
    """A memstrata storage backend: every seam above. Open one with
    :func:`memstrata.stores.open_store`."""

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_chunks(values: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    """``values`` in lists of at most ``size`` (bound parameters per statement)."""
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start:start + size]
