"""The PostgreSQL search index: documents in the server, searched in process.

* Durable: ``docs`` (what a hit shows, the pgvector ``embedding``, and each document's
  *term record* and int8 vector copy — :mod:`memstrata.stores.lexical`,
  :mod:`memstrata.stores.dense`), ``scope_stats`` (per scope: documents, total length,
  the change log's head and floor) and ``index_log`` (the ``docs.seq`` each index write
  wrote or deleted).
* Log order is commit order within a scope: a write takes its log positions from the
  scope's ``scope_stats`` row (``log_seq``), whose row lock it then holds until it
  commits, so a reader that sees position n sees every position before it. A process
  that has applied the log up to n applies exactly the entries after it, in one round
  trip that also reads the rows they name — its own writes and every other process's.
* Searches run on the same :class:`~memstrata.stores.mirror.ScopeMirror` as SQLite's
  (BM25 with FTS5's formula over the term records, an int8 first pass over the vectors)
  kept in a :class:`~memstrata.stores.mirror.MirrorCache` under ``index_memory_mb``;
  dense candidates are re-scored exactly by pgvector (``1 - (embedding <=> q)``) in the
  server. Scores and ties are the SQLite backend's, to floating-point rounding.
* Searches read what is committed: inside a transaction, a search does not see the
  transaction's own index writes until it commits (it reads the log on a connection of
  its own).

The ``postings`` table of earlier versions is no longer written; its rows fill in the
term records of documents stored before them (then deleted with their documents).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg_pool import PoolTimeout

from ...errors import StoreError
from ...types import Filters, Layer, Scope
from .. import policy
from ..base import DocInfo, IndexDoc
from ..dense import quantize, rescore_depth
from ..lexical import encode_terms
from ..mirror import DocRecord, MirrorCache, ScopeMirror
from .connection import explain
from .dialect import PostgresDialect

__all__ = ["PostgresIndex"]

_T = TypeVar("_T")
log = logging.getLogger("memstrata")
_LOCK_BACKFILL = 72_616_013  # advisory lock key: one process fills in the term records
_LAYERS = {layer.value: layer for layer in Layer}

_TOKEN = re.compile(r"[^\W_]+")  # documents' lengths: runs of letters and digits, case-folded

#: a scope's log head and floor, and every entry after a position with the row it names
_SYNC = ("SELECT s.log_seq, s.log_floor, l.seq, l.doc, d.id, d.status, d.terms, d.q8 "
         "FROM (SELECT 1) AS one "
         "LEFT JOIN scope_stats s ON s.namespace=%(ns)s AND s.user_id=%(uid)s "
         "LEFT JOIN index_log l ON l.namespace=%(ns)s AND l.user_id=%(uid)s AND l.seq > %(after)s "
         "LEFT JOIN docs d ON d.namespace=%(ns)s AND d.user_id=%(uid)s AND d.seq = l.doc "
         "ORDER BY l.seq")


def _terms(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class PostgresIndex(PostgresDialect):
    """The :class:`~memstrata.stores.base.SearchIndex` and
    :class:`~memstrata.stores.base.VectorCache` seams on PostgreSQL."""

    #: log entries kept per scope; a process that fell further behind rebuilds the mirror
    log_keep = 20_000
    #: a mirror folds its appended rows into its base past max(fold_min, fold_ratio × rows)
    fold_min, fold_ratio = 1024, 0.05
    #: a sync with more changes than max(fold_min, reload_ratio × rows) rebuilds instead
    reload_ratio = 0.3
    #: a transaction that indexed at least analyze_min documents, more than analyze_ratio
    #: × the rows the planner's statistics know of, ANALYZEs the tables a search reads
    #: once it commits (a bulk load searched before autovacuum came by was planned as an
    #: empty table: doc_info, the re-scoring and the access-statistics UPDATE on items
    #: filtered every row of the user — 50 ms a search at 10k items, 4.6 ms after)
    analyze_min, analyze_ratio = 1000, 0.2

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8,
                 timeout: float = 10.0, index_memory_mb: float = 512.0,
                 durability: str = "full") -> None:
        super().__init__(url, min_size=min_size, max_size=max_size, timeout=timeout,
                         durability=durability)
        self._mirrors = MirrorCache(int(index_memory_mb * 2**20))
        self._mirror_lock = threading.RLock()

    def setup(self) -> list[str]:
        applied = super().setup()
        if not self._x("SELECT value FROM meta WHERE key = 'index_records'"):
            self._backfill()
        return applied

    def _backfill(self) -> None:
        """Term records and int8 vectors for documents stored before they existed (terms
        from their postings), once: ``meta.index_records`` records it done, in the same
        transaction (a backfill cut short runs again at the next open)."""
        with self.transaction():
            self._x("SELECT pg_advisory_xact_lock(%s)", (_LOCK_BACKFILL,))
            if self._x("SELECT value FROM meta WHERE key = 'index_records'"):
                return  # another process filled them in while we waited
            docs = self._x("SELECT namespace, user_id, id, embedding FROM docs WHERE terms IS NULL")
            counts: dict[tuple[str, str, str], tuple[list[str], list[str]]] = {}
            for p in self._x("SELECT namespace, user_id, doc_id, term, tf_body, tf_context "
                             "FROM postings"):
                body, context = counts.setdefault((p["namespace"], p["user_id"], p["doc_id"]), ([], []))
                body += [p["term"]] * p["tf_body"]
                context += [p["term"]] * p["tf_context"]
            rows = []
            for d in docs:
                body, context = counts.get((d["namespace"], d["user_id"], d["id"]), ([], []))
                vec = d["embedding"]  # an untyped `vector` column reads as pgvector's Vector
                vec = vec.to_numpy() if hasattr(vec, "to_numpy") else vec
                rows.append((encode_terms(" ".join(body), " ".join(context)),
                             None if vec is None else quantize(np.asarray(vec, dtype=np.float32)),
                             d["namespace"], d["user_id"], d["id"]))
            self._many("UPDATE docs SET terms=%s, q8=%s WHERE namespace=%s AND user_id=%s AND id=%s",
                       rows)
            self._x("DELETE FROM postings")
            self._x("INSERT INTO meta (key, value) VALUES ('index_records', 'filled')")

    # -- index ----------------------------------------------------------------------
    def _log(self, scope: Scope, seqs: Sequence[int], added: int = 0, grown: int = 0) -> None:
        """Count the scope's documents and append the change log, inside the caller's
        transaction: the scope's row stays locked until it commits (see the module)."""
        ns, uid = scope.namespace, scope.user_id
        n = len(seqs)
        rows = self._x("UPDATE scope_stats SET n_docs=n_docs+%s, total_len=total_len+%s, "
                       "log_seq=log_seq+%s, logged=logged+%s WHERE namespace=%s AND user_id=%s "
                       "RETURNING log_seq, logged", (added, grown, n, n, ns, uid))
        if not rows:
            # a scope's first row (a new user, or one forgotten and written again) starts
            # its log at a fresh epoch, with the floor there: a mirror from before — of
            # the forgotten user, whose log went with it — is behind that and rebuilds
            rows = self._x("INSERT INTO scope_stats (namespace, user_id, n_docs, total_len, "
                           "log_seq, log_floor, logged) SELECT %s,%s,%s,%s, e.base + %s, e.base, %s "
                           "FROM (SELECT nextval('scope_log_epochs') << 32 AS base) AS e "
                           "ON CONFLICT (namespace, user_id) DO UPDATE "
                           "SET n_docs=scope_stats.n_docs+excluded.n_docs, "
                           "total_len=scope_stats.total_len+excluded.total_len, "
                           "log_seq=scope_stats.log_seq+excluded.logged, "
                           "logged=scope_stats.logged+excluded.logged RETURNING log_seq, logged",
                           (ns, uid, added, grown, n, n))
        row = rows[0]
        head, logged = int(row["log_seq"]), int(row["logged"])
        self._many("INSERT INTO index_log (namespace, user_id, seq, doc) VALUES (%s,%s,%s,%s)",
                   [(ns, uid, head - n + 1 + i, s) for i, s in enumerate(seqs)])
        if logged > 2 * self.log_keep:
            floor = head - self.log_keep
            self._x("DELETE FROM index_log WHERE namespace=%s AND user_id=%s AND seq <= %s",
                    (ns, uid, floor))
            self._x("UPDATE scope_stats SET log_floor=%s, logged=%s WHERE namespace=%s AND "
                    "user_id=%s", (floor, self.log_keep, ns, uid))

    def index(self, scope: Scope, docs: Sequence[IndexDoc]) -> None:
        if not docs:
            return
        ns, uid = scope.namespace, scope.user_id
        with self.transaction():
            ids = sorted({d.id for d in docs})
            lens = {r["id"]: r["doc_len"] for r in self._x(
                "SELECT id, doc_len FROM docs WHERE namespace=%s AND user_id=%s AND id = ANY(%s) "
                "ORDER BY id FOR UPDATE", (ns, uid, ids))}
            added, grown, rows = 0, 0, []
            for doc in docs:
                # + 1: FTS5 counts the scope column's token in |D|; so do we, for equal scores
                length = len(_terms(doc.body)) + len(_terms(doc.context)) + 1
                added += doc.id not in lens
                grown += length - lens.get(doc.id, 0)
                lens[doc.id] = length
                vec = None if doc.vector is None else np.asarray(doc.vector, dtype=np.float32).reshape(-1)
                rows.append((ns, uid, doc.id, doc.layer.value, doc.text, doc.session_id, doc.kind,
                             doc.status, doc.importance, doc.created_at, list(doc.tags), length,
                             None if vec is None else vec.shape[0], vec,
                             encode_terms(doc.body, doc.context),
                             None if vec is None else quantize(vec)))
            self._many("INSERT INTO docs (namespace, user_id, id, layer, text, session_id, kind, "
                       "status, importance, created_at, tags, doc_len, dim, embedding, terms, q8) "
                       "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                       "ON CONFLICT (namespace, user_id, id) DO UPDATE SET layer=excluded.layer, "
                       "text=excluded.text, session_id=excluded.session_id, kind=excluded.kind, "
                       "status=excluded.status, importance=excluded.importance, "
                       "created_at=excluded.created_at, tags=excluded.tags, "
                       "doc_len=excluded.doc_len, dim=COALESCE(excluded.dim, docs.dim), "
                       "embedding=COALESCE(excluded.embedding, docs.embedding), "
                       "terms=excluded.terms, q8=COALESCE(excluded.q8, docs.q8)", rows)
            seqs = [int(r["seq"]) for r in self._x(
                "SELECT seq FROM docs WHERE namespace=%s AND user_id=%s AND id = ANY(%s) ORDER BY seq",
                (ns, uid, ids))]
            self._log(scope, seqs, added, grown)
            hooks = self._local.after_commit
            prior = hooks.get("analyze")
            hooks["analyze"] = partial(self._analyze_after, len(docs) + (prior.args[0] if prior else 0))

    def _analyze_after(self, indexed: int) -> None:
        """After a transaction that indexed ``indexed`` documents: ANALYZE ``docs``,
        ``index_log`` and ``items`` (whose access statistics a search updates by id;
        indexed items are written beside their documents) when that many is a bulk load
        (see ``analyze_min``)."""
        if indexed < self.analyze_min:
            return
        try:
            known = self._x("SELECT reltuples FROM pg_class WHERE oid = 'docs'::regclass")
            if indexed > self.analyze_ratio * max(float(known[0]["reltuples"]), 0.0):
                self._x("ANALYZE docs, index_log, items")
        except StoreError as exc:  # e.g. a role that does not own the tables
            log.info("ANALYZE after indexing %d documents not run (%s)", indexed, exc)

    def set_vectors(self, scope: Scope, vectors: Mapping[str, np.ndarray]) -> None:
        if not vectors:
            return
        ns, uid = scope.namespace, scope.user_id
        ids = sorted(vectors)
        flat = [np.asarray(vectors[doc_id], dtype=np.float32).reshape(-1) for doc_id in ids]
        rows = [(vec.shape[0], vec, quantize(vec), ns, uid, doc_id) for doc_id, vec in zip(ids, flat)]
        with self.transaction():
            self._x("SELECT 1 FROM docs WHERE namespace=%s AND user_id=%s AND id = ANY(%s) "
                    "ORDER BY id FOR UPDATE", (ns, uid, ids))
            self._many("UPDATE docs SET dim=%s, embedding=%s, q8=%s WHERE namespace=%s AND "
                       "user_id=%s AND id=%s", rows)
            seqs = [int(r["seq"]) for r in self._x(
                "SELECT seq FROM docs WHERE namespace=%s AND user_id=%s AND id = ANY(%s) ORDER BY seq",
                (ns, uid, ids))]
            if seqs:
                self._log(scope, seqs)

    def _delete_docs(self, scope: Scope, ids: Sequence[str]) -> None:
        ns, uid = scope.namespace, scope.user_id
        gone = self._x("DELETE FROM docs WHERE namespace=%s AND user_id=%s AND id = ANY(%s) "
                       "RETURNING doc_len, seq", (ns, uid, list(ids)))
        if gone:
            self._x("DELETE FROM postings WHERE namespace=%s AND user_id=%s AND doc_id = ANY(%s)",
                    (ns, uid, list(ids)))
            self._log(scope, sorted(int(r["seq"]) for r in gone), -len(gone),
                      -sum(r["doc_len"] for r in gone))

    # -- the mirrors ------------------------------------------------------------------
    def _read(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """``work(conn)`` on a pooled connection of its own (not this thread's
        transaction: what is committed). Reads only, so the pool's check on checkout is
        skipped and a connection found dead (a restarted server) is retried once on a
        fresh, checked one: one round trip less per search step."""
        if self._pool.closed:
            self._pool.open(wait=False)
        for attempt in (0, 1):
            self._local.unchecked = attempt == 0
            try:
                with self._pool.connection() as conn:
                    self._local.unchecked = False
                    return work(conn)
            except psycopg.OperationalError as exc:
                if attempt:
                    raise explain(exc, self.url) from exc
            except (psycopg.Error, PoolTimeout) as exc:
                raise explain(exc, self.url) from exc
            finally:
                self._local.unchecked = False
        raise AssertionError("unreachable")

    def _build(self, scope: Scope, conn: psycopg.Connection[Any]) -> ScopeMirror:
        """A mirror from the stored records: the log head first, then the rows, so that
        a write committed in between is applied again from the log (idempotent)."""
        key = {"ns": scope.namespace, "uid": scope.user_id}
        head = conn.execute("SELECT log_seq FROM scope_stats WHERE namespace=%(ns)s AND "
                            "user_id=%(uid)s", key).fetchone()
        cur = conn.cursor(binary=True)
        cur.execute("SELECT seq, id, status, terms, q8 FROM docs WHERE namespace=%(ns)s AND "
                    "user_id=%(uid)s ORDER BY seq", key)
        docs: list[DocRecord] = [(int(r[0]), r[1], int(policy.visible_by_default(r[2])), r[3], r[4])
                                 for r in cur]
        return ScopeMirror.build(int(head[0]) if head else 0, docs)

    def _changes(self, conn: psycopg.Connection[Any], scope: Scope, after: int) -> list[Any]:
        """The scope's log head and floor, and every entry after ``after`` with the row
        it names (one round trip)."""
        return conn.cursor(binary=True).execute(
            _SYNC, {"ns": scope.namespace, "uid": scope.user_id, "after": after}).fetchall()

    @contextmanager
    def one_search(self, scope: Scope) -> Iterator[None]:
        """One search's reads of ``scope`` on this thread: the first brings its mirror up
        to date, the others use it as it is (two round trips fewer a hybrid search)."""
        passes = self._local.__dict__.setdefault("passes", {})
        if scope.key in passes:  # nested: the outer block decides
            yield
            return
        passes[scope.key] = False
        try:
            yield
        finally:
            passes.pop(scope.key, None)

    def _mirror_for(self, scope: Scope, conn: psycopg.Connection[Any]) -> ScopeMirror:
        """The scope's mirror with every change committed (as ``conn``, a connection of
        its own, reads) applied: one round trip when it is loaded already. Call under
        ``_mirror_lock``."""
        mirror = self._mirrors.get(scope.key)
        if mirror is None:
            mirror = self._build(scope, conn)
            self._mirrors.put(scope.key, mirror)
            return mirror
        passes: dict[str, bool] | None = getattr(self._local, "passes", None)
        if passes is not None and passes.get(scope.key):
            return mirror  # brought up to date by this search's first read
        rows = self._changes(conn, scope, mirror.seq)
        if passes is not None and scope.key in passes:
            passes[scope.key] = True
        head, floor = (int(rows[0][0]), int(rows[0][1])) if rows[0][0] is not None else (0, 0)
        if head == mirror.seq:
            return mirror
        entries = [r for r in rows if r[2] is not None]
        reload_at = max(self.fold_min, int(self.reload_ratio * mirror.rows))
        if head < mirror.seq or floor > mirror.seq or len(entries) > reload_at:
            mirror = self._build(scope, conn)  # the scope was emptied, or the log pruned past us
        else:
            changed = [int(r[3]) for r in entries]
            docs: dict[int, DocRecord] = {
                int(r[3]): (int(r[3]), r[4], int(policy.visible_by_default(r[5])), r[6], r[7])
                for r in entries if r[4] is not None}
            mirror.apply(head, changed, docs)
            if mirror.tail_rows > max(self.fold_min, int(self.fold_ratio * mirror.rows)):
                mirror = mirror.compacted()
        self._mirrors.put(scope.key, mirror)
        return mirror

    def _allowed(self, scope: Scope, filters: Filters,
                 conn: psycopg.Connection[Any]) -> list[int] | None:
        """None when the mirrors' default mask (all turns, active items) is the filter;
        otherwise the ``docs.seq`` the filters allow, resolved in SQL."""
        if policy.default_mask(filters):
            return None
        where, params = self._filter_clauses(filters, "d")
        rows = conn.execute(self._sql("SELECT d.seq FROM docs d WHERE d.namespace=? AND d.user_id=?"
                                      + "".join(f" AND {w}" for w in where)),
                            (scope.namespace, scope.user_id, *params)).fetchall()
        return [int(r[0]) for r in rows]

    def index_memory(self) -> dict[str, int]:
        """What the in-process search index holds now: scopes, bytes (as the budget
        counts them), the budget, and how many scopes were evicted so far."""
        with self._mirror_lock:
            return {"scopes": len(self._mirrors), "bytes": self._mirrors.total,
                    "budget": self._mirrors.budget, "evictions": self._mirrors.evictions}

    # -- searching --------------------------------------------------------------------
    def lexical_search(self, scope: Scope, query: str, filters: Filters, limit: int, *,
                       context_weight: float = 0.3, body_weight: float = 1.0) -> list[tuple[str, float]]:
        terms = policy.query_terms(query, limit)
        if not terms:
            return []

        def search(conn: psycopg.Connection[Any]) -> list[tuple[str, float]]:
            with self._mirror_lock:
                mirror = self._mirror_for(scope, conn)
                mask = mirror.mask(self._allowed(scope, filters, conn))
                return mirror.lexical_search(terms, limit, mask, context_weight=context_weight,
                                             body_weight=body_weight)

        return self._read(search)

    def vector_search(self, scope: Scope, vector: np.ndarray, filters: Filters,
                      limit: int) -> list[tuple[str, float]]:
        if limit <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)

        def search(conn: psycopg.Connection[Any]) -> list[tuple[str, float]]:
            with self._mirror_lock:
                mirror = self._mirror_for(scope, conn)
                mask = mirror.mask(self._allowed(scope, filters, conn))
                candidates = mirror.vector_candidates(query, rescore_depth(limit), mask)
            if not candidates:
                return []
            # exact cosines of the candidates, computed by pgvector in the server
            rows = conn.execute("SELECT seq, 1 - (embedding <=> %s) AS cos FROM docs WHERE "
                                "namespace=%s AND user_id=%s AND seq = ANY(%s) AND dim = %s",
                                (query, scope.namespace, scope.user_id, list(candidates),
                                 query.shape[0])).fetchall()
            found = sorted((-float(r[1]), int(r[0])) for r in rows)
            return [(candidates[seq], -neg) for neg, seq in found[:limit]]

        return self._read(search)

    def doc_info(self, scope: Scope, ids: Sequence[str]) -> dict[str, DocInfo]:
        def read(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return conn.execute("SELECT id, layer, text, created_at, session_id, kind, status, "
                                "importance, tags FROM docs WHERE namespace=%s AND user_id=%s AND "
                                "id = ANY(%s)", (scope.namespace, scope.user_id, list(ids))).fetchall()

        return {r[0]: DocInfo(r[0], _LAYERS[r[1]], r[2], r[3], r[4], r[5], r[6],
                              r[7] if r[7] is not None else 0.5, tuple(r[8] or ()))
                for r in self._read(read)}

    def _delete_scope_docs(self, scope: Scope, *, semantic_only: bool) -> None:
        key = (scope.namespace, scope.user_id)
        if semantic_only:
            ids = [r["id"] for r in self._x("SELECT id FROM docs WHERE namespace=%s AND "
                                            "user_id=%s AND layer='semantic'", key)]
            self._delete_docs(scope, ids)
            return
        # the scope's log and stats go too (they name the user): a process behind finds
        # no head and rebuilds (empty), and a new first row starts a later epoch
        for table in ("postings", "docs", "index_log", "scope_stats"):
            self._x(f"DELETE FROM {table} WHERE namespace=%s AND user_id=%s", key)
        with self._mirror_lock:
            self._mirrors.drop(scope.key)
