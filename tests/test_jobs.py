"""Durable background jobs: crash between raw write and extraction, a worker killed with
SIGKILL mid-batch (a real process), and a job applied twice by two workers. Real SQLite
files and the instant hash embedder; no mocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memstrata import Memory, Status
from memstrata.errors import ConflictError, JobError

LIKES = ["hiking", "tennis", "chess", "jazz", "sushi", "cycling", "painting", "golf", "yoga",
         "rowing"]


def turn(text: str) -> list[dict]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "OK."}]


def state(memory: Memory, user: str) -> list[tuple]:
    """What extraction produced, independent of ids and times."""
    items = memory.list(user, filters={"status": [s.value for s in Status]}, limit=10_000)
    return sorted((i.content, i.status.value, i.version, round(i.confidence, 4),
                   tuple(v.op for v in memory.history(i.id, user))) for i in items)


def conversation(memory: Memory, users: int) -> None:
    for u in range(users):
        for i, like in enumerate(LIKES):
            memory.add(turn(f"I like {like}."), user_id=f"user{u}", session_id="s1")
            memory.add(turn(f"I also like {LIKES[(i + 3) % len(LIKES)]}."), user_id=f"user{u}",
                       session_id="s2")
        memory.add(turn("I use Java."), user_id=f"user{u}", session_id="s3")
        memory.add(turn("I switched from Java to Go."), user_id=f"user{u}", session_id="s3")


def test_add_returns_before_extraction_and_flush_waits(tmp_path: Path) -> None:
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off") as memory:
        memory.add(turn("I like hiking."), user_id="a")
        assert memory.list("a") == [] and memory.jobs("a", status="pending")
        memory.flush()
        assert [i.content for i in memory.list("a")] == ["User likes hiking"]
        assert [j.status for j in memory.jobs("a")] == ["done"]


def test_crash_between_raw_write_and_extraction_resumes_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    crashed = Memory(url, embedder="hash:256", worker="off")
    crashed.add(turn("I live in Paris."), user_id="a")
    crashed.add(turn("I like tennis."), user_id="a")
    crashed.store.close()  # the process dies: nothing ran, the jobs are in the file
    with Memory(url, embedder="hash:256") as memory:  # a restart resumes them
        memory.flush(timeout=60)
        after = state(memory, "a")
        assert [c for c, *_ in after] == ["User likes tennis", "User lives in Paris"]
        assert [j.status for j in memory.jobs("a")] == ["done", "done"]
        assert len(memory.messages("a")) == 4
        memory.flush()
        assert state(memory, "a") == after


def test_a_job_taken_over_after_its_lease_applies_once(tmp_path: Path) -> None:
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off") as memory:
        memory.add(turn("I like chess."), user_id="a")
        slow = memory.store.claim_job("slow-worker", lease_s=0)  # it stalls past its lease
        fast = memory.store.claim_job("fast-worker", lease_s=60)
        assert slow is not None and fast is not None and slow.id == fast.id
        memory.pipeline.run_extract(fast)
        with pytest.raises(ConflictError):
            memory.pipeline.run_extract(slow)  # its writes roll back with the refused finish
        [item] = memory.list("a")
        assert [v.op for v in memory.history(item.id, "a")] == ["create"]
        assert item.confidence == 0.8


def test_a_failing_job_is_retried_then_reported(tmp_path: Path) -> None:
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off",
                job_max_attempts=2) as memory:
        memory.add(turn("I like chess."), user_id="a")
        memory.store.enqueue_job(memory.user("a").scope, "no-such-kind", {})
        with pytest.raises(JobError, match="no handler"):
            memory.flush()
        [done, failed] = memory.jobs("a")
        assert done.status == "done" and failed.status == "failed" and failed.attempts == 2
        memory.flush()  # reported once


def test_sigkill_mid_batch_then_restart_completes_every_job_exactly_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    users = 3
    with Memory(url, embedder="hash:256", worker="off") as memory:
        conversation(memory, users)
        total = len(memory.jobs())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    cmd = [sys.executable, "-m", "memstrata.cli.main", "worker", "--store", url,
           "--embedder", "hash:256", "--poll", "0.05"]
    proc = subprocess.Popen([*cmd, "--lease", "2"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        with Memory(url, embedder="hash:256", worker="off") as watch:
            deadline = time.monotonic() + 120
            while len(watch.jobs(status="done")) < 3 and time.monotonic() < deadline:
                assert proc.poll() is None, proc.stderr.read().decode()
                time.sleep(0.005)
            os.kill(proc.pid, signal.SIGKILL)  # mid-batch: no cleanup, no finally
            proc.wait()
            done_at_kill = len(watch.jobs(status="done"))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert 3 <= done_at_kill < total, "the worker must die mid-batch"
    subprocess.run([*cmd, "--until-idle"], env=env, check=True, timeout=300,
                   capture_output=True)
    reference_url = f"sqlite:///{tmp_path / 'reference.db'}"
    with Memory(reference_url, embedder="hash:256", worker="off") as reference:
        conversation(reference, users)
        reference.flush()
        with Memory(url, embedder="hash:256", worker="off") as restarted:
            jobs = restarted.jobs()
            assert len(jobs) == total and {j.status for j in jobs} == {"done"}
            assert sum(j.attempts for j in jobs) <= total + 1  # at most the one in hand re-ran
            for u in range(users):
                user = f"user{u}"
                assert state(restarted, user) == state(reference, user)
                for session in ("s1", "s2", "s3"):
                    assert [m.content for m in restarted.messages(user, session)] == \
                        [m.content for m in reference.messages(user, session)]


def test_maintain_and_profile_run_as_idempotent_jobs(tmp_path: Path) -> None:
    from datetime import timedelta

    from memstrata.types import utcnow

    url = f"sqlite:///{tmp_path / 'm.db'}"
    later = utcnow() + timedelta(days=400)
    with Memory(url, embedder="hash:256", worker="off") as memory:
        memory.add(turn("My name is Alice."), user_id="a")
        memory.add(turn("I like hiking."), user_id="a")
        memory.add(turn("Remind me to renew my passport."), user_id="a")
        memory.flush()
        queued = memory.maintain("a", now=later, background=True)
        assert len(queued.queued) == 2 and queued.deactivated == 0
        assert memory.maintain("a", now=later, background=True).queued == ()  # already pending
        assert memory.profile("a", cached=True).name == "Alice"  # live until a snapshot exists
        memory.store.close()  # the process dies before a worker ran them
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    subprocess.run([sys.executable, "-m", "memstrata.cli.main", "worker", "--store", url,
                    "--embedder", "hash:256", "--until-idle"], env=env, check=True,
                   timeout=300, capture_output=True)
    with Memory(url, embedder="hash:256", worker="off") as memory:
        kinds = [(j.kind, j.status) for j in memory.jobs("a")]
        assert kinds[-2:] == [("maintain", "done"), ("profile", "done")]
        hiking = next(i for i in memory.list("a", filters={"status": ["inactive"]}))
        assert "hiking" in hiking.content  # decayed; the todo did not
        assert [i.kind.value for i in memory.list("a")].count("todo") == 1
        ops = [v.op for v in memory.history(hiking.id, "a")]
        snapshot = memory.profile("a", cached=True)
        assert snapshot == memory.profile("a") and "passport" in " ".join(snapshot.current)
        # the same maintenance again, inline or queued, changes nothing
        again = memory.maintain("a", now=later)
        assert (again.deactivated, again.reweighted, again.evicted) == (0, 0, 0)
        memory.maintain("a", now=later, background=True)
        memory.flush()
        assert [v.op for v in memory.history(hiking.id, "a")] == ops
        assert {j.status for j in memory.jobs("a")} == {"done"}
        memory.forget_user("a")
        assert memory.profile("a", cached=True).is_empty


def test_job_kinds_keep_the_strings_stored_rows_hold(tmp_path: Path) -> None:
    """A database written before the kinds were an enum reads the same: a row queued with
    the bare strings of then runs, and what is queued now stores the same strings."""
    from memstrata.stores.jobs import (ExtractPayload, JobKind, MaintainPayload, enqueue,
                                       read_payload)

    assert {k.value for k in JobKind} == {"extract", "summarise", "consolidate", "maintain", "profile"}
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off") as memory:
        memory.add(turn("I live in Paris."), user_id="a", extract=False)
        scope = memory.user("a").scope
        old = memory.store.enqueue_job(scope, "extract", {"session_id": "default", "from_seq": 0,
                                                          "to_seq": 1})
        new = enqueue(memory.store, scope, MaintainPayload(None))
        [stored_old, stored_new] = memory.store.list_jobs(scope)
        assert (stored_old.kind, stored_new.kind) == ("extract", "maintain")
        assert type(stored_old.kind) is str and stored_new.payload == {}
        assert read_payload(stored_old) == ExtractPayload("default", 0, 1)
        memory.flush()
        assert {j.id: j.status for j in memory.jobs("a")} == {old.id: "done", new.id: "done"}
        assert [i.content for i in memory.list("a")] == ["User lives in Paris"]


@pytest.mark.parametrize("payload, says", [
    ({"session_id": "s1", "from_seq": "0", "to_seq": 1}, "'from_seq' must be a message sequence number"),
    ({"from_seq": 0, "to_seq": 1}, "'session_id' must be a non-empty string"),
    ({"session_id": "s1", "from_seq": True, "to_seq": 1}, "not bool"),
])
def test_a_payload_that_does_not_fit_is_a_job_error_naming_the_field(tmp_path: Path, payload: dict,
                                                                      says: str) -> None:
    from memstrata.errors import MemstrataError
    from memstrata.stores.jobs import ExtractPayload, read_payload

    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off",
                job_max_attempts=1) as memory:
        scope = memory.user("a").scope
        job = memory.store.enqueue_job(scope, "extract", payload)
        for read in (read_payload, ExtractPayload.read):
            with pytest.raises(JobError, match=says) as caught:
                read(job)
            assert isinstance(caught.value, MemstrataError) and job.id in str(caught.value)
        with pytest.raises(JobError, match="failed after every attempt") as failed:
            memory.flush()
        assert says in str(failed.value)
        [stored] = memory.jobs("a")
        assert stored.status == "failed" and says in (stored.last_error or "")


def test_a_payload_read_as_another_kind_and_an_unknown_kind_are_named(tmp_path: Path) -> None:
    from memstrata.stores.jobs import ConsolidatePayload, MaintainPayload, read_payload

    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off") as memory:
        scope = memory.user("a").scope
        job = memory.store.enqueue_job(scope, "maintain", {"now": "yesterday"})
        with pytest.raises(JobError, match="'now' must be an ISO 8601 time"):
            MaintainPayload.read(job)
        with pytest.raises(JobError, match="is a 'maintain' job, not 'consolidate'"):
            ConsolidatePayload.read(job)
        other = memory.store.enqueue_job(scope, "reindex-v9", {})
        with pytest.raises(JobError, match="unknown kind 'reindex-v9'"):
            read_payload(other)
