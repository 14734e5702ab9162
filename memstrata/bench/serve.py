"""``memstrata bench serve``: the HTTP service under concurrent load, beside the same
calls made in process, in one run.

For each store (a SQLite file; PostgreSQL + Redis sessions with ``--compare-postgres``)
the users are seeded with ``--items`` memory items each (bulk-written like ``bench
latency``: real texts, vectors from the real embedder on a base set, perturbed) and a
short conversation. Then ``--clients`` concurrent clients each make ``--requests``
calls, a fixed mix of search (50%), add (30%) and context (20%) on random users:
first as threads calling ``UserMemory`` in this process, then as asyncio tasks calling
a ``memstrata serve`` subprocess over HTTP with an API key. Each call is timed from
send to the last byte; errors are counted, never retried. After each number of clients
the bench waits until the service has run every job the calls queued and reports how
many were left when the calls ended and how long they took (a service that puts its
requests first leaves more behind), so each run starts with an empty queue.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tqdm import tqdm

from ..memory import Memory
from ..server.keys import Keys
from ..stores import open_store
from ..stores.policy import UNFINISHED
from ..types import Scope
from .latency import _bulk_items, synthetic_texts

__all__ = ["run_serve_bench", "render", "MIX", "http_client", "http_call", "serve_process"]

#: The operations and their shares of the calls.
MIX = (("search", 5), ("add", 3), ("context", 2))
TENANT = "bench"


def _percentiles(samples: list[float]) -> dict[str, float]:
    if len(samples) < 2:
        one = round(samples[0] * 1000, 2) if samples else 0.0
        return {"n": len(samples), "p50_ms": one, "p95_ms": one, "p99_ms": one}
    q = statistics.quantiles(sorted(samples), n=100, method="inclusive")
    return {"n": len(samples), "p50_ms": round(q[49] * 1000, 2), "p95_ms": round(q[94] * 1000, 2),
            "p99_ms": round(q[98] * 1000, 2)}


def _plan(clients: int, requests: int, users: int, seed: int = 11) -> list[list[tuple[str, str, str]]]:
    """Per client, its calls: (operation, user id, text)."""
    names = [op for op, _ in MIX]
    weights = [w for _, w in MIX]
    queries = [t.split(" (note")[0].split("（")[0] for t in synthetic_texts(200, seed=99)]
    said = synthetic_texts(clients * requests, seed=21)
    plans = []
    for c in range(clients):
        rng = random.Random(seed * 1000 + c)
        plans.append([(op, f"user-{rng.randrange(users)}",
                       rng.choice(queries) if op != "add" else said[c * requests + i])
                      for i, op in enumerate(rng.choices(names, weights, k=requests))])
    return plans


def _summary(samples: dict[str, list[float]], errors: dict[str, int], wall: float) -> dict[str, Any]:
    every = [s for values in samples.values() for s in values]
    return {"ops": {op: _percentiles(samples[op]) | {"errors": errors.get(op, 0)} for op, _ in MIX},
            "all": _percentiles(every) | {"errors": sum(errors.values())},
            "wall_s": round(wall, 2), "throughput_rps": round(len(every) / wall, 1) if wall else 0.0}


def _in_process(memory: Memory, plans: list[list[tuple[str, str, str]]]) -> dict[str, Any]:
    samples: dict[str, list[float]] = {op: [] for op, _ in MIX}
    errors: dict[str, int] = {}

    def client(plan: list[tuple[str, str, str]]) -> None:
        for op, user, text in plan:
            handle = memory.user(user, agent=TENANT)
            started = time.perf_counter()
            try:
                if op == "search":
                    handle.search(text, k=10)
                elif op == "add":
                    handle.add([{"role": "user", "content": text}], "bench")
                else:
                    handle.context("bench", [{"role": "user", "content": f"last time, {text}?"}],
                                   budget=1000)
            except Exception:  # counted: the run reports every failure
                errors[op] = errors.get(op, 0) + 1
                continue
            samples[op].append(time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(len(plans)) as pool:
        list(pool.map(client, plans))
    return _summary(samples, errors, time.perf_counter() - started)


def http_client(url: str, token: str, clients: int, timeout: float = 120) -> httpx.AsyncClient:
    """An HTTP client of the service for ``clients`` concurrent callers, with the key."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                             timeout=timeout, limits=limits)


def http_call(op: str, user: str, text: str, session_id: str = "bench") -> tuple[str, dict[str, Any]]:
    """The path and JSON body of one call of :data:`MIX` (``op``) for ``user`` about ``text``."""
    if op == "search":
        return f"/v1/users/{user}/search", {"query": text, "k": 10}
    if op == "add":
        return f"/v1/users/{user}/messages", {"messages": [{"role": "user", "content": text}],
                                              "session_id": session_id}
    return f"/v1/users/{user}/context", {"session_id": session_id, "budget": 1000,
                                         "messages": [{"role": "user", "content": f"last time, {text}?"}]}


async def _over_http(url: str, token: str, plans: list[list[tuple[str, str, str]]]) -> dict[str, Any]:
    samples: dict[str, list[float]] = {op: [] for op, _ in MIX}
    errors: dict[str, int] = {}
    async with http_client(url, token, len(plans)) as http:
        async def client(plan: list[tuple[str, str, str]]) -> None:
            for op, user, text in plan:
                path, body = http_call(op, user, text)
                started = time.perf_counter()
                try:
                    response = await http.post(path, json=body)
                    ok = response.status_code < 400
                except httpx.HTTPError:
                    ok = False
                if ok:
                    samples[op].append(time.perf_counter() - started)
                else:
                    errors[op] = errors.get(op, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(client(plan) for plan in plans))
        wall = time.perf_counter() - started
    return _summary(samples, errors, wall)


def _seed(memory: Memory, users: int, items: int, progress: bool) -> None:
    rng = np.random.default_rng(7)
    base = memory.embedder.embed(synthetic_texts(512, seed=3), kind="passage")
    for u in range(users):
        scope = Scope(f"user-{u}", TENANT)
        _bulk_items(memory.store, scope, synthetic_texts(items, seed=100 + u), base, rng, progress)
        memory.user(scope.user_id, agent=TENANT).add(
            [{"role": "user", "content": "I switched our routing service from Java to Go."},
             {"role": "assistant", "content": "How did the migration go?"}], "bench", extract=False)


def _drain(url: str, timeout_s: float = 600.0) -> dict[str, Any]:
    """Wait until the service has run every job the calls queued: how many were left
    when the calls ended and how long they took (a service that puts its requests
    first leaves more behind). Each run then starts with no job queued."""
    store = open_store(url)
    try:
        left = len(store.list_jobs(statuses=UNFINISHED, limit=100_000))
        started = time.perf_counter()
        while store.list_jobs(statuses=UNFINISHED, limit=1) and time.perf_counter() - started < timeout_s:
            time.sleep(0.2)
        return {"jobs_left": left, "drain_s": round(time.perf_counter() - started, 2)}
    finally:
        store.close()


def stop_process(proc: "subprocess.Popen[str]", wait_s: float = 60.0) -> None:
    """Stop a service started by :func:`serve_process`: SIGTERM (it finishes what it is
    doing), SIGKILL after ``wait_s``."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def serve_process(config: Path, env: dict[str, str],
                  on_line: Callable[[str], None] | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start ``memstrata serve --config config``; return the process and its URL once
    /readyz answers 200. Its log lines (stderr) are read on, each handed to ``on_line``
    as it comes (dropped without one) — a pipe nobody reads would stall the service."""
    proc = subprocess.Popen([sys.executable, "-m", "memstrata.cli.main", "serve", "--config", str(config)],
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    said: list[str] = []
    for line in proc.stderr:  # log lines may come before the one with the URL
        said.append(line)
        if found := re.search(r"serving .* at (http://\S+)", line):
            break
    else:
        proc.kill()
        raise RuntimeError(f"memstrata serve did not start: {''.join(said)[-2000:]}")
    url = found.group(1)
    stderr = proc.stderr

    def drain() -> None:
        for rest in [*said, *stderr]:
            if on_line is not None:
                on_line(rest)
        stderr.close()  # the process ended

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # ready once the store answers
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return proc, url


def _one_store(label: str, url: str, sessions: str, *, embedder: str | None, clients: list[int],
               requests: int, users: int, items: int, progress: bool, tmp: Path,
               in_process: bool = True, extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One run per number of clients on one seeded store: in process (unless not
    ``in_process``), then over HTTP to one ``memstrata serve`` subprocess; ``extra``
    memory settings for both."""
    settings: dict[str, Any] = {"sessions": sessions} if sessions else {}
    settings.update(extra or {})
    with Memory(url, embedder=embedder, worker="off", **settings) as memory:
        _seed(memory, users, items, progress)
        embedder_name = memory.embedder.name
    local: dict[int, dict[str, Any]] = {}
    with Memory(url, embedder=embedder, **settings) as memory:
        for u in range(users):  # load each user's index once, as a warm server has
            memory.user(f"user-{u}", agent=TENANT).search("warm up", k=1)
        for count in clients if in_process else ():
            local[count] = _in_process(memory, _plan(count, requests, users))
            memory.flush()
        token = Keys(memory.store).create(TENANT, "app", rate_limit=0, name="bench").token
    config = tmp / f"{label}.toml"
    memory_table = "".join(f'{k} = {json.dumps(v)}\n' for k, v in
                           {"store": url, "embedder": embedder_name, **settings}.items())
    config.write_text(f"[server]\nport = 0\nrate_limit = 0\nlog_format = \"text\"\nmcp = false\n\n"
                      f"[memory]\n{memory_table}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    proc, base = serve_process(config, env)
    remote: dict[int, dict[str, Any]] = {}
    try:
        asyncio.run(_over_http(base, token, _plan(max(clients), 1, users, seed=5)))  # warm the server
        _drain(url)
        for count in clients:
            remote[count] = asyncio.run(_over_http(base, token, _plan(count, requests, users)))
            remote[count].update(_drain(url))
    finally:
        stop_process(proc)
    return [{"store": label, "url": url.split("@")[-1], "clients": count,
             "sessions": sessions.split("?")[0] or "main store", "embedder": embedder_name,
             "in_process": local.get(count), "http": remote[count]} for count in clients]


def run_serve_bench(*, clients: "int | list[int]" = 32, requests: int = 20, users: int = 4,
                    items: int = 10_000, embedder: str | None = None, postgres: str | None = None,
                    redis: str | None = "redis://127.0.0.1:6379/0", progress: bool = True,
                    in_process: bool = True, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The benchmark on a temporary SQLite file and, with ``postgres`` (a URL of an empty
    database), on PostgreSQL with Redis sessions; ``clients`` a number or several (each
    on the same seeded store, in one run: service time beside queueing)."""
    counts = [clients] if isinstance(clients, int) else list(clients)
    report: dict[str, Any] = {"benchmark": "serve", "clients": counts[0] if len(counts) == 1 else counts,
                              "requests_per_client": requests,
                              "users": users, "items_per_user": items, "settings": settings or {},
                              "mix": {op: w / sum(w for _, w in MIX) for op, w in MIX},
                              "load_average": list(os.getloadavg()), "runs": []}
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-serve-") as tmp:
        root = Path(tmp)
        targets = [("sqlite", f"sqlite:///{root / 'serve.db'}", "")]
        if postgres:
            prefix = f"bench-serve-{uuid.uuid4().hex[:8]}"
            targets.append(("postgres+redis", postgres, f"{redis}?prefix={prefix}" if redis else ""))
        for label, url, sessions in tqdm(targets, desc="stores", disable=not progress, leave=False):
            report["runs"] += _one_store(label, url, sessions, embedder=embedder, clients=counts,
                                         requests=requests, users=users, items=items,
                                         progress=progress, tmp=root, in_process=in_process,
                                         extra=settings)
    report["load_average_after"] = list(os.getloadavg())
    return report


def render(report: dict[str, Any]) -> str:
    """The runs as one Markdown table: per store and mode, per operation."""
    lines = [f"{report['clients']} concurrent client(s) × {report['requests_per_client']} calls, "
             f"{report['users']} users × {report['items_per_user']:,} items; mix "
             + ", ".join(f"{op} {share:.0%}" for op, share in report["mix"].items())
             + f"; load average before {report['load_average'][0]:.1f}, after "
             f"{report['load_average_after'][0]:.1f}",
             "| store | clients | mode | op | n | p50 | p95 | p99 | errors |",
             "|---|---|---|---|---|---|---|---|---|"]
    for run in report["runs"]:
        for mode in ("in_process", "http"):
            result = run[mode]
            if result is None:
                continue
            for op, row in [*result["ops"].items(), ("all", result["all"])]:
                lines.append(f"| {run['store']} | {run['clients']} | {mode.replace('_', '-')} | {op} | "
                             f"{row['n']} | {row['p50_ms']} ms | {row['p95_ms']} ms | "
                             f"{row['p99_ms']} ms | {row['errors']} |")
    for run in report["runs"]:
        modes = [f"{mode.replace('_', '-')} {run[mode]['throughput_rps']} calls/s"
                 for mode in ("in_process", "http") if run[mode] is not None]
        if "jobs_left" in run["http"]:
            modes.append(f"{run['http']['jobs_left']} job(s) left, run in {run['http']['drain_s']} s")
        lines.append(f"{run['store']}, {run['clients']} client(s): {', '.join(modes)}")
    return "\n".join(lines)
