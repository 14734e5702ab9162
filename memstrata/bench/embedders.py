"""Embedder comparison: quality (dense-only recall) and texts/second on the dev data.

Each embedder indexes the same data through the public API; dense-only recall isolates
the embedder, and the hybrid figure shows what it adds to BM25. Throughput is measured
on the same machine in the same run, on real turns, batched as imports batch them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..providers.embedders import parse_embedder
from .locomo import conversation_sessions, load_locomo, run_locomo
from .memdaily import load_memdaily, run_memdaily

__all__ = ["run_embedders"]


def _throughput(spec: str, texts: list[str], batch: int = 32) -> float:
    embedder = parse_embedder(spec)
    embedder.embed(texts[:batch])  # warm-up: model load, first-call allocations
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i:i + batch])
    return len(texts) / (time.perf_counter() - started)


def run_embedders(specs: list[str], *, locomo: str | Path, memdaily: str | Path | None = None,
                  limit: int | None = None, sample: int = 512, progress: bool = True) -> dict[str, Any]:
    turns = [m["content"] for s in conversation_sessions(load_locomo(locomo)[0]) for m in s["messages"]]
    zh: list[str] = []
    if memdaily:
        zh = [m["message"] for _, t in load_memdaily(memdaily)[:60] for m in t["message_list"]]
    report: dict[str, Any] = {"benchmark": "embedders", "embedders": {}}
    for spec in specs:
        row: dict[str, Any] = {"texts_per_s_en": round(_throughput(spec, turns[:sample]), 1)}
        if zh:
            row["texts_per_s_zh"] = round(_throughput(spec, zh[:sample]), 1)
        lo = run_locomo(locomo, ks=[5, 10], embedder=spec, limit=limit, progress=progress)
        row["locomo"] = {name: s["overall"] for name, s in lo["systems"].items()}
        if memdaily:
            md = run_memdaily(memdaily, ks=[5], embedder=spec, limit=300, progress=progress)
            row["memdaily"] = {name: s["overall"] for name, s in md["systems"].items()}
        row["name"] = lo["embedder"]
        report["embedders"][spec] = row
    return report


def render(report: dict[str, Any]) -> str:
    lines = ["| embedder | texts/s (en) | texts/s (zh) | LoCoMo dense R@5 | R@10 | hybrid R@10 | "
             "MemDaily dense R@5 | hybrid R@5 |", "|---|---|---|---|---|---|---|---|"]
    for spec, row in report["embedders"].items():
        lo, md = row["locomo"], row.get("memdaily", {})
        lines.append(f"| `{spec}` | {row['texts_per_s_en']} | {row.get('texts_per_s_zh', '–')} | "
                     f"{lo['dense']['recall@5']:.3f} | {lo['dense']['recall@10']:.3f} | "
                     f"{lo['memstrata']['recall@10']:.3f} | "
                     f"{md.get('dense', {}).get('recall@5', float('nan')):.3f} | "
                     f"{md.get('memstrata', {}).get('recall@5', float('nan')):.3f} |")
    return "\n".join(lines)
