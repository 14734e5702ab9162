"""``memstrata bench hostile``: the CPU that hostile inputs cost, against same-run
baselines of ordinary size.

Three inputs an adversarial run used to stall the worker or the caller — a 100,000
character compound query ("X? Also, Y? …", searched and used as the user message of
``context()``), a 100,000 character Chinese message without punctuation, and a 1 MB tool
result — each beside an ordinary one, on one fresh SQLite store with a few hundred turns
already in it. Jobs run inline (``worker="off"``), so the process CPU time of a step is
the caller's or the worker's alone.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..memory import Memory

__all__ = ["run_hostile", "hostile_inputs"]

_ZH = "我叫小明我在上海工作我喜欢打篮球我对花生过敏今天天气很好我们明天去公园散步吧"


def hostile_inputs(chars: int = 100_000, tool_bytes: int = 1_000_000,
                   seed: int = 7) -> dict[str, str]:
    """The three hostile texts (deterministic for a seed)."""
    rng = random.Random(seed)
    query = " ".join(f"Where does friend {i} live? Also, what does friend {i} like?"
                     for i in range(chars // 50))[:chars]
    chinese = "".join(rng.choice(_ZH) for _ in range(chars))
    rows = ",".join(f'{{"id": {i}, "name": "item {i}", "note": "lorem ipsum dolor sit"}}'
                    for i in range(tool_bytes // 50))
    tool = f'{{"rows": [{rows}]}}'[:tool_bytes]
    return {"query": query, "chinese": chinese, "tool": tool}


def _cpu(step: Callable[[], Any]) -> dict[str, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    step()
    return {"cpu_s": round(time.process_time() - cpu, 3), "wall_s": round(time.perf_counter() - wall, 3)}


def _turns(tool_result: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "list the rows"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "rows", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": tool_result}]


def _steps(memory: Memory, label: str,
           source: dict[str, str]) -> list[tuple[str, Callable[[], Any]]]:
    """The measured steps for one set of inputs, in order."""
    lin = memory.user("hostile")
    query = source["query"]
    return [("search", lambda: lin.search(query)),
            ("context", lambda: lin.context("bg", [{"role": "user",
                                                    "content": query + " As I said last time."}])),
            ("chinese_add", lambda: lin.add([{"role": "user", "content": source["chinese"]}],
                                            f"zh-{label}")),
            ("chinese_jobs", memory.flush),
            ("tool_add", lambda: lin.add(_turns(source["tool"]), f"tool-{label}")),
            ("tool_jobs", memory.flush)]


def run_hostile(*, embedder: str | None = None, chars: int = 100_000,
                tool_bytes: int = 1_000_000, background: int = 200) -> dict[str, Any]:
    """Each case's CPU and wall time: ``{case: {"hostile": {...}, "baseline": {...}}}``."""
    texts = hostile_inputs(chars, tool_bytes)
    ordinary = {"query": "Where does friend 7 live? Also, what does friend 7 like?",
                "chinese": "我叫小明，我在上海工作，我喜欢打篮球。", "tool": '{"rows": [{"id": 1}]}'}
    cases: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hostile.db"
        with Memory(f"sqlite:///{path}", embedder=embedder, worker="off",
                    max_message_chars=max(chars, tool_bytes) + 1000) as memory:
            lin = memory.user("hostile")
            lin.add([{"role": "user", "content": f"My friend {i} lives in town {i} and likes "
                                                 f"sport {i % 17}."} for i in range(background)], "bg")
            memory.flush()
            lin.add([{"role": "user", "content": "你好，我在上海工作。"}], "warm")
            memory.flush()
            lin.search("warm up")  # first calls load the model and the Chinese dictionary
            for label, source in (("baseline", ordinary), ("hostile", texts)):
                for step, run in _steps(memory, label, source):
                    cases.setdefault(step, {})[label] = _cpu(run)
            name = memory.embedder.name
    return {"embedder": name, "chars": chars, "tool_bytes": tool_bytes,
            "background_turns": background, "cases": cases,
            "worst_hostile_cpu_s": max(c["hostile"]["cpu_s"] for c in cases.values())}
