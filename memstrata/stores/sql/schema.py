"""The tables both SQL backends create alike, written once over each backend's column types.

A backend's migrations (``sqlite/migrations.py``, ``postgres/migrations.py``) take these
pieces, rendered in its column types (:data:`TYPES`), where they create the table; the
rest of each schema is its own (the search index's tables, and the tables whose keys
differ: SQLite's AUTOINCREMENT rows, PostgreSQL's identity columns and primary keys that
start with the scope, which Citus needs to distribute by user). Each rendered piece is
the text the released migrations always had, so no migration changes.

=========  ================  ==============================
type       SQLite            PostgreSQL
=========  ================  ==============================
``time``   ``REAL`` (epoch)  ``TIMESTAMPTZ``
``json``   ``TEXT``          ``JSONB``
``flag``   ``INTEGER …0``    ``BOOLEAN … FALSE``
``bytes``  ``BLOB``          ``BYTEA``
``bigint`` ``INTEGER``       ``BIGINT``
``minute`` ``window``        ``window_min`` (a column name)
=========  ================  ==============================
"""

from __future__ import annotations

from string import Template

__all__ = ["shared_tables", "TYPES"]

#: each backend's column types (the table above)
TYPES = {
    "sqlite": {"time": "REAL", "json": "TEXT", "flag": "INTEGER NOT NULL DEFAULT 0", "bytes": "BLOB",
               "bigint": "INTEGER", "minute": "window"},
    "postgres": {"time": "TIMESTAMPTZ", "json": "JSONB", "flag": "BOOLEAN NOT NULL DEFAULT FALSE",
                 "bytes": "BYTEA", "bigint": "BIGINT", "minute": "window_min"},
}

_TABLES = {
    "sessions": """CREATE TABLE sessions (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    created_at $time NOT NULL, updated_at $time NOT NULL,
    status TEXT NOT NULL DEFAULT 'open', version INTEGER NOT NULL DEFAULT 1,
    summary TEXT, message_range_end INTEGER NOT NULL DEFAULT 0,
    metadata $json NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, user_id, session_id)
)""",
    # the two store-wide tables of migration 0001 (see tests/test_schema_scoped.py)
    "meta_and_cache": """CREATE TABLE meta (
    key TEXT PRIMARY KEY, value TEXT NOT NULL
);
CREATE TABLE embedding_cache (
    model TEXT NOT NULL, hash TEXT NOT NULL, vec $bytes NOT NULL,
    PRIMARY KEY (model, hash)
)""",
    "profile_versions": """CREATE TABLE profile_versions (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, version INTEGER NOT NULL,
    data $json NOT NULL, actor TEXT NOT NULL, reason TEXT NOT NULL, at $time NOT NULL,
    PRIMARY KEY (namespace, user_id, version)
)""",
    "api_keys": """CREATE TABLE api_keys (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, role TEXT NOT NULL, name TEXT NOT NULL,
    secret_hash TEXT NOT NULL, created_at $time NOT NULL, user_id TEXT, rate_limit INTEGER,
    created_by TEXT, revoked_at $time
);
CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at)""",
    # the minute column is window_min on PostgreSQL, where WINDOW is a reserved word
    "rate_windows": """CREATE TABLE rate_windows (
    bucket TEXT NOT NULL, $minute $bigint NOT NULL, hits INTEGER NOT NULL,
    PRIMARY KEY (bucket, $minute)
)""",
    "job_result": "ALTER TABLE jobs ADD COLUMN result $json",
    # migration 0007_p12_knowledge, whole
    "knowledge": """CREATE TABLE kb_documents (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL, owner TEXT,
    title TEXT NOT NULL, source TEXT NOT NULL, format TEXT NOT NULL, text TEXT NOT NULL,
    content_hash TEXT NOT NULL, signature $json NOT NULL DEFAULT '[]',
    tags $json NOT NULL DEFAULT '[]', last_reviewed $time, created_at $time NOT NULL,
    updated_at $time NOT NULL, metadata $json NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, user_id, id)
);
CREATE INDEX kb_documents_hash ON kb_documents (namespace, user_id, content_hash);
CREATE TABLE kb_chunks (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL, doc_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL, text TEXT NOT NULL, start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL, content_hash TEXT NOT NULL,
    heading_path $json NOT NULL DEFAULT '[]', joins_next $flag,
    duplicate_of TEXT, tags $json NOT NULL DEFAULT '[]', source TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '', last_reviewed $time, created_at $time NOT NULL,
    recalled INTEGER NOT NULL DEFAULT 0, used INTEGER NOT NULL DEFAULT 0,
    last_recalled $time, last_used $time,
    PRIMARY KEY (namespace, user_id, id)
);
CREATE INDEX kb_chunks_doc ON kb_chunks (namespace, user_id, doc_id, ordinal);
CREATE INDEX kb_chunks_hash ON kb_chunks (namespace, user_id, content_hash);
CREATE TABLE kb_recalls (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    kb_user_id TEXT NOT NULL, chunk_id TEXT NOT NULL, query TEXT NOT NULL, at $time NOT NULL,
    PRIMARY KEY (namespace, user_id, session_id, kb_user_id, chunk_id)
);
CREATE INDEX kb_recalls_chunk ON kb_recalls (namespace, kb_user_id, chunk_id)""",
    "summary_versions": """CREATE TABLE summary_versions (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    version INTEGER NOT NULL, range_start INTEGER NOT NULL, range_end INTEGER NOT NULL,
    summary $json NOT NULL, at $time NOT NULL,
    PRIMARY KEY (namespace, user_id, session_id, version)
)""",
    "idempotency_keys": """CREATE TABLE idempotency_keys (
    namespace TEXT NOT NULL, user_id TEXT NOT NULL, key TEXT NOT NULL,
    fingerprint TEXT NOT NULL, session_id TEXT NOT NULL, message_ids $json NOT NULL,
    created_at $time NOT NULL,
    PRIMARY KEY (namespace, user_id, key)
)""",
}


def shared_tables(backend: str) -> dict[str, str]:
    """The shared pieces (statements joined by ``;\\n``, none at the end) in the column
    types of ``backend`` (``sqlite`` or ``postgres``)."""
    return {name: Template(sql).substitute(TYPES[backend]) for name, sql in _TABLES.items()}
