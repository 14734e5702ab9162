"""Durable background jobs: the worker that runs them.

Jobs live in the store (``jobs`` table), so a crash or a restart loses none: a job is
``pending`` until a worker claims it for a lease; a worker that dies leaves it
``running``, and the next claim takes it again — at once when the holder was a process
on this host that is gone (its name carries host and pid), otherwise once its lease
expired; a live worker renews its lease while a job runs (a heartbeat every third of
the lease), so a long job is never taken from it. Attempts are counted when a job is
claimed, so a job whose worker is killed each time still fails after ``max_attempts``.
A handler applies
a job's writes and calls :meth:`~memstrata.stores.base.Store.finish_job` in **one**
transaction, so its effects commit exactly once: if the lease expired and another
worker took the job meanwhile, ``finish_job`` raises and the stale work rolls back.

A :class:`Worker` runs inside :class:`~memstrata.Memory` as a thread (the default) or
as a process of its own (``memstrata worker``). Jobs of one user run one at a time,
oldest first, so decisions see earlier turns before later ones.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from .errors import ConflictError, JobError, MemstrataError
from .stores.base import Job, JobQueue
from .stores.jobs import JobKind, read_payload
from .stores.policy import UNFINISHED, Rerun

__all__ = ["Worker", "Handler", "Prepare", "Periodic", "JobKind", "UNFINISHED", "wait_for"]

log = logging.getLogger("memstrata.jobs")

#: A job handler: applies the job and calls ``store.finish_job(job)`` in the same
#: transaction as its writes.
Handler = Callable[[Job], None]
#: Work done ahead for queued jobs, several at once, before the oldest of them runs
#: (the embedding of their turns, batched across jobs and users). It may do nothing
#: or fail: each job still does all its own work; a failure is logged.
Prepare = Callable[[list[Job]], None]


_MAX_BACKOFF_S = 30.0
#: Times a job runs again at once when a forget of its user committed while it ran
#: (after that it fails this attempt, and is retried like any failure).
_RERUNS = 5
#: The kinds memstrata defines: their payloads are checked before a handler runs
#: (a kind of a caller's own, such as a test's, is not).
_KINDS = frozenset(kind.value for kind in JobKind)


@dataclass
class Periodic:
    """Work the worker does on a schedule beside its jobs (the idle-session sweep): the
    first run one ``every_s`` after the worker is made, then every ``every_s``. A
    failure is logged once with a count while it repeats, and retried next time."""

    name: str
    every_s: float
    run: Callable[[], object]
    due: float = field(default=0.0)
    failures: int = 0

    def __post_init__(self) -> None:
        self.due = time.monotonic() + self.every_s


def _alive(pid: int) -> bool:
    """Whether a process of this host is running (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


class Worker:
    """Claims jobs from a store and runs their handlers, one at a time."""

    def __init__(self, store: JobQueue, handlers: Mapping[str, Handler], *, lease_s: float = 60.0,
                 max_attempts: int = 3, poll_s: float = 0.5, name: str | None = None,
                 prepare: Prepare | None = None, prepare_jobs: int = 64) -> None:
        self.store = store
        self.prepare = prepare
        self.prepare_jobs = prepare_jobs
        self._prepared: set[str] = set()
        self.handlers = dict(handlers)
        self.lease_s = lease_s
        self.max_attempts = max_attempts
        self.poll_s = poll_s
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.failures: list[tuple[Job, str]] = []
        self.periodic: list[Periodic] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def dead_workers(self) -> list[str]:
        """Holders of running jobs that were processes on this host and are gone."""
        host = socket.gethostname()
        dead = []
        for job in self.store.list_jobs(statuses=("running",), limit=1000):
            name = job.worker or ""
            parts = name.rsplit(":", 2)
            if name == self.name or len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
                continue
            if not _alive(int(parts[1])):
                dead.append(name)
        return sorted(set(dead))

    def _heartbeat(self, job: Job, done: threading.Event) -> None:
        while not done.wait(self.lease_s / 3):
            try:
                if not self.store.renew_job(job, self.lease_s):
                    return  # taken back: finish_job will say so
            except MemstrataError as exc:  # the store is failing: the handler will notice
                log.warning("job %s: renewing the lease failed: %s", job.id, exc)

    def _prepare_pending(self) -> None:
        """Hand the oldest pending jobs not prepared yet to ``prepare``, together — when
        the next job to run is one of them (a job arriving alone is prepared alone)."""
        if self.prepare is None:
            return
        pending = self.store.list_jobs(statuses=("pending",), limit=self.prepare_jobs)
        fresh = [job for job in pending if job.id not in self._prepared]
        if not fresh:
            return
        if len(self._prepared) > 10 * self.prepare_jobs:  # ids of jobs long finished
            self._prepared &= {job.id for job in pending}
        self._prepared.update(job.id for job in fresh)
        try:
            self.prepare(fresh)
        except Exception as exc:  # the jobs do the work themselves
            log.warning("worker %s: preparing %d job(s) failed (%s: %s); they run unprepared",
                        self.name, len(fresh), type(exc).__name__, exc)

    def run_once(self) -> Job | None:
        """Claim and run one job; the job (or None when nothing was runnable)."""
        self._prepare_pending()
        job = self.store.claim_job(self.name, self.lease_s, max_attempts=self.max_attempts,
                                   dead_workers=self.dead_workers())
        if job is None:
            return None
        handler = self.handlers.get(job.kind)
        started = time.monotonic()
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job, done), daemon=True,
                                name=f"memstrata-lease-{job.id}")
        beat.start()
        try:
            if handler is None:
                raise JobError(f"no handler for job kind {job.kind!r} (written by a newer "
                               f"memstrata?); known: {', '.join(sorted(self.handlers))}")
            if job.kind in _KINDS:
                read_payload(job)  # a payload that does not fit fails here, named
            for rerun in range(_RERUNS + 1):
                try:
                    handler(job)
                    break
                except Rerun as exc:  # a forget of the user committed while it ran: again, at once
                    if rerun == _RERUNS:  # a failed attempt (retried later), not a lost job
                        raise JobError(f"{exc} ({_RERUNS} times in a row)") from exc
            log.info("job %s (%s of %r) done in %.3fs, attempt %d", job.id, job.kind,
                     job.user_id, time.monotonic() - started, job.attempts)
        except ConflictError as exc:
            log.warning("job %s: %s", job.id, exc)
        except Exception as exc:  # recorded on the job and retried; never lost
            error = f"{type(exc).__name__}: {exc}"
            log.exception("job %s (%s) failed on attempt %d", job.id, job.kind, job.attempts)
            self.failures.append((job, error))
            try:
                self.store.finish_job(job, error=error, max_attempts=self.max_attempts)
            except ConflictError as again:
                log.warning("job %s: %s", job.id, again)
        finally:
            done.set()
        return job

    def run_periodic(self) -> None:
        """Run the scheduled work that is due."""
        for task in self.periodic:
            if time.monotonic() < task.due:
                continue
            task.due = time.monotonic() + task.every_s
            try:
                task.run()
            except Exception as exc:  # logged, retried at the next due time
                task.failures += 1
                if task.failures == 1:
                    log.warning("worker %s: %s failed (%s: %s); retrying every %.0fs",
                                self.name, task.name, type(exc).__name__, exc, task.every_s)
                elif task.failures & (task.failures - 1) == 0:
                    log.warning("worker %s: %s still failing after %d tries (%s)", self.name,
                                task.name, task.failures, type(exc).__name__)
            else:
                if task.failures:
                    log.info("worker %s: %s works again after %d failure(s)", self.name,
                             task.name, task.failures)
                task.failures = 0

    def run(self, *, until_idle: bool = False, stop: threading.Event | None = None) -> int:
        """Run jobs until ``stop`` is set (or, with ``until_idle``, until no job is
        pending or running anywhere). Returns the number of jobs run."""
        stop = stop or self._stop
        ran = 0
        while not stop.is_set():
            self.run_periodic()
            if self.run_once() is not None:
                ran += 1
                continue
            if until_idle and not self.store.list_jobs(statuses=UNFINISHED, limit=1):
                break
            self._wake.wait(self.poll_s)
            self._wake.clear()
        return ran

    # -- as a thread inside Memory ----------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the background thread (once)."""
        with self._lock:
            if self.running:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=f"memstrata-worker-{self.name}",
                                            daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self.run()
                failures = 0
            except Exception as exc:  # the store failed (locked, disk full): back off
                failures += 1
                delay = min(self.poll_s * 2 ** failures, _MAX_BACKOFF_S)
                if failures == 1:
                    log.exception("worker %s: claiming jobs failed; retrying in %.1fs",
                                  self.name, delay)
                elif failures & (failures - 1) == 0:  # 2, 4, 8, …: one line, no traceback
                    log.warning("worker %s: still failing after %d tries (%s: %s); next try "
                                "in %.0fs", self.name, failures, type(exc).__name__, exc, delay)
                self._stop.wait(delay)

    def wake(self) -> None:
        """Tell the worker a job is waiting (it also polls every ``poll_s``)."""
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the thread after the job in hand; pending jobs stay in the store."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


def wait_for(store: JobQueue, *, created_before: datetime, timeout: float | None, worker: Worker,
             inline: bool, poll_s: float = 0.02) -> None:
    """Block until no job created before ``created_before`` is pending or running.

    With ``inline`` the caller's thread runs jobs itself; otherwise it waits for the
    worker thread (or another process). Raises JobError after ``timeout`` seconds.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if inline:
            while worker.run_once() is not None:
                pass
        if not store.list_jobs(statuses=UNFINISHED, created_before=created_before, limit=1):
            return
        if deadline is not None and time.monotonic() > deadline:
            left = store.list_jobs(statuses=UNFINISHED, created_before=created_before)
            raise JobError(f"{len(left)} background job(s) still unfinished after {timeout}s "
                               f"(oldest {left[0].id}, {left[0].status}); is a worker running?")
        worker.wake()
        time.sleep(poll_s)
