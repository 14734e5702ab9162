"""Ready to shard by user: every table and every query is scoped by (namespace, user_id).

Reads the migrations of both backends and the SQL strings in the store modules (with
``ast``, no database) and fails on a table without the scope columns — for PostgreSQL,
without them in the primary key, which Citus needs to distribute by ``user_id`` — or on
a statement that touches a scoped table without a namespace and a user_id condition.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from memstrata.stores.postgres.migrations import PG_MIGRATIONS
from memstrata.stores.sqlite.migrations import SQLITE_MIGRATIONS

STORES = Path(__file__).resolve().parent.parent / "memstrata" / "stores"

# Store-wide on purpose, one row per store rather than per user:
#  * schema_migrations — which migrations ran; a property of the database itself.
#  * meta — store settings such as the embedder the index was built with.
#  * embedding_cache — keyed by (model, content hash): a vector depends only on the text,
#    so users share it. On Citus these three are reference tables.
#  * api_keys, audit_log, rate_windows — the HTTP service's keys, audit log and rate
#    counters: a key belongs to a tenant (a namespace), not to a user's memory, and an
#    audit entry is about a key's request. Small, local or reference tables on Citus.
STORE_WIDE = {"schema_migrations", "meta", "embedding_cache", "api_keys", "audit_log", "rate_windows"}

# SQLite's FTS5 table carries the scope as one token column (``scope``, the hash of
# namespace and user_id) because FTS5 tables have no typed key columns.
SCOPE_TOKEN_TABLES = {"docs_fts"}

# Statements allowed without a scope condition, with why. Anything new fails the test.
ALLOWED = {
    # list_users enumerates the scopes themselves; on Citus it fans out to every shard
    ("sql", "list_users"),
    # the job queue is claimed across users (head of each user's queue); list_jobs with
    # no scope lists every user's jobs for workers and flush()
    ("sql", "claim_job"), ("sql", "list_jobs"),
    # the idle-session sweep looks across users for sessions to archive (it fans out too)
    ("sql", "idle_sessions"),
    # store-wide maintenance: FTS5 optimize merges every segment; the one-time fill of
    # term records and int8 vectors for documents written before migration 0009_p13
    ("sqlite.py", "compact"), ("sqlite.py", "_backfill"), ("postgres.py", "_backfill"),
}
# SQLite follow-ups keyed by a rowid that a scoped lookup in the same transaction just
# returned (single-node SQLite only; reported upstream as worth scoping anyway).
ALLOWED_SQLITE_ROWID = re.compile(r"WHERE rowid=\?$")


def _tables(migrations: list[tuple[str, str]]) -> dict[str, str]:
    """table name -> its CREATE statement."""
    out = {}
    for _, sql in migrations:
        for stmt in sql.split(";\n"):
            m = re.search(r"CREATE (?:VIRTUAL )?TABLE (?:IF NOT EXISTS )?(\w+)", stmt)
            if m:
                out[m.group(1)] = stmt
    return out


PG_TABLES = _tables(PG_MIGRATIONS)
SQLITE_TABLES = _tables(SQLITE_MIGRATIONS)
SCOPED = (set(PG_TABLES) | set(SQLITE_TABLES)) - STORE_WIDE


def _columns(stmt: str) -> set[str]:
    body = stmt[stmt.index("(") + 1:]
    return {m.group(1) for m in re.finditer(r"(?:^|,)\s*(\w+)[\s,]", body)}


@pytest.mark.parametrize("table", sorted(set(PG_TABLES) - STORE_WIDE))
def test_postgres_table_key_starts_with_scope(table: str) -> None:
    stmt = PG_TABLES[table]
    key = re.search(r"PRIMARY KEY \(([^)]*)\)", stmt)
    assert key, f"{table} has no composite primary key"
    columns = [c.strip() for c in key.group(1).split(",")]
    assert columns[:2] == ["namespace", "user_id"], f"{table} key {columns} is not scoped"
    for unique in re.findall(r"UNIQUE \(([^)]*)\)", stmt):
        assert {"namespace", "user_id"} <= {c.strip() for c in unique.split(",")}, table


@pytest.mark.parametrize("table", sorted(set(SQLITE_TABLES) - STORE_WIDE))
def test_sqlite_table_has_scope_columns(table: str) -> None:
    columns = _columns(SQLITE_TABLES[table])
    if table in SCOPE_TOKEN_TABLES:
        assert "scope" in columns
    else:
        assert {"namespace", "user_id"} <= columns, f"{table} lacks namespace/user_id"


def test_store_wide_tables_are_the_known_three() -> None:
    assert STORE_WIDE <= set(PG_TABLES) | {"schema_migrations"}
    assert STORE_WIDE <= set(SQLITE_TABLES) | {"schema_migrations"}


# -- the SQL in the store modules -----------------------------------------------------------
def _flatten(node: ast.AST, names: dict[str, ast.AST], seen: frozenset[str] = frozenset()) -> str:
    """The SQL text an expression builds: string constants in order, local names resolved."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in names and node.id not in seen:
        return _flatten(names[node.id], names, seen | {node.id})
    if isinstance(node, ast.JoinedStr):
        return "".join(_flatten(v, names, seen) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        return " " + _flatten(node.value, names, seen) + " "
    return " ".join(_flatten(child, names, seen) for child in ast.iter_child_nodes(node))


def _statements(module: str) -> list[tuple[str, str]]:
    """(function name, SQL) for every call of _x/_many/execute/executemany (and the shared
    row code's _q/_qm) in the package ``module`` names (``sqlite.py`` → ``stores/sqlite/``,
    ``sql`` → ``stores/sql/``, the row SQL both backends share); module-level SQL constants
    are resolved too."""
    out = []
    for path in sorted((STORES / module.removesuffix(".py")).glob("*.py")):
        out += _file_statements(ast.parse(path.read_text()))
    return out


def _file_statements(tree: ast.Module) -> list[tuple[str, str]]:
    constants: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            constants[node.targets[0].id] = node.value
    out = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef):
            continue
        names: dict[str, ast.AST] = dict(constants)
        for node in ast.walk(func):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        names[target.id] = node.value
                    elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        for t, v in zip(target.elts, node.value.elts):
                            if isinstance(t, ast.Name):
                                names[t.id] = v
        for node in ast.walk(func):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"_x", "_many", "_q", "_qm", "execute", "executemany"}
                    and node.args):
                sql = " ".join(_flatten(node.args[0], names).split())
                if sql:
                    out.append((func.name, sql))
    return out


def _touched(sql: str) -> set[str]:
    return {t for t in re.findall(r"\b(?:FROM|JOIN|UPDATE|INTO)\s+(\w+)", sql)} & SCOPED


def _unscoped(module: str, statements: list[tuple[str, str]]) -> list[str]:
    bad = []
    for func, sql in statements:
        tables = _touched(sql)
        if not tables or sql.lstrip().upper().startswith("CREATE") or (module, func) in ALLOWED:
            continue
        if module == "sqlite.py" and ALLOWED_SQLITE_ROWID.search(sql):
            continue
        if sql.upper().startswith("INSERT"):
            columns = set(re.findall(r"\w+", sql[sql.index("(") + 1:sql.index(")")]))
            scoped = {"namespace", "user_id"} <= columns or (tables <= SCOPE_TOKEN_TABLES
                                                             and "scope" in columns)
        else:
            scoped = bool(re.search(r"\bnamespace\s*=", sql) and re.search(r"\buser_id\s*=", sql))
        if not scoped:
            bad.append(f"{module}:{func}: {sql[:160]}")
    return bad


@pytest.mark.parametrize("module", ["sqlite.py", "postgres.py", "sql"])
def test_every_query_on_a_scoped_table_is_scoped(module: str) -> None:
    statements = _statements(module)
    assert len(statements) > 20, "the SQL extraction found too little; has the module changed?"
    bad = _unscoped(module, statements)
    assert not bad, "unscoped SQL:\n" + "\n".join(bad)


def test_the_checker_catches_unscoped_sql() -> None:
    samples = [("f", "SELECT * FROM items WHERE id=%s"),
               ("g", "INSERT INTO docs (id, text) VALUES (%s, %s)"),
               ("h", "UPDATE postings SET tf_body=1 WHERE namespace=%s"),
               ("ok", "DELETE FROM docs WHERE namespace=%s AND user_id=%s AND id=%s"),
               ("ok2", "SELECT value FROM meta WHERE key=%s")]
    assert [b.split(":")[1] for b in _unscoped("postgres.py", samples)] == ["f", "g", "h"]
