"""``memstrata bench forget-isolation``: one tenant's latency beside another tenant's
forget loop, and the forgotten bytes gone from the store files by the stated deadline.

A ``memstrata serve`` subprocess serves a temporary SQLite store (tenant A's ``--users``
seeded with ``--items`` memory items each, as ``bench serve`` does) with
``erase_within_s`` set to ``--erase-within``. Tenant A's ``--clients`` clients search and
remember (2 : 1) for ``--seconds``, first alone, then while tenant B's key loops: add two
turns and remember an item for one user — each holding a unique planted string — then
forget that user (``DELETE /v1/users/{u}``). Reported: A's p50/p95 and request counts
both ways and the ratio of the p95s; B's forgets; then, polling the ``.db``, ``-wal`` and
``-shm`` files every half second, when the last of B's planted strings left them, against the
deadline the docs state (``erase_within_s`` + 5 s + the compaction's own time, which the
server's log reports).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from ..memory import Memory
from ..server.keys import Keys
from ..types import Scope
from .latency import _bulk_items, synthetic_texts
from .serve import _percentiles, serve_process, stop_process

__all__ = ["run_forget_isolation", "render", "TENANT_A", "TENANT_B"]

TENANT_A, TENANT_B = "tenant-a", "tenant-b"
#: The worker checks for a due compaction this often (memory.py's Periodic).
WORKER_TICK_S = 5.0


async def _tenant_a(http: httpx.AsyncClient, clients: int, users: int, seconds: float,
                    queries: list[str], seed: int) -> dict[str, Any]:
    """``clients`` clients searching and remembering (2 : 1) for ``seconds``."""
    samples: dict[str, list[float]] = {"search": [], "remember": []}
    errors = {"search": 0, "remember": 0}
    stop = time.perf_counter() + seconds

    async def client(c: int) -> None:
        rng = random.Random(seed * 100 + c)
        while time.perf_counter() < stop:
            user = f"user-{rng.randrange(users)}"
            op = "remember" if rng.random() < 1 / 3 else "search"
            if op == "search":
                call = http.post(f"/v1/users/{user}/search", json={"query": rng.choice(queries), "k": 10})
            else:
                call = http.post(f"/v1/users/{user}/items", json={"content": rng.choice(queries)})
            started = time.perf_counter()
            try:
                ok = (await call).status_code < 400
            except httpx.HTTPError:
                ok = False
            if ok:
                samples[op].append(time.perf_counter() - started)
            else:
                errors[op] += 1

    started = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    wall = time.perf_counter() - started
    every = samples["search"] + samples["remember"]
    return {"all": _percentiles(every) | {"errors": sum(errors.values())},
            "ops": {op: _percentiles(samples[op]) | {"errors": errors[op]} for op in samples},
            "wall_s": round(wall, 2), "requests": len(every)}


async def _tenant_b(http: httpx.AsyncClient, done: asyncio.Event, planted: list[str],
                    forgets: list[dict[str, Any]]) -> None:
    """Until ``done``: plant two strings for one user, then forget the user."""
    while not done.is_set():
        tag = uuid.uuid4().hex[:10]
        turn, item = f"zqturn{tag}", f"zqitem{tag}"
        user = f"/v1/users/victim-{len(forgets) % 3}"
        added = await http.post(f"{user}/messages", json={"session_id": "s", "messages": [
            {"role": "user", "content": f"My locker code is {turn}. 我的储物柜密码是{turn}。"},
            {"role": "assistant", "content": "Noted."}]})
        remembered = await http.post(f"{user}/items", json={"content": f"User's locker code is {item}"})
        started = time.time()
        forgot = await http.delete(user)
        if added.status_code >= 400 or remembered.status_code >= 400 or forgot.status_code >= 400:
            raise RuntimeError(f"tenant B's loop failed: {added.status_code} {remembered.status_code} "
                               f"{forgot.status_code} {forgot.text[:300]}")
        planted += [turn, item]
        forgets.append({"at": started, "s": time.time() - started,
                        "erase_by": (forgot.json().get("erase") or {}).get("by")})


async def _phases(url: str, key_a: str, key_b: str, *, clients: int, users: int, seconds: float,
                  queries: list[str]) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=clients + 1, max_keepalive_connections=clients + 1)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key_a}"},
                                 timeout=120, limits=limits) as a, \
            httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key_b}"},
                              timeout=120) as b:
        await _tenant_a(a, clients, users, min(2.0, seconds), queries, seed=1)  # warm up
        alone = await _tenant_a(a, clients, users, seconds, queries, seed=2)
        planted: list[str] = []
        forgets: list[dict[str, Any]] = []
        done = asyncio.Event()
        loop = asyncio.create_task(_tenant_b(b, done, planted, forgets))
        beside = await _tenant_a(a, clients, users, seconds, queries, seed=2)
        done.set()
        await loop  # the iteration under way completes: each planted string is forgotten
    return {"alone": alone, "beside": beside, "planted": planted, "forgets": forgets}


def _files(db: Path) -> list[Path]:
    return [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]


_PLANTED = re.compile(rb"zq(?:turn|item)[0-9a-f]{10}")


def _still_there(db: Path, planted: list[str]) -> dict[str, int]:
    """Per store file, how many planted strings it still holds (one pass over each)."""
    wanted = {s.encode() for s in planted}
    return {path.name: len(wanted & set(_PLANTED.findall(path.read_bytes()))) for path in _files(db)}


def _erasures(erased: list[str]) -> Callable[[str], None]:
    """What keeps the server's erasure lines (with when they were read) from its log."""
    def keep(line: str) -> None:
        if "erased the pages" in line or "erasing freed pages" in line:
            erased.append(f"{time.time():.3f} {line.strip()}")

    return keep


def _seed(url: str, users: int, items: int, embedder: str | None,
          progress: bool) -> tuple[str, str, str]:
    """Tenant A's users with ``items`` items each, and an API key for each tenant:
    ``(key A, key B, the embedder's name)``."""
    with Memory(url, embedder=embedder, worker="off") as memory:
        rng = np.random.default_rng(7)
        base = memory.embedder.embed(synthetic_texts(512, seed=3), kind="passage")
        for u in range(users):
            _bulk_items(memory.store, Scope(f"user-{u}", TENANT_A),
                        synthetic_texts(items, seed=100 + u), base, rng, progress)
        keys = Keys(memory.store)
        key_a = keys.create(TENANT_A, "app", rate_limit=0, name="bench A").token
        key_b = keys.create(TENANT_B, "app", rate_limit=0, name="bench B").token
        return key_a, key_b, memory.embedder.name


def _wait_gone(db: Path, planted: list[str], until: float) -> float | None:
    """When no store file holds a planted string any more (polled every half second),
    or None if some are still there at ``until``."""
    while time.time() < until:
        left = _still_there(db, planted)
        if not any(left.values()):
            return time.time()
        time.sleep(0.5)
    return None


def _figures(run: dict[str, Any], erased: list[str], last: float,
             gone_at: float | None) -> dict[str, Any]:
    """The report's latency ratio, forget timings and erasure deadline figures."""
    alone, beside = run["alone"], run["beside"]
    compactions = [_compaction(line, last) for line in erased]
    due = _epoch(run["forgets"][-1]["erase_by"]) if run["forgets"] else None
    deadline_s = round(due - last + WORKER_TICK_S, 1) if due is not None else None
    took = max((c["took_s"] for c in compactions if c["after_last_forget_s"] >= 0), default=0.0)
    gone = round(gone_at - last, 1) if gone_at is not None else None
    return dict(alone=alone, beside=beside,
                p95_ratio=round(beside["all"]["p95_ms"] / alone["all"]["p95_ms"], 2)
                if alone["all"]["p95_ms"] else None,
                forgets=len(run["forgets"]), planted=len(run["planted"]),
                forget_p50_ms=_percentiles([f["s"] for f in run["forgets"]])["p50_ms"]
                if run["forgets"] else None,
                compactions=compactions, deadline_after_last_forget_s=deadline_s,
                gone_after_last_forget_s=gone,
                # polled every half second (a scan of each file takes a moment too): a
                # second of slack on top of the compaction's time
                gone_by_deadline=gone is not None and deadline_s is not None
                and gone <= deadline_s + took + 1.0)


def run_forget_isolation(*, clients: int = 4, seconds: float = 15.0, users: int = 4,
                         items: int = 5000, erase_within: float = 20.0, embedder: str | None = None,
                         grace: float = 60.0, progress: bool = True) -> dict[str, Any]:
    """The benchmark (see the module docstring) on a temporary SQLite store."""
    report: dict[str, Any] = {"benchmark": "forget-isolation", "clients": clients, "seconds": seconds,
                              "users": users, "items_per_user": items, "erase_within_s": erase_within,
                              "load_average": list(os.getloadavg())}
    queries = [t.split(" (note")[0].split("（")[0] for t in synthetic_texts(200, seed=99)]
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-forget-") as tmp:
        root = Path(tmp)
        db = root / "store.db"
        url = f"sqlite:///{db}"
        key_a, key_b, report["embedder"] = _seed(url, users, items, embedder, progress)
        report["store_mb"] = round(sum(p.stat().st_size for p in _files(db)) / 2**20, 1)
        config = root / "serve.toml"
        # the JSON log is at INFO: it carries the erasure lines read below
        config.write_text("[server]\nport = 0\nrate_limit = 0\nlog_format = \"json\"\nmcp = false\n\n"
                          f"[memory]\nstore = \"{url}\"\nembedder = \"{report['embedder']}\"\n"
                          f"erase_within_s = {erase_within}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
        erased: list[str] = []
        proc, base_url = serve_process(config, env, _erasures(erased))
        try:
            run = asyncio.run(_phases(base_url, key_a, key_b, clients=clients, users=users,
                                      seconds=seconds, queries=queries))
            last = run["forgets"][-1]["at"] if run["forgets"] else time.time()
            deadline = last + erase_within + WORKER_TICK_S
            report["found_after_loop"] = _still_there(db, run["planted"])
            gone_at = _wait_gone(db, run["planted"], deadline + grace)
            report["left_at_end"] = _still_there(db, run["planted"])
        finally:
            stop_process(proc)
    report.update(_figures(run, erased, last, gone_at), load_average_after=list(os.getloadavg()))
    return report


def _epoch(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso).timestamp() if iso else None


def _compaction(line: str, last: float) -> dict[str, Any]:
    """One erasure line of the server's log: when (after B's last forget), how long."""
    at, _, text = line.partition(" ")
    took = re.search(r", in ([\d.]+) s\)", text)
    return {"after_last_forget_s": round(float(at) - last, 1),
            "took_s": float(took.group(1)) if took else 0.0, "ok": "erased the pages" in text}


def render(report: dict[str, Any], command: str = "") -> str:
    """The figures as Markdown: tenant A alone and beside B's forget loop, then the bytes."""
    a, b = report["alone"], report["beside"]
    within = "within" if report["p95_ratio"] is not None and report["p95_ratio"] <= 2 else "NOT within"
    lines = [f"{command}" if command else "",
             f"tenant A: {report['clients']} clients searching and remembering for "
             f"{report['seconds']:g} s, {report['users']} users × {report['items_per_user']:,} items "
             f"({report['store_mb']} MB SQLite store, embedder {report['embedder']}); "
             f"erase_within_s = {report['erase_within_s']:g}; load average before "
             f"{report['load_average'][0]:.1f}, after {report['load_average_after'][0]:.1f}",
             "| tenant A | requests | p50 | p95 | errors |", "|---|---|---|---|---|",
             f"| alone | {a['requests']} | {a['all']['p50_ms']} ms | {a['all']['p95_ms']} ms | "
             f"{a['all']['errors']} |",
             f"| beside B's forget loop | {b['requests']} | {b['all']['p50_ms']} ms | "
             f"{b['all']['p95_ms']} ms | {b['all']['errors']} |",
             f"p95 beside / alone: {report['p95_ratio']}× ({within} 2×); "
             f"tenant B forgot a user {report['forgets']} times (p50 {report['forget_p50_ms']} ms), "
             f"planting {report['planted']} unique strings"]
    gone = report["gone_after_last_forget_s"]
    runs = ", ".join(f"{c['after_last_forget_s']:g} s (took {c['took_s']:g} s)"
                     for c in report["compactions"]) or "none"
    lines.append(f"compactions logged, after B's last forget: {runs}")
    if gone is None:
        lines.append("planted strings STILL in the store files after the deadline and a grace: "
                     f"{report['left_at_end']}")
    else:
        lines.append(f"planted strings in the files when the loop ended: {report['found_after_loop']}; "
                     f"none {gone:g} s after B's last forget; "
                     f"stated deadline {report['deadline_after_last_forget_s']:g} s (its erase.by "
                     f"+ {WORKER_TICK_S:g} s) + the compaction's time: "
                     f"{'met' if report['gone_by_deadline'] else 'MISSED'}")
    return "\n".join(line for line in lines if line)
