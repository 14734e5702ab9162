"""What the ``durability`` setting costs: add() latency, ``normal`` beside ``full``.

    flock /tmp/memstrata-bench.lock python scripts/bench_durability.py [--adds 300] [--postgres]

One Memory per (backend, durability) on a fresh store, the hash embedder and no worker
(add() alone is timed: the commit of the turns, their extraction job and the words'
index). The modes take turns in rounds of 20 adds so that a busy machine slows them
alike. PostgreSQL runs on a local pgserver (its data on the same disk).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from memstrata import Memory


def _pct(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(q * len(samples)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--adds", type=int, default=300)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memstrata-durability-"))
    urls = {"sqlite": lambda mode: f"sqlite:///{tmp / f'{mode}.db'}"}
    server = None
    if args.postgres:
        import pgserver
        import psycopg

        server = pgserver.get_server(tmp / "pg", cleanup_mode="stop")
        base = server.get_uri()
        for mode in ("normal", "full"):
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE bench_{mode}")
        urls["postgresql"] = lambda mode: base.replace("/postgres?", f"/bench_{mode}?")
    try:
        for backend, url in urls.items():
            memories = {mode: Memory(url(mode), embedder="hash:256", worker="off", durability=mode)
                        for mode in ("normal", "full")}
            times: dict[str, list[float]] = {mode: [] for mode in memories}
            for start in range(0, args.adds, 20):
                for mode, memory in memories.items():
                    for i in range(start, min(start + 20, args.adds)):
                        began = time.perf_counter()
                        memory.add([{"role": "user", "content": f"I packed item {i} for the trip to Lisbon"},
                                    {"role": "assistant", "content": "Noted."}], "lin", f"s{i // 50}")
                        times[mode].append(time.perf_counter() - began)
            for mode, memory in memories.items():
                memory.close()
                t = times[mode]
                print(f"{backend:10} durability={mode:6} adds={len(t)}  p50 {_pct(t, 0.5):6.2f} ms  "
                      f"p95 {_pct(t, 0.95):6.2f} ms  mean {statistics.mean(t) * 1000:6.2f} ms")
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
