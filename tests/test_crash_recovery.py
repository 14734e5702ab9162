"""Crash recovery of the job queue, with real processes: a worker SIGKILLed mid-job is
detected as gone and its job taken back at once; attempts count even when the worker
dies each time; flush() reports final outcomes only; a failing store is retried with
back-off, logging a traceback once."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory
from memstrata.errors import JobError, StoreError
from memstrata.jobs import Worker
from memstrata.stores import open_store
from memstrata.types import Scope, utcnow

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from memstrata import Memory
    path, marker = sys.argv[1], Path(sys.argv[2])
    with Memory(f"sqlite:///{path}", embedder="hash:64", worker="off", job_lease_s=3600) as m:
        real = m.worker.handlers["extract"]
        def stuck(job):
            marker.write_text(job.id)
            time.sleep(120)  # killed here, mid-job
            real(job)
        m.worker.handlers["extract"] = stuck
        m.worker.run_once()
""")


def test_a_killed_worker_s_job_is_taken_back_at_once_by_a_restarted_worker(tmp_path):
    path, marker = tmp_path / "m.db", tmp_path / "claimed"
    with Memory(f"sqlite:///{path}", embedder="hash:64", worker="off") as m:
        for user in ("lin", "kai", "mei"):
            m.user(user).add([{"role": "user", "content": f"I live in Oslo, says {user}."}], "s1")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(marker)], cwd=ROOT)
    try:
        for _ in range(600):
            if marker.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert marker.exists(), "the child never claimed a job"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    killed = marker.read_text()
    with Memory(f"sqlite:///{path}", embedder="hash:64", worker="off", job_lease_s=3600) as m:
        started = time.monotonic()
        m.flush(timeout=60)  # a hang guard only: the lease is an hour, the takeover immediate
        took = time.monotonic() - started
        jobs = m.jobs()
        assert {j.status for j in jobs} == {"done"}
        assert next(j for j in jobs if j.id == killed).attempts == 2
        assert all(m.user(u).list() for u in ("lin", "kai", "mei"))
    print(f"restarted worker finished the queue in {took:.2f} s after the SIGKILL")


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    return f"sqlite:///{tmp_path / 'm.db'}"


def test_a_job_whose_worker_dies_every_time_fails_after_max_attempts(store_url):
    with open_store(store_url) as store:
        scope = Scope("lin")
        job = store.enqueue_job(scope, "extract", {"session_id": "s1", "from_seq": 0, "to_seq": 0})
        now = utcnow()
        for attempt in range(1, 4):  # each holder dies; its lease runs out
            claimed = store.claim_job(f"w{attempt}", 1.0, now=now, max_attempts=3)
            assert claimed is not None and claimed.attempts == attempt
            now += timedelta(seconds=5)
        assert store.claim_job("w4", 1.0, now=now, max_attempts=3) is None
        [final] = store.list_jobs(scope)
        assert (final.id, final.status, final.attempts) == (job.id, "failed", 3)
        assert "no attempt is left" in (final.last_error or "")


def test_a_dead_holder_is_taken_back_without_waiting_for_its_lease(store_url):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with open_store(store_url) as store:
        store.enqueue_job(Scope("lin"), "profile", {})
        import socket

        holder = f"{socket.gethostname()}:{dead.pid}:abcdef"
        assert store.claim_job(holder, 3600.0) is not None
        worker = Worker(store, {}, lease_s=3600.0)
        assert worker.dead_workers() == [holder]
        again = store.claim_job(worker.name, 3600.0, dead_workers=worker.dead_workers())
        assert again is not None and again.attempts == 2


def test_a_long_job_keeps_its_lease_through_heartbeats(store_url):
    with open_store(store_url) as store:
        store.enqueue_job(Scope("lin"), "slow", {})
        # leases of 1.5 s, renewed every 0.5 s: a heartbeat thread that a busy machine
        # stalls for a lease (0.3 s leases failed a cold CI run at load 2 on 2 cores) is
        # not what this test is about
        other = Worker(store, {}, lease_s=1.5)

        def slow(job):
            time.sleep(4.5)  # three leases long
            assert other.store.claim_job(other.name, 1.5) is None  # still held: renewed
            store.finish_job(job)

        worker = Worker(store, {"slow": slow}, lease_s=1.5)
        assert worker.run_once() is not None
        assert [j.status for j in store.list_jobs()] == ["done"]


def test_flush_reports_final_outcomes_only(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64", worker="off") as m:
        real, calls = m.worker.handlers["extract"], []

        def flaky(job):
            calls.append(job.id)
            if len(calls) == 1:
                raise RuntimeError("a passing failure")
            real(job)

        m.worker.handlers["extract"] = flaky
        m.user("lin").add("I live in Oslo.", "s1")
        m.flush(timeout=60)  # the retry finished it: nothing to report
        assert len(calls) == 2 and [j.status for j in m.jobs("lin")] == ["done"]

        m.worker.handlers["extract"] = lambda job: (_ for _ in ()).throw(RuntimeError("always"))
        m.user("lin").add("I like tennis.", "s1")
        with pytest.raises(JobError, match="1 background job"):
            m.flush(timeout=60)


def test_a_failing_store_is_retried_with_back_off_and_one_traceback(tmp_path, caplog):
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    store.close()  # every call now fails with a StoreError, as on a full or vanished disk
    with pytest.raises(StoreError):
        store.list_jobs()
    worker = Worker(store, {}, poll_s=0.05)
    caplog.set_level(logging.INFO, logger="memstrata.jobs")
    thread = threading.Thread(target=worker._loop, daemon=True)
    thread.start()
    time.sleep(2.0)
    worker._stop.set()
    thread.join(10)
    records = [r for r in caplog.records if r.name == "memstrata.jobs"]
    assert sum(r.exc_info is not None for r in records) == 1
    assert 1 <= len(records) <= 5  # 0.1, 0.2, 0.4, 0.8 s apart: not one every poll
