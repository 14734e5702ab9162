"""``memstrata bench chaos``: the HTTP service under load while its parts fail.

``memstrata serve`` runs on PostgreSQL (an empty database) with sessions in a private
``redis-server`` without persistence. ``clients`` concurrent clients mix add, search,
context and forget for ``duration`` seconds; meanwhile Redis is stopped and started
again (empty: its cache is gone) and the service process is SIGKILLed and started
again. Each forget first plants a unique word in a session turn and a memory item of
its own, then forgets both (the session's turns with the items extracted from them).

Afterwards (the service stopped, every pending job run in process): every add the
service acknowledged (201) must be in the store — read back by ``messages()`` and in
the export — and no planted word of a forget may come back in the export, in search
or in the session's log. A forget that got no answer (the service was killed under it)
is sent again after the load, as a client would. Failed calls are counted by kind:
``refused`` (no listener: the service restarting), ``cut`` (the connection dropped
mid-call: the SIGKILL), ``timeout``, and each HTTP status >= 400, and by the phase they
fell in (Redis down, service down, steady).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import re
import signal
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ..memory import Memory
from ..server.keys import Keys
from ..stores.transfer import export_jsonl
from .latency import synthetic_texts
from .redis_server import RedisServer, free_port
from .serve import TENANT, _percentiles, http_call, http_client, serve_process, stop_process

__all__ = ["run_chaos", "render", "CHAOS_MIX"]

#: The operations and their shares of the calls (a forget is four calls: plant a turn
#: and an item, forget both).
CHAOS_MIX = (("add", 4), ("search", 3), ("context", 2), ("forget", 1))


@dataclass
class _Plant:
    user: str
    session_id: str
    token: str
    item_id: str | None = None
    forgotten: bool = False  # both forgets answered 2xx during the load


@dataclass
class _Run:
    """What the clients saw: acknowledged adds, plants, timings and failures."""

    started: float
    acked: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # id -> user, session, text
    plants: list[_Plant] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=dict)
    failures: list[tuple[float, str, str]] = field(default_factory=list)  # (t, op, kind)
    events: dict[str, float] = field(default_factory=dict)


def _kind(exc: BaseException | None, status: int) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "refused"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return "cut"
    if exc is not None:
        return type(exc).__name__
    return str(status)


async def _call(http: httpx.AsyncClient, run: _Run, op: str, method: str, path: str,
                body: dict[str, Any] | None = None, fine: tuple[int, ...] = ()) -> httpx.Response | None:
    """One call; its time when it succeeded (or answered a status in ``fine``), its
    failure's kind otherwise (then None)."""
    started = time.perf_counter()
    try:
        response = await http.request(method, path, json=body)
    except httpx.HTTPError as exc:
        run.failures.append((time.perf_counter() - run.started, op, _kind(exc, 0)))
        await asyncio.sleep(0.1)  # no listener: do not spin
        return None
    if response.status_code >= 400 and response.status_code not in fine:
        run.failures.append((time.perf_counter() - run.started, op, _kind(None, response.status_code)))
        return None
    run.samples.setdefault(op, []).append(time.perf_counter() - started)
    return response


async def _plant_and_forget(http: httpx.AsyncClient, run: _Run, user: str, session_id: str) -> None:
    token = f"plant{uuid.uuid4().hex[:12]}"
    plant = _Plant(user, session_id, token)
    run.plants.append(plant)
    path, body = http_call("add", user, f"My locker code is {token}, keep it safe.", session_id)
    await _call(http, run, "forget", "POST", path, body)
    item = await _call(http, run, "forget", "POST", f"/v1/users/{user}/items",
                       {"content": f"The spare key word is {token}."})
    if item is not None:
        plant.item_id = item.json()["id"]
    # 404: nothing to forget (the planting add was refused while Redis was down)
    turns = await _call(http, run, "forget", "DELETE",
                        f"/v1/users/{user}/sessions/{session_id}/messages?items=true", fine=(404,))
    gone = plant.item_id is not None and await _call(
        http, run, "forget", "DELETE", f"/v1/users/{user}/items/{plant.item_id}") is not None
    plant.forgotten = turns is not None and gone


async def _client(http: httpx.AsyncClient, run: _Run, c: int, users: int, deadline: float) -> None:
    rng = random.Random(1000 + c)
    names, weights = [op for op, _ in CHAOS_MIX], [w for _, w in CHAOS_MIX]
    queries = [t.split(" (note")[0].split("（")[0] for t in synthetic_texts(200, seed=99)]
    said = synthetic_texts(500, seed=21 + c)
    n = 0
    while time.monotonic() < deadline:
        op = rng.choices(names, weights)[0]
        user = f"user-{rng.randrange(users)}"
        session_id = f"c{c}-s{n // 10}"
        n += 1
        if op == "forget":
            await _plant_and_forget(http, run, user, f"c{c}-f{n}")
            continue
        text = f"{said[n % len(said)]} (call {c}-{n})" if op == "add" else rng.choice(queries)
        path, body = http_call(op, user, text, session_id)
        response = await _call(http, run, op, "POST", path, body)
        if op == "add" and response is not None:
            for m in response.json()["messages"]:
                run.acked[m["id"]] = (user, session_id, m["content"])


def _serve_config(tmp: Path, port: int, store: str, sessions: str, embedder: str) -> Path:
    config = tmp / "chaos.toml"
    config.write_text(f'[server]\nport = {port}\nrate_limit = 0\nlog_format = "text"\nmcp = false\n\n'
                      f'[memory]\nstore = "{store}"\nsessions = "{sessions}"\nembedder = "{embedder}"\n')
    return config


class _Service:
    """The ``memstrata serve`` process, which the run kills and starts again."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.log: list[str] = []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
        self.proc, self.url = serve_process(config, self.env, self.log.append)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def start(self) -> None:
        self.proc, self.url = serve_process(self.config, self.env, self.log.append)

    def stop(self) -> None:
        stop_process(self.proc)


async def _faults(run: _Run, redis: RedisServer, service: _Service, duration: float,
                  redis_down_s: float) -> None:
    """Redis down at 30% of the run (for ``redis_down_s``), the service SIGKILLed at 60%."""
    def now() -> float:
        return time.perf_counter() - run.started

    await asyncio.sleep(max(0.0, 0.3 * duration - now()))
    run.events["redis_killed"] = now()
    await asyncio.to_thread(redis.kill)
    await asyncio.sleep(redis_down_s)
    await asyncio.to_thread(redis.start)
    run.events["redis_back"] = now()
    await asyncio.sleep(max(0.0, 0.6 * duration - now()))
    run.events["service_killed"] = now()
    await asyncio.to_thread(service.kill)
    await asyncio.to_thread(service.start)
    run.events["service_back"] = now()


async def _load(url: str, token: str, run: _Run, redis: RedisServer, service: _Service, *,
                clients: int, users: int, duration: float, redis_down_s: float) -> None:
    deadline = time.monotonic() + duration
    async with http_client(url, token, clients, timeout=30) as http:
        await asyncio.gather(_faults(run, redis, service, duration, redis_down_s),
                             *(_client(http, run, c, users, deadline) for c in range(clients)))
    run.events["load_end"] = time.perf_counter() - run.started


async def _finish_forgets(url: str, token: str, run: _Run) -> int:
    """Forget again what got no answer (the service was killed under it); how many."""
    again = 0
    async with http_client(url, token, 1, timeout=60) as http:
        for plant in run.plants:
            if plant.forgotten:
                continue
            again += 1
            if plant.item_id is None:  # the remember got no answer: find the item by its word
                found = await http.post(f"/v1/users/{plant.user}/search",
                                        json={"query": plant.token, "k": 10})
                ids = [h["id"] for h in found.json()["hits"] if plant.token in h["text"]
                       and h["layer"] == "semantic"]
            else:
                ids = [plant.item_id]
            response = await http.delete(f"/v1/users/{plant.user}/sessions/{plant.session_id}"
                                         "/messages?items=true")
            if response.status_code not in (200, 404):
                response.raise_for_status()
            for item_id in ids:
                response = await http.delete(f"/v1/users/{plant.user}/items/{item_id}")
                if response.status_code not in (200, 404):
                    response.raise_for_status()
    return again


def _log_summary(lines: list[str]) -> list[tuple[str, int]]:
    """The service's warning and error lines, by message (times and counts cut), with
    the exception each traceback ended in."""
    said: Counter[str] = Counter()
    for line, after in zip(lines, [*lines[1:], ""]):
        if " WARNING " in line or " ERROR " in line:
            said[re.sub(r"\d+", "N", line.split(": ", 1)[-1].strip())[:160]] += 1
        elif line[:1] not in (" ", "") and re.match(r"^[\w.]+(Error|Exception)\b", line) \
                and not after.startswith(" "):
            said["raised " + re.sub(r"\d+", "N", line.strip())[:160]] += 1
    return said.most_common(12)


def _phase(t: float, events: dict[str, float]) -> str:
    if events.get("redis_killed", 1e18) <= t <= events.get("redis_back", 1e18) + 2:
        return "redis_restart"
    if events.get("service_killed", 1e18) <= t <= events.get("service_back", 1e18) + 2:
        return "service_restart"
    return "steady"


def _verify(store: str, sessions: str, embedder: str, run: _Run) -> dict[str, Any]:
    """After the load, in process: every acknowledged add stored, no planted word back."""
    with Memory(store, embedder=embedder, sessions=sessions) as memory:
        memory.flush(timeout=600)  # the jobs the service left (a killed one's too) run first
        out = io.StringIO()
        export_jsonl(memory.store, out)
        text = out.getvalue()
        exported = {r["id"]: r.get("content") for r in map(json.loads, text.splitlines())
                    if r.get("type") == "message"}
        by_session: dict[tuple[str, str], set[str]] = {}
        for user, sid, _ in run.acked.values():
            if (user, sid) not in by_session:
                by_session[(user, sid)] = {m.id for m in memory.user(user, agent=TENANT).messages(sid)}
        read_back = sum(mid in by_session[(u, s)] for mid, (u, s, _) in run.acked.items())
        in_export = sum(exported.get(mid) == content for mid, (_, _, content) in run.acked.items())
        back_in_export = sum(p.token in text for p in run.plants)
        back_in_search = sum(any(p.token in h.text for h in memory.user(p.user, agent=TENANT)
                                 .search(p.token, k=10, mode="lexical"))
                             for p in run.plants)
        back_in_log = sum(bool(memory.user(p.user, agent=TENANT).messages(p.session_id))
                          for p in run.plants)
    return {"acknowledged_adds": len(run.acked), "read_back": read_back, "in_export": in_export,
            "planted": len(run.plants), "forgotten_during_load": sum(p.forgotten for p in run.plants),
            "back_in_export": back_in_export, "back_in_search": back_in_search,
            "back_in_session_log": back_in_log}


def run_chaos(postgres: str, *, clients: int = 32, duration: float = 120.0, users: int = 8,
              embedder: str = "hash:384", redis_down_s: float = 3.0) -> dict[str, Any]:
    """The run on ``postgres`` (a URL of an empty database with pgvector); the report."""
    report: dict[str, Any] = {"benchmark": "chaos", "clients": clients, "duration_s": duration,
                              "users": users, "embedder": embedder,
                              "mix": {op: w / sum(w for _, w in CHAOS_MIX) for op, w in CHAOS_MIX},
                              "load_average": list(os.getloadavg())}
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-chaos-") as tmp:
        root = Path(tmp)
        redis = RedisServer(root)
        redis.start()
        try:
            sessions = redis.url_with(f"chaos{uuid.uuid4().hex[:8]}")
            with Memory(postgres, embedder=embedder, sessions=sessions, worker="off") as memory:
                token = Keys(memory.store).create(TENANT, "app", rate_limit=0, name="chaos").token
            service = _Service(_serve_config(root, free_port(), postgres, sessions, embedder))
            try:
                run = _Run(time.perf_counter())
                asyncio.run(_load(service.url, token, run, redis, service, clients=clients,
                                  users=users, duration=duration, redis_down_s=redis_down_s))
                report["forgets_sent_again"] = asyncio.run(_finish_forgets(service.url, token, run))
            finally:
                service.stop()
            report["checks"] = _verify(postgres, sessions, embedder, run)
            report["service_tracebacks"] = sum("Traceback" in line for line in service.log)
            report["service_log"] = _log_summary(service.log)
        finally:
            redis.kill()
    failures = Counter((op, kind, _phase(t, run.events)) for t, op, kind in run.failures)
    report["events_s"] = {k: round(v, 2) for k, v in run.events.items()}
    report["ops"] = {op: _percentiles(run.samples.get(op, [])) for op, _ in CHAOS_MIX}
    report["failures"] = [{"op": op, "kind": kind, "phase": phase, "count": n}
                          for (op, kind, phase), n in sorted(failures.items())]
    report["failures_by_kind"] = dict(Counter(kind for _, _, kind in run.failures))
    report["load_average_after"] = list(os.getloadavg())
    return report


def render(report: dict[str, Any]) -> str:
    """The report as Markdown: the checks, the calls that succeeded, the failures."""
    c, e = report["checks"], report["events_s"]
    lines = [f"{report['clients']} clients × {report['duration_s']:.0f} s, {report['users']} users, "
             f"embedder {report['embedder']}; mix " + ", ".join(
                 f"{op} {share:.0%}" for op, share in report["mix"].items())
             + f"; load average before {report['load_average'][0]:.1f}, after "
             f"{report['load_average_after'][0]:.1f}",
             f"Redis stopped at {e.get('redis_killed')} s, back (empty) at {e.get('redis_back')} s; "
             f"service SIGKILLed at {e.get('service_killed')} s, ready again at "
             f"{e.get('service_back')} s; load ended at {e.get('load_end')} s",
             f"acknowledged adds: {c['acknowledged_adds']}, read back {c['read_back']}, "
             f"in the export {c['in_export']}",
             f"planted and forgotten: {c['planted']} ({c['forgotten_during_load']} answered during "
             f"the load, {report['forgets_sent_again']} sent again after); back in the export "
             f"{c['back_in_export']}, in search {c['back_in_search']}, in the session log "
             f"{c['back_in_session_log']}",
             f"tracebacks in the service log: {report['service_tracebacks']}; its warnings and "
             "errors: " + "; ".join(f"{n}× {text}" for text, n in report["service_log"]),
             "| op | ok | p50 | p95 | p99 |", "|---|---|---|---|---|"]
    for op, row in report["ops"].items():
        lines.append(f"| {op} | {row['n']} | {row['p50_ms']} ms | {row['p95_ms']} ms | {row['p99_ms']} ms |")
    lines += ["", "| op | failure | phase | count |", "|---|---|---|---|"]
    lines += [f"| {f['op']} | {f['kind']} | {f['phase']} | {f['count']} |" for f in report["failures"]]
    return "\n".join(lines)
