"""PostgreSQL faults: a server restarted during write batches, bad connection URLs.

The server is the suite's own pgserver, restarted for real (``pg_ctl restart -m fast``
cuts every client connection). No mocks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from pgserver_fixture import PgServer, database_url, pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory, errors
from memstrata.cli.main import cli
from memstrata.stores import open_store
from memstrata.types import Message, Role, Scope

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
ALICE = Scope("alice")


def batch(n: int, size: int = 4) -> list[Message]:
    return [Message(role=Role.USER, content=f"batch {n} turn {i}",
                    created_at=T0 + timedelta(minutes=10 * n + i)) for i in range(size)]


def test_restart_between_and_within_batches_loses_nothing_acknowledged(
        pg_server: PgServer, pg_url: str) -> None:
    if pg_server.pgdata is None:
        pytest.skip("restarting needs the suite's own server")
    acknowledged: list[str] = []
    refused = 0
    with open_store(pg_url) as store:
        n = 0
        while n < 6:
            messages = batch(n)
            try:
                with store.transaction():  # one batch: two appends that commit together
                    store.append_messages(ALICE, "s", messages[:2])
                    if n == 2 and refused == 0:
                        pg_server.restart()  # within the batch, before it commits
                    store.append_messages(ALICE, "s", messages[2:])
            except errors.StoreUnavailableError as exc:
                assert "PostgreSQL" in str(exc)
                refused += 1
                continue  # not acknowledged: the caller retries the same batch
            acknowledged += [m.content for m in messages]
            if n == 4:
                pg_server.restart()  # between batches: the next checkout reconnects
            n += 1
        assert refused == 1
        stored = store.get_messages(ALICE, "s")
    assert [m.content for m in stored] == acknowledged  # each batch once, in order
    assert [m.seq for m in stored] == list(range(len(acknowledged)))
    with open_store(pg_url) as reopened:  # durable, seen by a new client too
        assert len(reopened.get_messages(ALICE, "s")) == 24


def test_memory_add_after_restart_reconnects(pg_server: PgServer, pg_url: str) -> None:
    if pg_server.pgdata is None:
        pytest.skip("restarting needs the suite's own server")
    with Memory(pg_url, embedder="hash:256") as memory:
        memory.add([{"role": "user", "content": "before the restart"}], "alice", "s")
        pg_server.restart()
        memory.add([{"role": "user", "content": "after the restart"}], "alice", "s")
        assert [m.content for m in memory.messages("alice", "s")] == ["before the restart",
                                                                      "after the restart"]
        assert memory.search("restart", "alice", k=2)


def test_cli_names_a_wrong_database_and_a_wrong_password(pg_server: PgServer, pg_url: str,
                                                        tmp_path) -> None:
    runner = CliRunner()
    missing = database_url(pg_url, "no_such_memstrata_db")
    result = runner.invoke(cli, ["export", "--store", missing, str(tmp_path / "x.jsonl")])
    assert result.exit_code == 1
    line = result.output.strip()
    assert "\n" not in line and "unknown database" in line and "no_such_memstrata_db" in line
    if pg_server.pgdata is None:
        return
    pg_server.execute("DO $$ BEGIN CREATE ROLE memstrata_pw LOGIN PASSWORD 'right'; "
                      "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    hba = pg_server.pgdata / "pg_hba.conf"
    rules = hba.read_text()
    if "memstrata_pw" not in rules:  # this role must send a password; others are trusted
        hba.write_text("local all memstrata_pw scram-sha-256\n" + rules)
        pg_server.execute("SELECT pg_reload_conf()")
    bad = pg_url.replace("postgres:@", "memstrata_pw:s3cret-wrong@", 1)
    result = runner.invoke(cli, ["search", "--store", bad, "--user", "u", "anything"])
    assert result.exit_code == 1
    assert "refused the password" in result.output and "memstrata_pw@" in result.output
    assert "s3cret-wrong" not in result.output
