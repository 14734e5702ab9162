"""Files: a damaged SQLite file, a foreign SQLite database, a store of a newer
memstrata and damaged rows are clear StoreErrors — and nothing is written to the file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory
from memstrata.errors import StoreError


def _make(path: Path) -> None:
    with Memory(f"sqlite:///{path}", embedder="hash:64", worker="off") as m:
        lin = m.user("lin")
        lin.add([{"role": "user", "content": f"I like sport number {i}, truly."} for i in range(300)], "s1")
        lin.remember("Prefers tea", kind="preference")
        m.flush()


def test_a_foreign_sqlite_file_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "theirs.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a memstrata store"):
        Memory(f"sqlite:///{path}", embedder="hash:64")
    assert path.read_bytes() == before
    tables = [r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")]
    assert tables == ["invoices"]


def test_a_store_of_a_newer_memstrata_is_refused(tmp_path):
    path = tmp_path / "m.db"
    _make(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES ('9999_from_the_future', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer memstrata.*9999_from_the_future"):
        Memory(f"sqlite:///{path}", embedder="hash:64")


def test_a_postgres_store_of_a_newer_memstrata_is_refused(pg_url):
    with Memory(pg_url, embedder="hash:64", worker="off"):
        pass
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (name) VALUES ('9999_from_the_future')")
    with pytest.raises(StoreError, match="newer memstrata"):
        Memory(pg_url, embedder="hash:64")


def test_a_damaged_file_fails_the_quick_check_on_open_and_is_not_written(tmp_path):
    path = tmp_path / "m.db"
    _make(path)
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(3 * page, len(data) - page, 5 * page):  # scribble over some pages
        data[offset + 100:offset + 400] = b"\xff" * 300
    path.write_bytes(bytes(data))
    damaged = path.read_bytes()
    with pytest.raises(StoreError, match="integrity check"):
        Memory(f"sqlite:///{path}", embedder="hash:64")
    assert path.read_bytes() == damaged
    # the check is a setting: off, the file opens (at the caller's risk)
    with pytest.raises(StoreError):
        with Memory(f"sqlite:///{path}", embedder="hash:64", quick_check=False, worker="off") as m:
            m.compact()  # compact checks again: a damaged file is never rewritten


@pytest.mark.parametrize("table, column, where", [
    ("messages", "metadata", "seq = 3"),
    ("messages", "tool_calls", "seq = 4"),
    ("items", "tags", "1 = 1"),
    ("jobs", "payload", "1 = 1"),
    ("sessions", "summary", "1 = 1"),
])
def test_a_damaged_row_is_a_store_error(tmp_path, table, column, where):
    path = tmp_path / "m.db"
    with Memory(f"sqlite:///{path}", embedder="hash:64", worker="off", summary_every=2) as m:
        m.user("lin").add([{"role": "user", "content": f"turn {i}"} for i in range(6)], "s1")
        m.user("lin").remember("Prefers tea")
        conn = sqlite3.connect(path)
        conn.execute(f"UPDATE {table} SET {column} = '{{not json' WHERE {where}")
        conn.commit()
        conn.close()
        lin = m.user("lin")
        calls = {"messages": lambda: lin.messages("s1"), "items": lambda: lin.list(),
                 "jobs": lambda: lin.jobs(), "sessions": lambda: lin.session("s1")}
        with pytest.raises(StoreError, match="damaged"):
            calls[table]()


def test_a_read_only_store_searches_without_writing(tmp_path):
    path = tmp_path / "m.db"
    _make(path)
    with Memory(f"sqlite:///{path}", embedder="hash:64") as m:
        m.compact()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("m.db")}
    with Memory(f"sqlite:///{path}", embedder="hash:64", read_only=True) as m:
        lin = m.user("lin")
        assert lin.search("sport number 7") and lin.search("tea")
        assert lin.list() and lin.messages("s1") and lin.profile() is not None
        lin.context("s1", [{"role": "user", "content": "What did I say last time about tea?"}])
        assert all(i.access_count == 0 for i in lin.list())  # no access counts written
        with pytest.raises(StoreError, match="read-only"):
            lin.remember("Prefers coffee")
    assert path.read_bytes() == before["m.db"]
    wal = Path(str(path) + "-wal")
    assert not wal.exists() or wal.read_bytes() == before.get("m.db-wal", b"")  # nothing logged


def test_a_damaged_vector_is_a_store_error_and_a_damaged_cache_entry_is_embedded_again(tmp_path):
    path = tmp_path / "m.db"
    with Memory(f"sqlite:///{path}", embedder="hash:64", embed_on_add="inline") as m:
        lin = m.user("lin")
        lin.add([{"role": "user", "content": "I live in Berlin and like green tea"}], "s1")
        lin.remember("Lin likes green tea")
        m.flush()
        conn = sqlite3.connect(path)
        conn.execute("UPDATE doc_vectors SET vec = x'0102' WHERE rowid = (SELECT min(rowid) FROM doc_vectors)")
        conn.execute("UPDATE embedding_cache SET vec = x'01'")
        conn.commit()
        conn.close()
        with pytest.raises(StoreError, match="damaged vector"):
            lin.search("green tea")
        # the cache is a cache: a damaged entry is a miss, its text embedded and stored again
        def damaged_entries() -> int:
            conn = sqlite3.connect(path)
            try:
                return conn.execute("SELECT count(*) FROM embedding_cache WHERE length(vec) % 4 != 0")\
                    .fetchone()[0]
            finally:
                conn.close()
        before = damaged_entries()
        lin.add([{"role": "user", "content": "I live in Berlin and like green tea"}], "s2")
        m.flush()
        assert before > 0 and damaged_entries() < before
