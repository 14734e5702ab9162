"""The ``durability`` setting: what a commit survives.

``full`` (the default): SQLite syncs the WAL at every commit (``synchronous=FULL``), and
PostgreSQL commits wait for their WAL flush (``synchronous_commit=on``) even on a
database whose own default is ``off``; ``normal``: SQLite ``synchronous=NORMAL`` (a
process crash loses nothing, a power loss may roll back the last commits) and
PostgreSQL keeps the server's setting.
"""

from __future__ import annotations

import psycopg
import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory, errors


def _sqlite_sync(memory: Memory) -> int:
    return int(memory.store._x("PRAGMA synchronous").fetchone()[0])  # type: ignore[attr-defined]


@pytest.mark.parametrize("setting, expected", [({}, 2), ({"durability": "full"}, 2),
                                               ({"durability": "normal"}, 1)])
def test_sqlite_synchronous_follows_the_setting(tmp_path, setting, expected):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64", **setting) as memory:
        assert _sqlite_sync(memory) == expected  # 2 = FULL, 1 = NORMAL
        memory.add("I packed the lantern", "lin")
        assert [m.content for m in memory.messages("lin")] == ["I packed the lantern"]


def test_durability_refuses_other_values(tmp_path):
    with pytest.raises(errors.ConfigError, match="durability"):
        Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64", durability="fsync")


@pytest.mark.parametrize("durability, expected", [("full", "on"), ("normal", "off")])
def test_postgres_synchronous_commit_follows_the_setting(pg_url, durability, expected):
    name = psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a server that trades it away
        conn.execute(f"ALTER DATABASE {name} SET synchronous_commit = off")
    with Memory(pg_url, embedder="hash:64", durability=durability) as memory:
        memory.add("I packed the lantern", "lin")
        with memory.store._conn() as conn:  # type: ignore[attr-defined]
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == expected
