"""`memstrata export` / `memstrata restore`: moving memory between SQLite and PostgreSQL.

Real backends only: SQLite files in ``tmp_path`` and fresh databases on the suite's
pgserver. The round trips compare the export files byte for byte.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory, errors
from memstrata.cli.main import cli
from memstrata.stores import open_store
from memstrata.stores.transfer import FORMAT, export_jsonl, restore_jsonl
from memstrata.types import Scope

T0 = datetime(2024, 5, 8, 13, 56, 7, 123456, tzinfo=UTC)
LOCOMO = Path(os.environ.get("MEMSTRATA_LOCOMO_DEV", Path(__file__).resolve().parents[2]
                             / "shared" / "bench-data" / "locomo" / "locomo_dev.json"))


def url_for(kind: str, tmp_path: Path, name: str, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / f'{name}.db'}"
    return request.getfixturevalue("pg_url") if name == "a" else _second_pg(request)


def _second_pg(request: pytest.FixtureRequest) -> str:
    from pgserver_fixture import database_url

    server = request.getfixturevalue("pg_server")
    name = f"memstrata_test_{uuid.uuid4().hex[:12]}"
    server.execute(f"CREATE DATABASE {name}")
    request.addfinalizer(lambda: server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    return database_url(server.url, name)


def export_text(store_or_memory, **kw) -> str:
    store = getattr(store_or_memory, "store", store_or_memory)
    out = io.StringIO()
    export_jsonl(store, out, **kw)
    return out.getvalue()


def fill(memory: Memory) -> None:
    """A bit of everything: tool calls, names, metadata, namespaces, all item statuses,
    multi-version histories, original times with microseconds."""
    memory.add([{"role": "system", "content": "You are helpful."},
                {"role": "user", "name": "Lin", "content": "我周末喜欢爬山 and I switched to Go",
                 "created_at": T0, "metadata": {"dia_id": "D1:1", "score": 0.1 + 0.2}},
                {"role": "assistant", "content": None, "created_at": T0 + timedelta(seconds=1),
                 "tool_calls": [{"id": "call_1", "type": "function",
                                 "function": {"name": "lookup", "arguments": "{\"q\": \"Go\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"ok\": true}",
                 "created_at": T0 + timedelta(seconds=2)}], "lin", "s2")
    memory.add([{"role": "user", "content": "second session", "created_at": T0 + timedelta(days=1)}],
               "lin", "s1")
    memory.add([{"role": "user", "content": "more in the second", "created_at": T0 + timedelta(days=2)}],
               "lin", "s1")
    tea = memory.remember("likes tea", "lin", kind="preference", tags=["drink", "饮料"],
                          metadata={"nested": {"a": [1, 2.5, None]}}, session_id="s2")
    memory.update(tea.id, "lin", content="likes green tea", reason="corrected")
    memory.update(tea.id, "lin", status="superseded")
    todo = memory.remember("renew passport", "lin", kind="todo", importance=0.9)
    memory.update(todo.id, "lin", status="done")
    old = memory.remember("lives in Berlin", "lin")
    memory.update(old.id, "lin", status="inactive")
    memory.remember("a fact of another agent's user", "kim", agent_id="agent-b")
    memory.update_profile("lin", name="Lin", goals=["climb Mont Blanc"])
    memory.flush()  # the extraction jobs add() queued: done before anything is exported


@pytest.mark.parametrize("source,target", [("sqlite", "postgres"), ("postgres", "sqlite")])
def test_round_trip_between_backends_is_byte_identical(source, target, tmp_path, request) -> None:
    with Memory(url_for(source, tmp_path, "a", request), embedder="hash:256") as a:
        fill(a)
        first = export_text(a)
        hits_before = [h.id for h in a.search("green tea", "lin", k=3, filters={"status": [
            "active", "superseded"]})]
    with Memory(url_for(target, tmp_path, "b", request), embedder="hash:256") as b:
        result = restore_jsonl(b.store, io.StringIO(first))
        assert sorted(result.scopes, key=lambda s: s.user_id) == [Scope("kim", "agent-b"), Scope("lin")]
        end = json.loads(first.splitlines()[-1])["counts"]
        assert result.counts == end
        assert end["session"] == 2 and end["message"] == 6 and end["item"] >= 4
        assert end["job"] >= 1 and end["profile_version"] == 1  # extraction jobs, profile edit
        for scope in result.scopes:
            b.reindex(scope.user_id, agent_id=scope.namespace, progress=False)
        assert export_text(b) == first
        hits_after = [h.id for h in b.search("green tea", "lin", k=3, filters={"status": [
            "active", "superseded"]})]
        assert hits_after == hits_before
        assert [m.seq for m in b.messages("lin", "s1")] == [0, 1]
        assert b.messages("lin", "s2")[3].tool_call_id == "call_1"
    header = json.loads(first.splitlines()[0])
    assert header == {"type": "header", "format": FORMAT, "version": 1, "embedder": "hash:256"}
    assert json.loads(first.splitlines()[-1])["type"] == "end"


def test_export_one_user(tmp_path) -> None:
    with Memory(f"sqlite:///{tmp_path / 'a.db'}", embedder="hash:256") as a:
        fill(a)
        text = export_text(a, scopes=[Scope("kim", "agent-b")])
    users = {(r.get("namespace"), r.get("user_id")) for r in map(json.loads, text.splitlines())
             if r["type"] not in ("header", "end")}
    assert users == {("agent-b", "kim")}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_bad_exports_are_refused_and_nothing_is_written(backend, tmp_path, request) -> None:
    with Memory(f"sqlite:///{tmp_path / 'src.db'}", embedder="hash:256") as src:
        fill(src)
        good = export_text(src).splitlines(keepends=True)
    with open_store(url_for(backend, tmp_path, "a", request)) as store:
        cases = {
            "truncated": (good[:-1], "truncated"),
            "cut mid-way": (good[:4], "truncated"),
            "bad counts": (good[:2] + good[3:], "end record counts"),
            "no header": (good[1:], "header"),
            "newer version": ([good[0].replace('"version":1', '"version":99')] + good[1:],
                              "upgrade memstrata"),
            "not json": (good[:2] + ["{oops\n"] + good[2:], r":3: not JSON"),
        }
        for name, (lines, message) in cases.items():
            with pytest.raises(errors.ValidationError, match=message):
                restore_jsonl(store, lines)
            assert store.list_users() == [], name
        restore_jsonl(store, good)
        with pytest.raises(errors.ValidationError, match="already has memory"):
            restore_jsonl(store, good)


def test_cli_export_and_restore(tmp_path, pg_url, monkeypatch) -> None:
    monkeypatch.delenv("MEMSTRATA_EMBEDDER", raising=False)
    src = f"sqlite:///{tmp_path / 'src.db'}"
    with Memory(src, embedder="hash:256") as memory:
        fill(memory)
    runner = CliRunner()
    out = tmp_path / "lin.jsonl"
    result = runner.invoke(cli, ["export", "--store", src, "--user", "lin", str(out)])
    assert result.exit_code == 0, result.output
    assert "exported 2 sessions, 6 messages" in result.output
    result = runner.invoke(cli, ["restore", "--store", pg_url, str(out)])
    assert result.exit_code == 0, result.output
    assert "restored 1 users" in result.output and "with hash:256" in result.output
    # turns only: a search touches the items it returns, and the export must match byte for byte
    result = runner.invoke(cli, ["search", "--store", pg_url, "--embedder", "hash:256",
                                 "--user", "lin", "--layer", "episodic", "second session"])
    assert "second session" in result.output
    again = runner.invoke(cli, ["restore", "--store", pg_url, str(out)])
    assert again.exit_code == 1 and "already has memory" in again.output
    missing = runner.invoke(cli, ["export", "--store", src, "--user", "nobody", str(tmp_path / "n")])
    assert missing.exit_code == 1 and "no memory for user(s) nobody" in missing.output
    back = tmp_path / "back.jsonl"
    assert runner.invoke(cli, ["export", "--store", pg_url, str(back)]).exit_code == 0
    assert back.read_bytes() == out.read_bytes()


@pytest.mark.slow
@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo dev data not at {LOCOMO} "
                    "(set MEMSTRATA_LOCOMO_DEV)")
def test_locomo_round_trip_sqlite_postgres_sqlite_is_byte_identical(tmp_path, pg_url) -> None:
    from memstrata.bench.locomo import conversation_sessions, load_locomo

    with Memory(f"sqlite:///{tmp_path / 'a.db'}", embedder="hash:256") as a:
        for sample in load_locomo(LOCOMO):
            a.import_conversation(conversation_sessions(sample), f"locomo-{sample['sample_id']}",
                                  progress=False)
        first = export_text(a)
    assert first.count('"type":"message"') == 2760
    with Memory(pg_url, embedder="hash:256") as b:
        for scope in restore_jsonl(b.store, io.StringIO(first)).scopes:
            b.reindex(scope.user_id, agent_id=scope.namespace, progress=False)
        second = export_text(b)
        question = "When did Caroline go to the LGBTQ support group?"
        on_pg = [h.id for h in b.search(question, "locomo-conv-26", k=5, mode="lexical")]
    with Memory(f"sqlite:///{tmp_path / 'c.db'}", embedder="hash:256") as c:
        restore_jsonl(c.store, io.StringIO(second))
        third = export_text(c)
    assert second == first
    assert third.encode() == first.encode()
    assert on_pg  # the rebuilt PostgreSQL index answers
