"""PostgreSQL rows: the session log and session rows, items and versions, jobs, profile
versions, metadata and LLM usage (every seam of :mod:`memstrata.stores.base` but the
search index)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ...errors import ConflictError
from ...types import (Filters, ItemVersion, MemoryItem, Message, Role, Scope, Status, UsageRecord, new_id,
                      utcnow)
from .. import policy
from ..base import IdempotentAdd, Job, ProfileVersion, SessionRecord, SummaryVersion
from .connection import PostgresConnection, as_json

__all__ = ["PostgresRows", "filter_sql"]

_LOCK_JOBS = 72_616_003  # advisory lock key: one job claimer at a time
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _message(row: dict[str, Any]) -> Message:
    return Message(role=Role(row["role"]), content=row["content"], created_at=row["created_at"],
                   id=row["id"], session_id=row["session_id"], seq=row["seq"], name=row["name"],
                   tool_calls=tuple(row["tool_calls"] or ()), tool_call_id=row["tool_call_id"],
                   metadata=row["metadata"] or {})


def _job(row: dict[str, Any]) -> Job:
    return Job(row["id"], row["namespace"], row["user_id"], row["kind"], row["payload"] or {},
               row["status"], row["attempts"], row["created_at"], row["updated_at"], row["worker"],
               row["lease_until"], row["last_error"], row.get("result"))


def _session(row: dict[str, Any]) -> SessionRecord:
    return SessionRecord(row["session_id"], row["created_at"], row["updated_at"], row["status"],
                         row["version"], row["n"], row["summary"], row["message_range_end"],
                         row["metadata"] or {}, row["next_seq"])


def filter_sql(filters: Filters, table: str = "d", *, items: bool = False) -> tuple[str, dict[str, Any]]:
    """`` AND …`` conditions (and named parameters) for ``filters`` on the index's
    ``docs`` (raw turns have no status and pass a status filter; tags TEXT[]) or, with
    ``items``, on ``items`` (tags JSONB, the session is ``source_session_id``). The one
    filter-to-SQL builder of this backend."""
    where: list[str] = []
    params: dict[str, Any] = {}
    if filters.statuses:
        where.append(f"{table}.status = ANY(%(f_statuses)s)" if items
                     else f"({table}.status IS NULL OR {table}.status = ANY(%(f_statuses)s))")
        params["f_statuses"] = [s.value for s in filters.statuses]
    if filters.layers and not items:
        where.append(f"{table}.layer = ANY(%(f_layers)s)")
        params["f_layers"] = [x.value for x in filters.layers]
    if filters.kinds:
        where.append(f"{table}.kind = ANY(%(f_kinds)s)")
        params["f_kinds"] = [k.value for k in filters.kinds]
    if filters.session_ids:
        column = "source_session_id" if items else "session_id"
        where.append(f"{table}.{column} = ANY(%(f_sessions)s)")
        params["f_sessions"] = list(filters.session_ids)
    if filters.since:
        where.append(f"{table}.created_at >= %(f_since)s")
        params["f_since"] = filters.since
    if filters.until:
        where.append(f"{table}.created_at <= %(f_until)s")
        params["f_until"] = filters.until
    if filters.tags:
        where.append(f"{table}.tags @> %(f_tags)s")
        params["f_tags"] = as_json(list(filters.tags)) if items else list(filters.tags)
    return "".join(f" AND {w}" for w in where), params


_OF_SESSION = ("FROM messages m WHERE m.namespace=s.namespace AND m.user_id=s.user_id AND "
               "m.session_id=s.session_id")
_SESSION_SELECT = (f"SELECT s.*, (SELECT COUNT(*) {_OF_SESSION}) AS n, "
                   f"(SELECT COALESCE(MAX(m.seq), -1) + 1 {_OF_SESSION}) AS next_seq FROM sessions s ")
_MESSAGE_INSERT = ("INSERT INTO messages (namespace, user_id, session_id, seq, id, role, content, "
                   "name, tool_calls, tool_call_id, created_at, metadata) VALUES "
                   "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)")


def _message_row(scope: Scope, session_id: str, m: Message) -> tuple[object, ...]:
    return (scope.namespace, scope.user_id, session_id, m.seq, m.id, m.role.value, m.content,
            m.name, as_json([dict(c) for c in m.tool_calls]) if m.tool_calls else None,
            m.tool_call_id, m.created_at, as_json(dict(m.metadata)))


class PostgresRows(PostgresConnection):
    """Everything but the search index (see :class:`~.index.PostgresIndex`)."""

    # -- the message log --------------------------------------------------------------
    def append_messages(self, scope: Scope, session_id: str, messages: Sequence[Message], *,
                        expected_version: int | None = None) -> list[Message]:
        if not messages:
            return []
        key = {"ns": scope.namespace, "uid": scope.user_id, "sid": session_id,
               "first": messages[0].created_at, "last": messages[-1].created_at,
               "v": expected_version}
        with self.transaction():
            # each statement locks the session row, so concurrent appends get distinct seqs
            # and a version check cannot be overtaken
            if expected_version == 0:
                done = self._x("INSERT INTO sessions (namespace, user_id, session_id, created_at, "
                               "updated_at) VALUES (%(ns)s, %(uid)s, %(sid)s, %(first)s, %(last)s) "
                               "ON CONFLICT (namespace, user_id, session_id) DO NOTHING "
                               "RETURNING version", key)
            elif expected_version is not None:
                done = self._x("UPDATE sessions SET updated_at=GREATEST(updated_at, %(last)s), "
                               "version=version+1, status='open' WHERE namespace=%(ns)s AND "
                               "user_id=%(uid)s AND session_id=%(sid)s AND version=%(v)s "
                               "RETURNING version", key)
            else:
                done = self._x("INSERT INTO sessions (namespace, user_id, session_id, created_at, "
                               "updated_at) VALUES (%(ns)s, %(uid)s, %(sid)s, %(first)s, %(last)s) "
                               "ON CONFLICT (namespace, user_id, session_id) DO UPDATE SET "
                               "updated_at=GREATEST(sessions.updated_at, excluded.updated_at), "
                               "version=sessions.version+1, status='open' RETURNING version", key)
            if not done:
                found = self.get_session(scope, session_id)
                assert expected_version is not None
                raise policy.session_conflict(scope, session_id, expected_version,
                                              found.version if found else 0)
            seq = self._x("SELECT COALESCE(MAX(seq), -1) + 1 AS n FROM messages WHERE "
                          "namespace=%(ns)s AND user_id=%(uid)s AND session_id=%(sid)s", key)[0]["n"]
            stored = [Message(role=m.role, content=m.content, created_at=m.created_at,
                              id=m.id or new_id("msg"), session_id=session_id, seq=seq + i,
                              name=m.name, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
                              metadata=m.metadata) for i, m in enumerate(messages)]
            self._many(_MESSAGE_INSERT, [_message_row(scope, session_id, m) for m in stored],
                       taken=policy.message_id_taken)
        return stored

    def get_messages(self, scope: Scope, session_id: str, *, start: int = 0,
                     limit: int | None = None) -> list[Message]:
        rows = self._x("SELECT * FROM messages WHERE namespace=%s AND user_id=%s AND session_id=%s "
                       "AND seq>=%s ORDER BY seq LIMIT %s",
                       (scope.namespace, scope.user_id, session_id, start, limit))
        return [_message(r) for r in rows]

    def delete_messages(self, scope: Scope, message_ids: Sequence[str]) -> None:
        if not message_ids:
            return
        with self.transaction():
            self._delete_docs(scope, list(message_ids))
            self._x("DELETE FROM messages WHERE namespace=%s AND user_id=%s AND id = ANY(%s)",
                    (scope.namespace, scope.user_id, list(message_ids)))

    def idempotent_add(self, scope: Scope, key: str) -> IdempotentAdd | None:
        rows = self._x("SELECT key, fingerprint, session_id, message_ids, created_at FROM "
                       "idempotency_keys WHERE namespace=%s AND user_id=%s AND key=%s",
                       (scope.namespace, scope.user_id, key))
        if not rows:
            return None
        r = rows[0]
        return IdempotentAdd(r["key"], r["fingerprint"], r["session_id"],
                             tuple(r["message_ids"]), r["created_at"])

    def record_idempotent_add(self, scope: Scope, record: IdempotentAdd) -> None:
        def taken(detail: object) -> Exception:
            return ConflictError(f"idempotency key {record.key!r} of {scope.user_id!r} was "
                                 "recorded by a concurrent add; retry to get its result")

        with self.transaction():
            self._many("INSERT INTO idempotency_keys (namespace, user_id, key, fingerprint, "
                       "session_id, message_ids, created_at) VALUES (%s,%s,%s,%s,%s,%s,%s)",
                       [(scope.namespace, scope.user_id, record.key, record.fingerprint,
                         record.session_id, as_json(list(record.message_ids)), record.created_at)],
                       taken=taken)

    # -- session rows -------------------------------------------------------------------
    def list_sessions(self, scope: Scope) -> list[SessionRecord]:
        rows = self._x(_SESSION_SELECT + "WHERE s.namespace=%s AND s.user_id=%s ORDER BY "
                       "s.created_at, s.session_id", (scope.namespace, scope.user_id))
        return [_session(r) for r in rows]

    def get_session(self, scope: Scope, session_id: str) -> SessionRecord | None:
        rows = self._x(_SESSION_SELECT + "WHERE s.namespace=%s AND s.user_id=%s AND "
                       "s.session_id=%s", (scope.namespace, scope.user_id, session_id))
        return _session(rows[0]) if rows else None

    def update_session(self, scope: Scope, session_id: str, expected_version: int, *,
                       status: str | None = None, summary: str | None = None,
                       message_range_end: int | None = None) -> SessionRecord:
        changes = {k: v for k, v in (("status", status), ("summary", summary),
                                     ("message_range_end", message_range_end)) if v is not None}
        sets = "".join(f"{k}=%({k})s, " for k in changes)
        with self.transaction():
            done = self._x(f"UPDATE sessions SET {sets}version=version+1 WHERE namespace=%(ns)s "
                           "AND user_id=%(uid)s AND session_id=%(sid)s AND version=%(v)s "
                           "RETURNING session_id",
                           {**changes, "ns": scope.namespace, "uid": scope.user_id,
                            "sid": session_id, "v": expected_version})
            record = self.get_session(scope, session_id)
            if not done or record is None:
                raise policy.session_conflict(scope, session_id, expected_version,
                                              record.version if record else 0)
        return record

    def idle_sessions(self, before: datetime, limit: int = 100) -> list[tuple[Scope, str]]:
        rows = self._x("SELECT namespace, user_id, session_id FROM sessions WHERE "
                       "status != 'archived' AND updated_at < %s ORDER BY updated_at LIMIT %s",
                       (before, limit))
        return [(Scope(r["user_id"], r["namespace"]), r["session_id"]) for r in rows]

    def summary_versions(self, scope: Scope, session_id: str) -> list[SummaryVersion]:
        rows = self._x("SELECT * FROM summary_versions WHERE namespace=%s AND user_id=%s AND "
                       "session_id=%s ORDER BY version", (scope.namespace, scope.user_id, session_id))
        return [SummaryVersion(r["version"], r["range_start"], r["range_end"], r["summary"], r["at"])
                for r in rows]

    def add_summary_version(self, scope: Scope, session_id: str, version: SummaryVersion) -> None:
        self._x("INSERT INTO summary_versions (namespace, user_id, session_id, version, range_start, "
                "range_end, summary, at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (namespace, "
                "user_id, session_id, version) DO UPDATE SET range_start=excluded.range_start, "
                "range_end=excluded.range_end, summary=excluded.summary, at=excluded.at",
                (scope.namespace, scope.user_id, session_id, version.version, version.range_start,
                 version.range_end, as_json(dict(version.summary)), version.at))

    def delete_summary_versions(self, scope: Scope, session_id: str) -> None:
        self._x("DELETE FROM summary_versions WHERE namespace=%s AND user_id=%s AND session_id=%s",
                (scope.namespace, scope.user_id, session_id))

    def restore_session(self, scope: Scope, session: SessionRecord,
                        messages: Sequence[Message]) -> None:
        def taken(detail: object) -> Exception:
            return policy.message_id_taken(f"session {session.session_id!r} of user "
                                           f"{scope.user_id!r} or one of its messages: {detail}; "
                                           "restore into an empty store")

        with self.transaction():
            self._many("INSERT INTO sessions (namespace, user_id, session_id, created_at, "
                       "updated_at, status, version, summary, message_range_end, metadata) "
                       "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                       [(scope.namespace, scope.user_id, session.session_id, session.created_at,
                         session.updated_at, session.status, session.version, session.summary,
                         session.message_range_end, as_json(dict(session.metadata)))], taken=taken)
            self._many(_MESSAGE_INSERT, [_message_row(scope, session.session_id, m)
                                         for m in messages], taken=taken)

    # -- items ----------------------------------------------------------------------
    def write_item(self, scope: Scope, item: MemoryItem, version: ItemVersion) -> None:
        policy.check_owner(scope, item)
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
                     item.source_session_id, as_json(list(item.source_message_ids)),
                     as_json(list(item.tags)), as_json(dict(item.metadata))))
            self._x("INSERT INTO item_versions (namespace, user_id, item_id, version, op, actor, "
                    "reason, at, before, after) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                    (scope.namespace, scope.user_id, item.id, version.version, version.op,
                     version.actor, version.reason, version.at,
                     as_json(version.before) if version.before is not None else None,
                     as_json(version.after) if version.after is not None else None))

    def get_item(self, scope: Scope, item_id: str) -> MemoryItem:
        rows = self._x("SELECT * FROM items WHERE namespace=%s AND user_id=%s AND id=%s",
                       (scope.namespace, scope.user_id, item_id))
        if not rows:
            raise policy.item_not_found(scope, item_id)
        return MemoryItem.from_dict(rows[0])

    def list_items(self, scope: Scope, filters: Filters, *, limit: int = 100,
                   offset: int = 0) -> list[MemoryItem]:
        extra, params = filter_sql(filters, "i", items=True)
        rows = self._x(f"SELECT * FROM items i WHERE i.namespace=%(ns)s AND i.user_id=%(uid)s{extra} "
                       "ORDER BY i.created_at DESC, i.id LIMIT %(limit)s OFFSET %(offset)s",
                       {**params, "ns": scope.namespace, "uid": scope.user_id, "limit": limit,
                        "offset": offset})
        return [MemoryItem.from_dict(r) for r in rows]

    def list_slot_items(self, scope: Scope, prefix: str, *, among: int) -> list[MemoryItem]:
        key = {"ns": scope.namespace, "uid": scope.user_id}
        rows = self._x("SELECT * FROM items WHERE namespace=%(ns)s AND user_id=%(uid)s "
                       "AND left(attribute, %(n)s)=%(prefix)s AND id IN (SELECT id FROM items "
                       "WHERE namespace=%(ns)s AND user_id=%(uid)s AND status=%(active)s "
                       "ORDER BY created_at DESC, id LIMIT %(among)s) ORDER BY created_at DESC, id",
                       {**key, "n": len(prefix), "prefix": prefix, "active": Status.ACTIVE.value,
                        "among": among})
        return [MemoryItem.from_dict(r) for r in rows]

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

    def items_state(self, scope: Scope) -> tuple[int, int, int]:
        key = {"ns": scope.namespace, "uid": scope.user_id}
        where = "WHERE namespace=%(ns)s AND user_id=%(uid)s"
        rows = self._x(f"SELECT (SELECT count(*) FROM items {where}) AS n, "
                       f"(SELECT coalesce(sum(version), 0) FROM items {where}) AS versions, "
                       f"(SELECT coalesce(max(id), 0) FROM item_versions {where}) AS newest", key)
        row = rows[0]
        return int(row["n"]), int(row["versions"]), int(row["newest"])

    def touch_items(self, scope: Scope, item_ids: Sequence[str], at: datetime) -> None:
        if not item_ids:
            return
        params = (at, scope.namespace, scope.user_id, list(item_ids))
        if getattr(self._local, "conn", None) is not None:  # inside the caller's transaction
            self._x("UPDATE items SET last_accessed=%s, access_count=access_count+1 WHERE "
                    "namespace=%s AND user_id=%s AND id = ANY(%s)", params)
            return
        # on its own: one statement, its own transaction (autocommit), whose commit does
        # not wait for the WAL flush (access statistics only; set_config(…, true) lasts
        # to that commit) — one round trip where BEGIN, SET LOCAL, UPDATE, COMMIT took four
        self._x("UPDATE items SET last_accessed=%s, access_count=access_count+1 FROM (SELECT "
                "set_config('synchronous_commit', 'off', true)) AS async WHERE namespace=%s AND "
                "user_id=%s AND id = ANY(%s)", params)

    # -- durable jobs ---------------------------------------------------------------
    def enqueue_job(self, scope: Scope, kind: str, payload: Mapping[str, Any]) -> Job:
        now = utcnow()
        job = Job(new_id("job"), scope.namespace, scope.user_id, kind, dict(payload), "pending",
                  0, now, now)
        self._x("INSERT INTO jobs (namespace, user_id, id, kind, payload, created_at, updated_at) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s)", (scope.namespace, scope.user_id, job.id, kind,
                                                  as_json(dict(payload)), now, now))
        return job

    def claim_job(self, worker: str, lease_s: float, *, now: datetime | None = None,
                  max_attempts: int | None = None,
                  dead_workers: Sequence[str] = ()) -> Job | None:
        at = now or utcnow()
        with self.transaction():
            # one claimer at a time: the head-of-queue test below is not safe under
            # SKIP LOCKED alone (two workers could take two jobs of one user)
            self._x("SELECT pg_advisory_xact_lock(%s)", (_LOCK_JOBS,))
            while True:
                rows = self._x(
                    "SELECT j.namespace, j.user_id, j.id, j.status, j.attempts, j.worker FROM jobs j "
                    "WHERE (j.status='pending' OR (j.status='running' AND (j.lease_until < %(at)s "
                    "OR j.worker = ANY(%(dead)s)))) AND NOT EXISTS (SELECT 1 FROM jobs o WHERE "
                    "o.namespace=j.namespace AND o.user_id=j.user_id AND o.status IN "
                    "('pending','running') AND o.seq < j.seq) ORDER BY j.seq LIMIT 1",
                    {"at": at, "dead": list(dead_workers)})
                if not rows:
                    return None
                row = rows[0]
                key = {"ns": row["namespace"], "u": row["user_id"], "id": row["id"]}
                if row["status"] == "running" and max_attempts is not None \
                        and row["attempts"] >= max_attempts:
                    self._x("UPDATE jobs SET status='failed', last_error=%(e)s, lease_until=NULL, "
                            "updated_at=%(at)s WHERE namespace=%(ns)s AND user_id=%(u)s AND id=%(id)s",
                            {**key, "at": at, "e": policy.abandoned(row["attempts"], row["worker"])})
                    continue
                claimed = self._x(
                    "UPDATE jobs SET status='running', worker=%(w)s, lease_until=%(lease)s, "
                    "attempts=attempts+1, updated_at=%(at)s WHERE namespace=%(ns)s AND "
                    "user_id=%(u)s AND id=%(id)s RETURNING *",
                    {**key, "w": worker, "at": at, "lease": at + timedelta(seconds=lease_s)})
                return _job(claimed[0])

    def renew_job(self, job: Job, lease_s: float) -> bool:
        rows = self._x("UPDATE jobs SET lease_until=%s WHERE namespace=%s AND user_id=%s AND id=%s "
                       "AND status='running' AND worker=%s RETURNING id",
                       (utcnow() + timedelta(seconds=lease_s), job.namespace, job.user_id, job.id,
                        job.worker))
        return bool(rows)

    def finish_job(self, job: Job, *, error: str | None = None, max_attempts: int = 3,
                   result: Mapping[str, Any] | None = None) -> None:
        key = (job.namespace, job.user_id, job.id)
        with self.transaction():
            rows = self._x("SELECT status, worker, attempts FROM jobs WHERE namespace=%s AND "
                           "user_id=%s AND id=%s FOR UPDATE", key)
            if not rows or rows[0]["status"] != "running" or rows[0]["worker"] != job.worker:
                raise policy.not_claimed(job.id, job.worker)
            self._x("UPDATE jobs SET status=%s, last_error=%s, result=%s, updated_at=%s, "
                    "lease_until=NULL WHERE namespace=%s AND user_id=%s AND id=%s",
                    (policy.job_outcome(rows[0]["attempts"], max_attempts, error), error,
                     as_json(dict(result)) if result is not None else None, utcnow(), *key))

    def list_jobs(self, scope: Scope | None = None, *, statuses: Sequence[str] = (),
                  created_before: datetime | None = None, limit: int = 1000) -> list[Job]:
        where: list[str] = ["TRUE"]
        params: dict[str, Any] = {"limit": limit}
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

    def restore_jobs(self, scope: Scope, jobs: Sequence[Job]) -> None:
        def taken(detail: object) -> Exception:
            return policy.message_id_taken(f"a job of user {scope.user_id!r} is already stored "
                                           f"({detail}); restore into an empty store")

        with self.transaction():
            self._many("INSERT INTO jobs (namespace, user_id, id, kind, payload, status, "
                       "attempts, worker, lease_until, created_at, updated_at, last_error, "
                       "result) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                       [(scope.namespace, scope.user_id, j.id, j.kind, as_json(dict(j.payload)),
                         j.status, j.attempts, j.worker, j.lease_until, j.created_at,
                         j.updated_at, j.last_error,
                         as_json(dict(j.result)) if j.result is not None else None)
                        for j in jobs], taken=taken)

    # -- users ----------------------------------------------------------------------
    def list_users(self) -> list[Scope]:
        # the one query that spans users on purpose: on Citus it fans out to every shard
        rows = self._x("SELECT namespace, user_id FROM sessions UNION SELECT namespace, user_id "
                       "FROM items ORDER BY 1, 2")
        return [Scope(r["user_id"], r["namespace"]) for r in rows]

    def _delete_user_rows(self, scope: Scope, *, messages: bool) -> None:
        key = (scope.namespace, scope.user_id)
        tables = ("messages", "sessions", "summary_versions", "idempotency_keys") if messages else ()
        for table in (*tables, "item_versions", "items", "jobs", "profile_versions", "llm_usage"):
            self._x(f"DELETE FROM {table} WHERE namespace=%s AND user_id=%s", key)

    # -- metadata and profile ---------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._x("SELECT value FROM meta WHERE key=%s", (key,))
        return rows[0]["value"] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self._x("INSERT INTO meta (key, value) VALUES (%s,%s) ON CONFLICT (key) DO UPDATE "
                "SET value=excluded.value", (key, value))

    def profile_versions(self, scope: Scope) -> list[ProfileVersion]:
        rows = self._x("SELECT * FROM profile_versions WHERE namespace=%s AND user_id=%s "
                       "ORDER BY version", (scope.namespace, scope.user_id))
        return [ProfileVersion(r["version"], r["data"], r["actor"], r["reason"], r["at"])
                for r in rows]

    def add_profile_version(self, scope: Scope, version: ProfileVersion) -> None:
        def taken(detail: object) -> Exception:
            return ConflictError(f"profile version {version.version} of {scope.user_id!r} "
                                 "exists already; reload the profile and retry")

        with self.transaction():
            self._many("INSERT INTO profile_versions (namespace, user_id, version, data, actor, "
                       "reason, at) VALUES (%s,%s,%s,%s,%s,%s,%s)",
                       [(scope.namespace, scope.user_id, version.version,
                         as_json(dict(version.data)), version.actor, version.reason, version.at)],
                       taken=taken)

    # -- LLM usage --------------------------------------------------------------------
    def record_llm_usage(self, scope: Scope, record: UsageRecord) -> None:
        self._x("INSERT INTO llm_usage (namespace, user_id, at, model, purpose, prompt_tokens, "
                "completion_tokens, latency_s, error) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (scope.namespace, scope.user_id, record.at, record.model, record.purpose,
                 record.prompt_tokens, record.completion_tokens, record.latency_s, record.error))

    def llm_usage(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        rows = self._x("SELECT * FROM llm_usage WHERE namespace=%s AND user_id=%s AND at >= %s "
                       "ORDER BY id", (scope.namespace, scope.user_id, since or _EPOCH))
        return [UsageRecord(r["at"], r["model"], r["purpose"], r["prompt_tokens"],
                            r["completion_tokens"], r["latency_s"], r["error"]) for r in rows]

    def version_actors(self, scope: Scope) -> dict[str, int]:
        rows = self._x("SELECT actor, COUNT(*) AS n FROM item_versions WHERE namespace=%s AND "
                       "user_id=%s GROUP BY actor", (scope.namespace, scope.user_id))
        return {r["actor"]: int(r["n"]) for r in rows}
