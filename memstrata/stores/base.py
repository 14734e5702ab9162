"""The storage seam: what every backend (SQLite, PostgreSQL) implements.

A backend stores four things for each scope (namespace, user): the raw session log,
memory items with their version history, and a retrieval index of *documents* — one per
raw turn (episodic layer) and one per memory item (semantic layer) — searchable
lexically (pre-analysed tokens, see :mod:`memstrata.retrieval.text`) and by vector.
Fusion, scoring and everything else above this seam are shared by all backends.

Every method takes the :class:`~memstrata.types.Scope` first, and every row a backend
writes carries (namespace, user_id): the schema shards by user without changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..types import Filters, ItemVersion, Layer, MemoryItem, Message, Scope

if TYPE_CHECKING:
    from ..providers.llm import UsageRecord

__all__ = ["Store", "IndexDoc", "DocInfo", "SessionInfo", "SessionRecord", "Job", "ProfileVersion"]


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


@dataclass(frozen=True, slots=True)
class Job:
    """A durable background job (extraction, maintenance…) of one user.

    ``status`` is ``pending`` → ``running`` (claimed by ``worker`` until ``lease_until``)
    → ``done`` or ``failed``; a failed attempt goes back to ``pending`` until the
    attempts run out. A running job whose lease expired (its worker died) is claimable
    again. Jobs of one user run one at a time, oldest first.
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

    @property
    def scope(self) -> Scope:
        return Scope(self.user_id, self.namespace)


@dataclass(frozen=True, slots=True)
class ProfileVersion:
    """One version of a user's core-profile overrides (manual edits beat aggregation)."""

    version: int
    data: Mapping[str, Any]
    actor: str
    reason: str
    at: datetime


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session_id: str
    created_at: datetime
    updated_at: datetime
    status: str
    version: int
    message_count: int


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session row in full, as :meth:`Store.export_sessions` reads it and
    :meth:`Store.restore_session` writes it back (exports between backends)."""

    session_id: str
    created_at: datetime
    updated_at: datetime
    status: str
    version: int
    summary: str | None = None
    message_range_end: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)


class Store(ABC):
    """A memstrata storage backend. Open one with :func:`memstrata.stores.open_store`."""

    url: str
    supports_vectors: bool = True
    supports_fulltext: bool = True

    # -- lifecycle ---------------------------------------------------------------
    @abstractmethod
    def setup(self) -> list[str]:
        """Apply pending named migrations; return the names applied."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all. Nests."""

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw session log ------------------------------------------------------------
    @abstractmethod
    def append_messages(self, scope: Scope, session_id: str,
                        messages: Sequence[Message]) -> list[Message]:
        """Append to a session's log, assigning ids and sequence numbers; durable on return."""

    @abstractmethod
    def get_messages(self, scope: Scope, session_id: str, *, start: int = 0,
                     limit: int | None = None) -> list[Message]:
        """A session's messages in order, from sequence number ``start``."""

    @abstractmethod
    def list_sessions(self, scope: Scope) -> list[SessionInfo]: ...

    # -- memory items ---------------------------------------------------------------
    @abstractmethod
    def write_item(self, scope: Scope, item: MemoryItem, version: ItemVersion) -> None:
        """Insert or replace an item and append its version row, atomically."""

    @abstractmethod
    def get_item(self, scope: Scope, item_id: str) -> MemoryItem:
        """The item, or :class:`~memstrata.errors.NotFoundError`."""

    @abstractmethod
    def list_items(self, scope: Scope, filters: Filters, *, limit: int = 100,
                   offset: int = 0) -> list[MemoryItem]:
        """Items, newest first, narrowed by ``filters`` (kinds, statuses, tags, time)."""

    @abstractmethod
    def history(self, scope: Scope, item_id: str) -> list[ItemVersion]:
        """Every version row of an item, oldest first."""

    @abstractmethod
    def delete_item(self, scope: Scope, item_id: str) -> None:
        """Hard delete: the item, its versions, its index document and vector."""

    @abstractmethod
    def touch_items(self, scope: Scope, item_ids: Sequence[str], at: datetime) -> None:
        """Access statistics: last_accessed = at, access_count += 1."""

    # -- durable jobs ---------------------------------------------------------------
    @abstractmethod
    def enqueue_job(self, scope: Scope, kind: str, payload: Mapping[str, Any]) -> Job:
        """Persist a pending job (inside the caller's transaction, if any)."""

    @abstractmethod
    def claim_job(self, worker: str, lease_s: float, *, now: datetime | None = None) -> Job | None:
        """Claim the oldest runnable job: the head of some user's queue that is pending,
        or running with an expired lease. Sets status running, ``worker``, the lease and
        attempts + 1. None when nothing is runnable."""

    @abstractmethod
    def finish_job(self, job: Job, *, error: str | None = None, max_attempts: int = 3) -> None:
        """Mark a claimed job done (or, with ``error``, pending again or failed after
        ``max_attempts``). Raises :class:`~memstrata.errors.ConflictError` when the job
        is no longer claimed by ``job.worker`` (its lease expired and another worker
        took it): call it inside the transaction that applies the job's writes, so a
        job's effects commit exactly once."""

    @abstractmethod
    def list_jobs(self, scope: Scope | None = None, *, statuses: Sequence[str] = (),
                  created_before: datetime | None = None, limit: int = 1000) -> list[Job]:
        """Jobs oldest first, of one scope or all, narrowed by status and creation time."""

    # -- forgetting -----------------------------------------------------------------
    @abstractmethod
    def delete_messages(self, scope: Scope, message_ids: Sequence[str]) -> None:
        """Hard delete raw messages and their index documents."""

    @abstractmethod
    def delete_user(self, scope: Scope, *, messages: bool = True) -> None:
        """Hard delete everything of a scope: items, versions, index documents, vectors,
        jobs, profile versions and (with ``messages``) sessions and raw messages."""

    @abstractmethod
    def forget_vectors(self, model: str, hashes: Sequence[str]) -> None:
        """Drop embedding-cache rows (the vectors of forgotten texts)."""

    @abstractmethod
    def compact(self) -> None:
        """Reclaim the space of deleted rows so their bytes leave the files
        (SQLite: FTS5 optimize, VACUUM, WAL truncate; PostgreSQL: VACUUM)."""

    # -- core profile -----------------------------------------------------------------
    @abstractmethod
    def profile_versions(self, scope: Scope) -> list[ProfileVersion]:
        """Every version of the user's profile overrides, oldest first."""

    @abstractmethod
    def add_profile_version(self, scope: Scope, version: ProfileVersion) -> None:
        """Append a profile version; ConflictError if that version number exists."""

    # -- LLM usage (memstrata.assist) ---------------------------------------------------
    def record_llm_usage(self, scope: Scope, record: "UsageRecord") -> None:
        """Persist one LLM call of the scope (or a skipped one: ``error="budget"``)."""
        raise NotImplementedError(f"{type(self).__name__} does not record LLM usage")

    def llm_usage(self, scope: Scope, *, since: datetime | None = None) -> list["UsageRecord"]:
        """The scope's LLM usage records, oldest first, from ``since`` on."""
        raise NotImplementedError(f"{type(self).__name__} does not record LLM usage")

    def version_actors(self, scope: Scope) -> dict[str, int]:
        """How many version rows of the scope's items each actor wrote
        (``rule:<id>``, ``llm:<model>``, ``api``, ``user``…)."""
        raise NotImplementedError(f"{type(self).__name__} does not count version actors")

    # -- retrieval index ------------------------------------------------------------
    @abstractmethod
    def index(self, scope: Scope, docs: Sequence[IndexDoc]) -> None:
        """Insert or update documents (incrementally: nothing is rebuilt)."""

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
    def doc_info(self, scope: Scope, ids: Sequence[str]) -> dict[str, DocInfo]: ...

    # -- embedding cache ------------------------------------------------------------
    @abstractmethod
    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def cache_vectors(self, model: str, vectors: dict[str, np.ndarray]) -> None: ...

    @abstractmethod
    def get_meta(self, key: str) -> str | None:
        """A store-wide setting, e.g. the embedder the index was built with."""

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    # -- users ----------------------------------------------------------------------
    @abstractmethod
    def list_users(self) -> list[Scope]: ...

    # -- export and restore (memstrata.stores.transfer) ------------------------------
    @abstractmethod
    def export_sessions(self, scope: Scope) -> list[SessionRecord]:
        """Every session row of the scope in full, ordered by session id."""

    @abstractmethod
    def restore_session(self, scope: Scope, session: SessionRecord,
                        messages: Sequence[Message]) -> None:
        """Write a session row and its messages exactly as given — ids, sequence numbers,
        times, version — for restoring an export. Items go through :meth:`write_item`,
        one call per version, oldest first. The retrieval index is not touched: rebuild
        it with :meth:`memstrata.Memory.reindex`."""

    @abstractmethod
    def restore_jobs(self, scope: Scope, jobs: Sequence[Job]) -> None:
        """Write jobs exactly as given — ids, statuses, attempts, leases, times — queued in
        the given order, for restoring an export. Profile versions go through
        :meth:`add_profile_version`."""
