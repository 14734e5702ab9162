"""The PostgreSQL search index: BM25 from stored term statistics, pgvector for cosine.

Vectors live in ``docs.embedding`` (pgvector); a partial HNSW index per dimension
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
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ...types import Filters, Layer, Scope
from ..base import DocInfo, IndexDoc
from .connection import PostgresConnection
from .rows import filter_sql

__all__ = ["PostgresIndex"]

_K1, _B = 1.2, 0.75
_TOKEN = re.compile(r"[^\W_]+")  # FTS5 unicode61: runs of letters and digits, case-folded
_HNSW_MAX_DIM = 2000  # pgvector's limit for an HNSW index on `vector`
_LOCK_HNSW = 72_616_002  # advisory lock key: one index builder at a time


def _terms(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class PostgresIndex(PostgresConnection):
    """The :class:`~memstrata.stores.base.SearchIndex` and
    :class:`~memstrata.stores.base.VectorCache` seams on PostgreSQL."""

    #: scopes with at most this many documents are searched exactly (a scan of the
    #: user's rows); larger ones through the HNSW index, falling back to exact when
    #: filtering leaves the index short of ``limit`` hits.
    exact_search_limit = 20_000
    #: documents this process may add before it checks the planner's statistics
    analyze_after = 1000

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8,
                 timeout: float = 10.0) -> None:
        super().__init__(url, min_size=min_size, max_size=max_size, timeout=timeout)
        self._hnsw_dims: set[int] = set()
        self._added_since_analyze = 0

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

    def lexical_search(self, scope: Scope, query: str, filters: Filters, limit: int, *,
                       context_weight: float = 0.3,
                       body_weight: float = 1.0) -> list[tuple[str, float]]:
        terms = sorted(set(_terms(query)))
        if not terms or limit <= 0:
            return []
        extra, params = filter_sql(filters)
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
        extra, params = filter_sql(filters)
        params.update(ns=scope.namespace, uid=scope.user_id, dim=dim, q=vec, limit=limit)
        base = ("FROM docs d WHERE d.namespace=%(ns)s AND d.user_id=%(uid)s AND d.dim=%(dim)s"
                + extra)
        exact = (f"SELECT d.id, 1 - (d.embedding <=> %(q)s) AS cos {base} "
                 "ORDER BY cos DESC, d.seq LIMIT %(limit)s")
        stats = self._x("SELECT n_docs FROM scope_stats WHERE namespace=%s AND user_id=%s",
                        (scope.namespace, scope.user_id))
        if dim <= _HNSW_MAX_DIM and stats and stats[0]["n_docs"] > self.exact_search_limit:
            with self.transaction():
                ef_search = str(min(1000, max(40, 2 * limit)))
                self._x("SELECT set_config('hnsw.ef_search', %s, true)", (ef_search,))
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

    # -- embedding cache (store-wide) -------------------------------------------------
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

    def forget_vectors(self, model: str, hashes: Sequence[str]) -> None:
        self._x("DELETE FROM embedding_cache WHERE model=%s AND hash = ANY(%s)", (model, list(hashes)))

    def _delete_scope_docs(self, scope: Scope, *, semantic_only: bool) -> None:
        key = (scope.namespace, scope.user_id)
        if semantic_only:
            ids = [r["id"] for r in self._x("SELECT id FROM docs WHERE namespace=%s AND "
                                            "user_id=%s AND layer='semantic'", key)]
            self._delete_docs(scope, ids)
            return
        for table in ("postings", "docs", "scope_stats"):
            self._x(f"DELETE FROM {table} WHERE namespace=%s AND user_id=%s", key)
