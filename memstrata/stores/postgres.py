"""PostgreSQL + pgvector: the server-grade backend (``postgresql://user:pw@host/db``).

* psycopg 3 with a :class:`psycopg_pool.ConnectionPool` whose connections are checked on
  checkout, so a restarted server costs the calls in flight, not the store. Every
  psycopg error is re-raised as :class:`~memstrata.errors.StoreUnavailableError`
  (unreachable, wrong password, unknown database or role — named) or
  :class:`~memstrata.errors.StoreError`.
* Transactions are per thread and nest as savepoints, like the SQLite backend.
* Vectors live in ``docs.embedding`` (pgvector); a partial HNSW index per dimension
  (cosine) is created the first time that dimension is written.

Lexical ranking — BM25 from stored term statistics
--------------------------------------------------
The caller hands us analysed tokens (jieba words, Snowball stems), so a PostgreSQL text
search configuration has nothing left to do, and ``ts_rank`` is not BM25 (no IDF, no
length saturation): its rankings differ from SQLite's. We store instead one *posting*
per (scope, term, doc) with the term's count in ``body`` and in ``context``, the length
of each document and, per scope, the number of documents and their total length. A
search computes exactly the formula of SQLite FTS5's ``bm25()`` (k1 = 1.2, b = 0.75)::

    score(D) = Σ_t idf(t) · f·(k1+1) / (f + k1·(1 − b + b·|D|/avgdl))
    f = body_weight · tf_body + context_weight · tf_context
    idf(t) = max(ln((N − n_t + 0.5) / (n_t + 0.5)), 1e-6)

with |D| counting, as FTS5 does, one extra token for the scope column. One difference:
FTS5 takes N, n_t and avgdl over the whole table (every user), we take them over the
scope. For a store holding one user, scores are equal to floating-point rounding and
ties break the same way (insertion order); with several users, IDFs reflect that user's
own documents only, which is what a sharded (Citus) deployment can compute locally.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import (ConflictError, NotFoundError, StoreError, StoreUnavailableError,
                      ValidationError)
from ..types import (Filters, ItemVersion, Layer, MemoryItem, Message, Role, Scope, dumps,
                     new_id, utcnow)
from .base import DocInfo, IndexDoc, Job, ProfileVersion, SessionInfo, SessionRecord, Store
from .pg_migrations import PG_MIGRATIONS

__all__ = ["PostgresStore", "open_postgres"]

_K1, _B = 1.2, 0.75
_TOKEN = re.compile(r"[^\W_]+")  # FTS5 unicode61: runs of letters and digits, case-folded
_HNSW_MAX_DIM = 2000  # pgvector's limit for an HNSW index on `vector`
_LOCK_MIGRATE = 72_616_001  # advisory lock keys: one migrator, one index builder at a time
_LOCK_HNSW = 72_616_002
_LOCK_JOBS = 72_616_003


def _terms(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _where(url: str) -> str:
    """The server and database a URL names, without the password (for error messages)."""
    parts = urlsplit(url)
    host = parts.hostname or "local socket"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.username or 'default user'}@{host}{port}/{parts.path.lstrip('/') or '(default)'}"


def _explain(exc: BaseException, url: str) -> StoreError:
    """A memstrata error for a psycopg one; connection-level failures name their cause."""
    text = str(exc).strip()
    where = _where(url)
    low = text.lower()
    if isinstance(exc, PoolTimeout):
        return StoreUnavailableError(f"PostgreSQL at {where} gave no connection in time ({text}); "
                                     "is the server up, and is the pool large enough?")
    if "password authentication failed" in low or "no password supplied" in low:
        return StoreUnavailableError(f"PostgreSQL at {where} refused the password ({text}); "
                                     "fix the password in the URL")
    if re.search(r'database ".*" does not exist', low):
        return StoreUnavailableError(f"PostgreSQL at {where}: unknown database ({text}); create it "
                                     "(createdb) or fix the database name in the URL")
    if re.search(r'role ".*" does not exist', low):
        return StoreUnavailableError(f"PostgreSQL at {where}: unknown user ({text}); fix the user "
                                     "name in the URL")
    if isinstance(exc, psycopg.OperationalError) and (
            "connection" in low or "server" in low or "terminat" in low or "shut" in low):
        return StoreUnavailableError(f"cannot reach PostgreSQL at {where} ({text}); check that "
                                     "the server is running and the host and port are right")
    if isinstance(exc, psycopg.errors.UndefinedFile) and "vector" in low:
        return StoreError(f"PostgreSQL at {where} has no pgvector ({text}); install the "
                          "pgvector extension on the server")
    return StoreError(f"PostgreSQL error on {where}: {text}")


def _message(row: dict[str, Any]) -> Message:
    return Message(role=Role(row["role"]), content=row["content"], created_at=row["created_at"],
                   id=row["id"], session_id=row["session_id"], seq=row["seq"], name=row["name"],
                   tool_calls=tuple(row["tool_calls"] or ()), tool_call_id=row["tool_call_id"],
                   metadata=row["metadata"] or {})


def _job(row: dict[str, Any]) -> Job:
    return Job(row["id"], row["namespace"], row["user_id"], row["kind"], row["payload"] or {},
               row["status"], row["attempts"], row["created_at"], row["updated_at"], row["worker"],
               row["lease_until"], row["last_error"])


def _item(row: dict[str, Any]) -> MemoryItem:
    return MemoryItem.from_dict(row)


def _json(value: Any) -> Jsonb:
    return Jsonb(value, dumps=dumps)


class PostgresStore(Store):
    """memstrata on PostgreSQL with pgvector. Open with :func:`open_postgres`."""

    #: scopes with at most this many documents are searched exactly (a scan of the
    #: user's rows); larger ones through the HNSW index, falling back to exact when
    #: filtering leaves the index short of ``limit`` hits.
    exact_search_limit = 20_000
    #: documents this process may add before it checks the planner's statistics
    analyze_after = 1000

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8,
                 timeout: float = 10.0) -> None:
        self.url = url
        self._conninfo = url.replace("postgres://", "postgresql://", 1)
        self._timeout = timeout
        try:  # fail now, with the reason, rather than as a pool timeout later
            psycopg.connect(self._conninfo, connect_timeout=max(1, int(timeout))).close()
        except psycopg.Error as exc:
            raise _explain(exc, url) from exc
        self._pool = ConnectionPool(self._conninfo, min_size=min_size, max_size=max_size,
                                    kwargs={"autocommit": True}, configure=self._configure,
                                    check=ConnectionPool.check_connection, timeout=timeout,
                                    open=False, name="memstrata")
        self._local = threading.local()
        self._hnsw_dims: set[int] = set()
        self._added_since_analyze = 0

    @staticmethod
    def _configure(conn: psycopg.Connection) -> None:
        conn.execute("SET TIME ZONE 'UTC'")  # datetimes come back as SQLite's do
        try:
            register_vector(conn)
        except psycopg.ProgrammingError:
            pass  # before the first setup() the extension does not exist yet

    # -- lifecycle ---------------------------------------------------------------
    def setup(self) -> list[str]:
        applied: list[str] = []
        try:
            with psycopg.connect(self._conninfo, autocommit=True) as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_MIGRATE,))
                conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                             "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
                done = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
                for name, sql in PG_MIGRATIONS:
                    if name not in done:
                        for statement in sql.split(";\n"):
                            if statement.strip():
                                conn.execute(statement)
                        conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
                        applied.append(name)
        except psycopg.Error as exc:
            raise _explain(exc, self.url) from exc
        return applied

    def close(self) -> None:
        if not self._pool.closed:
            self._pool.close()

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        if self._pool.closed:
            self._pool.open(wait=False)
        try:
            with self._pool.connection() as conn:
                yield conn
        except (psycopg.Error, PoolTimeout) as exc:
            raise _explain(exc, self.url) from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._conn() as conn:
            outer = getattr(self._local, "conn", None) is None
            self._local.conn = conn
            try:
                with conn.transaction():  # savepoints when nested
                    yield
            except psycopg.Error as exc:
                raise _explain(exc, self.url) from exc
            finally:
                if outer:
                    self._local.conn = None

    def _x(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        with self._conn() as conn:
            try:
                cur = conn.cursor(row_factory=dict_row)
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else []
            except psycopg.Error as exc:
                raise _explain(exc, self.url) from exc

    def _many(self, sql: str, rows: Sequence[Any]) -> None:
        if not rows:
            return
        with self._conn() as conn:
            try:
                conn.cursor().executemany(sql, rows)
            except psycopg.Error as exc:
                raise _explain(exc, self.url) from exc

    # -- sessions and messages ------------------------------------------------------
    def append_messages(self, scope: Scope, session_id: str,
                        messages: Sequence[Message]) -> list[Message]:
        if not messages:
            return []
        key = {"ns": scope.namespace, "uid": scope.user_id, "sid": session_id}
        with self.transaction():
            # the upsert locks the session row, so concurrent appends get distinct seqs
            self._x("INSERT INTO sessions (namespace, user_id, session_id, created_at, updated_at) "
                    "VALUES (%(ns)s, %(uid)s, %(sid)s, %(first)s, %(last)s) ON CONFLICT (namespace, "
                    "user_id, session_id) DO UPDATE SET updated_at=GREATEST(sessions.updated_at, "
                    "excluded.updated_at), version=sessions.version+1",
                    {**key, "first": messages[0].created_at, "last": messages[-1].created_at})
            seq = self._x("SELECT COALESCE(MAX(seq), -1) + 1 AS n FROM messages WHERE "
                          "namespace=%(ns)s AND user_id=%(uid)s AND session_id=%(sid)s", key)[0]["n"]
            stored = [Message(role=m.role, content=m.content, created_at=m.created_at,
                              id=m.id or new_id("msg"), session_id=session_id, seq=seq + i,
                              name=m.name, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
                              metadata=m.metadata) for i, m in enumerate(messages)]
            try:
                self._many("INSERT INTO messages (namespace, user_id, session_id, seq, id, role, "
                           "content, name, tool_calls, tool_call_id, created_at, metadata) VALUES "
                           "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                           [(scope.namespace, scope.user_id, session_id, m.seq, m.id, m.role.value,
                             m.content, m.name,
                             _json([dict(c) for c in m.tool_calls]) if m.tool_calls else None,
                             m.tool_call_id, m.created_at, _json(dict(m.metadata))) for m in stored])
            except StoreError as exc:
                if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                    raise ValidationError(f"message id already stored: {exc.__cause__}; leave 'id' "
                                          "empty to let memstrata assign one") from exc.__cause__
                raise
        return stored

    def get_messages(self, scope: Scope, session_id: str, *, start: int = 0,
                     limit: int | None = None) -> list[Message]:
        rows = self._x("SELECT * FROM messages WHERE namespace=%s AND user_id=%s AND session_id=%s "
                       "AND seq>=%s ORDER BY seq LIMIT %s",
                       (scope.namespace, scope.user_id, session_id, start, limit))
        return [_message(r) for r in rows]

    def list_sessions(self, scope: Scope) -> list[SessionInfo]:
        rows = self._x("SELECT s.*, (SELECT COUNT(*) FROM messages m WHERE m.namespace=s.namespace "
                       "AND m.user_id=s.user_id AND m.session_id=s.session_id) AS n FROM sessions s "
                       "WHERE s.namespace=%s AND s.user_id=%s ORDER BY s.created_at, s.session_id",
                       (scope.namespace, scope.user_id))
        return [SessionInfo(r["session_id"], r["created_at"], r["updated_at"], r["status"],
                            r["version"], r["n"]) for r in rows]

    # -- items ----------------------------------------------------------------------
    def write_item(self, scope: Scope, item: MemoryItem, version: ItemVersion) -> None:
        if (item.user_id, item.namespace) != (scope.user_id, scope.namespace):
            raise ValidationError("item belongs to another user or namespace")
        with self.transaction():
            self._x("INSERT INTO items (namespace, user_id, id, kind, content, subject, attribute, "
                    "value, confidence, importance, status, version, supersedes, created_at, "
                    "updated_at, last_accessed, access_count, source_session_id, source_message_ids, "
                    "tags, metadata) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"
                    "%s,%s) ON CONFLICT (namespace, user_id, id) DO UPDATE SET kind=excluded.kind, "
                    "content=excluded.content, subject=excluded.subject, "
                    "attribute=excluded.attribute, value=excluded.value, "
                    "confidence=excluded.confidence, importance=excluded.importance, "
                    "status=excluded.status, version=excluded.version, "
                    "supersedes=excluded.supersedes, created_at=excluded.created_at, "
                    "updated_at=excluded.updated_at, last_accessed=excluded.last_accessed, "
                    "access_count=excluded.access_count, "
                    "source_session_id=excluded.source_session_id, "
                    "source_message_ids=excluded.source_message_ids, tags=excluded.tags, "
                    "metadata=excluded.metadata",
                    (scope.namespace, scope.user_id, item.id, item.kind.value, item.content,
                     item.subject, item.attribute, item.value, item.confidence, item.importance,
                     item.status.value, item.version, item.supersedes, item.created_at,
                     item.updated_at, item.last_accessed, item.access_count,
                     item.source_session_id, _json(list(item.source_message_ids)),
                     _json(list(item.tags)), _json(dict(item.metadata))))
            self._x("INSERT INTO item_versions (namespace, user_id, item_id, version, op, actor, "
                    "reason, at, before, after) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                    (scope.namespace, scope.user_id, item.id, version.version, version.op,
                     version.actor, version.reason, version.at,
                     _json(version.before) if version.before is not None else None,
                     _json(version.after) if version.after is not None else None))
            self._x("UPDATE docs SET status=%s, importance=%s WHERE namespace=%s AND user_id=%s "
                    "AND id=%s", (item.status.value, item.importance, scope.namespace,
                                  scope.user_id, item.id))

    def get_item(self, scope: Scope, item_id: str) -> MemoryItem:
        rows = self._x("SELECT * FROM items WHERE namespace=%s AND user_id=%s AND id=%s",
                       (scope.namespace, scope.user_id, item_id))
        if not rows:
            raise NotFoundError(f"no memory item {item_id!r} for user {scope.user_id!r}"
                                + (f" in namespace {scope.namespace!r}" if scope.namespace else "")
                                + "; list them with `memstrata list --user ...`")
        return _item(rows[0])

    def list_items(self, scope: Scope, filters: Filters, *, limit: int = 100,
                   offset: int = 0) -> list[MemoryItem]:
        where = ["namespace=%(ns)s", "user_id=%(uid)s"]
        params: dict[str, Any] = {"ns": scope.namespace, "uid": scope.user_id,
                                  "limit": limit, "offset": offset}
        if filters.kinds:
            where.append("kind = ANY(%(kinds)s)")
            params["kinds"] = [k.value for k in filters.kinds]
        if filters.statuses:
            where.append("status = ANY(%(statuses)s)")
            params["statuses"] = [s.value for s in filters.statuses]
        if filters.session_ids:
            where.append("source_session_id = ANY(%(sessions)s)")
            params["sessions"] = list(filters.session_ids)
        if filters.since:
            where.append("created_at >= %(since)s")
            params["since"] = filters.since
        if filters.until:
            where.append("created_at <= %(until)s")
            params["until"] = filters.until
        if filters.tags:
            where.append("tags @> %(tags)s")
            params["tags"] = _json(list(filters.tags))
        rows = self._x(f"SELECT * FROM items WHERE {' AND '.join(where)} "
                       "ORDER BY created_at DESC, id LIMIT %(limit)s OFFSET %(offset)s", params)
        return [_item(r) for r in rows]

    def history(self, scope: Scope, item_id: str) -> list[ItemVersion]:
        rows = self._x("SELECT * FROM item_versions WHERE namespace=%s AND user_id=%s AND "
                       "item_id=%s ORDER BY id", (scope.namespace, scope.user_id, item_id))
        if not rows:
            self.get_item(scope, item_id)  # raises NotFoundError with a helpful message
        return [ItemVersion(r["item_id"], r["version"], r["op"], r["actor"], r["reason"], r["at"],
                            r["before"], r["after"]) for r in rows]

    def delete_item(self, scope: Scope, item_id: str) -> None:
        key = (scope.namespace, scope.user_id, item_id)
        with self.transaction():
            self.get_item(scope, item_id)
            self._delete_docs(scope, [item_id])
            self._x("DELETE FROM item_versions WHERE namespace=%s AND user_id=%s AND item_id=%s", key)
            self._x("DELETE FROM items WHERE namespace=%s AND user_id=%s AND id=%s", key)

    def touch_items(self, scope: Scope, item_ids: Sequence[str], at: datetime) -> None:
        if item_ids:
            self._x("UPDATE items SET last_accessed=%s, access_count=access_count+1 WHERE "
                    "namespace=%s AND user_id=%s AND id = ANY(%s)",
                    (at, scope.namespace, scope.user_id, list(item_ids)))

    # -- durable jobs ---------------------------------------------------------------
    def enqueue_job(self, scope: Scope, kind: str, payload: Mapping[str, Any]) -> Job:
        now = utcnow()
        job = Job(new_id("job"), scope.namespace, scope.user_id, kind, dict(payload), "pending",
                  0, now, now)
        self._x("INSERT INTO jobs (namespace, user_id, id, kind, payload, created_at, updated_at) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s)", (scope.namespace, scope.user_id, job.id, kind,
                                                  _json(dict(payload)), now, now))
        return job

    def claim_job(self, worker: str, lease_s: float, *, now: datetime | None = None) -> Job | None:
        at = now or utcnow()
        with self.transaction():
            # one claimer at a time: the head-of-queue test below is not safe under
            # SKIP LOCKED alone (two workers could take two jobs of one user)
            self._x("SELECT pg_advisory_xact_lock(%s)", (_LOCK_JOBS,))
            rows = self._x(
                "UPDATE jobs SET status='running', worker=%(w)s, lease_until=%(lease)s, "
                "attempts=attempts+1, updated_at=%(at)s WHERE (namespace, user_id, id) = "
                "(SELECT j.namespace, j.user_id, j.id FROM jobs j WHERE (j.status='pending' OR "
                "(j.status='running' AND j.lease_until < %(at)s)) AND NOT EXISTS (SELECT 1 FROM "
                "jobs o WHERE o.namespace=j.namespace AND o.user_id=j.user_id AND o.status IN "
                "('pending','running') AND o.seq < j.seq) ORDER BY j.seq LIMIT 1) RETURNING *",
                {"w": worker, "at": at, "lease": at + timedelta(seconds=lease_s)})
        return _job(rows[0]) if rows else None

    def finish_job(self, job: Job, *, error: str | None = None, max_attempts: int = 3) -> None:
        key = (job.namespace, job.user_id, job.id)
        with self.transaction():
            rows = self._x("SELECT status, worker, attempts FROM jobs WHERE namespace=%s AND "
                           "user_id=%s AND id=%s FOR UPDATE", key)
            if not rows or rows[0]["status"] != "running" or rows[0]["worker"] != job.worker:
                raise ConflictError(f"job {job.id} is no longer claimed by {job.worker!r} (its "
                                    "lease expired and another worker took it); its work is "
                                    "discarded here and done there")
            status = "done" if error is None else (
                "failed" if rows[0]["attempts"] >= max_attempts else "pending")
            self._x("UPDATE jobs SET status=%s, last_error=%s, updated_at=%s, lease_until=NULL "
                    "WHERE namespace=%s AND user_id=%s AND id=%s", (status, error, utcnow(), *key))

    def list_jobs(self, scope: Scope | None = None, *, statuses: Sequence[str] = (),
                  created_before: datetime | None = None, limit: int = 1000) -> list[Job]:
        where, params = ["TRUE"], {"limit": limit}
        if scope is not None:
            where.append("namespace=%(ns)s AND user_id=%(uid)s")
            params.update(ns=scope.namespace, uid=scope.user_id)
        if statuses:
            where.append("status = ANY(%(statuses)s)")
            params["statuses"] = list(statuses)
        if created_before is not None:
            where.append("created_at <= %(before)s")
            params["before"] = created_before
        rows = self._x(f"SELECT * FROM jobs WHERE {' AND '.join(where)} ORDER BY seq "
                       "LIMIT %(limit)s", params)
        return [_job(r) for r in rows]

    # -- forgetting -----------------------------------------------------------------
    def delete_messages(self, scope: Scope, message_ids: Sequence[str]) -> None:
        if not message_ids:
            return
        with self.transaction():
            self._delete_docs(scope, list(message_ids))
            self._x("DELETE FROM messages WHERE namespace=%s AND user_id=%s AND id = ANY(%s)",
                    (scope.namespace, scope.user_id, list(message_ids)))

    def delete_user(self, scope: Scope, *, messages: bool = True) -> None:
        key = (scope.namespace, scope.user_id)
        with self.transaction():
            if messages:
                for table in ("postings", "docs", "scope_stats", "messages", "sessions"):
                    self._x(f"DELETE FROM {table} WHERE namespace=%s AND user_id=%s", key)
            else:
                ids = [r["id"] for r in self._x("SELECT id FROM docs WHERE namespace=%s AND "
                                                "user_id=%s AND layer='semantic'", key)]
                self._delete_docs(scope, ids)
            for table in ("item_versions", "items", "jobs", "profile_versions", "llm_usage"):
                self._x(f"DELETE FROM {table} WHERE namespace=%s AND user_id=%s", key)

    def forget_vectors(self, model: str, hashes: Sequence[str]) -> None:
        self._x("DELETE FROM embedding_cache WHERE model=%s AND hash = ANY(%s)", (model, list(hashes)))

    def compact(self) -> None:
        try:  # VACUUM cannot run inside a transaction block: its own autocommit connection
            with psycopg.connect(self._conninfo, autocommit=True) as conn:
                conn.execute("VACUUM")
        except psycopg.Error as exc:
            raise _explain(exc, self.url) from exc

    # -- LLM usage --------------------------------------------------------------------
    def record_llm_usage(self, scope: Scope, record: Any) -> None:
        self._x("INSERT INTO llm_usage (namespace, user_id, at, model, purpose, prompt_tokens, "
                "completion_tokens, latency_s, error) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (scope.namespace, scope.user_id, record.at, record.model, record.purpose,
                 record.prompt_tokens, record.completion_tokens, record.latency_s, record.error))

    def llm_usage(self, scope: Scope, *, since: datetime | None = None) -> list[Any]:
        from ..providers.llm import UsageRecord

        rows = self._x("SELECT * FROM llm_usage WHERE namespace=%s AND user_id=%s AND at >= %s "
                       "ORDER BY id", (scope.namespace, scope.user_id,
                                       since or datetime(1970, 1, 1, tzinfo=timezone.utc)))
        return [UsageRecord(r["at"], r["model"], r["purpose"], r["prompt_tokens"],
                            r["completion_tokens"], r["latency_s"], r["error"]) for r in rows]

    def version_actors(self, scope: Scope) -> dict[str, int]:
        rows = self._x("SELECT actor, COUNT(*) AS n FROM item_versions WHERE namespace=%s AND "
                       "user_id=%s GROUP BY actor", (scope.namespace, scope.user_id))
        return {r["actor"]: int(r["n"]) for r in rows}

    # -- core profile -----------------------------------------------------------------
    def profile_versions(self, scope: Scope) -> list[ProfileVersion]:
        rows = self._x("SELECT * FROM profile_versions WHERE namespace=%s AND user_id=%s "
                       "ORDER BY version", (scope.namespace, scope.user_id))
        return [ProfileVersion(r["version"], r["data"], r["actor"], r["reason"], r["at"])
                for r in rows]

    def add_profile_version(self, scope: Scope, version: ProfileVersion) -> None:
        try:
            with self.transaction():
                self._x("INSERT INTO profile_versions (namespace, user_id, version, data, actor, "
                        "reason, at) VALUES (%s,%s,%s,%s,%s,%s,%s)",
                        (scope.namespace, scope.user_id, version.version, _json(dict(version.data)),
                         version.actor, version.reason, version.at))
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise ConflictError(f"profile version {version.version} of {scope.user_id!r} "
                                    "exists already; reload the profile and retry") from exc.__cause__
            raise

    # -- index ----------------------------------------------------------------------
    def index(self, scope: Scope, docs: Sequence[IndexDoc]) -> None:
        if not docs:
            return
        ns, uid = scope.namespace, scope.user_id
        with self.transaction():
            for dim in sorted({np.asarray(d.vector).size for d in docs if d.vector is not None}):
                self._ensure_hnsw(dim)
            ids = sorted({d.id for d in docs})
            lens = {r["id"]: r["doc_len"] for r in self._x(
                "SELECT id, doc_len FROM docs WHERE namespace=%s AND user_id=%s AND id = ANY(%s) "
                "ORDER BY id FOR UPDATE", (ns, uid, ids))}
            added, grown, final, rows = 0, 0, {}, []
            for doc in docs:
                body, context = Counter(_terms(doc.body)), Counter(_terms(doc.context))
                # + 1: FTS5 counts the scope column's token in |D|; so do we, for equal scores
                length = sum(body.values()) + sum(context.values()) + 1
                added += doc.id not in lens
                grown += length - lens.get(doc.id, 0)
                lens[doc.id] = length
                final[doc.id] = (body, context)
                vec = None if doc.vector is None else np.asarray(doc.vector, dtype=np.float32)
                rows.append((ns, uid, doc.id, doc.layer.value, doc.text, doc.session_id, doc.kind,
                             doc.status, doc.importance, doc.created_at, list(doc.tags), length,
                             None if vec is None else vec.shape[0], vec))
            self._many("INSERT INTO docs (namespace, user_id, id, layer, text, session_id, kind, "
                       "status, importance, created_at, tags, doc_len, dim, embedding) VALUES "
                       "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (namespace, user_id, "
                       "id) DO UPDATE SET layer=excluded.layer, text=excluded.text, "
                       "session_id=excluded.session_id, kind=excluded.kind, status=excluded.status, "
                       "importance=excluded.importance, created_at=excluded.created_at, "
                       "tags=excluded.tags, doc_len=excluded.doc_len, "
                       "dim=COALESCE(excluded.dim, docs.dim), "
                       "embedding=COALESCE(excluded.embedding, docs.embedding)", rows)
            self._x("DELETE FROM postings WHERE namespace=%s AND user_id=%s AND doc_id = ANY(%s)",
                    (ns, uid, ids))
            self._many("INSERT INTO postings (namespace, user_id, term, doc_id, tf_body, tf_context) "
                       "VALUES (%s,%s,%s,%s,%s,%s)",
                       [(ns, uid, term, doc_id, body[term], context[term])
                        for doc_id, (body, context) in final.items() for term in sorted(body | context)])
            self._x("INSERT INTO scope_stats (namespace, user_id, n_docs, total_len) VALUES "
                    "(%s,%s,%s,%s) ON CONFLICT (namespace, user_id) DO UPDATE SET "
                    "n_docs=scope_stats.n_docs+excluded.n_docs, "
                    "total_len=scope_stats.total_len+excluded.total_len", (ns, uid, added, grown))
            self._maybe_analyze(added)

    def _maybe_analyze(self, added: int) -> None:
        """ANALYZE the index tables once this process has added more documents than the
        planner's statistics know of. After a bulk import, until autovacuum's next pass,
        row estimates of 1 turn the BM25 query into nested loops: seconds per search at
        a few thousand documents instead of milliseconds. Doubling keeps this rare."""
        self._added_since_analyze += added
        if self._added_since_analyze < self.analyze_after:
            return
        known = self._x("SELECT reltuples FROM pg_class WHERE oid = 'docs'::regclass")[0]["reltuples"]
        if self._added_since_analyze > max(known, 0):
            self._x("ANALYZE docs, postings, scope_stats")
            self._added_since_analyze = 0

    def _ensure_hnsw(self, dim: int) -> None:
        """Create the HNSW index for ``dim`` if missing; call before writing to ``docs``."""
        if dim in self._hnsw_dims or dim > _HNSW_MAX_DIM:
            return
        name = f"docs_hnsw_{dim}"
        if self._x("SELECT to_regclass(%s) AS r", (name,))[0]["r"] is not None:
            self._hnsw_dims.add(dim)  # cached only once seen committed
            return
        with self.transaction():
            self._x("SELECT pg_advisory_xact_lock(%s)", (_LOCK_HNSW,))
            self._x(f"CREATE INDEX IF NOT EXISTS {name} ON docs USING hnsw "
                    f"((embedding::vector({dim})) vector_cosine_ops) WHERE dim = {dim}")

    def _delete_docs(self, scope: Scope, ids: Sequence[str]) -> None:
        ns, uid = scope.namespace, scope.user_id
        gone = self._x("DELETE FROM docs WHERE namespace=%s AND user_id=%s AND id = ANY(%s) "
                       "RETURNING doc_len", (ns, uid, list(ids)))
        if gone:
            self._x("DELETE FROM postings WHERE namespace=%s AND user_id=%s AND doc_id = ANY(%s)",
                    (ns, uid, list(ids)))
            self._x("UPDATE scope_stats SET n_docs=n_docs-%s, total_len=total_len-%s WHERE "
                    "namespace=%s AND user_id=%s", (len(gone), sum(r["doc_len"] for r in gone), ns, uid))

    @staticmethod
    def _filter_sql(filters: Filters) -> tuple[str, dict[str, Any]]:
        where: list[str] = []
        params: dict[str, Any] = {}
        if filters.statuses:
            where.append("(d.status IS NULL OR d.status = ANY(%(f_statuses)s))")
            params["f_statuses"] = [s.value for s in filters.statuses]
        if filters.layers:
            where.append("d.layer = ANY(%(f_layers)s)")
            params["f_layers"] = [x.value for x in filters.layers]
        if filters.kinds:
            where.append("d.kind = ANY(%(f_kinds)s)")
            params["f_kinds"] = [k.value for k in filters.kinds]
        if filters.session_ids:
            where.append("d.session_id = ANY(%(f_sessions)s)")
            params["f_sessions"] = list(filters.session_ids)
        if filters.since:
            where.append("d.created_at >= %(f_since)s")
            params["f_since"] = filters.since
        if filters.until:
            where.append("d.created_at <= %(f_until)s")
            params["f_until"] = filters.until
        if filters.tags:
            where.append("d.tags @> %(f_tags)s")
            params["f_tags"] = list(filters.tags)
        return "".join(f" AND {w}" for w in where), params

    def lexical_search(self, scope: Scope, query: str, filters: Filters, limit: int, *,
                       context_weight: float = 0.3,
                       body_weight: float = 1.0) -> list[tuple[str, float]]:
        terms = sorted(set(_terms(query)))
        if not terms or limit <= 0:
            return []
        extra, params = self._filter_sql(filters)
        f = "(%(bw)s * p.tf_body + %(w)s * p.tf_context)"
        sql = (
            "WITH st AS (SELECT n_docs::float8 AS n, total_len::float8 / GREATEST(n_docs, 1) AS avgdl "
            "FROM scope_stats WHERE namespace=%(ns)s AND user_id=%(uid)s), "
            "idf AS (SELECT p.term, GREATEST(ln((st.n - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) "
            "AS idf FROM postings p, st WHERE p.namespace=%(ns)s AND p.user_id=%(uid)s AND "
            "p.term = ANY(%(terms)s) GROUP BY p.term, st.n) "
            f"SELECT d.id, sum(idf.idf * {f} * {_K1 + 1} / ({f} + {_K1} * "
            f"({1 - _B} + {_B} * d.doc_len / st.avgdl))) AS score "
            "FROM postings p JOIN idf ON idf.term = p.term JOIN docs d ON d.namespace = p.namespace "
            "AND d.user_id = p.user_id AND d.id = p.doc_id CROSS JOIN st "
            "WHERE p.namespace=%(ns)s AND p.user_id=%(uid)s AND p.term = ANY(%(terms)s) AND "
            f"d.namespace=%(ns)s AND d.user_id=%(uid)s{extra} GROUP BY d.id, d.seq "
            "ORDER BY score DESC, d.seq LIMIT %(limit)s")
        rows = self._x(sql, {"ns": scope.namespace, "uid": scope.user_id, "terms": terms,
                             "w": float(context_weight), "bw": float(body_weight), "limit": limit,
                             **params})
        return [(r["id"], float(r["score"])) for r in rows if r["score"] > 0]

    def vector_search(self, scope: Scope, vector: np.ndarray, filters: Filters,
                      limit: int) -> list[tuple[str, float]]:
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        dim = vec.shape[0]
        if limit <= 0:
            return []
        extra, params = self._filter_sql(filters)
        params.update(ns=scope.namespace, uid=scope.user_id, dim=dim, q=vec, limit=limit)
        base = ("FROM docs d WHERE d.namespace=%(ns)s AND d.user_id=%(uid)s AND d.dim=%(dim)s"
                + extra)
        exact = (f"SELECT d.id, 1 - (d.embedding <=> %(q)s) AS cos {base} "
                 "ORDER BY cos DESC, d.seq LIMIT %(limit)s")
        stats = self._x("SELECT n_docs FROM scope_stats WHERE namespace=%s AND user_id=%s",
                        (scope.namespace, scope.user_id))
        if dim <= _HNSW_MAX_DIM and stats and stats[0]["n_docs"] > self.exact_search_limit:
            with self.transaction():
                self._x("SELECT set_config('hnsw.ef_search', %s, true)", (str(min(1000, max(40, 2 * limit))),))
                rows = self._x(f"SELECT d.id, 1 - (d.embedding::vector({dim}) <=> %(q)s::vector({dim})) "
                               f"AS cos {base} ORDER BY d.embedding::vector({dim}) <=> "
                               f"%(q)s::vector({dim}) LIMIT %(limit)s", params)
            if len(rows) >= limit:
                return [(r["id"], float(r["cos"])) for r in rows]
        return [(r["id"], float(r["cos"])) for r in self._x(exact, params)]

    def doc_info(self, scope: Scope, ids: Sequence[str]) -> dict[str, DocInfo]:
        rows = self._x("SELECT id, layer, text, created_at, session_id, kind, status, importance, tags "
                       "FROM docs WHERE namespace=%s AND user_id=%s AND id = ANY(%s)",
                       (scope.namespace, scope.user_id, list(ids)))
        return {r["id"]: DocInfo(r["id"], Layer(r["layer"]), r["text"], r["created_at"],
                                 r["session_id"], r["kind"], r["status"],
                                 r["importance"] if r["importance"] is not None else 0.5,
                                 tuple(r["tags"] or ()))
                for r in rows}

    # -- embedding cache and meta (store-wide) ---------------------------------------
    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        rows = self._x("SELECT hash, vec FROM embedding_cache WHERE model=%s AND hash = ANY(%s)",
                       (model, list(hashes)))
        return {r["hash"]: np.frombuffer(r["vec"], dtype=np.float32) for r in rows}

    def cache_vectors(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        with self.transaction():
            self._many("INSERT INTO embedding_cache (model, hash, vec) VALUES (%s,%s,%s) "
                       "ON CONFLICT DO NOTHING",
                       [(model, h, np.asarray(v, dtype=np.float32).tobytes())
                        for h, v in sorted(vectors.items())])

    def get_meta(self, key: str) -> str | None:
        rows = self._x("SELECT value FROM meta WHERE key=%s", (key,))
        return rows[0]["value"] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self._x("INSERT INTO meta (key, value) VALUES (%s,%s) ON CONFLICT (key) DO UPDATE "
                "SET value=excluded.value", (key, value))

    # -- users ----------------------------------------------------------------------
    def list_users(self) -> list[Scope]:
        # the one query that spans users on purpose: on Citus it fans out to every shard
        rows = self._x("SELECT namespace, user_id FROM sessions UNION SELECT namespace, user_id "
                       "FROM items ORDER BY 1, 2")
        return [Scope(r["user_id"], r["namespace"]) for r in rows]

    # -- export and restore ---------------------------------------------------------
    def export_sessions(self, scope: Scope) -> list[SessionRecord]:
        rows = self._x("SELECT * FROM sessions WHERE namespace=%s AND user_id=%s ORDER BY session_id",
                       (scope.namespace, scope.user_id))
        return [SessionRecord(r["session_id"], r["created_at"], r["updated_at"], r["status"],
                              r["version"], r["summary"], r["message_range_end"],
                              r["metadata"] or {}) for r in rows]

    def restore_session(self, scope: Scope, session: SessionRecord,
                        messages: Sequence[Message]) -> None:
        ns, uid = scope.namespace, scope.user_id
        try:
            with self.transaction():
                self._x("INSERT INTO sessions (namespace, user_id, session_id, created_at, "
                        "updated_at, status, version, summary, message_range_end, metadata) "
                        "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                        (ns, uid, session.session_id, session.created_at, session.updated_at,
                         session.status, session.version, session.summary,
                         session.message_range_end, _json(dict(session.metadata))))
                self._many("INSERT INTO messages (namespace, user_id, session_id, seq, id, role, "
                           "content, name, tool_calls, tool_call_id, created_at, metadata) VALUES "
                           "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                           [(ns, uid, session.session_id, m.seq, m.id, m.role.value, m.content,
                             m.name, _json([dict(c) for c in m.tool_calls]) if m.tool_calls else None,
                             m.tool_call_id, m.created_at, _json(dict(m.metadata)))
                            for m in messages])
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise ValidationError(f"session {session.session_id!r} of user {uid!r} or one of "
                                      f"its message ids is already stored ({exc.__cause__}); "
                                      "restore into an empty store") from exc.__cause__
            raise

    def restore_jobs(self, scope: Scope, jobs: Sequence[Job]) -> None:
        try:
            with self.transaction():
                self._many("INSERT INTO jobs (namespace, user_id, id, kind, payload, status, "
                           "attempts, worker, lease_until, created_at, updated_at, last_error) "
                           "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                           [(scope.namespace, scope.user_id, j.id, j.kind, _json(dict(j.payload)),
                             j.status, j.attempts, j.worker, j.lease_until, j.created_at,
                             j.updated_at, j.last_error) for j in jobs])
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise ValidationError(f"a job of user {scope.user_id!r} is already stored "
                                      f"({exc.__cause__}); restore into an empty store") from exc.__cause__
            raise


def open_postgres(url: str) -> PostgresStore:
    """``postgresql://user:password@host:port/database`` (libpq URL), migrated."""
    store = PostgresStore(url)
    store.setup()
    return store
