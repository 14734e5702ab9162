"""Shared pieces of the retrieval benchmarks: recall bookkeeping and report shapes."""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..memory import Memory
from ..providers.embedders import Embedder
from ..requests import SearchRequest
from ..retrieval.search import Mode, Retriever, SearchResult
from ..types import Scope

__all__ = ["RecallTable", "bench_memory", "SYSTEMS", "search_as", "write_json"]

# name in the report -> (the request's mode, Retriever.search options) over the same
# index. The baselines are one plain list each: no question splitting, no query expansion.
_PLAIN = {"split": False, "expansion": 0.0}
SYSTEMS: dict[str, tuple[Mode, dict[str, Any]]] = {"memstrata": ("hybrid", {}),
                                                   "bm25": ("lexical", _PLAIN),
                                                   "dense": ("dense", _PLAIN)}


def search_as(retriever: Retriever, system: str, scope: Scope, request: SearchRequest,
              **options: Any) -> SearchResult:
    """``request`` searched the way ``system`` (a key of :data:`SYSTEMS`) searches."""
    mode, own = SYSTEMS[system]
    return retriever.search(scope, replace(request, mode=mode), **own, **options)


class RecallTable:
    """Recall@k per system, per category and overall (mean over questions)."""

    def __init__(self, ks: Sequence[int]) -> None:
        self.ks = sorted(ks)
        self._rows: dict[str, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
        #: per system, adjacent hits whose score is above the one ranked before it
        self.inversions: dict[str, int] = defaultdict(int)

    def add(self, system: str, category: str, ranked: Sequence[str], gold: Iterable[str],
            scores: Sequence[float] = ()) -> None:
        self.inversions[system] += sum(b > a + 1e-12 for a, b in zip(scores, scores[1:]))
        gold = set(gold)
        if not gold:
            return
        values = [len(gold & set(ranked[:k])) / len(gold) for k in self.ks]
        self._rows[system][category].append(values)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for system, cats in self._rows.items():
            every = [v for rows in cats.values() for v in rows]
            out[system] = {
                "overall": self._mean(every), "score_inversions": self.inversions[system],
                "by_category": {c: self._mean(rows) | {"n": len(rows)} for c, rows in sorted(cats.items())},
            }
        return out

    def _mean(self, rows: list[list[float]]) -> dict[str, float]:
        if not rows:
            return {f"recall@{k}": 0.0 for k in self.ks}
        return {f"recall@{k}": round(sum(r[i] for r in rows) / len(rows), 4)
                for i, k in enumerate(self.ks)}


def markdown(report: dict[str, Any], ks: Sequence[int]) -> str:
    """The report as a Markdown table: systems × overall and per-category recall."""
    lines = []
    systems = report["systems"]
    cats = sorted({c for s in systems.values() for c in s["by_category"]})
    head = ["system"] + [f"R@{k}" for k in ks] + [f"{c} R@{ks[min(1, len(ks) - 1)]}" for c in cats]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    kk = ks[min(1, len(ks) - 1)]
    for name, s in systems.items():
        row = [name] + [f"{s['overall'][f'recall@{k}']:.3f}" for k in ks]
        row += [f"{s['by_category'].get(c, {}).get(f'recall@{kk}', 0):.3f}" for c in cats]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


@contextmanager
def bench_memory(store: str | None, embedder: "str | Embedder | None",
                 **settings: Any) -> Iterator[Memory]:
    """A Memory on the given store, or on a fresh temporary SQLite file."""
    if store:
        with Memory(store, embedder=embedder, **settings) as memory:
            yield memory
        return
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as tmp:
        with Memory(f"sqlite:///{Path(tmp) / 'bench.db'}", embedder=embedder, **settings) as memory:
            yield memory


def write_json(report: dict[str, Any], path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n")
