"""Named schema migrations, applied in order by ``Store.setup()`` / ``memstrata migrate``.

Every table's key starts with (namespace, user_id) or carries both, so the schema
distributes by user. Never edit a released migration: append a new one.
"""

from __future__ import annotations

from ..sql.schema import shared_tables

__all__ = ["SQLITE_MIGRATIONS"]

_SHARED = shared_tables("sqlite")  # the tables both backends create alike

SQLITE_MIGRATIONS: list[tuple[str, str]] = [
    ("0001_initial", "\n" + _SHARED["sessions"] + """;
CREATE TABLE messages (
    id TEXT NOT NULL, namespace TEXT NOT NULL, user_id TEXT NOT NULL,
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL, content TEXT,
    name TEXT, tool_calls TEXT, tool_call_id TEXT, created_at REAL NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, user_id, id),
    UNIQUE (namespace, user_id, session_id, seq)
);
CREATE TABLE items (
    id TEXT NOT NULL, namespace TEXT NOT NULL, user_id TEXT NOT NULL,
    kind TEXT NOT NULL, content TEXT NOT NULL, subject TEXT, attribute TEXT, value TEXT,
    confidence REAL NOT NULL, importance REAL NOT NULL, status TEXT NOT NULL,
    version INTEGER NOT NULL, supersedes TEXT, created_at REAL NOT NULL,
    updated_at REAL NOT NULL, last_accessed REAL, access_count INTEGER NOT NULL DEFAULT 0,
    source_session_id TEXT, source_message_ids TEXT NOT NULL DEFAULT '[]',
    tags TEXT NOT NULL DEFAULT '[]', metadata TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, user_id, id)
);
CREATE INDEX items_scope ON items (namespace, user_id, status, created_at);
CREATE TABLE item_versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, item_id TEXT NOT NULL,
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, version INTEGER NOT NULL,
    op TEXT NOT NULL, actor TEXT NOT NULL, reason TEXT NOT NULL, at REAL NOT NULL,
    before TEXT, after TEXT
);
CREATE INDEX item_versions_item ON item_versions (namespace, user_id, item_id);
CREATE TABLE docs (
    rowid INTEGER PRIMARY KEY, namespace TEXT NOT NULL, user_id TEXT NOT NULL,
    id TEXT NOT NULL, layer TEXT NOT NULL, text TEXT NOT NULL, session_id TEXT,
    kind TEXT, status TEXT, importance REAL, created_at REAL NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    UNIQUE (namespace, user_id, id)
);
CREATE INDEX docs_session ON docs (namespace, user_id, session_id);
CREATE VIRTUAL TABLE docs_fts USING fts5 (
    scope, body, context, tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TABLE doc_vectors (
    rowid INTEGER PRIMARY KEY, namespace TEXT NOT NULL, user_id TEXT NOT NULL,
    dim INTEGER NOT NULL, vec BLOB NOT NULL
);
CREATE INDEX doc_vectors_scope ON doc_vectors (namespace, user_id);
CREATE TABLE index_state (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, generation INTEGER NOT NULL,
    PRIMARY KEY (namespace, user_id)
);
""" + _SHARED["meta_and_cache"] + "\n"),
    ("0002_jobs", """
CREATE TABLE jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, kind TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}', status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0, worker TEXT, lease_until REAL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, last_error TEXT
);
CREATE INDEX jobs_queue ON jobs (status, namespace, user_id, seq);
""" + _SHARED["profile_versions"] + "\n"),
    ("0003_llm_usage", """
CREATE TABLE llm_usage (
    id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, user_id TEXT NOT NULL,
    at REAL NOT NULL, model TEXT NOT NULL, purpose TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
    latency_s REAL NOT NULL DEFAULT 0, error TEXT
);
CREATE INDEX llm_usage_scope ON llm_usage (namespace, user_id, at)
"""),
    # the index's change log (every index write appends the row ids it wrote, so a
    # process applies exactly what others wrote since its last look); per document what
    # an in-process index loads — its term record and int8 vector — in a table of its
    # own, so loading a user reads neither texts nor float32 vectors (the setup step
    # fills it for documents written before); and per large scope a snapshot of the
    # whole in-process index as a few blobs, with the log position it reflects.
    ("0009_p13_index_log", """
CREATE TABLE doc_records (
    rowid INTEGER PRIMARY KEY, namespace TEXT NOT NULL, user_id TEXT NOT NULL,
    id TEXT NOT NULL, visible INTEGER NOT NULL, terms BLOB NOT NULL, q8 BLOB
);
CREATE INDEX doc_records_scope ON doc_records (namespace, user_id);
CREATE TABLE index_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, user_id TEXT NOT NULL,
    doc INTEGER NOT NULL
);
CREATE INDEX index_log_scope ON index_log (namespace, user_id, seq);
CREATE TABLE index_snapshots (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, part TEXT NOT NULL, chunk INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (namespace, user_id, part, chunk)
);
ALTER TABLE index_state ADD COLUMN floor INTEGER NOT NULL DEFAULT 0;
ALTER TABLE index_state ADD COLUMN logged INTEGER NOT NULL DEFAULT 0;
ALTER TABLE index_state ADD COLUMN snapshot_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE index_state ADD COLUMN snapshot_rows INTEGER NOT NULL DEFAULT 0;
ALTER TABLE index_state ADD COLUMN since_snapshot INTEGER NOT NULL DEFAULT 0
"""),
    ("0005_p10_service", "\n" + _SHARED["api_keys"] + """;
CREATE TABLE audit_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, tenant TEXT NOT NULL,
    key_id TEXT NOT NULL, role TEXT NOT NULL, action TEXT NOT NULL, method TEXT NOT NULL,
    path TEXT NOT NULL, status INTEGER NOT NULL, user_id TEXT, target TEXT, request_id TEXT
);
CREATE INDEX audit_log_tenant ON audit_log (tenant, seq);
""" + _SHARED["rate_windows"] + "\n"),
    ("0004_p8_job_result", "\n" + _SHARED["job_result"] + "\n"),
    ("0007_p12_knowledge", "\n" + _SHARED["knowledge"] + "\n"),
    ("0010_p11_summary_versions", "\n" + _SHARED["summary_versions"] + "\n"),
    # add(..., idempotency_key=): what the first add with a key stored — a digest of its
    # request and the ids of its messages — so a retry returns that instead of storing
    # the messages again; forgotten with the user (and with the messages it names)
    ("0011_p9_idempotency", "\n" + _SHARED["idempotency_keys"] + "\n"),
    # the embedding cache is keyed by (tenant, user, text) from this migration on, so a cache hit
    # times nobody else's text: the shared entries written before are dropped (a forget
    # computes partitioned keys and would never find them); every indexed document keeps
    # its own vector, so nothing is re-embedded but what is written or searched again
    ("0012_p17_cache_partition", """
DELETE FROM embedding_cache
"""),
]
