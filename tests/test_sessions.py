"""One conformance suite for the SessionStore seam: the main store's own session rows on
SQLite and on PostgreSQL (no Redis), Redis on 127.0.0.1:6379, and a real 3-node Redis
Cluster started here on localhost ports.

No mocks: racing writers are real threads and real processes on the real stores.
"""

from __future__ import annotations

import multiprocessing
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import errors
from memstrata.layers.episodic import ExtractiveSummariser, SessionManager
from memstrata.sessions import open_session_store
from memstrata.sessions.base import SessionStore
from memstrata.stores import open_store
from memstrata.types import Message, Role, Scope, StructuredSummary, utcnow

ALICE = Scope("alice", "ns:{x}")  # braces and colons in ids must not move the hash tag
REDIS = "redis://127.0.0.1:6379/0"


def _redis_up(port: int = 6379) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory) -> Iterator[str]:
    """Three cluster-enabled redis-server processes, joined with redis-cli --cluster create."""
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    tmp = tmp_path_factory.mktemp("cluster")
    ports = []
    while len(ports) < 3:  # cluster bus ports are port + 10000: keep both free
        p = _free_port()
        if p < 55000 and p not in ports:
            ports.append(p)
    for p in ports:
        subprocess.run(["redis-server", "--port", str(p), "--bind", "127.0.0.1",
                        "--cluster-enabled", "yes", "--cluster-config-file", str(tmp / f"n{p}.conf"),
                        "--dir", str(tmp), "--save", "", "--appendonly", "no", "--daemonize", "yes",
                        "--pidfile", str(tmp / f"n{p}.pid"), "--logfile", str(tmp / f"n{p}.log")],
                       check=True)
    try:
        for p in ports:
            for _ in range(100):
                if _redis_up(p):
                    break
                time.sleep(0.05)
        subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                        "--cluster-replicas", "0", "--cluster-yes"], check=True,
                       capture_output=True, timeout=60)
        for _ in range(200):
            info = subprocess.run(["redis-cli", "-p", str(ports[0]), "cluster", "info"],
                                  capture_output=True, text=True).stdout
            if "cluster_state:ok" in info:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the Redis Cluster did not reach cluster_state:ok")
        yield f"redis+cluster://127.0.0.1:{ports[0]}"
    finally:
        for p in ports:
            subprocess.run(["redis-cli", "-p", str(p), "shutdown", "nosave"], capture_output=True)


@pytest.fixture(params=["sqlite", "postgres", "redis", "redis-cluster"])
def session_url(request, tmp_path) -> tuple[str, str | None]:
    """(main store URL, sessions URL); each Redis test gets its own key prefix. The
    PostgreSQL case has no Redis: sessions live in its own session rows."""
    db = f"sqlite:///{tmp_path / 'm.db'}"
    prefix = f"t{uuid.uuid4().hex[:10]}"
    if request.param == "sqlite":
        return db, None
    if request.param == "postgres":
        return request.getfixturevalue("pg_url"), None
    if request.param == "redis":
        if not _redis_up():
            pytest.fail("no Redis on 127.0.0.1:6379: run ./scripts/test, which starts one")
        return db, f"{REDIS}?prefix={prefix}"
    return db, f"{request.getfixturevalue('redis_cluster')}/?prefix={prefix}"


@pytest.fixture
def sessions(session_url) -> Iterator[SessionStore]:
    db, url = session_url
    with open_store(db) as store, open_session_store(url, store, window=5) as opened:
        yield opened


def msg(text: str, role: Role = Role.USER) -> Message:
    return Message(role=role, content=text, created_at=utcnow())


def test_new_session_is_version_zero(sessions):
    state = sessions.load(ALICE, "s1")
    assert (state.version, state.exists, state.message_count, state.recent) == (0, False, 0, ())


def test_append_load_window_and_messages(sessions):
    state, stored = sessions.append(ALICE, "s1", [msg(f"m{i}") for i in range(8)], 0)
    assert [m.seq for m in stored] == list(range(8)) and all(m.id for m in stored)
    assert state.version == 1 and state.message_count == 8 and state.status == "open"
    assert [m.content for m in state.recent] == [f"m{i}" for i in range(3, 8)]  # window 5
    assert [m.content for m in sessions.messages(ALICE, "s1", start=6)] == ["m6", "m7"]
    assert sessions.load(Scope("bob", ALICE.namespace), "s1").version == 0  # scoped by user


def test_stale_version_is_a_conflict_and_writes_nothing(sessions):
    sessions.append(ALICE, "s1", [msg("a")], 0)
    with pytest.raises(errors.ConflictError, match="version 1, not 0"):
        sessions.append(ALICE, "s1", [msg("b")], 0)
    with pytest.raises(errors.ConflictError):
        sessions.save_summary(ALICE, "s1", StructuredSummary(goal="x"), 1, 0)
    state = sessions.load(ALICE, "s1")
    assert state.version == 1 and [m.content for m in sessions.messages(ALICE, "s1")] == ["a"]
    assert state.summary is None


def test_summary_round_trip(sessions):
    state, _ = sessions.append(ALICE, "s1", [msg("I want a trip to Kyoto")], 0)
    summary = StructuredSummary(goal="a trip to Kyoto", version=1)
    saved = sessions.save_summary(ALICE, "s1", summary, 1, state.version)
    assert saved.summary == summary and saved.message_range_end == 1 and saved.version == 2


def test_archive_hands_over_every_message_and_reopens_on_write(sessions):
    store = sessions.store
    sessions.append(ALICE, "s1", [msg(f"m{i}") for i in range(3)], 0)
    state, handed = sessions.archive(ALICE, "s1")
    assert state.status == "archived"
    assert [m.content for m in store.get_messages(ALICE, "s1")] == ["m0", "m1", "m2"]
    assert len(handed) == (3 if sessions.hot_log else 0)
    again, _ = sessions.archive(ALICE, "s1")  # idempotent
    assert again.status == "archived" and len(store.get_messages(ALICE, "s1")) == 3
    state, stored = sessions.append(ALICE, "s1", [msg("m3")], sessions.load(ALICE, "s1").version)
    assert state.status == "open" and stored[0].seq == 3
    assert [m.content for m in sessions.messages(ALICE, "s1")] == ["m0", "m1", "m2", "m3"]
    sessions.archive(ALICE, "s1")
    assert [m.seq for m in store.get_messages(ALICE, "s1")] == [0, 1, 2, 3]


def test_expired_lists_idle_sessions_only(sessions):
    sessions.append(ALICE, "old", [msg("x")], 0)
    later = utcnow() + timedelta(minutes=31)
    assert (ALICE, "old") in sessions.expired(later, timedelta(minutes=30))
    assert (ALICE, "old") not in sessions.expired(utcnow(), timedelta(minutes=30))
    sessions.archive(ALICE, "old")
    assert (ALICE, "old") not in sessions.expired(later, timedelta(minutes=30))


def test_manager_sweep_summarises_archives_and_resumes(sessions):
    manager = SessionManager(sessions, every_n=4)
    for text in ["I want to plan a trip to Kyoto.", "We decided to go in April.",
                 "Booked the flights already.", "Should we rent a car?", "Never book hostels."]:
        manager.append(ALICE, "trip", [msg(text)])
        manager.summarise(ALICE, "trip")
    assert sessions.load(ALICE, "trip").message_range_end == 4
    archived = manager.sweep(utcnow() + timedelta(hours=1))
    assert [(s, sid) for s, sid, _ in archived] == [(ALICE, "trip")]
    state = sessions.load(ALICE, "trip")
    assert state.status == "archived" and state.message_range_end == 5
    assert "hostels" in state.summary.constraints
    resumed = manager.resume(ALICE, exclude="other")
    assert resumed is not None and resumed.session_id == "trip"
    assert "Kyoto" in resumed.summary.goal and "car" in resumed.summary.open_questions


def _writer(db: str, url: str | None, name: str, n: int, errors_out=None) -> None:
    try:
        with open_store(db) as store, open_session_store(url, store) as sessions:
            manager = SessionManager(sessions, every_n=7)
            for i in range(n):
                manager.append(ALICE, "race", [msg(f"{name}-{i}"), msg(f"{name}-{i}-reply", Role.ASSISTANT)])
                manager.summarise(ALICE, "race")
    except BaseException as exc:  # surfaced by the parent
        if errors_out is not None:
            errors_out.append(exc)
        raise


def _check_race(sessions: SessionStore, names: list[str], n: int) -> None:
    log = sessions.messages(ALICE, "race")
    assert [m.seq for m in log] == list(range(len(log)))
    assert len(log) == 2 * n * len(names)
    for name in names:
        mine = [m.content for m in log if m.content.startswith(name + "-")]
        assert mine == [x for i in range(n) for x in (f"{name}-{i}", f"{name}-{i}-reply")]
    for a, b in zip(log[::2], log[1::2]):  # each append of two stays together
        assert b.content == a.content + "-reply"
    state = sessions.load(ALICE, "race")
    assert state.message_count == len(log)
    assert state.message_range_end <= len(log) and state.summary is not None


def test_two_threads_racing_lose_and_reorder_nothing(session_url, sessions):
    db, url = session_url
    errs: list[BaseException] = []
    threads = [threading.Thread(target=_writer, args=(db, url, name, 30, errs)) for name in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errs
    _check_race(sessions, ["A", "B"], 30)


def test_two_processes_racing_lose_and_reorder_nothing(session_url, sessions):
    db, url = session_url
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(db, url, name, 20)) for name in "PQ"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0]
    _check_race(sessions, ["P", "Q"], 20)


def test_summaries_are_incremental_over_200_turns(sessions):
    """The summariser sees each message exactly once, and the summary stays small."""
    seen: list[str] = []

    class Counting(ExtractiveSummariser):
        def summarise(self, previous, new_messages, *, scope=None):
            seen.extend(m.id for m in new_messages)
            return ExtractiveSummariser.summarise(self, previous, new_messages, scope=scope)

    manager = SessionManager(sessions, summariser=Counting(), every_n=10)
    for turn in range(200):
        manager.append(ALICE, "long", [msg(f"Turn {turn}: I want to finish step {turn}. "
                                           f"Should we test part {turn}?")])
        manager.summarise(ALICE, "long")
    ids = [m.id for m in sessions.messages(ALICE, "long")]
    assert seen == ids  # every message once, in order
    state = sessions.load(ALICE, "long")
    assert state.message_range_end == 200 and state.summary.version == 20
    assert all(len(getattr(state.summary, p)) <= 200 for p in
               ("goal", "decisions", "done", "open_questions", "constraints"))


def test_redis_unavailable_is_a_clear_error(tmp_path):
    port = _free_port()  # nothing listens here
    with open_store(f"sqlite:///{tmp_path / 'm.db'}") as store:
        with pytest.raises(errors.StoreUnavailableError, match=f"cannot reach Redis at 127.0.0.1:{port}"):
            open_session_store(f"redis://127.0.0.1:{port}/0", store)


def test_redis_going_away_mid_session_is_an_error_not_an_empty_session(tmp_path):
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    port = _free_port()
    subprocess.run(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--daemonize", "yes", "--dir", str(tmp_path)], check=True)
    for _ in range(100):
        if _redis_up(port):
            break
        time.sleep(0.05)
    with open_store(f"sqlite:///{tmp_path / 'm.db'}") as store:
        sessions = open_session_store(f"redis://127.0.0.1:{port}/0", store)
        sessions.append(ALICE, "s1", [msg("hello")], 0)
        subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True)
        with pytest.raises(errors.StoreUnavailableError, match="Redis"):
            sessions.load(ALICE, "s1")


def test_unknown_sessions_scheme(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'm.db'}") as store:
        with pytest.raises(errors.ConfigError, match="unknown sessions URL"):
            open_session_store("mongodb://x", store)
