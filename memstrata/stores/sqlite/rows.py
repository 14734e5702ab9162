"""SQLite rows: the session log and session rows, items and versions, jobs, profile
versions, metadata and LLM usage (the seams of :mod:`memstrata.stores.base` other than
the search index)."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from ...errors import ConflictError
from ...types import (Filters, ItemVersion, MemoryItem, Message, Role, Scope, Status, UsageRecord, dumps,
                      from_timestamp, new_id, utcnow)
from .. import policy
from ..base import IdempotentAdd, Job, ProfileVersion, SessionRecord, SummaryVersion, iter_chunks
from .connection import SQLiteConnection

__all__ = ["SQLiteRows", "filter_clauses"]


def _ts(value: float) -> datetime:
    stamp = from_timestamp(value)
    assert stamp is not None
    return stamp


_R = TypeVar("_R")


def _decoded(what: str) -> Callable[[Callable[[sqlite3.Row], _R]], Callable[[sqlite3.Row], _R]]:
    """A row decoder whose failure on a damaged row (bad JSON, a missing or malformed
    value) is a StoreError naming the row, not a raw JSONDecodeError or KeyError."""
    def wrap(decode: Callable[[sqlite3.Row], _R]) -> Callable[[sqlite3.Row], _R]:
        @functools.wraps(decode)
        def read(row: sqlite3.Row) -> _R:
            try:
                return decode(row)
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                keys = row.keys()
                row_id = row["id"] if "id" in keys else row["session_id"] if "session_id" in keys else "?"
                raise policy.damaged(what, row_id, exc) from exc
        return read
    return wrap


@_decoded("memory item")
def _item_from_row(row: sqlite3.Row) -> MemoryItem:
    data = dict(row)
    for key in ("source_message_ids", "tags", "metadata"):
        data[key] = json.loads(data[key]) if data[key] else ([] if key != "metadata" else {})
    for key in ("created_at", "updated_at", "last_accessed"):
        data[key] = from_timestamp(data[key])
    return MemoryItem.from_dict(data)


@_decoded("message")
def _message_from_row(row: sqlite3.Row) -> Message:
    return Message(role=Role(row["role"]), content=row["content"],
                   created_at=_ts(row["created_at"]), id=row["id"],
                   session_id=row["session_id"], seq=row["seq"], name=row["name"],
                   tool_calls=tuple(json.loads(row["tool_calls"])) if row["tool_calls"] else (),
                   tool_call_id=row["tool_call_id"],
                   metadata=json.loads(row["metadata"]) if row["metadata"] else {})


@_decoded("job")
def _job_from_row(row: sqlite3.Row) -> Job:
    return Job(row["id"], row["namespace"], row["user_id"], row["kind"], json.loads(row["payload"]),
               row["status"], row["attempts"], _ts(row["created_at"]), _ts(row["updated_at"]),
               row["worker"], from_timestamp(row["lease_until"]), row["last_error"],
               json.loads(row["result"]) if row["result"] else None)


@_decoded("session")
def _session_from_row(row: sqlite3.Row) -> SessionRecord:
    return SessionRecord(row["session_id"], _ts(row["created_at"]), _ts(row["updated_at"]),
                         row["status"], row["version"], row["n"], row["summary"],
                         row["message_range_end"],
                         json.loads(row["metadata"]) if row["metadata"] else {}, row["next_seq"])


def filter_clauses(filters: Filters, table: str, *, session_col: str = "session_id",
                   layers: bool = True, turns_pass_status: bool = True) -> tuple[list[str], list[object]]:
    """SQL conditions (and parameters) for ``filters`` on ``table`` — the index's ``docs``
    (raw turns have no status and pass the status filter) or ``items``. The one
    filter-to-SQL builder of this backend."""
    where: list[str] = []
    params: list[object] = []

    def any_of(column: str, values: list[object]) -> None:
        where.append(f"{table}.{column} IN ({','.join('?' * len(values))})")
        params.extend(values)

    if filters.statuses:
        any_of("status", [s.value for s in filters.statuses])
        if turns_pass_status:
            where[-1] = f"({table}.status IS NULL OR {where[-1]})"
    if layers and filters.layers:
        any_of("layer", [x.value for x in filters.layers])
    if filters.kinds:
        any_of("kind", [k.value for k in filters.kinds])
    if filters.session_ids:
        any_of(session_col, list(filters.session_ids))
    if filters.since:
        where.append(f"{table}.created_at >= ?")
        params.append(filters.since.timestamp())
    if filters.until:
        where.append(f"{table}.created_at <= ?")
        params.append(filters.until.timestamp())
    for tag in filters.tags:
        where.append(f"EXISTS (SELECT 1 FROM json_each({table}.tags) WHERE value = ?)")
        params.append(tag)
    return where, params


_OF_SESSION = ("FROM messages m WHERE m.namespace=s.namespace AND m.user_id=s.user_id AND "
               "m.session_id=s.session_id")
_SESSION_SELECT = (f"SELECT s.*, (SELECT COUNT(*) {_OF_SESSION}) AS n, "
                   f"(SELECT COALESCE(MAX(m.seq), -1) + 1 {_OF_SESSION}) AS next_seq FROM sessions s ")
_MESSAGE_INSERT = ("INSERT INTO messages (id, namespace, user_id, session_id, seq, role, content, "
                   "name, tool_calls, tool_call_id, created_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)")


def _message_row(scope: Scope, session_id: str, m: Message) -> tuple[object, ...]:
    return (m.id, scope.namespace, scope.user_id, session_id, m.seq, m.role.value, m.content,
            m.name, dumps(list(m.tool_calls)) if m.tool_calls else None, m.tool_call_id,
            m.created_at.timestamp(), dumps(dict(m.metadata)))


class SQLiteRows(SQLiteConnection):
    """Everything but the search index (see :class:`~.index.SQLiteIndex`)."""

    # -- the message log --------------------------------------------------------------
    def append_messages(self, scope: Scope, session_id: str, messages: Sequence[Message], *,
                        expected_version: int | None = None) -> list[Message]:
        if not messages:
            return []
        with self.transaction():  # BEGIN IMMEDIATE: the check and the write are one step
            if expected_version is not None:
                found = self._x("SELECT version FROM sessions WHERE namespace=? AND user_id=? AND "
                                "session_id=?", (scope.namespace, scope.user_id, session_id)).fetchone()
                actual = found[0] if found else 0
                if actual != expected_version:
                    raise policy.session_conflict(scope, session_id, expected_version, actual)
            row = self._x("SELECT COALESCE(MAX(seq), -1) FROM messages WHERE namespace=? AND "
                          "user_id=? AND session_id=?",
                          (scope.namespace, scope.user_id, session_id)).fetchone()
            seq = (row[0] if row else -1) + 1
            stored = [Message(role=m.role, content=m.content, created_at=m.created_at,
                              id=m.id or new_id("msg"), session_id=session_id, seq=seq + i,
                              name=m.name, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
                              metadata=m.metadata) for i, m in enumerate(messages)]
            self._insert_many(_MESSAGE_INSERT, [_message_row(scope, session_id, m) for m in stored],
                              taken=policy.message_id_taken)
            first, last = stored[0].created_at.timestamp(), stored[-1].created_at.timestamp()
            self._x("INSERT INTO sessions (namespace, user_id, session_id, created_at, updated_at, "
                    "status, version) VALUES (?,?,?,?,?, 'open', 1) ON CONFLICT(namespace, user_id, "
                    "session_id) DO UPDATE SET updated_at=max(updated_at, excluded.updated_at), "
                    "version=version+1, status='open'",
                    (scope.namespace, scope.user_id, session_id, first, last))
        return stored

    def get_messages(self, scope: Scope, session_id: str, *, start: int = 0,
                     limit: int | None = None) -> list[Message]:
        rows = self._x("SELECT * FROM messages WHERE namespace=? AND user_id=? AND session_id=? "
                       "AND seq>=? ORDER BY seq LIMIT ?",
                       (scope.namespace, scope.user_id, session_id, start,
                        -1 if limit is None else limit)).fetchall()
        return [_message_from_row(r) for r in rows]

    def delete_messages(self, scope: Scope, message_ids: Sequence[str]) -> None:
        if not message_ids:
            return
        with self.transaction():
            self._delete_docs(scope, list(message_ids))
            for chunk in iter_chunks(message_ids):
                self._x(f"DELETE FROM messages WHERE namespace=? AND user_id=? AND id IN "
                        f"({','.join('?' * len(chunk))})", (scope.namespace, scope.user_id, *chunk))

    def idempotent_add(self, scope: Scope, key: str) -> IdempotentAdd | None:
        row = self._x("SELECT key, fingerprint, session_id, message_ids, created_at FROM "
                      "idempotency_keys WHERE namespace=? AND user_id=? AND key=?",
                      (scope.namespace, scope.user_id, key)).fetchone()
        if row is None:
            return None
        return IdempotentAdd(row[0], row[1], row[2], tuple(json.loads(row[3])), _ts(row[4]))

    def record_idempotent_add(self, scope: Scope, record: IdempotentAdd) -> None:
        def taken(detail: object) -> Exception:
            return ConflictError(f"idempotency key {record.key!r} of {scope.user_id!r} was "
                                 "recorded by a concurrent add; retry to get its result")

        with self.transaction():
            self._insert_many("INSERT INTO idempotency_keys (namespace, user_id, key, fingerprint, "
                              "session_id, message_ids, created_at) VALUES (?,?,?,?,?,?,?)",
                              [(scope.namespace, scope.user_id, record.key, record.fingerprint,
                                record.session_id, dumps(list(record.message_ids)),
                                record.created_at.timestamp())], taken=taken)

    # -- session rows -------------------------------------------------------------------
    def list_sessions(self, scope: Scope) -> list[SessionRecord]:
        rows = self._x(_SESSION_SELECT + "WHERE s.namespace=? AND s.user_id=? ORDER BY "
                       "s.created_at, s.session_id", (scope.namespace, scope.user_id)).fetchall()
        return [_session_from_row(r) for r in rows]

    def get_session(self, scope: Scope, session_id: str) -> SessionRecord | None:
        row = self._x(_SESSION_SELECT + "WHERE s.namespace=? AND s.user_id=? AND s.session_id=?",
                      (scope.namespace, scope.user_id, session_id)).fetchone()
        return _session_from_row(row) if row is not None else None

    def update_session(self, scope: Scope, session_id: str, expected_version: int, *,
                       status: str | None = None, summary: str | None = None,
                       message_range_end: int | None = None) -> SessionRecord:
        changes = {k: v for k, v in (("status", status), ("summary", summary),
                                     ("message_range_end", message_range_end)) if v is not None}
        sets = "".join(f"{k}=?, " for k in changes)
        with self.transaction():
            cur = self._x(f"UPDATE sessions SET {sets}version=version+1 WHERE namespace=? AND "
                          "user_id=? AND session_id=? AND version=?",
                          (*changes.values(), scope.namespace, scope.user_id, session_id,
                           expected_version))
            record = self.get_session(scope, session_id)
            if cur.rowcount != 1 or record is None:
                raise policy.session_conflict(scope, session_id, expected_version,
                                              record.version if record else 0)
        return record

    def summary_versions(self, scope: Scope, session_id: str) -> list[SummaryVersion]:
        rows = self._x("SELECT * FROM summary_versions WHERE namespace=? AND user_id=? AND "
                       "session_id=? ORDER BY version", (scope.namespace, scope.user_id,
                                                         session_id)).fetchall()
        return [SummaryVersion(r["version"], r["range_start"], r["range_end"], json.loads(r["summary"]),
                               _ts(r["at"])) for r in rows]

    def add_summary_version(self, scope: Scope, session_id: str, version: SummaryVersion) -> None:
        with self.transaction():
            self._x("INSERT OR REPLACE INTO summary_versions (namespace, user_id, session_id, "
                    "version, range_start, range_end, summary, at) VALUES (?,?,?,?,?,?,?,?)",
                    (scope.namespace, scope.user_id, session_id, version.version, version.range_start,
                     version.range_end, dumps(dict(version.summary)), version.at.timestamp()))

    def delete_summary_versions(self, scope: Scope, session_id: str) -> None:
        with self.transaction():
            self._x("DELETE FROM summary_versions WHERE namespace=? AND user_id=? AND session_id=?",
                    (scope.namespace, scope.user_id, session_id))

    def idle_sessions(self, before: datetime, limit: int = 100) -> list[tuple[Scope, str]]:
        rows = self._x("SELECT namespace, user_id, session_id FROM sessions WHERE "
                       "status != 'archived' AND updated_at < ? ORDER BY updated_at LIMIT ?",
                       (before.timestamp(), limit)).fetchall()
        return [(Scope(r[1], r[0]), r[2]) for r in rows]

    def restore_session(self, scope: Scope, session: SessionRecord,
                        messages: Sequence[Message]) -> None:
        def taken(detail: object) -> Exception:
            return policy.message_id_taken(f"session {session.session_id!r} of user "
                                           f"{scope.user_id!r} or one of its messages: {detail}; "
                                           "restore into an empty store")

        with self.transaction():
            self._insert_many(
                "INSERT INTO sessions (namespace, user_id, session_id, created_at, updated_at, "
                "status, version, summary, message_range_end, metadata) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(scope.namespace, scope.user_id, session.session_id,
                  session.created_at.timestamp(), session.updated_at.timestamp(), session.status,
                  session.version, session.summary, session.message_range_end,
                  dumps(dict(session.metadata)))], taken=taken)
            self._insert_many(_MESSAGE_INSERT, [_message_row(scope, session.session_id, m)
                                                for m in messages], taken=taken)

    # -- items ----------------------------------------------------------------------
    def write_item(self, scope: Scope, item: MemoryItem, version: ItemVersion) -> None:
        policy.check_owner(scope, item)
        with self.transaction():
            self._x("INSERT INTO items (id, namespace, user_id, kind, content, subject, "
                    "attribute, value, confidence, importance, status, version, supersedes, "
                    "created_at, updated_at, last_accessed, access_count, source_session_id, "
                    "source_message_ids, tags, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                    "ON CONFLICT(namespace, user_id, id) DO UPDATE SET kind=excluded.kind, "
                    "content=excluded.content, subject=excluded.subject, attribute=excluded.attribute, "
                    "value=excluded.value, confidence=excluded.confidence, importance=excluded.importance, "
                    "status=excluded.status, version=excluded.version, supersedes=excluded.supersedes, "
                    "created_at=excluded.created_at, updated_at=excluded.updated_at, "
                    "last_accessed=excluded.last_accessed, access_count=excluded.access_count, "
                    "source_session_id=excluded.source_session_id, "
                    "source_message_ids=excluded.source_message_ids, tags=excluded.tags, "
                    "metadata=excluded.metadata",
                    (item.id, scope.namespace, scope.user_id, item.kind.value, item.content,
                     item.subject, item.attribute, item.value, item.confidence, item.importance,
                     item.status.value, item.version, item.supersedes, item.created_at.timestamp(),
                     item.updated_at.timestamp(),
                     item.last_accessed.timestamp() if item.last_accessed else None,
                     item.access_count, item.source_session_id, dumps(list(item.source_message_ids)),
                     dumps(list(item.tags)), dumps(dict(item.metadata))))
            self._x("INSERT INTO item_versions (item_id, namespace, user_id, version, op, actor, "
                    "reason, at, before, after) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (item.id, scope.namespace, scope.user_id, version.version, version.op,
                     version.actor, version.reason, version.at.timestamp(),
                     dumps(version.before) if version.before is not None else None,
                     dumps(version.after) if version.after is not None else None))

    def get_item(self, scope: Scope, item_id: str) -> MemoryItem:
        row = self._x("SELECT * FROM items WHERE namespace=? AND user_id=? AND id=?",
                      (scope.namespace, scope.user_id, item_id)).fetchone()
        if row is None:
            raise policy.item_not_found(scope, item_id)
        return _item_from_row(row)

    def list_items(self, scope: Scope, filters: Filters, *, limit: int = 100,
                   offset: int = 0) -> list[MemoryItem]:
        where, params = filter_clauses(filters, "items", session_col="source_session_id",
                                       layers=False, turns_pass_status=False)
        where, params = ["namespace=?", "user_id=?", *where], [scope.namespace, scope.user_id, *params]
        rows = self._x(f"SELECT * FROM items WHERE {' AND '.join(where)} "
                       "ORDER BY created_at DESC, id LIMIT ? OFFSET ?", (*params, limit, offset)).fetchall()
        return [_item_from_row(r) for r in rows]

    def list_slot_items(self, scope: Scope, prefix: str, *, among: int) -> list[MemoryItem]:
        key = (scope.namespace, scope.user_id)
        rows = self._x("SELECT * FROM items WHERE namespace=? AND user_id=? AND substr(attribute, 1, ?)=? "
                       "AND id IN (SELECT id FROM items WHERE namespace=? AND user_id=? AND status=? "
                       "ORDER BY created_at DESC, id LIMIT ?) ORDER BY created_at DESC, id",
                       (*key, len(prefix), prefix, *key, Status.ACTIVE.value, among)).fetchall()
        return [_item_from_row(r) for r in rows]

    def history(self, scope: Scope, item_id: str) -> list[ItemVersion]:
        rows = self._x("SELECT * FROM item_versions WHERE namespace=? AND user_id=? AND item_id=? "
                       "ORDER BY id", (scope.namespace, scope.user_id, item_id)).fetchall()
        if not rows:
            self.get_item(scope, item_id)  # raises NotFoundError with a helpful message
        return [ItemVersion(r["item_id"], r["version"], r["op"], r["actor"], r["reason"],
                            _ts(r["at"]), json.loads(r["before"]) if r["before"] else None,
                            json.loads(r["after"]) if r["after"] else None) for r in rows]

    def delete_item(self, scope: Scope, item_id: str) -> None:
        with self.transaction():
            self.get_item(scope, item_id)
            self._delete_docs(scope, [item_id])
            self._x("DELETE FROM item_versions WHERE namespace=? AND user_id=? AND item_id=?",
                    (scope.namespace, scope.user_id, item_id))
            self._x("DELETE FROM items WHERE namespace=? AND user_id=? AND id=?",
                    (scope.namespace, scope.user_id, item_id))

    def items_state(self, scope: Scope) -> tuple[int, int, int]:
        key = (scope.namespace, scope.user_id)
        row = self._x("SELECT (SELECT count(*) FROM items WHERE namespace=? AND user_id=?), "
                      "(SELECT coalesce(sum(version), 0) FROM items WHERE namespace=? AND user_id=?), "
                      "(SELECT coalesce(max(id), 0) FROM item_versions WHERE namespace=? AND user_id=?)",
                      (*key, *key, *key)).fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])

    def touch_items(self, scope: Scope, item_ids: Sequence[str], at: datetime) -> None:
        if not item_ids:
            return
        marks = ",".join("?" * len(item_ids))
        with self.transaction():
            self._x(f"UPDATE items SET last_accessed=?, access_count=access_count+1 WHERE "
                    f"namespace=? AND user_id=? AND id IN ({marks})",
                    (at.timestamp(), scope.namespace, scope.user_id, *item_ids))

    # -- durable jobs ---------------------------------------------------------------
    def enqueue_job(self, scope: Scope, kind: str, payload: Mapping[str, Any]) -> Job:
        now = utcnow()
        job = Job(new_id("job"), scope.namespace, scope.user_id, kind, dict(payload), "pending",
                  0, now, now)
        with self.transaction():
            self._x("INSERT INTO jobs (id, namespace, user_id, kind, payload, status, attempts, "
                    "created_at, updated_at) VALUES (?,?,?,?,?,'pending',0,?,?)",
                    (job.id, scope.namespace, scope.user_id, kind, dumps(job.payload),
                     now.timestamp(), now.timestamp()))
        return job

    def claim_job(self, worker: str, lease_s: float, *, now: datetime | None = None,
                  max_attempts: int | None = None,
                  dead_workers: Sequence[str] = ()) -> Job | None:
        at = (now or utcnow()).timestamp()
        dead = list(dead_workers)
        held = "j.lease_until < ?" + (f" OR j.worker IN ({','.join('?' * len(dead))})" if dead else "")
        with self.transaction():
            while True:
                # only the head of each user's queue is runnable: one job per user at a time
                row = self._x(
                    f"SELECT * FROM jobs j WHERE (j.status='pending' OR (j.status='running' AND "
                    f"({held}))) AND NOT EXISTS (SELECT 1 FROM jobs o WHERE "
                    "o.namespace=j.namespace AND o.user_id=j.user_id AND o.status IN "
                    "('pending','running') AND o.seq < j.seq) ORDER BY j.seq LIMIT 1",
                    (at, *dead)).fetchone()
                if row is None:
                    return None
                key = (row["namespace"], row["user_id"], row["id"])
                if row["status"] == "running" and max_attempts is not None \
                        and row["attempts"] >= max_attempts:
                    self._x("UPDATE jobs SET status='failed', last_error=?, lease_until=NULL, "
                            "updated_at=? WHERE namespace=? AND user_id=? AND id=?",
                            (policy.abandoned(row["attempts"], row["worker"]), at, *key))
                    continue
                self._x("UPDATE jobs SET status='running', worker=?, lease_until=?, "
                        "attempts=attempts+1, updated_at=? WHERE namespace=? AND user_id=? AND id=?",
                        (worker, at + lease_s, at, *key))
                claimed = self._x("SELECT * FROM jobs WHERE namespace=? AND user_id=? AND id=?",
                                  key).fetchone()
                assert claimed is not None
                return _job_from_row(claimed)

    def renew_job(self, job: Job, lease_s: float) -> bool:
        with self.transaction():
            cur = self._x("UPDATE jobs SET lease_until=? WHERE namespace=? AND user_id=? AND id=? "
                          "AND status='running' AND worker=?",
                          (utcnow().timestamp() + lease_s, job.namespace, job.user_id, job.id,
                           job.worker))
        return cur.rowcount > 0

    def finish_job(self, job: Job, *, error: str | None = None, max_attempts: int = 3,
                   result: Mapping[str, Any] | None = None) -> None:
        now = utcnow().timestamp()
        with self.transaction():
            key = (job.namespace, job.user_id, job.id)
            row = self._x("SELECT status, worker, attempts FROM jobs WHERE namespace=? AND "
                          "user_id=? AND id=?", key).fetchone()
            if row is None or row["status"] != "running" or row["worker"] != job.worker:
                raise policy.not_claimed(job.id, job.worker)
            self._x("UPDATE jobs SET status=?, last_error=?, result=?, updated_at=?, "
                    "lease_until=NULL WHERE namespace=? AND user_id=? AND id=?",
                    (policy.job_outcome(row["attempts"], max_attempts, error), error,
                     dumps(dict(result)) if result is not None else None, now, *key))

    def list_jobs(self, scope: Scope | None = None, *, statuses: Sequence[str] = (),
                  created_before: datetime | None = None, limit: int = 1000) -> list[Job]:
        where: list[str] = ["1=1"]
        params: list[object] = []
        if scope is not None:
            where.append("namespace=? AND user_id=?")
            params += [scope.namespace, scope.user_id]
        if statuses:
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            params += list(statuses)
        if created_before is not None:
            where.append("created_at <= ?")
            params.append(created_before.timestamp())
        rows = self._x(f"SELECT * FROM jobs WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?",
                       (*params, limit)).fetchall()
        return [_job_from_row(r) for r in rows]

    def restore_jobs(self, scope: Scope, jobs: Sequence[Job]) -> None:
        def taken(detail: object) -> Exception:
            return policy.message_id_taken(f"a job of user {scope.user_id!r} is already stored "
                                           f"({detail}); restore into an empty store")

        with self.transaction():
            self._insert_many(
                "INSERT INTO jobs (id, namespace, user_id, kind, payload, status, attempts, "
                "worker, lease_until, created_at, updated_at, last_error, result) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(j.id, scope.namespace, scope.user_id, j.kind, dumps(dict(j.payload)), j.status,
                  j.attempts, j.worker, j.lease_until.timestamp() if j.lease_until else None,
                  j.created_at.timestamp(), j.updated_at.timestamp(), j.last_error,
                  dumps(dict(j.result)) if j.result is not None else None)
                 for j in jobs], taken=taken)

    # -- users ----------------------------------------------------------------------
    def list_users(self) -> list[Scope]:
        rows = self._x("SELECT namespace, user_id FROM sessions UNION SELECT namespace, user_id "
                       "FROM items ORDER BY 1, 2").fetchall()
        return [Scope(r[1], r[0]) for r in rows]

    def _delete_user_rows(self, scope: Scope, *, messages: bool) -> None:
        key = (scope.namespace, scope.user_id)
        if messages:
            self._x("DELETE FROM messages WHERE namespace=? AND user_id=?", key)
            self._x("DELETE FROM sessions WHERE namespace=? AND user_id=?", key)
            self._x("DELETE FROM summary_versions WHERE namespace=? AND user_id=?", key)
            self._x("DELETE FROM idempotency_keys WHERE namespace=? AND user_id=?", key)
        for table in ("item_versions", "items", "jobs", "profile_versions", "llm_usage"):
            self._x(f"DELETE FROM {table} WHERE namespace=? AND user_id=?", key)

    # -- metadata and profile ---------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self._x("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self._x("INSERT OR REPLACE INTO meta (key, value) VALUES (?,?)", (key, value))

    def profile_versions(self, scope: Scope) -> list[ProfileVersion]:
        rows = self._x("SELECT * FROM profile_versions WHERE namespace=? AND user_id=? "
                       "ORDER BY version", (scope.namespace, scope.user_id)).fetchall()
        return [ProfileVersion(r["version"], json.loads(r["data"]), r["actor"], r["reason"],
                               _ts(r["at"])) for r in rows]

    def add_profile_version(self, scope: Scope, version: ProfileVersion) -> None:
        def taken(detail: object) -> Exception:
            return ConflictError(f"profile version {version.version} of {scope.user_id!r} "
                                 "exists already; reload the profile and retry")

        with self.transaction():
            self._insert_many("INSERT INTO profile_versions (namespace, user_id, version, data, "
                              "actor, reason, at) VALUES (?,?,?,?,?,?,?)",
                              [(scope.namespace, scope.user_id, version.version,
                                dumps(dict(version.data)), version.actor, version.reason,
                                version.at.timestamp())], taken=taken)

    # -- LLM usage --------------------------------------------------------------------
    def record_llm_usage(self, scope: Scope, record: UsageRecord) -> None:
        with self.transaction():
            self._x("INSERT INTO llm_usage (namespace, user_id, at, model, purpose, prompt_tokens, "
                    "completion_tokens, latency_s, error) VALUES (?,?,?,?,?,?,?,?,?)",
                    (scope.namespace, scope.user_id, record.at.timestamp(), record.model,
                     record.purpose, record.prompt_tokens, record.completion_tokens,
                     record.latency_s, record.error))

    def llm_usage(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        rows = self._x("SELECT * FROM llm_usage WHERE namespace=? AND user_id=? AND at >= ? "
                       "ORDER BY id", (scope.namespace, scope.user_id,
                                       since.timestamp() if since else 0.0)).fetchall()
        return [UsageRecord(_ts(r["at"]), r["model"], r["purpose"], r["prompt_tokens"],
                            r["completion_tokens"], r["latency_s"], r["error"]) for r in rows]

    def version_actors(self, scope: Scope) -> dict[str, int]:
        rows = self._x("SELECT actor, COUNT(*) FROM item_versions WHERE namespace=? AND user_id=? "
                       "GROUP BY actor", (scope.namespace, scope.user_id)).fetchall()
        return {r[0]: int(r[1]) for r in rows}
