"""``memstrata bench ingest``: how fast messages go in, beside the embedder's own speed
on the same texts, in one run.

Three kinds of real messages from the bench data: short English chat turns (LoCoMo
dev), short Chinese chat turns (MADial zh dev) and long assistant answers with the
questions they answer (LongMemEval_S dev haystacks). For each, on a fresh SQLite file
with the same loaded embedder:

* **embedder alone** — ``embed()`` over the texts the write path embeds for those
  turns (a turn's dense text: the turn, after the turn before it when that one is
  short), ``embed_batch`` per call; and over the bare message texts;
* **import** — ``import_conversation`` (raw turns, words and vectors), without and
  with extraction (then ``flush()``: the extraction jobs run);
* **chat** — ``add()`` of one user turn and its reply at a time, as an application
  sends them, with the worker thread; without extraction (the vectors are embedded in
  ``add()``) and with it (in the jobs; the time runs to the end of ``flush()``).

Messages/s count every message stored and indexed; the ratio is messages/s over the
embedder's texts/s on the dense texts (1.0: the pipeline costs nothing beside the model).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..config import Settings
from ..memory import Memory
from ..providers.embedders import Embedder, parse_embedder
from ..retrieval.documents import window_dense_text
from ..text import tokenize
from ..types import Message, Role

__all__ = ["run_ingest", "render", "load_sets"]

PATHS = ("import", "import+extract", "chat", "chat+extract")


def _take(sessions: Iterator[tuple[str, list[dict[str, Any]]]], n: int) -> list[dict[str, Any]]:
    """The first ``n`` messages of ``sessions`` (session id, messages), as sessions."""
    out: list[dict[str, Any]] = []
    got = 0
    for session_id, msgs in sessions:
        msgs = msgs[:n - got]
        if msgs:
            out.append({"session_id": session_id, "messages": msgs})
            got += len(msgs)
        if got >= n:
            break
    return out


def _locomo(root: Path, n: int) -> list[dict[str, Any]]:
    def sessions() -> Iterator[tuple[str, list[dict[str, Any]]]]:
        for sample in json.loads((root / "locomo" / "locomo_dev.json").read_text()):
            conv = sample["conversation"]
            keys = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:]))
            for key in keys:
                yield f"{sample['sample_id']}-{key}", [
                    {"role": "user" if t["speaker"] == conv["speaker_a"] else "assistant",
                     "content": t["text"]} for t in conv[key]]
    return _take(sessions(), n)


def _madial(root: Path, n: int) -> list[dict[str, Any]]:
    def sessions() -> Iterator[tuple[str, list[dict[str, Any]]]]:
        with open(root / "madial" / "MADial-Bench-zh-dialogue.dev.json", encoding="utf-8") as lines:
            for i, line in enumerate(lines):
                msgs = []
                for turn in json.loads(line)["dialogue"]:
                    found = re.match(r'<([^>]+)>:"?(.*?)"?\s*$', turn.strip(), re.S)
                    if found and found.group(2):
                        msgs.append({"role": "assistant" if found.group(1) == "Assistant" else "user",
                                     "content": found.group(2)})
                yield f"madial-zh-{i}", msgs
    return _take(sessions(), n)


def _long_answers(root: Path, n: int) -> list[dict[str, Any]]:
    def sessions() -> Iterator[tuple[str, list[dict[str, Any]]]]:
        for sample in json.loads((root / "longmemeval" / "longmemeval_s_dev60.json").read_text()):
            for sid, session in zip(sample["haystack_session_ids"], sample["haystack_sessions"]):
                pairs = [(q, a) for q, a in zip(session[::2], session[1::2]) if q["role"] == "user"
                         and a["role"] == "assistant" and len(a["content"]) >= 1000]
                yield f"lme-{sid}", [{"role": m["role"], "content": m["content"]}
                                     for pair in pairs for m in pair]
    return _take(sessions(), n)


def load_sets(root: str | Path, n: int) -> dict[str, list[dict[str, Any]]]:
    """The three sets of ``n`` messages each, as sessions for ``import_conversation``."""
    root = Path(root)
    return {"short en (LoCoMo)": _locomo(root, n), "short zh (MADial)": _madial(root, n),
            "long answers (LongMemEval)": _long_answers(root, n // 2)}


def _dense_texts(sessions: list[dict[str, Any]]) -> list[str]:
    out = []
    for session in sessions:
        turns = [Message.from_dict(m, index=i) for i, m in enumerate(session["messages"])]
        turns = [t for t in turns if t.role is not Role.SYSTEM]
        out += [window_dense_text(turns, i) for i in range(len(turns))]
    return out


def _rate(embedder: Embedder, texts: list[str], batch: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        embedder.embed(texts[start:start + batch])
    return len(texts) / (time.perf_counter() - started)


def _one_path(path: str, embedder: Embedder, sessions: list[dict[str, Any]], tmp: Path,
              settings: dict[str, Any]) -> float:
    """Messages/s of one write path on a fresh store."""
    url = f"sqlite:///{tmp / f'{path}-{time.monotonic_ns()}.db'}"
    extract = path.endswith("+extract")
    with Memory(url, embedder=embedder, **settings) as memory:
        user = memory.user("ingest")
        started = time.perf_counter()
        if path.startswith("import"):
            user.import_conversation(sessions, progress=False, extract=extract)
        else:
            for session in sessions:
                msgs = session["messages"]
                for start in range(0, len(msgs), 2):
                    user.add(msgs[start:start + 2], session["session_id"], extract=extract)
        memory.flush()
        wall = time.perf_counter() - started
        count = sum(len(s["messages"]) for s in sessions)
        assert sum(len(user.messages(s["session_id"])) for s in sessions) == count
    return count / wall


def run_ingest(data: str | Path, *, messages: int = 200, embedder: str | None = None,
               paths: tuple[str, ...] = PATHS, batch: int | None = None,
               progress: bool = True) -> dict[str, Any]:
    """The benchmark (see the module docstring); ``batch`` overrides ``embed_batch``."""
    model = parse_embedder(embedder)
    settings: dict[str, Any] = {"durability": "normal"}
    if batch is not None:
        settings["embed_batch"] = batch
    size = batch or Settings.load().embed_batch
    sets = load_sets(data, messages)
    model.embed(["warm up", "预热"])
    tokenize("预热 the tokenizers")  # jieba loads its dictionary once, not inside a timing
    report: dict[str, Any] = {"benchmark": "ingest", "embedder": model.name, "embed_batch": size,
                              "messages_per_set": messages, "cpus": os.cpu_count(),
                              "load_average": list(os.getloadavg()), "sets": []}
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-ingest-") as tmp:
        for name, sessions in tqdm(sets.items(), desc="sets", disable=not progress, leave=False):
            texts = _dense_texts(sessions)
            raw = [m["content"] for s in sessions for m in s["messages"]]
            row: dict[str, Any] = {"set": name, "messages": len(raw),
                                   "mean_chars": round(sum(map(len, raw)) / len(raw)),
                                   "embedder_texts_per_s": round(_rate(model, texts, size), 1),
                                   "embedder_raw_texts_per_s": round(_rate(model, raw, size), 1),
                                   "paths": {}}
            for path in paths:
                row["paths"][path] = round(_one_path(path, model, sessions, Path(tmp), settings), 1)
            report["sets"].append(row)
    report["load_average_after"] = list(os.getloadavg())
    return report


def render(report: dict[str, Any]) -> str:
    """A Markdown table: per set, the embedder's texts/s and each path's messages/s."""
    paths = list(report["sets"][0]["paths"]) if report["sets"] else []
    head = ["set", "msgs", "mean chars", "embedder alone (dense texts/s)", "embedder (message texts/s)",
            *(f"{p} msg/s (ratio)" for p in paths)]
    lines = [f"embedder {report['embedder']}, embed_batch {report['embed_batch']}, "
             f"{report['cpus']} CPUs, load average before {report['load_average'][0]:.1f}, "
             f"after {report['load_average_after'][0]:.1f}",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in report["sets"]:
        rate = row["embedder_texts_per_s"]
        cells = [row["set"], str(row["messages"]), str(row["mean_chars"]), f"{rate}",
                 f"{row['embedder_raw_texts_per_s']}",
                 *(f"{v} ({v / rate:.2f})" for v in row["paths"].values())]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
