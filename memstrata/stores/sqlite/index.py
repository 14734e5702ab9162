"""The SQLite search index: documents, their terms and vectors, a change log, mirrors.

* Durable: ``docs`` (what a hit shows, and each document's *term record*, see
  :mod:`memstrata.stores.lexical`), ``docs_fts`` (the analysed tokens, FTS5),
  ``doc_vectors`` (float32 vectors and their int8 copies, see
  :mod:`memstrata.stores.dense`).
* ``index_log``: every index write appends the store row ids it wrote or deleted, in the
  same transaction. SQLite has one writer at a time, so log order is commit order: a
  process that has applied the log up to ``seq`` applies exactly the entries after it —
  its own writes and every other process's — re-reading those rows as they are now.
* Searches run on a per-scope :class:`~memstrata.stores.mirror.ScopeMirror`, built from
  the stored term records and int8 vectors in one vectorised pass (no tokenising), kept
  in a :class:`~memstrata.stores.mirror.MirrorCache` under the store's memory budget,
  and brought up to date from the log before each search. Dense search re-scores the
  int8 pass's best rows exactly from the float32 vectors.
* Inside a transaction that has written to a scope's index, a search applies only the
  log entries committed before that transaction (the transaction's own rows show once it
  commits; a scope not loaded yet is read for that one search, own rows included).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import StoreError
from ...types import Filters, Layer, Scope, dumps, from_timestamp
from .. import policy
from ..base import DocInfo, IndexDoc, iter_chunks
from ..dense import quantize, rescore_depth
from ..lexical import encode_terms
from ..mirror import DocRecord, MirrorCache, ScopeMirror
from .connection import explain
from .dialect import SQLiteDialect

__all__ = ["SQLiteIndex"]

log = logging.getLogger("memstrata")

_LOGGED = "logged"  # a pending entry: (scope key, _LOGGED, first log seq this transaction wrote)
_CHECKPOINT = "checkpoint"  # (scope key, _CHECKPOINT, scope): snapshot the scope after commit
_LAYERS = {layer.value: layer for layer in Layer}
_RECORDS = "SELECT rowid, id, visible, terms, q8 FROM doc_records WHERE namespace=? AND user_id=?"


class SQLiteIndex(SQLiteDialect):
    """The :class:`~memstrata.stores.base.SearchIndex` and
    :class:`~memstrata.stores.base.VectorCache` seams on one SQLite file."""

    #: log entries kept per scope; older ones are pruned, and a process that fell
    #: further behind than that rebuilds the scope's mirror
    log_keep = 20_000
    #: a mirror folds its appended rows into its sorted base once they pass
    #: max(fold_min, fold_ratio × rows)
    fold_min, fold_ratio = 1024, 0.05
    #: a sync with more changes than max(fold_min, reload_ratio × rows) rebuilds instead
    reload_ratio = 0.3
    #: scopes with at least this many documents keep a snapshot of their mirror, written
    #: again once max(snapshot_every, snapshot_ratio × its rows) entries were logged after it.
    #: snapshot_ratio = fold_ratio: from 82k rows on (where 5% passes snapshot_every) what
    #: a fresh process applies on load never passes the fold threshold, so it is appended
    #: to the tail, not re-sorted with the whole scope (at 10%, a 100k load folded 6,300
    #: rows: 0.2 s of its first search)
    snapshot_min, snapshot_every, snapshot_ratio = 2000, 4096, 0.05
    #: snapshot blobs are split into chunks of at most this many bytes
    chunk_bytes = 64 * 2**20

    def __init__(self, path: str, *, timeout: float = 30.0,
                 index_memory_mb: float = 512.0) -> None:
        super().__init__(path, timeout=timeout)
        self._mirrors = MirrorCache(int(index_memory_mb * 2**20))
        self._commits = 0  # this connection's commits (data_version counts the others')

    def setup(self) -> list[str]:
        applied = super().setup()
        if self._x("SELECT value FROM meta WHERE key = 'index_records'").fetchone() is None:
            self._backfill()
        return applied

    def _backfill(self) -> None:
        """Mirror records for documents written before they existed, once: ``meta``'s
        ``index_records`` records it done in the same transaction, so a fill cut short
        runs again at the next open (filling in only what is missing, and logging it)."""
        missing = ("SELECT d.rowid, d.namespace, d.user_id, d.id, d.status, f.body, f.context, "
                   "v.vec FROM docs d JOIN docs_fts f ON f.rowid = d.rowid LEFT JOIN "
                   "doc_vectors v ON v.rowid = d.rowid LEFT JOIN doc_records r ON "
                   "r.rowid = d.rowid WHERE r.rowid IS NULL")
        if self._x(missing + " LIMIT 1").fetchone() is None:
            try:  # nothing to fill in: a read-only file stays readable
                with self.transaction():
                    self._x("INSERT OR REPLACE INTO meta (key, value) VALUES ('index_records', 'filled')")
            except StoreError as exc:
                log.info("index records complete; not recorded (%s)", exc)
            return
        with self.transaction():
            rows = self._x(missing).fetchall()
            self._many("INSERT INTO doc_records (rowid, namespace, user_id, id, visible, terms, q8) "
                       "VALUES (?,?,?,?,?,?,?)",
                       [(r[0], r[1], r[2], r[3], policy.visible_by_default(r[4]),
                         encode_terms(r[5], r[6]),
                         None if r[7] is None else quantize(policy.vector(r[7], r[0])))
                        for r in rows])
            scopes: dict[tuple[str, str], list[int]] = {}
            for r in rows:
                scopes.setdefault((r[1], r[2]), []).append(int(r[0]))
            for (ns, uid), rowids in scopes.items():
                self._log(Scope(uid, ns), rowids)
            self._x("INSERT OR REPLACE INTO meta (key, value) VALUES ('index_records', 'filled')")

    # -- writing ----------------------------------------------------------------------
    def _scalar(self, sql: str, params: Sequence[object] = ()) -> Any:
        row = self._x(sql, params).fetchone()
        assert row is not None, sql
        return row[0]

    def _log(self, scope: Scope, rowids: Sequence[int]) -> None:
        """Append the change log (inside the caller's transaction) and prune it."""
        if not rowids:
            return
        ns, uid = scope.namespace, scope.user_id
        self._many("INSERT INTO index_log (namespace, user_id, doc) VALUES (?,?,?)",
                   [(ns, uid, r) for r in rowids])
        # one writer at a time: the entries just added are consecutive
        first = int(self._scalar("SELECT last_insert_rowid()")) - len(rowids) + 1
        if not any(p[0] == scope.key and p[1] == _LOGGED for p in self._pending):
            self._pending.append((scope.key, _LOGGED, first))
        # a scope's first state row (a new user, or one forgotten and written again) has
        # its floor at its first entry: a mirror from before — of the forgotten user,
        # whose log entries went with it — is older than that and is rebuilt
        row = self._x("INSERT INTO index_state (namespace, user_id, generation, floor, logged, "
                      "since_snapshot) VALUES (?,?,0,?,?,?) ON CONFLICT(namespace, user_id) DO UPDATE "
                      "SET logged = logged + excluded.logged, since_snapshot = since_snapshot + "
                      "excluded.since_snapshot RETURNING logged, since_snapshot, snapshot_rows",
                      (ns, uid, first, len(rowids), len(rowids))).fetchone()
        assert row is not None
        logged, since, rows = row
        if since > self._snapshot_due(rows) and rows + since >= self.snapshot_min:
            self._pending.append((scope.key, _CHECKPOINT, scope))
        if logged > 2 * self.log_keep:
            cut = self._scalar("SELECT seq FROM index_log WHERE namespace=? AND user_id=? ORDER BY "
                               "seq DESC LIMIT 1 OFFSET ?", (ns, uid, self.log_keep))
            self._x("DELETE FROM index_log WHERE namespace=? AND user_id=? AND seq <= ?",
                    (ns, uid, cut))
            self._x("UPDATE index_state SET floor=?, logged=? WHERE namespace=? AND user_id=?",
                    (cut, self.log_keep, ns, uid))

    def index(self, scope: Scope, docs: Sequence[IndexDoc]) -> None:
        if not docs:
            return
        ns, uid = scope.namespace, scope.user_id
        with self.transaction():
            written = []
            for doc in docs:
                row = self._x("SELECT rowid FROM docs WHERE namespace=? AND user_id=? AND id=?",
                              (ns, uid, doc.id)).fetchone()
                values = (doc.layer.value, doc.text, doc.session_id, doc.kind, doc.status,
                          doc.importance, doc.created_at.timestamp(), dumps(list(doc.tags)))
                if row is None:
                    cur = self._x("INSERT INTO docs (namespace, user_id, id, layer, text, session_id, "
                                  "kind, status, importance, created_at, tags) "
                                  "VALUES (?,?,?,?,?,?,?,?,?,?,?)", (ns, uid, doc.id, *values))
                    rowid = cur.lastrowid
                else:
                    rowid = row[0]
                    self._x("UPDATE docs SET layer=?, text=?, session_id=?, kind=?, status=?, "
                            "importance=?, created_at=?, tags=? WHERE rowid=? AND namespace=? AND "
                            "user_id=?", (*values, rowid, ns, uid))
                    self._x("DELETE FROM docs_fts WHERE rowid=?", (rowid,))
                self._x("INSERT INTO docs_fts (rowid, scope, body, context) VALUES (?,?,?,?)",
                        (rowid, scope.key, doc.body, doc.context))
                q8 = None
                if doc.vector is not None:
                    vec = np.asarray(doc.vector, dtype=np.float32).reshape(-1)
                    q8 = quantize(vec)
                    self._x("INSERT OR REPLACE INTO doc_vectors (rowid, namespace, user_id, dim, vec) "
                            "VALUES (?,?,?,?,?)", (rowid, ns, uid, vec.shape[0], vec.tobytes()))
                self._x("INSERT INTO doc_records (rowid, namespace, user_id, id, visible, terms, q8) "
                        "VALUES (?,?,?,?,?,?,?) ON CONFLICT(rowid) DO UPDATE SET id=excluded.id, "
                        "visible=excluded.visible, terms=excluded.terms, "
                        "q8=COALESCE(excluded.q8, doc_records.q8)",
                        (rowid, ns, uid, doc.id, policy.visible_by_default(doc.status),
                         encode_terms(doc.body, doc.context), q8))
                written.append(int(rowid))  # type: ignore[arg-type]
            self._log(scope, written)

    def set_vectors(self, scope: Scope, vectors: Mapping[str, np.ndarray]) -> None:
        if not vectors:
            return
        ns, uid = scope.namespace, scope.user_id
        with self.transaction():
            written = []
            for doc_id, vector in sorted(vectors.items()):
                row = self._x("SELECT rowid FROM docs WHERE namespace=? AND user_id=? AND id=?",
                              (ns, uid, doc_id)).fetchone()
                if row is None:
                    continue
                vec = np.asarray(vector, dtype=np.float32).reshape(-1)
                self._x("INSERT OR REPLACE INTO doc_vectors (rowid, namespace, user_id, dim, vec) "
                        "VALUES (?,?,?,?,?)", (row[0], ns, uid, vec.shape[0], vec.tobytes()))
                self._x("UPDATE doc_records SET q8=? WHERE rowid=? AND namespace=? AND user_id=?",
                        (quantize(vec), row[0], ns, uid))
                written.append(int(row[0]))
            self._log(scope, written)

    def _delete_docs(self, scope: Scope, ids: Sequence[str]) -> None:
        gone = []
        for doc_id in ids:
            row = self._x("SELECT rowid FROM docs WHERE namespace=? AND user_id=? AND id=?",
                          (scope.namespace, scope.user_id, doc_id)).fetchone()
            if row is None:
                continue
            self._x("DELETE FROM docs_fts WHERE rowid=?", (row[0],))
            self._x("DELETE FROM doc_vectors WHERE rowid=?", (row[0],))
            self._x("DELETE FROM doc_records WHERE rowid=?", (row[0],))
            self._x("DELETE FROM docs WHERE rowid=?", (row[0],))
            gone.append(int(row[0]))
        if gone:
            self._drop_snapshot(scope)
        self._log(scope, gone)

    def _delete_scope_docs(self, scope: Scope, *, semantic_only: bool) -> None:
        key = (scope.namespace, scope.user_id)
        if semantic_only:
            ids = [r[0] for r in self._x("SELECT id FROM docs WHERE namespace=? AND user_id=? "
                                         "AND layer='semantic'", key)]
            self._delete_docs(scope, ids)
            return
        self._x("DELETE FROM docs_fts WHERE rowid IN (SELECT rowid FROM docs WHERE "
                "namespace=? AND user_id=?)", key)
        self._x("DELETE FROM doc_vectors WHERE namespace=? AND user_id=?", key)
        self._x("DELETE FROM doc_records WHERE namespace=? AND user_id=?", key)
        self._x("DELETE FROM docs WHERE namespace=? AND user_id=?", key)
        self._x("DELETE FROM index_snapshots WHERE namespace=? AND user_id=?", key)
        # the scope's log and state go too (they name the user): a mirror of another
        # process finds no state row and rebuilds (see _mirror_for)
        self._x("DELETE FROM index_log WHERE namespace=? AND user_id=?", key)
        self._x("DELETE FROM index_state WHERE namespace=? AND user_id=?", key)
        self._mirrors.drop(scope.key)

    def _drop_snapshot(self, scope: Scope) -> None:
        """Delete a scope's snapshot with the documents being deleted, in their
        transaction: a forgotten document's terms and vector must not outlive it there
        (the snapshot is written again after commit)."""
        key = (scope.namespace, scope.user_id)
        if self._x("DELETE FROM index_snapshots WHERE namespace=? AND user_id=?", key).rowcount:
            self._pending.append((scope.key, _CHECKPOINT, scope))
        self._x("UPDATE index_state SET snapshot_seq=0, snapshot_rows=0 WHERE namespace=? AND "
                "user_id=?", key)

    # -- the mirrors ------------------------------------------------------------------
    def _records(self, scope: Scope, rowids: Sequence[int] | None = None) -> list[DocRecord]:
        """Stored mirror records of a scope (all, or those of ``rowids``), in row id order."""
        params = [scope.namespace, scope.user_id]
        chunks: list[list[int] | None] = [None] if rowids is None else list(iter_chunks(rowids))
        out: list[DocRecord] = []
        with self._lock:
            for chunk in chunks:
                where = "" if chunk is None else f" AND rowid IN ({','.join('?' * len(chunk))})"
                try:
                    cursor = self._conn.cursor()
                    cursor.row_factory = None  # plain tuples: a scope can be 100k rows
                    out += cursor.execute(_RECORDS + where + " ORDER BY rowid",
                                          (*params, *(chunk or ()))).fetchall()
                except sqlite3.Error as exc:
                    raise explain(exc, self.path) from exc
        return out

    def _horizon(self, scope: Scope) -> int | None:
        """Inside a transaction that wrote this scope's log: the last entry committed
        before it (entries from there on are this transaction's own, not yet committed)."""
        firsts = [int(p[2]) for p in self._pending  # type: ignore[call-overload]
                  if p[0] == scope.key and p[1] == _LOGGED]
        return min(firsts) - 1 if firsts else None

    def _snapshot_due(self, rows: int) -> int:
        return max(self.snapshot_every, int(self.snapshot_ratio * rows))

    def _mirror_for(self, scope: Scope) -> ScopeMirror:
        """The scope's mirror with every committed change applied (under the lock)."""
        ns, uid = scope.namespace, scope.user_id
        horizon = self._horizon(scope)
        cap = "" if horizon is None else f" AND seq <= {int(horizon)}"
        mirror = self._mirrors.get(scope.key)
        # nothing committed anywhere since the last look: no query needed
        version = (int(self._scalar("PRAGMA data_version")), self._commits)
        if mirror is not None and horizon is None and mirror.checked == version:
            return mirror
        state = self._x("SELECT floor, snapshot_seq, since_snapshot, snapshot_rows FROM index_state "
                        "WHERE namespace=? AND user_id=?", (ns, uid)).fetchone()
        if mirror is not None and (state is None or state[0] > mirror.seq):
            mirror = None  # log entries it still needed were pruned, or the scope forgotten
        if mirror is None and horizon is None:
            mirror = self._load(scope, state)
        if mirror is None:
            return self._transient(scope, cap)
        reload_at = max(self.fold_min, int(self.reload_ratio * mirror.rows))
        changes = self._x(f"SELECT seq, doc FROM index_log WHERE namespace=? AND user_id=? AND "
                          f"seq > ?{cap} ORDER BY seq LIMIT ?",
                          (ns, uid, mirror.seq, reload_at + 1)).fetchall()
        if not changes:
            if horizon is None:
                mirror.checked = version
            return mirror
        if horizon is not None:  # rows read now may hold this transaction's own writes
            return self._transient(scope, cap)
        if len(changes) > reload_at:
            mirror = self._build(scope)
        else:
            rowids = [int(c[1]) for c in changes]
            docs = {d[0]: d for d in self._records(scope, sorted(set(rowids)))}
            mirror.apply(int(changes[-1][0]), rowids, docs)
            if mirror.tail_rows > max(self.fold_min, int(self.fold_ratio * mirror.rows)):
                mirror = mirror.compacted()
        mirror.checked = version
        self._mirrors.put(scope.key, mirror)
        return mirror

    def _transient(self, scope: Scope, cap: str) -> ScopeMirror:
        """For a search inside a transaction that wrote this scope: a mirror of what
        this connection reads now (the transaction's own rows included, which may yet
        roll back), for this search only."""
        seq = self._scalar(f"SELECT COALESCE(max(seq), 0) FROM index_log WHERE namespace=? AND "
                           f"user_id=?{cap}", (scope.namespace, scope.user_id))
        return ScopeMirror.build(int(seq), self._records(scope))

    def _build(self, scope: Scope) -> ScopeMirror:
        """A mirror from the stored records: the log position first, then the rows, so
        that a write committed in between is applied again from the log (idempotent)."""
        seq = self._scalar("SELECT COALESCE(max(seq), 0) FROM index_log WHERE namespace=? AND "
                           "user_id=?", (scope.namespace, scope.user_id))
        return ScopeMirror.build(int(seq), self._records(scope))

    def _load(self, scope: Scope, state: sqlite3.Row | None) -> ScopeMirror:
        """A scope's mirror from its snapshot when it has a usable one (the log since it
        is applied by the caller), else built from the records — and then snapshotted
        when the scope is large."""
        if state is not None and state[3] and state[1] >= state[0] \
                and state[2] <= max(self.fold_min, int(self.reload_ratio * state[3])):
            parts = self._read_snapshot(scope)
            if parts is not None:
                mirror = ScopeMirror.from_parts(parts)
                self._mirrors.put(scope.key, mirror)
                return mirror
        mirror = self._build(scope)
        self._mirrors.put(scope.key, mirror)
        if mirror.rows >= self.snapshot_min and self._depth == 0:
            self._write_snapshot(scope, mirror)
        return mirror

    def _read_snapshot(self, scope: Scope) -> dict[str, bytes] | None:
        """The snapshot's parts, read in one statement (so from one committed state)."""
        chunks: dict[str, list[bytes]] = {}
        for part, _, data in self._x("SELECT part, chunk, data FROM index_snapshots WHERE "
                                     "namespace=? AND user_id=? ORDER BY part, chunk",
                                     (scope.namespace, scope.user_id)):
            chunks.setdefault(part, []).append(data)
        if "meta" not in chunks:
            return None
        return {part: pieces[0] if len(pieces) == 1 else b"".join(pieces)
                for part, pieces in chunks.items()}

    def _write_snapshot(self, scope: Scope, mirror: ScopeMirror) -> None:
        """Store ``mirror`` (compacted) as the scope's snapshot, in a transaction of its
        own that does not wait for the write lock: when another writer holds it, or the
        file is read-only, the snapshot waits for a later write."""
        if mirror.tail_rows or len(mirror) != mirror.rows:
            mirror = mirror.compacted()
            self._mirrors.put(scope.key, mirror)
        ns, uid = scope.namespace, scope.user_id
        parts = mirror.to_parts()
        rows = [(ns, uid, name, i, data[start:start + self.chunk_bytes])
                for name, data in parts.items()
                for i, start in enumerate(range(0, max(len(data), 1), self.chunk_bytes))]
        with self._lock:
            wait = self._scalar("PRAGMA busy_timeout")
            self._x("PRAGMA busy_timeout=0")
            try:
                with self.transaction():
                    self._x("DELETE FROM index_snapshots WHERE namespace=? AND user_id=?", (ns, uid))
                    self._many("INSERT INTO index_snapshots (namespace, user_id, part, chunk, data) "
                               "VALUES (?,?,?,?,?)", rows)
                    since = self._scalar("SELECT count(*) FROM index_log WHERE namespace=? AND "
                                         "user_id=? AND seq > ?", (ns, uid, mirror.seq))
                    self._x("INSERT INTO index_state (namespace, user_id, generation, snapshot_seq, "
                            "snapshot_rows, since_snapshot) VALUES (?,?,0,?,?,?) ON CONFLICT"
                            "(namespace, user_id) DO UPDATE SET snapshot_seq=excluded.snapshot_seq, "
                            "snapshot_rows=excluded.snapshot_rows, "
                            "since_snapshot=excluded.since_snapshot",
                            (ns, uid, mirror.seq, mirror.rows, since))
            except StoreError as exc:
                log.info("index snapshot of %r not written now (%s); a later write retries", uid, exc)
            finally:
                self._x(f"PRAGMA busy_timeout={int(wait)}")

    def _after_commit(self) -> None:
        """Snapshot the scopes whose log grew past their snapshot, once committed."""
        due = {p[0]: p[2] for p in self._pending if p[1] == _CHECKPOINT}
        self._commits += 1
        super()._after_commit()
        for scope in due.values():
            assert isinstance(scope, Scope)
            mirror = self._mirror_for(scope)
            state = self._x("SELECT since_snapshot, snapshot_rows FROM index_state WHERE "
                            "namespace=? AND user_id=?", (scope.namespace, scope.user_id)).fetchone()
            stale = state is None or state[0] > self._snapshot_due(state[1]) or not state[1]
            if stale and len(mirror) >= self.snapshot_min:
                self._write_snapshot(scope, mirror)

    def index_memory(self) -> dict[str, int]:
        """What the in-process search index holds now: scopes, bytes (as the budget
        counts them), the budget, and how many scopes were evicted so far."""
        with self._lock:
            return {"scopes": len(self._mirrors), "bytes": self._mirrors.total,
                    "budget": self._mirrors.budget, "evictions": self._mirrors.evictions}

    # -- searching --------------------------------------------------------------------
    def _allowed(self, scope: Scope, filters: Filters) -> list[int] | None:
        """None when the mirrors' default mask (all turns, active items) is the filter;
        otherwise the row ids the filters allow, resolved in SQL."""
        if policy.default_mask(filters):
            return None
        where, params = self._filter_clauses(filters, "d")
        rows = self._x("SELECT d.rowid FROM docs d WHERE d.namespace=? AND d.user_id=?"
                       + "".join(f" AND {w}" for w in where),
                       (scope.namespace, scope.user_id, *params)).fetchall()
        return [r[0] for r in rows]

    def lexical_search(self, scope: Scope, query: str, filters: Filters, limit: int, *,
                       context_weight: float = 0.3, body_weight: float = 1.0) -> list[tuple[str, float]]:
        terms = policy.query_terms(query, limit)
        if not terms:
            return []
        with self._lock:
            mirror = self._mirror_for(scope)
            mask = mirror.mask(self._allowed(scope, filters))
            return mirror.lexical_search(terms, limit, mask, context_weight=context_weight,
                                         body_weight=body_weight)

    def vector_search(self, scope: Scope, vector: np.ndarray, filters: Filters,
                      limit: int) -> list[tuple[str, float]]:
        if limit <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        with self._lock:
            mirror = self._mirror_for(scope)
            mask = mirror.mask(self._allowed(scope, filters))
            candidates = mirror.vector_candidates(query, rescore_depth(limit), mask)
            # exact cosines from the float32 vectors of the candidates
            found: list[tuple[float, int]] = []
            for chunk in iter_chunks(list(candidates)):
                rows = self._x(f"SELECT rowid, vec FROM doc_vectors WHERE namespace=? AND user_id=? "
                               f"AND rowid IN ({','.join('?' * len(chunk))})",
                               (scope.namespace, scope.user_id, *chunk)).fetchall()
                if rows:
                    matrix = np.stack([policy.vector(r[1], r[0], len(query)) for r in rows])
                    cosines = matrix @ query
                    found += [(-float(c), int(r[0])) for r, c in zip(rows, cosines)]
            found.sort()
            return [(candidates[rowid], -neg) for neg, rowid in found[:limit]]

    def doc_info(self, scope: Scope, ids: Sequence[str]) -> dict[str, DocInfo]:
        out: dict[str, DocInfo] = {}
        for chunk in iter_chunks(ids):
            rows = self._x(f"SELECT id, layer, text, created_at, session_id, kind, status, importance, "
                           f"tags FROM docs WHERE namespace=? AND user_id=? AND id IN "
                           f"({','.join('?' * len(chunk))})",
                           (scope.namespace, scope.user_id, *chunk)).fetchall()
            for r in rows:
                created = from_timestamp(r[3])
                assert created is not None
                out[r[0]] = DocInfo(r[0], _LAYERS[r[1]], r[2], created, r[4], r[5], r[6],
                                    r[7] if r[7] is not None else 0.5,
                                    tuple(json.loads(r[8])) if r[8] and r[8] != "[]" else ())
        return out
