"""The embedded default: everything in one SQLite file.

* WAL journal, ``synchronous=NORMAL``, a busy timeout so several processes can share a
  file; explicit ``BEGIN IMMEDIATE`` transactions (nested ones become savepoints).
* Lexical index: an FTS5 table keeps each document's analysed tokens durable in three
  columns — the scope key, the document's own tokens and its context tokens
  (neighbouring turns, session date). Queries run on a per-scope
  :class:`~memstrata.stores.lexical.LexicalIndex` (FTS5's ``bm25()`` formula, per-user
  statistics) loaded from it on first search: 5× faster than ``bm25()`` at 100k rows.
* Vector index: vectors durable in ``doc_vectors``; each scope's vectors mirrored in a
  :class:`~memstrata.stores.dense.DenseMatrix`.
* Both mirrors are kept in step on every write, after commit. A per-scope generation
  counter, bumped in the same transaction as each index write, tells a process when
  another process changed the index, and it reloads.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConflictError, NotFoundError, StoreError, ValidationError
from ..types import (Filters, ItemVersion, Layer, MemoryItem, Message, Role, Scope, Status,
                     dumps, from_timestamp, new_id, utcnow)
from .base import DocInfo, IndexDoc, Job, ProfileVersion, SessionInfo, SessionRecord, Store
from .dense import DenseMatrix
from .lexical import LexicalIndex
from .migrations import SQLITE_MIGRATIONS

__all__ = ["SQLiteStore"]


def _explain(exc: sqlite3.Error, path: str) -> StoreError:
    text = str(exc)
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{path} is read-only ({text}); fix the file or directory permissions, "
                          "or point memstrata at a writable path")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return StoreError(f"{path} is not a memstrata SQLite database or is corrupt ({text}); "
                          "restore it from a backup or `memstrata export` copy, or use a new path")
    if "locked" in text or "busy" in text:
        return StoreError(f"{path} stayed locked by another writer ({text}); retry, or raise "
                          "the busy timeout")
    if "unable to open" in text:
        return StoreError(f"cannot open {path} ({text}); check that the directory exists and is writable")
    return StoreError(f"SQLite error on {path}: {text}")


def _item_from_row(row: sqlite3.Row) -> MemoryItem:
    data = dict(row)
    for key in ("source_message_ids", "tags", "metadata"):
        data[key] = json.loads(data[key]) if data[key] else ([] if key != "metadata" else {})
    for key in ("created_at", "updated_at", "last_accessed"):
        data[key] = from_timestamp(data[key])
    return MemoryItem.from_dict(data)


def _message_from_row(row: sqlite3.Row) -> Message:
    return Message(role=Role(row["role"]), content=row["content"],
                   created_at=from_timestamp(row["created_at"]), id=row["id"],
                   session_id=row["session_id"], seq=row["seq"], name=row["name"],
                   tool_calls=tuple(json.loads(row["tool_calls"])) if row["tool_calls"] else (),
                   tool_call_id=row["tool_call_id"],
                   metadata=json.loads(row["metadata"]) if row["metadata"] else {})


def _job_from_row(row: sqlite3.Row) -> Job:
    return Job(row["id"], row["namespace"], row["user_id"], row["kind"], json.loads(row["payload"]),
               row["status"], row["attempts"], from_timestamp(row["created_at"]),
               from_timestamp(row["updated_at"]), row["worker"], from_timestamp(row["lease_until"]),
               row["last_error"])


def _filter_clauses(filters: Filters, table: str, *, session_col: str = "session_id",
                    layers: bool = True, turns_pass_status: bool = True) -> tuple[list[str], list[object]]:
    """SQL conditions (and parameters) for ``filters`` on ``table`` — the index's ``docs``
    (raw turns have no status and pass the status filter) or ``items``."""
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


@dataclass
class _Mirror:
    """A scope's in-process search structures and the index generation they reflect."""

    generation: int
    lexical: LexicalIndex
    dense: DenseMatrix | None


@dataclass(frozen=True, slots=True)
class _Rows:
    """A finished statement's rows (read to the end) and counts."""

    rows: list[sqlite3.Row]
    rowcount: int
    lastrowid: int | None

    def fetchone(self) -> sqlite3.Row | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[sqlite3.Row]:
        return self.rows

    def __iter__(self) -> Iterator[sqlite3.Row]:
        return iter(self.rows)


class SQLiteStore(Store):
    """memstrata on one SQLite file (``sqlite:///path.db``) or in memory (``memory://``)."""

    def __init__(self, path: str, *, timeout: float = 30.0) -> None:
        self.path = path
        self.url = "memory://" if path == ":memory:" else f"sqlite:///{path}"
        if path != ":memory:":
            parent = Path(path).expanduser().resolve().parent
            if not parent.is_dir():
                raise StoreError(f"cannot create {path}: directory {parent} does not exist")
        try:
            self._conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                         check_same_thread=False)
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        except sqlite3.Error as exc:
            raise _explain(exc, path) from exc
        self._lock = threading.RLock()
        self._depth = 0
        self._mirrors: dict[str, _Mirror] = {}
        self._pending_dense: list[tuple[str, str, object]] = []

    # -- lifecycle ---------------------------------------------------------------
    def setup(self) -> list[str]:
        applied: list[str] = []
        with self._lock, self.transaction():
            self._x("CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            done = {r[0] for r in self._x("SELECT name FROM schema_migrations")}
            for name, sql in SQLITE_MIGRATIONS:
                if name in done:
                    continue
                for statement in sql.split(";\n"):
                    if statement.strip():
                        self._x(statement)
                self._x("INSERT INTO schema_migrations VALUES (?, strftime('%s','now'))", (name,))
                applied.append(name)
        return applied

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass

    # Every statement runs under the lock and is read to the end before the lock is
    # released: the connection is shared by the caller's threads and the job worker, and
    # a half-read SELECT left open by one thread holds a read snapshot that makes another
    # thread's BEGIN IMMEDIATE fail at once with "database is locked" (no busy wait).
    def _x(self, sql: str, params: Sequence[object] = ()) -> "_Rows":
        with self._lock:
            try:
                cursor = self._conn.execute(sql, params)
                return _Rows(cursor.fetchall(), cursor.rowcount, cursor.lastrowid)
            except sqlite3.Error as exc:
                raise _explain(exc, self.path) from exc

    def _many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with self._lock:
            try:
                self._conn.executemany(sql, rows)
            except sqlite3.Error as exc:
                raise _explain(exc, self.path) from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            outer = self._depth == 0
            savepoint = f"sp{self._depth}"
            mark = len(self._pending_dense)  # mirror changes made inside this block
            self._x("BEGIN IMMEDIATE" if outer else f"SAVEPOINT {savepoint}")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._conn.rollback()
                    self._pending_dense.clear()
                else:
                    self._x(f"ROLLBACK TO {savepoint}")
                    self._x(f"RELEASE {savepoint}")
                    del self._pending_dense[mark:]
                raise
            self._depth -= 1
            if outer:
                self._x("COMMIT")
                self._apply_pending_dense()
            else:
                self._x(f"RELEASE {savepoint}")

    # -- sessions and messages ------------------------------------------------------
    def append_messages(self, scope: Scope, session_id: str,
                        messages: Sequence[Message]) -> list[Message]:
        if not messages:
            return []
        with self.transaction():
            row = self._x("SELECT COALESCE(MAX(seq), -1) FROM messages WHERE namespace=? AND "
                          "user_id=? AND session_id=?", (scope.namespace, scope.user_id, session_id)).fetchone()
            seq = row[0] + 1
            stored = []
            for m in messages:
                stored.append(Message(role=m.role, content=m.content, created_at=m.created_at,
                                      id=m.id or new_id("msg"), session_id=session_id, seq=seq,
                                      name=m.name, tool_calls=m.tool_calls,
                                      tool_call_id=m.tool_call_id, metadata=m.metadata))
                seq += 1
            try:
                self._conn.executemany(
                    "INSERT INTO messages (id, namespace, user_id, session_id, seq, role, content, "
                    "name, tool_calls, tool_call_id, created_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    [(m.id, scope.namespace, scope.user_id, session_id, m.seq, m.role.value, m.content,
                      m.name, dumps(list(m.tool_calls)) if m.tool_calls else None, m.tool_call_id,
                      m.created_at.timestamp(), dumps(dict(m.metadata))) for m in stored])
            except sqlite3.IntegrityError as exc:
                raise ValidationError(f"message id already stored: {exc}; leave 'id' empty to "
                                      "let memstrata assign one") from exc
            except sqlite3.Error as exc:
                raise _explain(exc, self.path) from exc
            first, last = stored[0].created_at.timestamp(), stored[-1].created_at.timestamp()
            self._x("INSERT INTO sessions (namespace, user_id, session_id, created_at, updated_at, "
                    "status, version) VALUES (?,?,?,?,?, 'open', 1) ON CONFLICT(namespace, user_id, "
                    "session_id) DO UPDATE SET updated_at=max(updated_at, excluded.updated_at), "
                    "version=version+1",
                    (scope.namespace, scope.user_id, session_id, first, last))
        return stored

    def get_messages(self, scope: Scope, session_id: str, *, start: int = 0,
                     limit: int | None = None) -> list[Message]:
        rows = self._x("SELECT * FROM messages WHERE namespace=? AND user_id=? AND session_id=? "
                       "AND seq>=? ORDER BY seq LIMIT ?",
                       (scope.namespace, scope.user_id, session_id, start,
                        -1 if limit is None else limit)).fetchall()
        return [_message_from_row(r) for r in rows]

    def list_sessions(self, scope: Scope) -> list[SessionInfo]:
        rows = self._x("SELECT s.*, (SELECT COUNT(*) FROM messages m WHERE m.namespace=s.namespace "
                       "AND m.user_id=s.user_id AND m.session_id=s.session_id) AS n FROM sessions s "
                       "WHERE namespace=? AND user_id=? ORDER BY created_at",
                       (scope.namespace, scope.user_id)).fetchall()
        return [SessionInfo(r["session_id"], from_timestamp(r["created_at"]),
                            from_timestamp(r["updated_at"]), r["status"], r["version"], r["n"])
                for r in rows]

    # -- items ----------------------------------------------------------------------
    def write_item(self, scope: Scope, item: MemoryItem, version: ItemVersion) -> None:
        if (item.user_id, item.namespace) != (scope.user_id, scope.namespace):
            raise ValidationError("item belongs to another user or namespace")
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
            self._x("UPDATE docs SET status=?, importance=? WHERE namespace=? AND user_id=? AND id=?",
                    (item.status.value, item.importance, scope.namespace, scope.user_id, item.id))
            self._pending_dense.append((scope.key, item.id, item.status.value))
            self._bump(scope)

    def get_item(self, scope: Scope, item_id: str) -> MemoryItem:
        row = self._x("SELECT * FROM items WHERE namespace=? AND user_id=? AND id=?",
                      (scope.namespace, scope.user_id, item_id)).fetchone()
        if row is None:
            raise NotFoundError(f"no memory item {item_id!r} for user {scope.user_id!r}"
                                + (f" in namespace {scope.namespace!r}" if scope.namespace else "")
                                + "; list them with `memstrata list --user ...`")
        return _item_from_row(row)

    def list_items(self, scope: Scope, filters: Filters, *, limit: int = 100,
                   offset: int = 0) -> list[MemoryItem]:
        where, params = _filter_clauses(filters, "items", session_col="source_session_id",
                                        layers=False, turns_pass_status=False)
        where, params = ["namespace=?", "user_id=?", *where], [scope.namespace, scope.user_id, *params]
        rows = self._x(f"SELECT * FROM items WHERE {' AND '.join(where)} "
                       "ORDER BY created_at DESC, id LIMIT ? OFFSET ?", (*params, limit, offset)).fetchall()
        return [_item_from_row(r) for r in rows]

    def history(self, scope: Scope, item_id: str) -> list[ItemVersion]:
        rows = self._x("SELECT * FROM item_versions WHERE namespace=? AND user_id=? AND item_id=? "
                       "ORDER BY id", (scope.namespace, scope.user_id, item_id)).fetchall()
        if not rows:
            self.get_item(scope, item_id)  # raises NotFoundError with a helpful message
        return [ItemVersion(r["item_id"], r["version"], r["op"], r["actor"], r["reason"],
                            from_timestamp(r["at"]),
                            json.loads(r["before"]) if r["before"] else None,
                            json.loads(r["after"]) if r["after"] else None) for r in rows]

    def delete_item(self, scope: Scope, item_id: str) -> None:
        with self.transaction():
            self.get_item(scope, item_id)
            self._delete_docs(scope, [item_id])
            self._x("DELETE FROM item_versions WHERE namespace=? AND user_id=? AND item_id=?",
                    (scope.namespace, scope.user_id, item_id))
            self._x("DELETE FROM items WHERE namespace=? AND user_id=? AND id=?",
                    (scope.namespace, scope.user_id, item_id))

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

    def claim_job(self, worker: str, lease_s: float, *, now: datetime | None = None) -> Job | None:
        at = (now or utcnow()).timestamp()
        with self.transaction():
            # only the head of each user's queue is runnable: one job per user at a time
            row = self._x(
                "SELECT * FROM jobs j WHERE (j.status='pending' OR (j.status='running' AND "
                "j.lease_until < ?)) AND NOT EXISTS (SELECT 1 FROM jobs o WHERE "
                "o.namespace=j.namespace AND o.user_id=j.user_id AND o.status IN "
                "('pending','running') AND o.seq < j.seq) ORDER BY j.seq LIMIT 1", (at,)).fetchone()
            if row is None:
                return None
            key = (row["namespace"], row["user_id"], row["id"])
            self._x("UPDATE jobs SET status='running', worker=?, lease_until=?, "
                    "attempts=attempts+1, updated_at=? WHERE namespace=? AND user_id=? AND id=?",
                    (worker, at + lease_s, at, *key))
            row = self._x("SELECT * FROM jobs WHERE namespace=? AND user_id=? AND id=?",
                          key).fetchone()
        return _job_from_row(row)

    def finish_job(self, job: Job, *, error: str | None = None, max_attempts: int = 3) -> None:
        now = utcnow().timestamp()
        with self.transaction():
            key = (job.namespace, job.user_id, job.id)
            row = self._x("SELECT status, worker, attempts FROM jobs WHERE namespace=? AND "
                          "user_id=? AND id=?", key).fetchone()
            if row is None or row["status"] != "running" or row["worker"] != job.worker:
                raise ConflictError(f"job {job.id} is no longer claimed by {job.worker!r} (its "
                                    "lease expired and another worker took it); its work is "
                                    "discarded here and done there")
            status = "done" if error is None else (
                "failed" if row["attempts"] >= max_attempts else "pending")
            self._x("UPDATE jobs SET status=?, last_error=?, updated_at=?, lease_until=NULL "
                    "WHERE namespace=? AND user_id=? AND id=?", (status, error, now, *key))

    def list_jobs(self, scope: Scope | None = None, *, statuses: Sequence[str] = (),
                  created_before: datetime | None = None, limit: int = 1000) -> list[Job]:
        where, params = ["1=1"], []  # type: ignore[var-annotated]
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

    # -- forgetting -----------------------------------------------------------------
    def delete_messages(self, scope: Scope, message_ids: Sequence[str]) -> None:
        if not message_ids:
            return
        with self.transaction():
            self._delete_docs(scope, list(message_ids))
            for start in range(0, len(message_ids), 500):
                chunk = list(message_ids)[start:start + 500]
                self._x(f"DELETE FROM messages WHERE namespace=? AND user_id=? AND id IN "
                        f"({','.join('?' * len(chunk))})", (scope.namespace, scope.user_id, *chunk))

    def delete_user(self, scope: Scope, *, messages: bool = True) -> None:
        key = (scope.namespace, scope.user_id)
        with self.transaction():
            if messages:
                self._x("DELETE FROM docs_fts WHERE rowid IN (SELECT rowid FROM docs WHERE "
                        "namespace=? AND user_id=?)", key)
                self._x("DELETE FROM doc_vectors WHERE namespace=? AND user_id=?", key)
                self._x("DELETE FROM docs WHERE namespace=? AND user_id=?", key)
                self._x("DELETE FROM messages WHERE namespace=? AND user_id=?", key)
                self._x("DELETE FROM sessions WHERE namespace=? AND user_id=?", key)
                self._x("DELETE FROM index_state WHERE namespace=? AND user_id=?", key)
            else:
                ids = [r[0] for r in self._x("SELECT id FROM docs WHERE namespace=? AND user_id=? "
                                             "AND layer='semantic'", key)]
                self._delete_docs(scope, ids)
            for table in ("item_versions", "items", "jobs", "profile_versions", "llm_usage"):
                self._x(f"DELETE FROM {table} WHERE namespace=? AND user_id=?", key)
            self._pending_dense.append((scope.key, "", "drop"))
            self._bump(scope)

    def forget_vectors(self, model: str, hashes: Sequence[str]) -> None:
        hashes = list(hashes)
        with self.transaction():
            for start in range(0, len(hashes), 500):
                chunk = hashes[start:start + 500]
                self._x(f"DELETE FROM embedding_cache WHERE model=? AND hash IN "
                        f"({','.join('?' * len(chunk))})", (model, *chunk))

    def compact(self) -> None:
        with self._lock:
            # FTS5 keeps deleted terms in old segments until they are merged
            self._x("INSERT INTO docs_fts(docs_fts) VALUES ('optimize')")
            if self.path != ":memory:":
                self._x("VACUUM")
                self._x("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- core profile -----------------------------------------------------------------
    def profile_versions(self, scope: Scope) -> list[ProfileVersion]:
        rows = self._x("SELECT * FROM profile_versions WHERE namespace=? AND user_id=? "
                       "ORDER BY version", (scope.namespace, scope.user_id)).fetchall()
        return [ProfileVersion(r["version"], json.loads(r["data"]), r["actor"], r["reason"],
                               from_timestamp(r["at"])) for r in rows]

    def add_profile_version(self, scope: Scope, version: ProfileVersion) -> None:
        with self.transaction():
            try:
                self._conn.execute(
                    "INSERT INTO profile_versions (namespace, user_id, version, data, actor, "
                    "reason, at) VALUES (?,?,?,?,?,?,?)",
                    (scope.namespace, scope.user_id, version.version, dumps(dict(version.data)),
                     version.actor, version.reason, version.at.timestamp()))
            except sqlite3.IntegrityError as exc:
                raise ConflictError(f"profile version {version.version} of {scope.user_id!r} "
                                    "exists already; reload the profile and retry") from exc

    # -- LLM usage --------------------------------------------------------------------
    def record_llm_usage(self, scope: Scope, record: Any) -> None:
        with self.transaction():
            self._x("INSERT INTO llm_usage (namespace, user_id, at, model, purpose, prompt_tokens, "
                    "completion_tokens, latency_s, error) VALUES (?,?,?,?,?,?,?,?,?)",
                    (scope.namespace, scope.user_id, record.at.timestamp(), record.model,
                     record.purpose, record.prompt_tokens, record.completion_tokens,
                     record.latency_s, record.error))

    def llm_usage(self, scope: Scope, *, since: datetime | None = None) -> list[Any]:
        from ..providers.llm import UsageRecord

        rows = self._x("SELECT * FROM llm_usage WHERE namespace=? AND user_id=? AND at >= ? "
                       "ORDER BY id", (scope.namespace, scope.user_id,
                                       since.timestamp() if since else 0.0)).fetchall()
        return [UsageRecord(from_timestamp(r["at"]), r["model"], r["purpose"], r["prompt_tokens"],
                            r["completion_tokens"], r["latency_s"], r["error"]) for r in rows]

    def version_actors(self, scope: Scope) -> dict[str, int]:
        rows = self._x("SELECT actor, COUNT(*) FROM item_versions WHERE namespace=? AND user_id=? "
                       "GROUP BY actor", (scope.namespace, scope.user_id)).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    # -- index ----------------------------------------------------------------------
    def _bump(self, scope: Scope) -> None:
        self._x("INSERT INTO index_state (namespace, user_id, generation) VALUES (?,?,1) "
                "ON CONFLICT(namespace, user_id) DO UPDATE SET generation=generation+1",
                (scope.namespace, scope.user_id))

    def _generation(self, scope: Scope) -> int:
        row = self._x("SELECT generation FROM index_state WHERE namespace=? AND user_id=?",
                      (scope.namespace, scope.user_id)).fetchone()
        return row[0] if row else 0

    def index(self, scope: Scope, docs: Sequence[IndexDoc]) -> None:
        if not docs:
            return
        with self.transaction():
            for doc in docs:
                row = self._x("SELECT rowid FROM docs WHERE namespace=? AND user_id=? AND id=?",
                              (scope.namespace, scope.user_id, doc.id)).fetchone()
                values = (doc.layer.value, doc.text, doc.session_id, doc.kind, doc.status,
                          doc.importance, doc.created_at.timestamp(), dumps(list(doc.tags)))
                if row is None:
                    cur = self._x("INSERT INTO docs (namespace, user_id, id, layer, text, session_id, "
                                  "kind, status, importance, created_at, tags) "
                                  "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                                  (scope.namespace, scope.user_id, doc.id, *values))
                    rowid = cur.lastrowid
                else:
                    rowid = row[0]
                    self._x("UPDATE docs SET layer=?, text=?, session_id=?, kind=?, status=?, "
                            "importance=?, created_at=?, tags=? WHERE rowid=? AND namespace=? AND "
                            "user_id=?", (*values, rowid, scope.namespace, scope.user_id))
                    self._x("DELETE FROM docs_fts WHERE rowid=?", (rowid,))
                self._x("INSERT INTO docs_fts (rowid, scope, body, context) VALUES (?,?,?,?)",
                        (rowid, scope.key, doc.body, doc.context))
                self._pending_dense.append((scope.key, doc.id, ("tokens", doc.body, doc.context,
                                                                 doc.status)))
                if doc.vector is not None:
                    vec = np.asarray(doc.vector, dtype=np.float32)
                    self._x("INSERT OR REPLACE INTO doc_vectors (rowid, namespace, user_id, dim, vec) "
                            "VALUES (?,?,?,?,?)", (rowid, scope.namespace, scope.user_id, vec.shape[0],
                                                   vec.tobytes()))
                    self._pending_dense.append((scope.key, doc.id, vec))
                if doc.status is not None:
                    self._pending_dense.append((scope.key, doc.id, doc.status))
            self._bump(scope)

    def _delete_docs(self, scope: Scope, ids: Sequence[str]) -> None:
        for doc_id in ids:
            row = self._x("SELECT rowid FROM docs WHERE namespace=? AND user_id=? AND id=?",
                          (scope.namespace, scope.user_id, doc_id)).fetchone()
            if row is None:
                continue
            self._x("DELETE FROM docs_fts WHERE rowid=?", (row[0],))
            self._x("DELETE FROM doc_vectors WHERE rowid=?", (row[0],))
            self._x("DELETE FROM docs WHERE rowid=?", (row[0],))
            self._pending_dense.append((scope.key, doc_id, None))
        self._bump(scope)

    def _apply_pending_dense(self) -> None:
        """After commit: mirror index writes into the loaded per-scope mirrors."""
        pending, self._pending_dense = self._pending_dense, []
        touched: set[str] = set()
        for key, doc_id, change in pending:
            mirror = self._mirrors.get(key)
            if mirror is None:
                continue
            touched.add(key)
            if isinstance(change, str) and change == "drop":
                self._mirrors.pop(key, None)
                touched.discard(key)
            elif change is None:
                mirror.lexical.remove(doc_id)
                if mirror.dense is not None:
                    mirror.dense.remove([doc_id])
            elif isinstance(change, str):
                mirror.lexical.set_visible(doc_id, change == "active")
                if mirror.dense is not None:
                    mirror.dense.set_visible(doc_id, change == "active")
            elif isinstance(change, tuple):
                _, body, context, status = change
                mirror.lexical.upsert(doc_id, body, context, status in (None, "active"))
            else:
                vec = np.asarray(change, dtype=np.float32)
                if mirror.dense is None:
                    mirror.dense = DenseMatrix(vec.shape[0])
                mirror.dense.upsert([doc_id], vec)
        for key in touched & set(self._mirrors):
            self._mirrors[key].generation = -1  # re-read the generation on next search

    def _mirror_for(self, scope: Scope) -> _Mirror:
        """The scope's in-process indexes, (re)loaded when another connection wrote."""
        generation = self._generation(scope)
        mirror = self._mirrors.get(scope.key)
        if mirror is not None and mirror.generation == -1:
            mirror.generation = generation  # our own writes were mirrored already
        if mirror is not None and mirror.generation == generation:
            return mirror
        mirror = _Mirror(generation, LexicalIndex(), None)
        for r in self._x("SELECT d.id, d.status, f.body, f.context FROM docs d JOIN docs_fts f "
                         "ON f.rowid = d.rowid WHERE d.namespace=? AND d.user_id=? ORDER BY d.rowid",
                         (scope.namespace, scope.user_id)):
            mirror.lexical.upsert(r[0], r[2], r[3], r[1] in (None, "active"))
        rows = self._x("SELECT d.id, d.status, v.dim, v.vec FROM doc_vectors v JOIN docs d ON "
                       "d.rowid=v.rowid WHERE v.namespace=? AND v.user_id=? ORDER BY v.rowid",
                       (scope.namespace, scope.user_id)).fetchall()
        if rows:
            dim = rows[0]["dim"]
            mirror.dense = DenseMatrix(dim, generation)
            matrix = np.frombuffer(b"".join(r["vec"] for r in rows),
                                   dtype=np.float32).reshape(len(rows), dim)
            mirror.dense.upsert([r["id"] for r in rows], matrix)
            for r in rows:
                if r["status"] is not None and r["status"] != "active":
                    mirror.dense.set_visible(r["id"], False)
        self._mirrors[scope.key] = mirror
        return mirror

    def _allowed(self, scope: Scope, filters: Filters) -> set[str] | None:
        """None when the mirrors' default mask (all turns, active items) is the filter;
        otherwise the ids the filters allow, resolved in SQL."""
        if filters.is_scope_only and not filters.layers and set(filters.statuses) == {Status.ACTIVE}:
            return None
        where, params = _filter_clauses(filters, "d")
        rows = self._x("SELECT d.id FROM docs d WHERE d.namespace=? AND d.user_id=?"
                       + "".join(f" AND {w}" for w in where),
                       (scope.namespace, scope.user_id, *params)).fetchall()
        return {r[0] for r in rows}

    def lexical_search(self, scope: Scope, query: str, filters: Filters, limit: int, *,
                       context_weight: float = 0.3,
                       body_weight: float = 1.0) -> list[tuple[str, float]]:
        terms = query.split()
        if not terms:
            return []
        with self._lock:
            mirror = self._mirror_for(scope)
            return mirror.lexical.search(terms, limit, context_weight=context_weight,
                                         body_weight=body_weight,
                                         allowed=self._allowed(scope, filters))

    def vector_search(self, scope: Scope, vector: np.ndarray, filters: Filters,
                      limit: int) -> list[tuple[str, float]]:
        with self._lock:
            mirror = self._mirror_for(scope)
            if mirror.dense is None:
                return []
            return mirror.dense.search(vector, limit, self._allowed(scope, filters))

    def doc_info(self, scope: Scope, ids: Sequence[str]) -> dict[str, DocInfo]:
        out: dict[str, DocInfo] = {}
        ids = list(ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            rows = self._x(f"SELECT id, layer, text, created_at, session_id, kind, status, importance, "
                           f"tags FROM docs WHERE namespace=? AND user_id=? AND id IN "
                           f"({','.join('?' * len(chunk))})",
                           (scope.namespace, scope.user_id, *chunk)).fetchall()
            for r in rows:
                out[r[0]] = DocInfo(r[0], Layer(r[1]), r[2], from_timestamp(r[3]), r[4], r[5], r[6],
                                    r[7] if r[7] is not None else 0.5,
                                    tuple(json.loads(r[8])) if r[8] else ())
        return out

    # -- embedding cache ------------------------------------------------------------
    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        hashes = list(hashes)
        for start in range(0, len(hashes), 500):
            chunk = hashes[start:start + 500]
            rows = self._x(f"SELECT hash, vec FROM embedding_cache WHERE model=? AND hash IN "
                           f"({','.join('?' * len(chunk))})", (model, *chunk)).fetchall()
            out.update({r[0]: np.frombuffer(r[1], dtype=np.float32) for r in rows})
        return out

    def cache_vectors(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        with self.transaction():
            self._many("INSERT OR IGNORE INTO embedding_cache (model, hash, vec) VALUES (?,?,?)",
                       [(model, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in vectors.items()])

    def get_meta(self, key: str) -> str | None:
        row = self._x("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self._x("INSERT OR REPLACE INTO meta (key, value) VALUES (?,?)", (key, value))

    # -- users ----------------------------------------------------------------------
    def list_users(self) -> list[Scope]:
        rows = self._x("SELECT namespace, user_id FROM sessions UNION SELECT namespace, user_id "
                       "FROM items ORDER BY 1, 2").fetchall()
        return [Scope(r[1], r[0]) for r in rows]

    # -- export and restore ---------------------------------------------------------
    def export_sessions(self, scope: Scope) -> list[SessionRecord]:
        rows = self._x("SELECT * FROM sessions WHERE namespace=? AND user_id=? ORDER BY session_id",
                       (scope.namespace, scope.user_id)).fetchall()
        return [SessionRecord(r["session_id"], from_timestamp(r["created_at"]),
                              from_timestamp(r["updated_at"]), r["status"], r["version"],
                              r["summary"], r["message_range_end"],
                              json.loads(r["metadata"]) if r["metadata"] else {}) for r in rows]

    def restore_session(self, scope: Scope, session: SessionRecord,
                        messages: Sequence[Message]) -> None:
        with self.transaction():
            try:
                self._conn.execute(
                    "INSERT INTO sessions (namespace, user_id, session_id, created_at, updated_at, "
                    "status, version, summary, message_range_end, metadata) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (scope.namespace, scope.user_id, session.session_id,
                     session.created_at.timestamp(), session.updated_at.timestamp(), session.status,
                     session.version, session.summary, session.message_range_end,
                     dumps(dict(session.metadata))))
                self._conn.executemany(
                    "INSERT INTO messages (id, namespace, user_id, session_id, seq, role, content, "
                    "name, tool_calls, tool_call_id, created_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    [(m.id, scope.namespace, scope.user_id, session.session_id, m.seq, m.role.value,
                      m.content, m.name, dumps(list(m.tool_calls)) if m.tool_calls else None,
                      m.tool_call_id, m.created_at.timestamp(), dumps(dict(m.metadata)))
                     for m in messages])
            except sqlite3.IntegrityError as exc:
                raise ValidationError(f"session {session.session_id!r} of user {scope.user_id!r} "
                                      f"or one of its message ids is already stored ({exc}); "
                                      "restore into an empty store") from exc
            except sqlite3.Error as exc:
                raise _explain(exc, self.path) from exc

    def restore_jobs(self, scope: Scope, jobs: Sequence[Job]) -> None:
        with self.transaction():
            try:
                self._conn.executemany(
                    "INSERT INTO jobs (id, namespace, user_id, kind, payload, status, attempts, "
                    "worker, lease_until, created_at, updated_at, last_error) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    [(j.id, scope.namespace, scope.user_id, j.kind, dumps(dict(j.payload)), j.status,
                      j.attempts, j.worker, j.lease_until.timestamp() if j.lease_until else None,
                      j.created_at.timestamp(), j.updated_at.timestamp(), j.last_error)
                     for j in jobs])
            except sqlite3.IntegrityError as exc:
                raise ValidationError(f"a job of user {scope.user_id!r} is already stored ({exc}); "
                                      "restore into an empty store") from exc
            except sqlite3.Error as exc:
                raise _explain(exc, self.path) from exc


def open_sqlite(url: str) -> SQLiteStore:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or ``memory://``."""
    if url in ("memory://", "sqlite://", "sqlite:///:memory:"):
        path = ":memory:"
    else:
        path = url[len("sqlite:///"):]
        if not path:
            raise StoreError(f"bad SQLite URL {url!r}; use sqlite:///path/to/file.db")
        path = os.path.expanduser(path)
    store = SQLiteStore(path)
    store.setup()
    return store

