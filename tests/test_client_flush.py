"""``Client.flush()`` / ``AsyncClient.flush()``: wait, over HTTP, for the background jobs
the service had queued — against a real server, its worker thread running or off."""

from __future__ import annotations

import asyncio

import pytest
from service_fixture import LiveServer

from memstrata import AsyncClient, Client, JobError, Memory

TURNS = [{"role": "user", "content": "I moved to Lisbon last spring and I work at Bosch."},
         {"role": "assistant", "content": "Noted."}]


def _unfinished(memory):
    return [j for j in memory.store.list_jobs(limit=1000) if j.status in ("pending", "running")]


def test_flush_waits_for_the_extraction_an_add_queued(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as memory, \
            LiveServer(memory) as live, Client(live.url, live.key("acme", "app")) as client:
        lin = client.user("lin")
        for n in range(3):
            lin.add(TURNS, f"s{n}")
        client.flush(timeout=60)
        assert _unfinished(memory) == []
        assert {j.status for j in lin.jobs()} == {"done"}
        assert any("Lisbon" in i.content for i in lin.list())  # the extraction ran


def test_async_flush_waits_too(tmp_path):
    async def run(url, token):
        async with AsyncClient(url, token) as client:
            lin = client.user("lin")
            await lin.add(TURNS, "s1")
            await client.flush(timeout=60)
            return [j.status for j in await lin.jobs()]

    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as memory, \
            LiveServer(memory) as live:
        assert asyncio.run(run(live.url, live.key("acme", "app"))) == ["done"]
        assert _unfinished(memory) == []


def test_flush_with_no_worker_says_so_after_its_timeout(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off") as memory, \
            LiveServer(memory) as live, Client(live.url, live.key("acme", "app")) as client:
        client.user("lin").add(TURNS, "s1")
        with pytest.raises(JobError, match="still unfinished after 0.3s; is a worker running"):
            client.flush(timeout=0.3)
        assert len(_unfinished(memory)) == 1  # nothing lost: the job waits for a worker


def test_flush_of_an_end_user_key_waits_for_its_own_user_only(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off") as memory, \
            LiveServer(memory) as live:
        with Client(live.url, live.key("acme", "app")) as app:
            app.user("max").add(TURNS, "s1")  # max's job never runs: no worker
        with Client(live.url, live.key("acme", "end-user", user_id="lin")) as mine:
            mine.flush(timeout=5)  # lin has nothing queued: returns at once
