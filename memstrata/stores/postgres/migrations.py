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

__all__ = ["PG_MIGRATIONS"]

PG_MIGRATIONS: list[tuple[str, str]] = [
    ("0001_initial", """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE sessions (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL,
    status TEXT NOT NULL DEFAULT 'open', version INTEGER NOT NULL DEFAULT 1,
    summary TEXT, message_range_end INTEGER NOT NULL DEFAULT 0,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, user_id, session_id)
);
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
CREATE TABLE meta (
    key TEXT PRIMARY KEY, value TEXT NOT NULL
);
CREATE TABLE embedding_cache (
    model TEXT NOT NULL, hash TEXT NOT NULL, vec BYTEA NOT NULL,
    PRIMARY KEY (model, hash)
)
"""),
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
CREATE TABLE profile_versions (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, version INTEGER NOT NULL,
    data JSONB NOT NULL, actor TEXT NOT NULL, reason TEXT NOT NULL, at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (namespace, user_id, version)
)
"""),
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
    ("0005_p10_service", """
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, role TEXT NOT NULL, name TEXT NOT NULL,
    secret_hash TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL, user_id TEXT, rate_limit INTEGER,
    created_by TEXT, revoked_at TIMESTAMPTZ
);
CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at);
CREATE TABLE audit_log (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at TIMESTAMPTZ NOT NULL,
    tenant TEXT NOT NULL, key_id TEXT NOT NULL, role TEXT NOT NULL, action TEXT NOT NULL,
    method TEXT NOT NULL, path TEXT NOT NULL, status INTEGER NOT NULL, user_id TEXT,
    target TEXT, request_id TEXT
);
CREATE INDEX audit_log_tenant ON audit_log (tenant, seq);
CREATE TABLE rate_windows (
    bucket TEXT NOT NULL, window_min BIGINT NOT NULL, hits INTEGER NOT NULL,
    PRIMARY KEY (bucket, window_min)
)
"""),
    ("0004_p8_job_result", """
ALTER TABLE jobs ADD COLUMN result JSONB
"""),
    ("0007_p12_knowledge", """
CREATE TABLE kb_documents (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL, owner TEXT,
    title TEXT NOT NULL, source TEXT NOT NULL, format TEXT NOT NULL, text TEXT NOT NULL,
    content_hash TEXT NOT NULL, signature JSONB NOT NULL DEFAULT '[]',
    tags JSONB NOT NULL DEFAULT '[]', last_reviewed TIMESTAMPTZ, created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL, metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, user_id, id)
);
CREATE INDEX kb_documents_hash ON kb_documents (namespace, user_id, content_hash);
CREATE TABLE kb_chunks (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL, doc_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL, text TEXT NOT NULL, start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL, content_hash TEXT NOT NULL,
    heading_path JSONB NOT NULL DEFAULT '[]', joins_next BOOLEAN NOT NULL DEFAULT FALSE,
    duplicate_of TEXT, tags JSONB NOT NULL DEFAULT '[]', source TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '', last_reviewed TIMESTAMPTZ, created_at TIMESTAMPTZ NOT NULL,
    recalled INTEGER NOT NULL DEFAULT 0, used INTEGER NOT NULL DEFAULT 0,
    last_recalled TIMESTAMPTZ, last_used TIMESTAMPTZ,
    PRIMARY KEY (namespace, user_id, id)
);
CREATE INDEX kb_chunks_doc ON kb_chunks (namespace, user_id, doc_id, ordinal);
CREATE INDEX kb_chunks_hash ON kb_chunks (namespace, user_id, content_hash);
CREATE TABLE kb_recalls (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    kb_user_id TEXT NOT NULL, chunk_id TEXT NOT NULL, query TEXT NOT NULL, at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (namespace, user_id, session_id, kb_user_id, chunk_id)
);
CREATE INDEX kb_recalls_chunk ON kb_recalls (namespace, kb_user_id, chunk_id)
"""),
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
    ("0010_p11_summary_versions", """
CREATE TABLE summary_versions (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    version INTEGER NOT NULL, range_start INTEGER NOT NULL, range_end INTEGER NOT NULL,
    summary JSONB NOT NULL, at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (namespace, user_id, session_id, version)
)
"""),
    # add(..., idempotency_key=): a digest of the first request with the key and the ids
    # of its messages (see the SQLite migration); and the epochs a scope's change log
    # starts from when its scope_stats row is created — again after forget_user removed
    # it — so a mirror of the forgotten scope is always behind the new floor
    ("0011_p9_pg_idempotency", """
CREATE TABLE idempotency_keys (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, key TEXT NOT NULL,
    fingerprint TEXT NOT NULL, session_id TEXT NOT NULL, message_ids JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (namespace, user_id, key)
);
CREATE SEQUENCE scope_log_epochs START 1
"""),
    # the embedding cache is keyed by (tenant, user, text) since P17, so that a cache hit
    # times nobody else's text: the shared entries written before are dropped (a forget
    # computes partitioned keys and would never find them); every indexed document keeps
    # its own vector, so nothing is re-embedded but what is written or searched again
    ("0012_p17_cache_partition", """
DELETE FROM embedding_cache
"""),
]
