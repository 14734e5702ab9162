"""The privacy suite: after ``forget`` (an item with its turns), a spoken "forget …" and
``forget_user``, then ``compact``, no store holds a trace of the forgotten strings — read
as raw bytes of the SQLite ``.db``/``-wal``/``-shm`` (with a reader in another connection
open during the compaction), as every row of every PostgreSQL table, as every Redis key
and value — in English and Chinese, with sessions in the main store and in Redis.

Forgotten: "kumquats" (an English fact) and "翡翠湾" (a Chinese one). Kept: "tennis".
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory
from memstrata.errors import StoreError
from memstrata.retrieval.documents import window_texts
from memstrata.retrieval.indexer import cache_key
from memstrata.stores.knowledge import kb_scope
from memstrata.types import Filters, Role

SECRETS = ("kumquat", "翡翠湾")
USER = "lin-7f3q"  # a user id that appears nowhere else
TALK = [{"role": "user", "content": "I'm allergic to kumquats."},
        {"role": "assistant", "content": "Thanks for telling me."},
        {"role": "user", "content": "我住在翡翠湾。"},
        {"role": "assistant", "content": "好的。"},
        {"role": "user", "content": "I like tennis."},
        {"role": "assistant", "content": "Great."}]
SPOKEN = ["Please forget that I'm allergic to kumquats.", "请忘掉我住在翡翠湾这件事"]


def _redis_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(params=["sqlite", "sqlite+redis", "postgres"])
def backend(request, tmp_path):
    """(store URL, sessions URL or "", Redis key prefix or None)."""
    db = f"sqlite:///{tmp_path / 'm.db'}"
    if request.param == "postgres":
        return request.getfixturevalue("pg_url"), "", None
    if request.param == "sqlite+redis":
        if not _redis_up():
            pytest.fail("no Redis on 127.0.0.1:6379: run ./scripts/test, which starts one")
        prefix = f"priv{uuid.uuid4().hex[:10]}"
        return db, f"redis://127.0.0.1:6379/0?prefix={prefix}", prefix
    return db, "", None


def _open(url: str, sessions: str) -> Memory:
    return Memory(url, embedder="hash:256", summary_every=4, sessions=sessions)


def _talk(m: Memory, session: str = "s1") -> None:
    lin = m.user(USER)
    lin.add(TALK, session)
    if m.session_manager.sessions.hot_log:  # Redis holds the turns until the archive
        lin.archive_session(session)
    m.flush(timeout=60)


def _found(blob: bytes | str) -> list[str]:
    """The secrets in ``blob``: as UTF-8, or escaped the way JSON writes them."""
    text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
    text = text.lower()
    return [s for s in SECRETS if s in text or json.dumps(s)[1:-1] in text]


# -- reading every store as it is ------------------------------------------------------

def _sqlite_bytes(url: str) -> dict[str, bytes]:
    path = url[len("sqlite:///"):]
    return {suffix or ".db": Path(path + suffix).read_bytes()
            for suffix in ("", "-wal", "-shm") if Path(path + suffix).exists()}


def _sql_rows(m: Memory) -> dict[str, list[str]]:
    """Every row of every table, as text."""
    if m.store.url.startswith("sqlite"):
        conn = sqlite3.connect(m.store.url[len("sqlite:///"):])
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            return {t: [repr(r) for r in conn.execute(f'SELECT * FROM "{t}"')] for t in tables}
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(m.store.url) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = "
                                             "current_schema()")]
        return {t: [r[0] for r in conn.execute(f'SELECT t::text FROM "{t}" t')] for t in tables}


def _redis_dump(prefix: str) -> dict[str, str]:
    """Every key under ``prefix`` and its value, as text."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=6379, decode_responses=True)
    read = {"hash": client.hgetall, "list": lambda k: client.lrange(k, 0, -1),
            "zset": lambda k: client.zrange(k, 0, -1), "string": client.get,
            "set": lambda k: sorted(client.smembers(k))}
    return {key: json.dumps(read[client.type(key)](key), ensure_ascii=False)
            for key in client.scan_iter(match=f"{prefix}:*")}


def _traces(m: Memory, prefix: str | None) -> dict[str, list[str]]:
    """Where a forgotten string is still found: file part, table or key -> strings."""
    where: dict[str, list[str]] = {}
    if m.store.url.startswith("sqlite"):
        where.update({part: _found(data) for part, data in _sqlite_bytes(m.store.url).items()})
    for table, rows in _sql_rows(m).items():
        where[f"table {table}"] = _found("\n".join(rows))
    if prefix:
        where.update({f"redis {k}": _found(k + v) for k, v in _redis_dump(prefix).items()})
    return {k: v for k, v in where.items() if v}


def _seen_by_api(m: Memory) -> list[str]:
    lin = m.user(USER)
    texts = [msg.content or "" for s in ("s1", "s2") for msg in lin.messages(s)]
    texts += [i.content for i in lin.list(filters={"statuses": ["active", "superseded",
                                                                "inactive", "done"]})]
    for s in ("s1", "s2"):
        summary = lin.session(s).summary
        texts.append(summary.render() if summary else "")
    context = lin.context("s1", [{"role": "user", "content": "What do you remember about me, "
                                                            "as I said last time?"}], budget=4000)
    texts += [str(msg.get("content")) for msg in context.messages]
    texts += [h.text for q in ("kumquats", "翡翠湾", "allergic") for h in lin.search(q)]
    texts.append(str(lin.profile().to_dict()))
    return _found("\n".join(texts))


def _compact_with_a_reader(m: Memory) -> None:
    """compact() while another connection holds a read transaction for a moment (SQLite);
    the reader stays open (idle) afterwards, while the files are read."""
    if not m.store.url.startswith("sqlite"):
        m.compact()
        return
    reader = sqlite3.connect(m.store.url[len("sqlite:///"):], check_same_thread=False)
    began = threading.Event()

    def read() -> None:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM messages").fetchall()
        began.set()
        time.sleep(0.5)
        reader.execute("COMMIT")

    thread = threading.Thread(target=read)
    thread.start()
    began.wait(10)
    try:
        report = m.compact()
        assert report.checkpointed
        assert not Path(m.store.url[len("sqlite:///"):] + "-wal").read_bytes()  # truncated
    finally:
        thread.join()
    m._reader = reader  # type: ignore[attr-defined]  (open while the bytes are read)


def _check_clean(m: Memory, prefix: str | None) -> None:
    assert _seen_by_api(m) == []
    _compact_with_a_reader(m)
    assert _traces(m, prefix) == {}


def _assert_kept(m: Memory) -> None:
    rows = "\n".join(r for rows in _sql_rows(m).values() for r in rows)
    assert "tennis" in rows  # what was not forgotten is still there


def test_forget_an_item_with_its_turns(backend):
    url, sessions, prefix = backend
    with _open(url, sessions) as m:
        _talk(m)
        lin = m.user(USER)
        assert _found(str(lin.session("s1").summary)), "the summary should hold a secret first"
        targets = [i for i in lin.list() if _found(i.content) and "stage" not in i.tags]
        assert len(targets) == 2, [i.content for i in lin.list()]
        reports = [lin.forget(i.id, messages=True) for i in targets]
        assert [r.items for r in reports] == [1, 1] and [r.turns for r in reports] == [1, 1]
        assert all(r.summaries == 1 and r.reembedded >= 1 for r in reports)
        if m.session_manager.sessions.hot_log:  # archived: the stage summary quoted them
            assert reports[0].stages == 1
        m.flush(timeout=60)  # the stage summary is consolidated again, without them
        _check_clean(m, prefix)
        _assert_kept(m)


def test_spoken_forget(backend):
    url, sessions, prefix = backend
    with _open(url, sessions) as m:
        _talk(m)
        lin = m.user(USER)
        lin.add([{"role": "user", "content": text} for text in SPOKEN], "s2")
        if m.session_manager.sessions.hot_log:
            lin.archive_session("s2")
        m.flush(timeout=60)
        done = [j.result["forgotten"] for j in lin.jobs() if j.result and "forgotten" in j.result]
        assert sum(d["items"] for d in done) >= 2, done  # the stage summary may match too
        _check_clean(m, prefix)
        _assert_kept(m)


def test_forget_user_removes_the_user_and_their_session_keys(backend):
    url, sessions, prefix = backend
    with _open(url, sessions) as m:
        _talk(m)
        lin = m.user(USER)
        lin.add([{"role": "user", "content": "我的邻居也住在翡翠湾, he likes kumquats"}], "s2")  # held
        lin.kb.add_text("# Notes\n\nMy private note on tennis clubs.", doc_id="notes.md", private=True)
        m.user("other").add([{"role": "user", "content": "I like tennis."}], "s1")
        m.flush(timeout=60)
        report = m.forget_user(USER)
        # no compaction on the caller's request: one is scheduled (the checks below compact)
        assert report.compact is None and report.erase_by is not None
        if prefix:
            assert report.keys >= 3  # two cached sessions and the user's set of them
        assert lin.messages("s1") == [] and lin.messages("s2") == []
        assert lin.session("s2").version == 0
        lin.archive_session("s2")  # nothing is written back from a session store
        assert m.store.get_messages(lin.scope, "s2") == []
        _check_clean(m, prefix)
        # the user id itself is gone: from every table (the index's change log and
        # state rows included) and from the raw bytes of the files
        named = {t: n for t, rows in _sql_rows(m).items() if (n := sum(USER in r for r in rows))}
        assert named == {}
        # nor the key of their private knowledge base (derived from the user id)
        private = kb_scope(lin.scope.namespace, USER).user_id
        assert {t for t, rows in _sql_rows(m).items() if any(private in r for r in rows)} == set()
        if url.startswith("sqlite"):
            assert [p for p, data in _sqlite_bytes(url).items() if USER.encode() in data] == []
        if prefix:
            assert [k for k, v in _redis_dump(prefix).items() if USER in k + v] == []
        _assert_kept(m)


def test_the_next_turn_is_re_embedded_without_the_forgotten_one(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as m:
        lin = m.user(USER)
        stored = lin.add(TALK, "s1", extract=False).messages
        m.indexer.index_turns(lin.scope, "s1", stored)
        turns = [t for t in stored if t.role is not Role.SYSTEM]
        secret, after = turns[0], turns[1]
        old_dense = window_texts(turns, 1)[3]
        assert "kumquat" in old_dense  # the reply's vector embeds the statement before it
        report = m.forgetter.forget_turns_report(lin.scope, [secret.id])
        assert (report.turns, report.reembedded) == (1, 1)
        name = m.embedder.name
        assert m.store.cached_vectors(name, [cache_key(lin.scope, old_dense),
                                             cache_key(lin.scope, secret.text)]) == {}
        fresh = m.embedder.embed([after.text], kind="passage")[0]
        [(best, score)] = m.store.vector_search(lin.scope, np.asarray(fresh), Filters(), 1)
        assert best == after.id and score == pytest.approx(1.0, abs=1e-3)


def test_compact_reports_a_reader_that_never_lets_go(tmp_path):
    path = tmp_path / "m.db"
    with Memory(f"sqlite:///{path}", embedder="hash:256", compact_wait_s=0.3) as m:
        m.user(USER).add(TALK, "s1")
        m.flush(timeout=60)
        reader = sqlite3.connect(path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM messages").fetchall()
        m.user(USER).forget_all()  # forgets, then reports that the -wal kept bytes
        with pytest.raises(StoreError, match="read transaction"):
            m.compact()
        reader.execute("COMMIT")
        assert m.compact().checkpointed
        assert not Path(str(path) + "-wal").read_bytes()
        reader.close()


def test_forget_user_over_http_leaves_the_id_nowhere_not_even_in_the_audit_log(tmp_path):
    """Through the service: DELETE /v1/users/{u} answers the report; the user's audit
    entries, the forget request's own included, name a random pseudonym from then on, so
    neither the tables nor the file's bytes hold the user id."""
    from service_fixture import LiveServer

    from memstrata import Client

    url = f"sqlite:///{tmp_path / 'm.db'}"
    with _open(url, "") as m, LiveServer(m) as live:
        token = live.key("acme", "app")
        with Client(live.url, token) as client:
            lin = client.user(USER)
            lin.add(TALK, "s1", idempotency_key="req-privacy")
            lin.remember("likes kumquats", kind="preference")
            client.user("other").add("I like tennis.", "s1")
            m.flush(timeout=60)
            report = lin.forget_all()
            assert report.user_id == USER and report.turns == 6 and report.erase_by is not None
            assert report.pseudonym and report.pseudonym.startswith("forgotten-") and report.audit == 2
        with live.client(token) as c:
            rows = c.get("/v1/audit").json()["data"]
        mine = [r for r in rows if r["user_id"] == report.pseudonym]
        assert [r["action"] for r in mine] == ["users.forget", "items.remember", "messages.add"]
        assert all(report.pseudonym in r["path"] for r in mine)
        assert not [r for r in rows if USER in json.dumps(r)]
        m.compact()
        named = {t: n for t, rows in _sql_rows(m).items() if (n := sum(USER in r for r in rows))}
        assert named == {}
        assert [p for p, data in _sqlite_bytes(url).items() if USER.encode() in data] == []
        assert _traces(m, None) == {}


def test_forgetting_schedules_one_erasure_and_the_worker_runs_it_by_the_deadline(tmp_path):
    """A forget never compacts the whole store on the caller's request: forgets share one
    scheduled compaction, which the worker thread runs once it is due — after which the
    forgotten bytes are gone from the files."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    with Memory(url, embedder="hash:256", summary_every=4, worker="off") as m:
        for user in (USER, "lin-second"):
            m.user(user).add(TALK, "s1")
        m.user("other").add([{"role": "user", "content": "I like tennis."}], "s1")
        m.flush(timeout=60)
        first = m.forget_user(USER)
        second = m.forget_user("lin-second")
        assert first.compact is None and second.erase_by == first.erase_by  # one, shared
        assert m.forgetter.erase_if_due(first.erase_by - 1) is None  # not due yet
        assert m.forgetter.erase_if_due(first.erase_by + 1) is not None  # the worker's turn
        assert m.forgetter.erase_if_due(first.erase_by + 2) is None  # once
    with Memory(url, embedder="hash:256", summary_every=4, erase_within_s=1) as m:
        m.user(USER).add(TALK, "s1")
        m.flush(timeout=60)
        report = m.forget_user(USER)  # the worker thread runs within erase_within_s + its tick
        deadline = time.monotonic() + 60
        while _traces(m, None) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _traces(m, None) == {}, report
        _assert_kept(m)
