"""The main store is the record of every turn, whatever the session store.

A real ``redis-server`` (and a real 3-node Redis Cluster) without persistence, started
here on free ports, is killed and restarted empty while sessions are open: every
acknowledged turn must still be read back, found by search, exported and extracted.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from memstrata import Memory
from memstrata.bench.redis_server import RedisServer as Redis
from memstrata.stores.transfer import export_jsonl
from memstrata.types import Scope, utcnow

WORDS = ["umbrella", "passport", "lantern", "compass", "harmonica", "kettle", "binoculars",
         "hammock", "snorkel", "telescope", "accordion", "thermos", "sextant", "tambourine",
         "periscope", "metronome", "yo-yo", "kaleidoscope", "castanets", "didgeridoo"]
TURNS = [  # 20 turns: 2 users x 2 sessions x 5, each a fact the rules extract
    (user, f"s{s}", f"My favourite thing is my {WORDS[i]}. I live in Berlin." if i % 5 == 0
     else f"I packed the {WORDS[i]} for the trip; I work as a nurse.")
    for i, (user, s) in enumerate((u, s) for u in ("lin", "mei") for s in (1, 2) for _ in range(5))]


@pytest.fixture(params=["redis", "redis-cluster"])
def redis(request, tmp_path) -> Iterator[Redis]:
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    server = Redis(tmp_path, request.param == "redis-cluster")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def test_acknowledged_turns_survive_a_redis_restart(redis: Redis, tmp_path) -> None:
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", sessions=redis.url,
                worker="off") as memory:
        acked = {}
        for user, sid, text in TURNS:
            result = memory.add([{"role": "user", "content": text}], user, sid)
            acked[result.message_ids[0]] = (user, sid, text)
        assert len(acked) == 20 and redis.keys() > 0  # the working set is cached there

        redis.kill()
        redis.start()  # back, empty: no persistence
        assert redis.keys() == 0

        # read back: every acknowledged turn, in order, from the main store
        for user in ("lin", "mei"):
            for sid in ("s1", "s2"):
                got = [m.content for m in memory.messages(user, sid)]
                assert got == [t for u, s, t in TURNS if (u, s) == (user, sid)]
                state = memory.session(user, sid)  # rebuilt from the store, not restarted
                assert state.message_count == 5 and state.status == "open"
        # a new turn continues the session where it was
        more = memory.add([{"role": "user", "content": "One more thing."}], "lin", "s1")
        assert more.messages[0].seq == 5

        # found by search
        for mid, (user, _, text) in acked.items():
            word = next(w for w in WORDS if w in text)
            assert mid in [h.id for h in memory.search(word, user, k=5)], word

        # exported, listed
        out = io.StringIO()
        export_jsonl(memory.store, out)
        exported = {r["id"] for r in map(json.loads, out.getvalue().splitlines())
                    if r.get("type") == "message"}
        assert set(acked) <= exported
        assert {s.session_id for s in memory.sessions("lin")} == {"s1", "s2"}
        assert {scope.user_id for scope in memory.users()} >= {"lin", "mei"}

        # extracted: add() queued extraction over every turn, as on any session store
        memory.flush(timeout=120)
        covered = set()
        for job in memory.jobs():
            if job.kind == "extract" and job.status == "done":
                p = job.payload
                covered |= {(job.user_id, p["session_id"], seq)
                            for seq in range(p["from_seq"], p["to_seq"] + 1)}
        for user, sid, seqs in (("lin", "s1", range(5)), ("lin", "s2", range(5)),
                                ("mei", "s1", range(5)), ("mei", "s2", range(5))):
            assert all((user, sid, q) in covered for q in seqs), (user, sid)
        for user in ("lin", "mei"):
            contents = " ".join(i.content for i in memory.list(user))
            assert "Berlin" in contents and "nurse" in contents


def test_forgetting_a_user_drops_the_cached_sessions(redis: Redis, tmp_path) -> None:
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", sessions=redis.url,
                worker="off") as memory:
        memory.add("I packed the lantern", "lin", "s1")
        memory.add("I packed the kettle", "mei", "s1")
        assert "lantern" in memory.session("lin", "s1").recent[0].content  # cached
        memory.forget_user("lin")
        assert memory.messages("lin", "s1") == [] and not memory.session("lin", "s1").exists
        for p in redis.ports:  # no cached content of lin's anywhere
            for key in subprocess.run(["redis-cli", "-p", str(p), "--raw", "keys", "*lin*"],
                                      capture_output=True, text=True).stdout.split():
                fields = subprocess.run(["redis-cli", "-p", str(p), "--raw", "hkeys", key],
                                        capture_output=True, text=True).stdout.split()
                assert fields == ["epoch"], (key, fields)
        assert "kettle" in memory.session("mei", "s1").recent[0].content


def test_the_worker_sweeps_idle_sessions_on_every_backend(redis: Redis, tmp_path) -> None:
    """The idle-session sweep runs inside the worker, on a schedule, without a caller."""
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", sessions=redis.url,
                session_idle_minutes=0.001, session_sweep_minutes=0.002) as memory:
        memory.add([{"role": "user", "content": "I live in Berlin.", "created_at": utcnow() - timedelta(hours=1)}],
                   "lin", "s1")
        deadline = time.monotonic() + 60
        while memory.session("lin", "s1").status != "archived" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert memory.session("lin", "s1").status == "archived"
        assert memory.store.idle_sessions(utcnow(), limit=5) == []
        assert Scope("lin", "") in memory.users()


def test_turns_an_earlier_version_held_in_redis_are_handed_to_the_store(tmp_path) -> None:
    """In earlier versions a Redis session held its turns until archived (``:meta``/``:log``
    keys); opening the store hands them to the main store once and drops those keys."""
    import redis as redis_py

    from memstrata.sessions import open_session_store
    from memstrata.stores import open_store

    prefix = f"legacy{time.time_ns()}"
    client = redis_py.Redis(host="127.0.0.1", port=6379)
    tag = f"{prefix}:{{ns%3Ax:lin:s1}}"
    now = utcnow().timestamp()
    client.hset(f"{tag}:meta", mapping={"version": 2, "count": 2, "status": "open",
                                         "created_at": now, "active_at": now})
    for seq, text in enumerate(["我住在翡翠湾", "I packed the lantern"]):
        client.rpush(f"{tag}:log", json.dumps({"id": f"msg_legacy{seq}", "role": "user", "content": text,
                                               "created_at": now, "session_id": "s1", "seq": seq}))
    client.zadd(f"{prefix}:activity", {json.dumps(["ns:x", "lin", "s1"]): now})
    with open_store(f"sqlite:///{tmp_path / 'm.db'}") as store:
        for _ in range(2):  # a second open finds nothing left to hand over
            with open_session_store(f"redis://127.0.0.1:6379/0?prefix={prefix}", store) as sessions:
                got = sessions.messages(Scope("lin", "ns:x"), "s1")
                assert [(m.id, m.content) for m in got] == [("msg_legacy0", "我住在翡翠湾"),
                                                            ("msg_legacy1", "I packed the lantern")]
    assert list(client.scan_iter(match=f"{prefix}:*")) == []


def test_readyz_checks_the_session_store_and_free_disk(tmp_path, monkeypatch) -> None:
    from service_fixture import LiveServer

    from memstrata.server.routes import ops

    server = Redis(tmp_path, cluster=False)
    server.start()
    try:
        with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", sessions=server.url) as memory, \
                LiveServer(memory) as live, live.client() as c:
            ready = c.get("/readyz")
            assert ready.status_code == 200
            assert ready.json()["checks"]["sessions"] == "ok" and ready.json()["checks"]["disk"] == "ok"
            server.kill()
            down = c.get("/readyz")
            assert down.status_code == 503 and "cannot reach Redis" in down.json()["checks"]["sessions"]
            server.start()
            assert c.get("/readyz").status_code == 200
            # the disk check: a threshold above what the disk has free
            monkeypatch.setattr(ops, "MIN_FREE_DISK_MB", 10**12)
            full = c.get("/readyz")
            assert full.status_code == 503 and "MB free" in full.json()["checks"]["disk"]
    finally:
        server.kill()
