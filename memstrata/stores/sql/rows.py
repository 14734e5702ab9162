"""The row seams of :mod:`memstrata.stores.base` other than the search index, written once
for both SQL backends: the session log and session rows, items and versions, jobs,
profile versions, metadata and LLM usage, and forgetting a user."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ...errors import ConflictError
from ...types import (Filters, ItemVersion, MemoryItem, Message, Role, Scope, Status, UsageRecord, new_id,
                      utcnow)
from .. import policy
from ..base import IdempotentAdd, Job, ProfileVersion, SessionRecord, SummaryVersion
from .dialect import SQLDialect, decoded, json_out, stored_time, time_out

__all__ = ["SQLRows"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@decoded("memory item")
def _item(row: Any) -> MemoryItem:
    data = dict(row)
    for key in ("source_message_ids", "tags", "metadata"):
        data[key] = json_out(data[key])
    for key in ("created_at", "updated_at", "last_accessed"):
        data[key] = time_out(data[key])
    return MemoryItem.from_dict(data)


@decoded("message")
def _message(row: Any) -> Message:
    return Message(role=Role(row["role"]), content=row["content"], created_at=stored_time(row["created_at"]),
                   id=row["id"], session_id=row["session_id"], seq=row["seq"], name=row["name"],
                   tool_calls=tuple(json_out(row["tool_calls"]) or ()),
                   tool_call_id=row["tool_call_id"], metadata=json_out(row["metadata"]) or {})


@decoded("job")
def _job(row: Any) -> Job:
    return Job(row["id"], row["namespace"], row["user_id"], row["kind"], json_out(row["payload"]) or {},
               row["status"], row["attempts"], stored_time(row["created_at"]), stored_time(row["updated_at"]),
               row["worker"], time_out(row["lease_until"]), row["last_error"],
               json_out(row["result"]))


@decoded("session")
def _session(row: Any) -> SessionRecord:
    return SessionRecord(row["session_id"], stored_time(row["created_at"]), stored_time(row["updated_at"]),
                         row["status"], row["version"], row["n"], row["summary"],
                         row["message_range_end"], json_out(row["metadata"]) or {}, row["next_seq"])


_OF_SESSION = ("FROM messages m WHERE m.namespace=s.namespace AND m.user_id=s.user_id AND "
               "m.session_id=s.session_id")
_SESSION_SELECT = (f"SELECT s.*, (SELECT COUNT(*) {_OF_SESSION}) AS n, "
                   f"(SELECT COALESCE(MAX(m.seq), -1) + 1 {_OF_SESSION}) AS next_seq FROM sessions s ")
_MESSAGE_INSERT = ("INSERT INTO messages (namespace, user_id, session_id, seq, id, role, content, "
                   "name, tool_calls, tool_call_id, created_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)")
_SESSION_INSERT = ("INSERT INTO sessions (namespace, user_id, session_id, created_at, updated_at) "
                   "VALUES (?,?,?,?,?) ON CONFLICT (namespace, user_id, session_id) ")
_ITEM_COLUMNS = ("kind", "content", "subject", "attribute", "value", "confidence", "importance",
                 "status", "version", "supersedes", "created_at", "updated_at", "last_accessed",
                 "access_count", "source_session_id", "source_message_ids", "tags", "metadata")


class SQLRows(SQLDialect):
    """Everything but the search index, the knowledge base and the service's tables."""

    # the search index's own (annotations only)
    _delete_docs: Callable[[Scope, Sequence[str]], None]
    _delete_scope_docs: Callable[..., None]
    _delete_user_knowledge: Callable[..., None]

    def _message_row(self, scope: Scope, session_id: str, m: Message) -> tuple[object, ...]:
        return (scope.namespace, scope.user_id, session_id, m.seq, m.id, m.role.value, m.content,
                m.name, self._json_in([dict(c) for c in m.tool_calls]) if m.tool_calls else None,
                m.tool_call_id, self._time_in(m.created_at), self._json_in(dict(m.metadata)))

    # -- the message log --------------------------------------------------------------
    def append_messages(self, scope: Scope, session_id: str, messages: Sequence[Message], *,
                        expected_version: int | None = None) -> list[Message]:
        if not messages:
            return []
        key = (scope.namespace, scope.user_id, session_id)
        first, last = self._time_in(messages[0].created_at), self._time_in(messages[-1].created_at)
        with self.transaction():
            # the session row is written first: each statement locks it (SQLite: the whole
            # database), so concurrent appends get distinct seqs and a version check
            # cannot be overtaken
            if expected_version == 0:
                done = self._q(_SESSION_INSERT + "DO NOTHING RETURNING version", (*key, first, last))
            elif expected_version is not None:
                done = self._q("UPDATE sessions SET updated_at=CASE WHEN updated_at < ? THEN ? "
                               "ELSE updated_at END, version=version+1, status='open' WHERE "
                               "namespace=? AND user_id=? AND session_id=? AND version=? "
                               "RETURNING version", (last, last, *key, expected_version))
            else:
                done = self._q(_SESSION_INSERT + "DO UPDATE SET updated_at=CASE WHEN "
                               "excluded.updated_at > sessions.updated_at THEN excluded.updated_at "
                               "ELSE sessions.updated_at END, version=sessions.version+1, "
                               "status='open' RETURNING version", (*key, first, last))
            if not done:
                found = self.get_session(scope, session_id)
                assert expected_version is not None
                raise policy.session_conflict(scope, session_id, expected_version,
                                              found.version if found else 0)
            seq = self._q("SELECT COALESCE(MAX(seq), -1) + 1 AS n FROM messages WHERE "
                          "namespace=? AND user_id=? AND session_id=?", key)[0]["n"]
            stored = [Message(role=m.role, content=m.content, created_at=m.created_at,
                              id=m.id or new_id("msg"), session_id=session_id, seq=seq + i,
                              name=m.name, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
                              metadata=m.metadata) for i, m in enumerate(messages)]
            self._qm(_MESSAGE_INSERT, [self._message_row(scope, session_id, m) for m in stored],
                     taken=policy.message_id_taken)
        return stored

    def get_messages(self, scope: Scope, session_id: str, *, start: int = 0,
                     limit: int | None = None) -> list[Message]:
        rows = self._q("SELECT * FROM messages WHERE namespace=? AND user_id=? AND session_id=? "
                       "AND seq>=? ORDER BY seq" + ("" if limit is None else " LIMIT ?"),
                       (scope.namespace, scope.user_id, session_id, start,
                        *(() if limit is None else (limit,))))
        return [_message(r) for r in rows]

    def delete_messages(self, scope: Scope, message_ids: Sequence[str]) -> None:
        if not message_ids:
            return
        with self.transaction():
            self._delete_docs(scope, list(message_ids))
            for clause, ids in self._in_chunks("id", message_ids):
                self._q(f"DELETE FROM messages WHERE namespace=? AND user_id=? AND {clause}",
                        (scope.namespace, scope.user_id, *ids))

    def idempotent_add(self, scope: Scope, key: str) -> IdempotentAdd | None:
        rows = self._q("SELECT key, fingerprint, session_id, message_ids, created_at FROM "
                       "idempotency_keys WHERE namespace=? AND user_id=? AND key=?",
                       (scope.namespace, scope.user_id, key))
        if not rows:
            return None
        r = rows[0]
        return IdempotentAdd(r["key"], r["fingerprint"], r["session_id"],
                             tuple(json_out(r["message_ids"])), stored_time(r["created_at"]))

    def record_idempotent_add(self, scope: Scope, record: IdempotentAdd) -> None:
        def taken(detail: object) -> Exception:
            return ConflictError(f"idempotency key {record.key!r} of {scope.user_id!r} was "
                                 "recorded by a concurrent add; retry to get its result")

        with self.transaction():
            self._qm("INSERT INTO idempotency_keys (namespace, user_id, key, fingerprint, "
                     "session_id, message_ids, created_at) VALUES (?,?,?,?,?,?,?)",
                     [(scope.namespace, scope.user_id, record.key, record.fingerprint,
                       record.session_id, self._json_in(list(record.message_ids)),
                       self._time_in(record.created_at))], taken=taken)

    # -- session rows -------------------------------------------------------------------
    def list_sessions(self, scope: Scope) -> list[SessionRecord]:
        rows = self._q(_SESSION_SELECT + "WHERE s.namespace=? AND s.user_id=? ORDER BY "
                       "s.created_at, s.session_id", (scope.namespace, scope.user_id))
        return [_session(r) for r in rows]

    def get_session(self, scope: Scope, session_id: str) -> SessionRecord | None:
        rows = self._q(_SESSION_SELECT + "WHERE s.namespace=? AND s.user_id=? AND s.session_id=?",
                       (scope.namespace, scope.user_id, session_id))
        return _session(rows[0]) if rows else None

    def update_session(self, scope: Scope, session_id: str, expected_version: int, *,
                       status: str | None = None, summary: str | None = None,
                       message_range_end: int | None = None) -> SessionRecord:
        changes = {k: v for k, v in (("status", status), ("summary", summary),
                                     ("message_range_end", message_range_end)) if v is not None}
        sets = "".join(f"{k}=?, " for k in changes)
        with self.transaction():
            done = self._q(f"UPDATE sessions SET {sets}version=version+1 WHERE namespace=? AND "
                           "user_id=? AND session_id=? AND version=? RETURNING session_id",
                           (*changes.values(), scope.namespace, scope.user_id, session_id,
                            expected_version))
            record = self.get_session(scope, session_id)
            if not done or record is None:
                raise policy.session_conflict(scope, session_id, expected_version,
                                              record.version if record else 0)
        return record

    def idle_sessions(self, before: datetime, limit: int = 100) -> list[tuple[Scope, str]]:
        rows = self._q("SELECT namespace, user_id, session_id FROM sessions WHERE "
                       "status != 'archived' AND updated_at < ? ORDER BY updated_at LIMIT ?",
                       (self._time_in(before), limit))
        return [(Scope(r["user_id"], r["namespace"]), r["session_id"]) for r in rows]

    def summary_versions(self, scope: Scope, session_id: str) -> list[SummaryVersion]:
        rows = self._q("SELECT * FROM summary_versions WHERE namespace=? AND user_id=? AND "
                       "session_id=? ORDER BY version", (scope.namespace, scope.user_id, session_id))
        return [SummaryVersion(r["version"], r["range_start"], r["range_end"], json_out(r["summary"]),
                               stored_time(r["at"])) for r in rows]

    def add_summary_version(self, scope: Scope, session_id: str, version: SummaryVersion) -> None:
        with self._one_write():
            self._q("INSERT INTO summary_versions (namespace, user_id, session_id, version, "
                    "range_start, range_end, summary, at) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT "
                    "(namespace, user_id, session_id, version) DO UPDATE SET "
                    "range_start=excluded.range_start, range_end=excluded.range_end, "
                    "summary=excluded.summary, at=excluded.at",
                    (scope.namespace, scope.user_id, session_id, version.version,
                     version.range_start, version.range_end, self._json_in(dict(version.summary)),
                     self._time_in(version.at)))

    def delete_summary_versions(self, scope: Scope, session_id: str) -> None:
        with self._one_write():
            self._q("DELETE FROM summary_versions WHERE namespace=? AND user_id=? AND session_id=?",
                    (scope.namespace, scope.user_id, session_id))

    def restore_session(self, scope: Scope, session: SessionRecord,
                        messages: Sequence[Message]) -> None:
        def taken(detail: object) -> Exception:
            return policy.message_id_taken(f"session {session.session_id!r} of user "
                                           f"{scope.user_id!r} or one of its messages: {detail}; "
                                           "restore into an empty store")

        with self.transaction():
            self._qm("INSERT INTO sessions (namespace, user_id, session_id, created_at, "
                     "updated_at, status, version, summary, message_range_end, metadata) "
                     "VALUES (?,?,?,?,?,?,?,?,?,?)",
                     [(scope.namespace, scope.user_id, session.session_id,
                       self._time_in(session.created_at), self._time_in(session.updated_at),
                       session.status, session.version, session.summary,
                       session.message_range_end, self._json_in(dict(session.metadata)))],
                     taken=taken)
            self._qm(_MESSAGE_INSERT, [self._message_row(scope, session.session_id, m)
                                       for m in messages], taken=taken)

    # -- items ----------------------------------------------------------------------
    def write_item(self, scope: Scope, item: MemoryItem, version: ItemVersion) -> None:
        policy.check_owner(scope, item)
        updates = ", ".join(f"{c}=excluded.{c}" for c in _ITEM_COLUMNS)
        with self.transaction():
            self._q(f"INSERT INTO items (namespace, user_id, id, {', '.join(_ITEM_COLUMNS)}) "
                    f"VALUES ({','.join('?' * (3 + len(_ITEM_COLUMNS)))}) "
                    f"ON CONFLICT (namespace, user_id, id) DO UPDATE SET {updates}",
                    (scope.namespace, scope.user_id, item.id, item.kind.value, item.content,
                     item.subject, item.attribute, item.value, item.confidence, item.importance,
                     item.status.value, item.version, item.supersedes,
                     self._time_in(item.created_at), self._time_in(item.updated_at),
                     self._time_in(item.last_accessed), item.access_count, item.source_session_id,
                     self._json_in(list(item.source_message_ids)), self._json_in(list(item.tags)),
                     self._json_in(dict(item.metadata))))
            self._q("INSERT INTO item_versions (namespace, user_id, item_id, version, op, actor, "
                    "reason, at, before, after) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (scope.namespace, scope.user_id, item.id, version.version, version.op,
                     version.actor, version.reason, self._time_in(version.at),
                     self._json_in(version.before) if version.before is not None else None,
                     self._json_in(version.after) if version.after is not None else None))

    def get_item(self, scope: Scope, item_id: str) -> MemoryItem:
        rows = self._q("SELECT * FROM items WHERE namespace=? AND user_id=? AND id=?",
                       (scope.namespace, scope.user_id, item_id))
        if not rows:
            raise policy.item_not_found(scope, item_id)
        return _item(rows[0])

    def list_items(self, scope: Scope, filters: Filters, *, limit: int = 100,
                   offset: int = 0) -> list[MemoryItem]:
        where, params = self._filter_clauses(filters, "items", items=True)
        rows = self._q(f"SELECT * FROM items WHERE {' AND '.join(['namespace=?', 'user_id=?', *where])} "
                       "ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
                       (scope.namespace, scope.user_id, *params, limit, offset))
        return [_item(r) for r in rows]

    def list_slot_items(self, scope: Scope, prefix: str, *, among: int) -> list[MemoryItem]:
        key = (scope.namespace, scope.user_id)
        rows = self._q("SELECT * FROM items WHERE namespace=? AND user_id=? AND substr(attribute, 1, ?)=? "
                       "AND id IN (SELECT id FROM items WHERE namespace=? AND user_id=? AND status=? "
                       "ORDER BY created_at DESC, id LIMIT ?) ORDER BY created_at DESC, id",
                       (*key, len(prefix), prefix, *key, Status.ACTIVE.value, among))
        return [_item(r) for r in rows]

    def history(self, scope: Scope, item_id: str) -> list[ItemVersion]:
        rows = self._q("SELECT * FROM item_versions WHERE namespace=? AND user_id=? AND item_id=? "
                       "ORDER BY id", (scope.namespace, scope.user_id, item_id))
        if not rows:
            self.get_item(scope, item_id)  # raises NotFoundError with a helpful message
        return [ItemVersion(r["item_id"], r["version"], r["op"], r["actor"], r["reason"],
                            stored_time(r["at"]), json_out(r["before"]), json_out(r["after"]))
                for r in rows]

    def delete_item(self, scope: Scope, item_id: str) -> None:
        key = (scope.namespace, scope.user_id, item_id)
        with self.transaction():
            self.get_item(scope, item_id)
            self._delete_docs(scope, [item_id])
            self._q("DELETE FROM item_versions WHERE namespace=? AND user_id=? AND item_id=?", key)
            self._q("DELETE FROM items WHERE namespace=? AND user_id=? AND id=?", key)

    def items_state(self, scope: Scope) -> tuple[int, int, int]:
        where = "WHERE namespace=? AND user_id=?"
        row = self._q(f"SELECT (SELECT count(*) FROM items {where}) AS n, "
                      f"(SELECT coalesce(sum(version), 0) FROM items {where}) AS versions, "
                      f"(SELECT coalesce(max(id), 0) FROM item_versions {where}) AS newest",
                      (scope.namespace, scope.user_id) * 3)[0]
        return int(row["n"]), int(row["versions"]), int(row["newest"])

    def touch_items(self, scope: Scope, item_ids: Sequence[str], at: datetime) -> None:
        if not item_ids:
            return
        clause, ids = self._in("id", item_ids)
        with self._one_write():
            self._q(f"UPDATE items SET last_accessed=?, access_count=access_count+1{self._lazy_commit()} "
                    f"WHERE namespace=? AND user_id=? AND {clause}",
                    (self._time_in(at), scope.namespace, scope.user_id, *ids))

    # -- durable jobs ---------------------------------------------------------------
    def enqueue_job(self, scope: Scope, kind: str, payload: Mapping[str, Any]) -> Job:
        now = utcnow()
        job = Job(new_id("job"), scope.namespace, scope.user_id, kind, dict(payload), "pending",
                  0, now, now)
        with self._one_write():
            self._q("INSERT INTO jobs (namespace, user_id, id, kind, payload, status, attempts, "
                    "created_at, updated_at) VALUES (?,?,?,?,?,'pending',0,?,?)",
                    (scope.namespace, scope.user_id, job.id, kind, self._json_in(job.payload),
                     self._time_in(now), self._time_in(now)))
        return job

    def claim_job(self, worker: str, lease_s: float, *, now: datetime | None = None,
                  max_attempts: int | None = None,
                  dead_workers: Sequence[str] = ()) -> Job | None:
        when = now or utcnow()
        held, params = "j.lease_until < ?", [self._time_in(when)]
        if dead_workers:
            clause, workers = self._in("j.worker", dead_workers)
            held, params = f"{held} OR {clause}", params + workers
        with self.transaction():
            self._lock_jobs()
            while True:
                # only the head of each user's queue is runnable: one job per user at a time
                rows = self._q(
                    "SELECT j.namespace, j.user_id, j.id, j.status, j.attempts, j.worker FROM jobs j "
                    f"WHERE (j.status='pending' OR (j.status='running' AND ({held}))) AND NOT EXISTS "
                    "(SELECT 1 FROM jobs o WHERE o.namespace=j.namespace AND o.user_id=j.user_id "
                    "AND o.status IN ('pending','running') AND o.seq < j.seq) ORDER BY j.seq LIMIT 1",
                    params)
                if not rows:
                    return None
                row = rows[0]
                key = (row["namespace"], row["user_id"], row["id"])
                if row["status"] == "running" and max_attempts is not None \
                        and row["attempts"] >= max_attempts:
                    self._q("UPDATE jobs SET status='failed', last_error=?, lease_until=NULL, "
                            "updated_at=? WHERE namespace=? AND user_id=? AND id=?",
                            (policy.abandoned(row["attempts"], row["worker"]), self._time_in(when),
                             *key))
                    continue
                claimed = self._q("UPDATE jobs SET status='running', worker=?, lease_until=?, "
                                  "attempts=attempts+1, updated_at=? WHERE namespace=? AND "
                                  "user_id=? AND id=? RETURNING *",
                                  (worker, self._time_in(when + timedelta(seconds=lease_s)),
                                   self._time_in(when), *key))
                return _job(claimed[0])

    def renew_job(self, job: Job, lease_s: float) -> bool:
        with self._one_write():
            rows = self._q("UPDATE jobs SET lease_until=? WHERE namespace=? AND user_id=? AND id=? "
                           "AND status='running' AND worker=? RETURNING id",
                           (self._time_in(utcnow() + timedelta(seconds=lease_s)), job.namespace,
                            job.user_id, job.id, job.worker))
        return bool(rows)

    def finish_job(self, job: Job, *, error: str | None = None, max_attempts: int = 3,
                   result: Mapping[str, Any] | None = None) -> None:
        key = (job.namespace, job.user_id, job.id)
        with self.transaction():
            rows = self._q("SELECT status, worker, attempts FROM jobs WHERE namespace=? AND "
                           f"user_id=? AND id=?{self._for_update}", key)
            if not rows or rows[0]["status"] != "running" or rows[0]["worker"] != job.worker:
                raise policy.not_claimed(job.id, job.worker)
            self._q("UPDATE jobs SET status=?, last_error=?, result=?, updated_at=?, "
                    "lease_until=NULL WHERE namespace=? AND user_id=? AND id=?",
                    (policy.job_outcome(rows[0]["attempts"], max_attempts, error), error,
                     self._json_in(dict(result)) if result is not None else None,
                     self._time_in(utcnow()), *key))

    def list_jobs(self, scope: Scope | None = None, *, statuses: Sequence[str] = (),
                  created_before: datetime | None = None, limit: int = 1000) -> list[Job]:
        where: list[str] = ["1=1"]
        params: list[object] = []
        if scope is not None:
            where.append("namespace=? AND user_id=?")
            params += [scope.namespace, scope.user_id]
        if statuses:
            clause, values = self._in("status", statuses)
            where.append(clause)
            params += values
        if created_before is not None:
            where.append("created_at <= ?")
            params.append(self._time_in(created_before))
        rows = self._q(f"SELECT * FROM jobs WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?",
                       (*params, limit))
        return [_job(r) for r in rows]

    def restore_jobs(self, scope: Scope, jobs: Sequence[Job]) -> None:
        def taken(detail: object) -> Exception:
            return policy.message_id_taken(f"a job of user {scope.user_id!r} is already stored "
                                           f"({detail}); restore into an empty store")

        with self.transaction():
            self._qm("INSERT INTO jobs (namespace, user_id, id, kind, payload, status, attempts, "
                     "worker, lease_until, created_at, updated_at, last_error, result) "
                     "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     [(scope.namespace, scope.user_id, j.id, j.kind, self._json_in(dict(j.payload)),
                       j.status, j.attempts, j.worker, self._time_in(j.lease_until),
                       self._time_in(j.created_at), self._time_in(j.updated_at), j.last_error,
                       self._json_in(dict(j.result)) if j.result is not None else None)
                      for j in jobs], taken=taken)

    # -- users ----------------------------------------------------------------------
    def list_users(self) -> list[Scope]:
        # the one query that spans users on purpose: on Citus it fans out to every shard
        rows = self._q("SELECT namespace, user_id FROM sessions UNION SELECT namespace, user_id "
                       "FROM items ORDER BY 1, 2")
        return [Scope(r["user_id"], r["namespace"]) for r in rows]

    def delete_user(self, scope: Scope, *, messages: bool = True) -> None:
        with self.transaction():
            self._delete_scope_docs(scope, semantic_only=not messages)
            self._delete_user_rows(scope, messages=messages)
            self._delete_user_knowledge(scope, documents=messages)

    def _delete_user_rows(self, scope: Scope, *, messages: bool) -> None:
        tables = ("messages", "sessions", "summary_versions", "idempotency_keys") if messages else ()
        for table in (*tables, "item_versions", "items", "jobs", "profile_versions", "llm_usage"):
            self._q(f"DELETE FROM {table} WHERE namespace=? AND user_id=?",
                    (scope.namespace, scope.user_id))

    # -- metadata and profile ---------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._q("SELECT value FROM meta WHERE key=?", (key,))
        return rows[0]["value"] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._one_write():
            self._q("INSERT INTO meta (key, value) VALUES (?,?) ON CONFLICT (key) DO UPDATE "
                    "SET value=excluded.value", (key, value))

    def profile_versions(self, scope: Scope) -> list[ProfileVersion]:
        rows = self._q("SELECT * FROM profile_versions WHERE namespace=? AND user_id=? "
                       "ORDER BY version", (scope.namespace, scope.user_id))
        return [ProfileVersion(r["version"], json_out(r["data"]), r["actor"], r["reason"],
                               stored_time(r["at"])) for r in rows]

    def add_profile_version(self, scope: Scope, version: ProfileVersion) -> None:
        def taken(detail: object) -> Exception:
            return ConflictError(f"profile version {version.version} of {scope.user_id!r} "
                                 "exists already; reload the profile and retry")

        with self.transaction():
            self._qm("INSERT INTO profile_versions (namespace, user_id, version, data, actor, "
                     "reason, at) VALUES (?,?,?,?,?,?,?)",
                     [(scope.namespace, scope.user_id, version.version,
                       self._json_in(dict(version.data)), version.actor, version.reason,
                       self._time_in(version.at))], taken=taken)

    # -- LLM usage --------------------------------------------------------------------
    def record_llm_usage(self, scope: Scope, record: UsageRecord) -> None:
        with self._one_write():
            self._q("INSERT INTO llm_usage (namespace, user_id, at, model, purpose, prompt_tokens, "
                    "completion_tokens, latency_s, error) VALUES (?,?,?,?,?,?,?,?,?)",
                    (scope.namespace, scope.user_id, self._time_in(record.at), record.model,
                     record.purpose, record.prompt_tokens, record.completion_tokens,
                     record.latency_s, record.error))

    def llm_usage(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        rows = self._q("SELECT * FROM llm_usage WHERE namespace=? AND user_id=? AND at >= ? "
                       "ORDER BY id", (scope.namespace, scope.user_id, self._time_in(since or _EPOCH)))
        return [UsageRecord(stored_time(r["at"]), r["model"], r["purpose"], r["prompt_tokens"],
                            r["completion_tokens"], r["latency_s"], r["error"]) for r in rows]

    def version_actors(self, scope: Scope) -> dict[str, int]:
        rows = self._q("SELECT actor, COUNT(*) AS n FROM item_versions WHERE namespace=? AND "
                       "user_id=? GROUP BY actor", (scope.namespace, scope.user_id))
        return {r["actor"]: int(r["n"]) for r in rows}
