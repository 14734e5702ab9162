"""Requests before background jobs (memstrata.priority): real threads, the hash embedder,
a real SQLite store. The assertions are about order and batches, never about time."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from memstrata import Memory
from memstrata.priority import Foreground
from memstrata.providers.embedders import HashEmbedder, TextKind
from memstrata.stores.base import Job
from memstrata.stores.jobs import JobKind


class Recording(HashEmbedder):
    """The hash embedder, recording the size of each batch it embeds."""

    def __init__(self) -> None:
        super().__init__(64)
        self.sizes: list[int] = []

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        self.sizes.append(len(texts))
        return super().embed(texts, kind=kind)


def _background(fg: Foreground, log: list[str], started: threading.Event) -> threading.Thread:
    def job() -> None:
        with fg.background():
            started.set()
            fg.pause()
            log.append("job")

    thread = threading.Thread(target=job)
    thread.start()
    return thread


def test_background_work_waits_for_the_request_in_flight_and_runs_after_it() -> None:
    fg = Foreground(max_wait_s=60, quiet_s=0)
    log: list[str] = []
    started = threading.Event()
    with fg.request():
        thread = _background(fg, log, started)
        assert started.wait(30)
        thread.join(0.3)  # a chance to run too early
        log.append("request done")
    thread.join(30)
    assert log == ["request done", "job"]
    assert fg.in_flight == 0 and fg.pauses == 1


def test_the_wait_is_bounded_so_jobs_run_under_constant_load() -> None:
    fg = Foreground(max_wait_s=0.05, quiet_s=0)
    log: list[str] = []
    fg.enter()  # a request that does not end while the job waits
    thread = _background(fg, log, threading.Event())
    thread.join(30)
    log.append("request done")
    fg.leave()
    assert log == ["job", "request done"]


def test_nested_calls_count_once_and_a_request_never_waits_for_itself() -> None:
    fg = Foreground(max_wait_s=60, quiet_s=0)
    with fg.request():
        with fg.request():  # context() calling search()
            assert fg.in_flight == 1
        with fg.background():  # a job run inline by the request
            assert not fg.yields()
            assert fg.pause() == 0.0
        assert fg.in_flight == 1
    assert fg.in_flight == 0 and fg.pauses == 0


def test_zero_wait_turns_the_priority_off() -> None:
    fg = Foreground(max_wait_s=0, quiet_s=0)
    fg.enter()
    with fg.background():
        assert not fg.yields() and fg.pause() == 0.0
    fg.leave()


def test_background_embedding_goes_a_few_texts_per_call_while_requests_come() -> None:
    embedder = Recording()
    fg = Foreground(max_wait_s=0.01, quiet_s=0, chunk=3)
    polite = fg.polite(embedder)
    texts = [f"turn {i} about the move to Hangzhou" for i in range(10)]
    with fg.background():
        alone = polite.embed(texts)  # nobody waiting: one call
        assert embedder.sizes == [10]
        fg.enter()
        try:
            busy = polite.embed(texts)
        finally:
            fg.leave()
    assert embedder.sizes[1:] == [3, 3, 3, 1]
    assert np.array_equal(alone, busy)
    assert np.array_equal(busy, HashEmbedder(64).embed(texts))
    polite.embed(texts)  # outside background work: straight through
    assert embedder.sizes[-1] == 10


def test_a_queued_job_waits_while_a_request_is_in_flight_and_runs_after(tmp_path: Path) -> None:
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64",
                background_wait_ms=60_000) as memory:
        log: list[str] = []
        ran = threading.Event()
        extract = memory.worker.handlers[JobKind.EXTRACT]

        def spy(job: Job) -> None:
            extract(job)
            log.append("job")
            ran.set()

        memory.worker.handlers[JobKind.EXTRACT] = spy
        lin = memory.user("lin")
        with memory.foreground.request():  # an HTTP request around the add, say
            lin.add([{"role": "user", "content": "I moved to Hangzhou last month"}], "s1")
            assert not ran.wait(0.5)  # a chance to run too early
            log.append("request done")
        assert ran.wait(30)
        memory.flush(timeout=30)
        assert log == ["request done", "job"]
        assert any("Hangzhou" in item.content for item in lin.list())


def test_the_service_counts_each_http_request_in_flight(tmp_path: Path) -> None:
    from service_fixture import LiveServer

    with Memory(f"sqlite:///{tmp_path / 's.db'}", embedder="hash:64") as memory:
        seen: list[int] = []
        search = memory.retriever.search

        def counting(*args: Any, **kwargs: Any) -> Any:
            seen.append(memory.foreground.in_flight)
            return search(*args, **kwargs)

        memory.retriever.search = counting  # type: ignore[method-assign]
        with LiveServer(memory) as live:
            with live.client(live.key("t", "app")) as http:
                response = http.post("/v1/users/lin/search", json={"query": "Hangzhou"})
        assert response.status_code == 200
        # the middleware's count and the search call's own, while it runs; none after
        assert seen == [2] and memory.foreground.in_flight == 0


def test_concurrent_context_calls_aggregate_a_changed_profile_once(tmp_path: Path) -> None:
    with Memory(f"sqlite:///{tmp_path / 'p.db'}", embedder="hash:64", worker="off") as memory:
        lin = memory.user("lin")
        lin.remember("Lin lives in Hangzhou", kind="fact", subject="city")
        reads: list[int] = []
        list_items = memory.store.list_items

        def counting(*args: Any, **kwargs: Any) -> Any:
            reads.append(1)
            return list_items(*args, **kwargs)

        memory.store.list_items = counting  # type: ignore[method-assign]
        start = threading.Barrier(8)
        profiles: list[Any] = []

        def read() -> None:
            start.wait(30)
            profiles.append(memory.profiles.profile(lin.scope))

        threads = [threading.Thread(target=read) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(profiles) == 8 and all(p == profiles[0] for p in profiles)
        assert len(reads) == 1  # the others waited for it and read what it kept
        lin.remember("Lin works as a nurse", kind="fact", subject="job")
        memory.profiles.profile(lin.scope)
        assert len(reads) == 2  # a change is aggregated again
