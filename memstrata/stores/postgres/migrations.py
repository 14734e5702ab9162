"""Named schema migrations of the PostgreSQL backend, applied in order by ``setup()``.

Every table that holds user data has (namespace, user_id) in its primary key, so each
one distributes on Citus by ``user_id`` without changes (see ``docs/postgres.md``).
Three tables are store-wide on purpose: ``schema_migrations``, ``meta`` and
``embedding_cache`` (keyed by model and a hash of tenant, user and text: a reference
table on Citus). Never edit a released migration: append a new one.

The HNSW index is not here: its expression names the embedding dimension, which only
the first vector written tells us, so :class:`~memstrata.stores.postgres.PostgresStore`
creates ``docs_hnsw_<dim>`` on demand.
"""

from __future__ import annotations

from ..sql.schema import shared_tables

__all__ = ["PG_MIGRATIONS"]

_SHARED = shared_tables("postgres")  # the tables both backends create alike

PG_MIGRATIONS: list[tuple[str, str]] = [
    ("0001_initial", """
CREATE EXTENSION IF NOT EXISTS vector;
""" + _SHARED["sessions"] + """;
CREATE TABLE messages (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    seq INTEGER NOT NULL, id TEXT NOT NULL, role TEXT NOT NULL, content TEXT,
    name TEXT, tool_calls JSONB, tool_call_id TEXT, created_at TIMESTAMPTZ NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, user_id, session_id, seq),
    UNIQUE (namespace, user_id, id)
);
CREATE TABLE items (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, content TEXT NOT NULL, subject TEXT, attribute TEXT, value TEXT,
    confidence DOUBLE PRECISION NOT NULL, importance DOUBLE PRECISION NOT NULL,
    status TEXT NOT NULL, version INTEGER NOT NULL, supersedes TEXT,
    created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL,
    last_accessed TIMESTAMPTZ, access_count INTEGER NOT NULL DEFAULT 0,
    source_session_id TEXT, source_message_ids JSONB NOT NULL DEFAULT '[]',
    tags JSONB NOT NULL DEFAULT '[]', metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, user_id, id)
);
CREATE INDEX items_scope ON items (namespace, user_id, status, created_at);
CREATE TABLE item_versions (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, item_id TEXT NOT NULL,
    id BIGINT GENERATED ALWAYS AS IDENTITY, version INTEGER NOT NULL,
    op TEXT NOT NULL, actor TEXT NOT NULL, reason TEXT NOT NULL, at TIMESTAMPTZ NOT NULL,
    before JSONB, after JSONB,
    PRIMARY KEY (namespace, user_id, item_id, id)
);
CREATE TABLE docs (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL,
    seq BIGINT GENERATED ALWAYS AS IDENTITY, layer TEXT NOT NULL, text TEXT NOT NULL,
    session_id TEXT, kind TEXT, status TEXT, importance DOUBLE PRECISION,
    created_at TIMESTAMPTZ NOT NULL, tags TEXT[] NOT NULL DEFAULT '{}',
    doc_len INTEGER NOT NULL, dim INTEGER, embedding vector,
    PRIMARY KEY (namespace, user_id, id)
);
CREATE INDEX docs_session ON docs (namespace, user_id, session_id);
CREATE TABLE postings (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, term TEXT NOT NULL, doc_id TEXT NOT NULL,
    tf_body INTEGER NOT NULL, tf_context INTEGER NOT NULL,
    PRIMARY KEY (namespace, user_id, term, doc_id)
);
CREATE INDEX postings_doc ON postings (namespace, user_id, doc_id);
CREATE TABLE scope_stats (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL,
    n_docs BIGINT NOT NULL, total_len BIGINT NOT NULL,
    PRIMARY KEY (namespace, user_id)
);
""" + _SHARED["meta_and_cache"] + "\n"),
    ("0002_jobs", """
CREATE TABLE jobs (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL,
    seq BIGINT GENERATED ALWAYS AS IDENTITY, kind TEXT NOT NULL,
    payload JSONB NOT NULL DEFAULT '{}', status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0, worker TEXT, lease_until TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL, last_error TEXT,
    PRIMARY KEY (namespace, user_id, id)
);
CREATE INDEX jobs_queue ON jobs (status, namespace, user_id, seq);
""" + _SHARED["profile_versions"] + "\n"),
    ("0003_llm_usage", """
CREATE TABLE llm_usage (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, id BIGINT GENERATED ALWAYS AS IDENTITY,
    at TIMESTAMPTZ NOT NULL, model TEXT NOT NULL, purpose TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
    latency_s DOUBLE PRECISION NOT NULL DEFAULT 0, error TEXT,
    PRIMARY KEY (namespace, user_id, id)
);
CREATE INDEX llm_usage_scope ON llm_usage (namespace, user_id, at)
"""),
    ("0005_p10_service", "\n" + _SHARED["api_keys"] + """;
CREATE TABLE audit_log (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at TIMESTAMPTZ NOT NULL,
    tenant TEXT NOT NULL, key_id TEXT NOT NULL, role TEXT NOT NULL, action TEXT NOT NULL,
    method TEXT NOT NULL, path TEXT NOT NULL, status INTEGER NOT NULL, user_id TEXT,
    target TEXT, request_id TEXT
);
CREATE INDEX audit_log_tenant ON audit_log (tenant, seq);
""" + _SHARED["rate_windows"] + "\n"),
    ("0004_p8_job_result", "\n" + _SHARED["job_result"] + "\n"),
    ("0007_p12_knowledge", "\n" + _SHARED["knowledge"] + "\n"),
    ("0009_p13_pg_index_log", """
ALTER TABLE docs ADD COLUMN terms BYTEA;
ALTER TABLE docs ADD COLUMN q8 BYTEA;
CREATE UNIQUE INDEX docs_scope_seq ON docs (namespace, user_id, seq);
ALTER TABLE scope_stats ADD COLUMN log_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE scope_stats ADD COLUMN log_floor BIGINT NOT NULL DEFAULT 0;
ALTER TABLE scope_stats ADD COLUMN logged BIGINT NOT NULL DEFAULT 0;
CREATE TABLE index_log (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, seq BIGINT NOT NULL, doc BIGINT NOT NULL,
    PRIMARY KEY (namespace, user_id, seq)
)
"""),
    ("0010_p11_summary_versions", "\n" + _SHARED["summary_versions"] + "\n"),
    # add(..., idempotency_key=): a digest of the first request with the key and the ids
    # of its messages (see the SQLite migration); and the epochs a scope's change log
    # starts from when its scope_stats row is created — again after forget_user removed
    # it — so a mirror of the forgotten scope is always behind the new floor
    ("0011_p9_pg_idempotency", "\n" + _SHARED["idempotency_keys"] + """;
CREATE SEQUENCE scope_log_epochs START 1
"""),
    # the embedding cache is keyed by (tenant, user, text) from this migration on, so a cache hit
    # times nobody else's text: the shared entries written before are dropped (a forget
    # computes partitioned keys and would never find them); every indexed document keeps
    # its own vector, so nothing is re-embedded but what is written or searched again
    ("0012_p17_cache_partition", """
DELETE FROM embedding_cache
"""),
]
