"""Search latency at growing sizes, add() throughput and peak memory.

The corpus is made of real conversational text: LoCoMo-like sentences generated from a
fixed vocabulary of templates (no data file needed), one user, as memory items. Vectors
for the bulk come from the default embedder on a base set of texts, each reused with a
small random perturbation so that 100k items do not cost 100k embedding calls (about
20 minutes on two cores); exact cosine search does not care where vectors came from.
Queries are embedded for real, separately, to report latency with and without the
query embedding.
"""

from __future__ import annotations

import random
import resource
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..memory import Memory
from ..retrieval.documents import item_texts
from ..stores.base import IndexDoc
from ..types import ItemVersion, Kind, Layer, MemoryItem, Scope, new_id, utcnow

__all__ = ["run_latency", "render", "render_comparison", "synthetic_texts"]

_SUBJECTS = ["I", "My sister", "My manager", "Our team", "My friend Anna", "我", "我妈妈", "我们团队"]
_VERBS_EN = ["started learning", "switched to", "really enjoys", "stopped using", "is planning a trip to",
             "bought a new", "keeps forgetting about", "wrote a blog post on", "is reading about",
             "signed up for a class on"]
_OBJECTS_EN = ["Go", "Rust", "pottery", "the Alps", "marathon training", "sourdough baking", "jazz piano",
               "Kubernetes", "birdwatching", "a vegan diet", "Lisbon", "the guitar", "chess openings",
               "watercolor painting", "rock climbing", "Japanese", "tax returns", "the dentist",
               "a road bike", "machine learning", "camping gear", "the book club", "yoga", "tennis"]
_ZH = ["最近在学习", "周末喜欢去", "打算明年去", "不再使用", "每天早上都会", "很喜欢吃", "准备报名"]
_ZH_OBJ = ["游泳", "日本", "咖啡", "爬山", "钢琴", "火锅", "Python", "马拉松", "摄影", "上海", "瑜伽", "围棋"]
_TAILS = ["last week", "since March", "with my kids", "after work", "every Sunday", "for the third time",
          "because a friend recommended it", "", "", ""]


def synthetic_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` short bilingual statements about a user's life, deterministic for ``seed``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if rng.random() < 0.3:
            out.append(f"{rng.choice(_SUBJECTS[5:])}{rng.choice(_ZH)}{rng.choice(_ZH_OBJ)}（第{i}条）")
        else:
            out.append(f"{rng.choice(_SUBJECTS[:5])} {rng.choice(_VERBS_EN)} {rng.choice(_OBJECTS_EN)} "
                       f"{rng.choice(_TAILS)} (note {i})".replace("  ", " "))
    return out


def _bulk_items(memory: Memory, scope: Scope, texts: list[str], base_vectors: np.ndarray,
                rng: np.random.Generator, progress: bool) -> None:
    now = utcnow()
    batch = 2000
    for start in tqdm(range(0, len(texts), batch), desc=f"load {len(texts):,}", disable=not progress,
                      leave=False):
        chunk = texts[start:start + batch]
        noise = rng.normal(0, 0.02, size=(len(chunk), base_vectors.shape[1])).astype(np.float32)
        vectors = base_vectors[rng.integers(0, len(base_vectors), len(chunk))] + noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        with memory.store.transaction():
            docs = []
            for i, text in enumerate(chunk):
                created = now - timedelta(minutes=len(texts) - start - i)
                item = MemoryItem(id=new_id("mem"), user_id=scope.user_id, namespace=scope.namespace,
                                  kind=Kind.FACT, content=text, created_at=created, updated_at=created)
                memory.store.write_item(scope, item, ItemVersion(item.id, 1, "create", "bench",
                                                                 "latency bench", created, None, None))
                display, body, context, _ = item_texts(item)
                docs.append(IndexDoc(item.id, Layer.SEMANTIC, display, body, context, created,
                                     kind="fact", status="active", importance=0.5, vector=vectors[i]))
            memory.store.index(scope, docs)


def _percentiles(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_ms": round(q[49] * 1000, 2), "p95_ms": round(q[94] * 1000, 2),
            "mean_ms": round(statistics.fmean(samples) * 1000, 2)}


def _fts5_baseline(memory: Memory, scope: Scope, queries: list[str]) -> dict[str, float] | None:
    """The same BM25 ranking asked of SQLite FTS5's own ``bm25()`` over the same file —
    the baseline the in-process postings mirror replaced. SQLite only."""
    from ..retrieval.documents import build_query
    from ..stores.sqlite import SQLiteStore

    store = memory.store
    if not isinstance(store, SQLiteStore):
        return None
    times = []
    for text in queries:
        terms = sorted(set(build_query(text)[0].split()))
        if not terms:
            continue
        match = f'scope : "{scope.key}" AND {{body context}} : (' + " OR ".join(
            '"' + t.replace('"', '""') + '"' for t in terms) + ")"
        t0 = time.perf_counter()
        store._x("SELECT d.id, -bm25(docs_fts, 0.0, ?, ?) AS s FROM docs_fts JOIN docs d ON "
                 "d.rowid = docs_fts.rowid WHERE docs_fts MATCH ? AND d.namespace=? AND d.user_id=? "
                 "ORDER BY s DESC LIMIT 50",
                 (memory.settings.body_weight, memory.settings.context_weight, match,
                  scope.namespace, scope.user_id)).fetchall()
        times.append(time.perf_counter() - t0)
    return _percentiles(times) if len(times) > 2 else None


def run_latency(sizes: list[int], *, queries: int = 200, store: str | None = None,
                progress: bool = True) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    query_texts = [t.split(" (note")[0].split("（")[0] for t in synthetic_texts(queries, seed=99)]
    report: dict[str, Any] = {"benchmark": "latency", "queries": queries, "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="memstrata-latency-") as tmp:
        url = store or f"sqlite:///{Path(tmp) / 'latency.db'}"
        with Memory(url) as memory:
            report["embedder"] = memory.embedder.name
            report["store"] = memory.store.url.split("@")[-1]
            report["backend"] = type(memory.store).__name__.removesuffix("Store")
            base_texts = synthetic_texts(512, seed=3)
            base_vectors = memory.embedder.embed(base_texts, kind="passage")
            # add(): real messages through the public API. It returns once the raw turns,
            # their words and their job are stored; flush() then waits for the background
            # job (embedding + extraction), whose rate is the sustained write throughput.
            add_times = []
            for i, text in enumerate(tqdm(synthetic_texts(100, seed=5), desc="add()",
                                          disable=not progress, leave=False)):
                started = time.perf_counter()
                memory.add([{"role": "user", "content": text}], "latency-add", f"s{i // 20}")
                add_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            memory.flush()
            drained = time.perf_counter() - started
            report["add"] = _percentiles(add_times) | {
                "messages_per_s": round(len(add_times) / sum(add_times), 1),
                "processed_per_s": round(len(add_times) / (sum(add_times) + drained), 1)}
            started = time.perf_counter()
            qvecs = memory.embedder.embed(query_texts, kind="query")
            embed_each = (time.perf_counter() - started) / len(query_texts)
            single = []
            for text in query_texts[:50]:
                t0 = time.perf_counter()
                memory.embedder.embed([text], kind="query")
                single.append(time.perf_counter() - t0)
            report["query_embedding"] = _percentiles(single) | {"batched_ms": round(embed_each * 1000, 2)}
            scope = Scope("latency-user")
            loaded = 0
            for size in sorted(sizes):
                texts = synthetic_texts(size - loaded, seed=size)
                _bulk_items(memory, scope, texts, base_vectors, rng, progress)
                loaded = size
                memory.retriever.search(scope, query_texts[0], k=10, query_vector=qvecs[0], touch=False)
                excluded, included = [], []
                for i, text in enumerate(tqdm(query_texts, desc=f"search @{size:,}",
                                              disable=not progress, leave=False)):
                    t0 = time.perf_counter()
                    memory.retriever.search(scope, text, k=10, query_vector=qvecs[i])
                    excluded.append(time.perf_counter() - t0)
                for text in query_texts[:50]:
                    t0 = time.perf_counter()
                    memory.retriever.search(scope, text, k=10)
                    included.append(time.perf_counter() - t0)
                report["sizes"][str(size)] = {"search_excluding_embedding": _percentiles(excluded),
                                              "search_including_embedding": _percentiles(included)}
                baseline = _fts5_baseline(memory, scope, query_texts)
                if baseline:
                    report["sizes"][str(size)]["baseline_fts5_bm25"] = baseline
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return report


def render(report: dict[str, Any]) -> str:
    lines = [f"store {report['store']}, embedder {report['embedder']}, {report['queries']} queries",
             f"add(): p50 {report['add']['p50_ms']} ms, p95 {report['add']['p95_ms']} ms; "
             f"with the background jobs (embedding + extraction) drained: "
             f"{report['add']['processed_per_s']} messages/s",
             f"query embedding alone: p50 {report['query_embedding']['p50_ms']} ms",
             "| items | search p50 | search p95 | with embedding p50 | with embedding p95 | "
             "baseline: FTS5 bm25() alone p50 | p95 |",
             "|---|---|---|---|---|---|---|"]
    for size, row in report["sizes"].items():
        ex, inc = row["search_excluding_embedding"], row["search_including_embedding"]
        base = row.get("baseline_fts5_bm25")
        lines.append(f"| {int(size):,} | {ex['p50_ms']} ms | {ex['p95_ms']} ms | "
                     f"{inc['p50_ms']} ms | {inc['p95_ms']} ms | "
                     + (f"{base['p50_ms']} ms | {base['p95_ms']} ms |" if base else "– | – |"))
    lines.append(f"peak RSS {report['peak_rss_mb']} MB")
    return "\n".join(lines)


def render_comparison(reports: list[dict[str, Any]]) -> str:
    """Several stores' runs as one table: search p50/p95 (query embedding excluded) per size."""
    names = [r.get("backend") or r["store"] for r in reports]
    head = ["items"] + [f"{n} {p}" for n in names for p in ("p50", "p95")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    sizes = sorted({int(s) for r in reports for s in r["sizes"]})
    for size in sizes:
        cells = [f"{size:,}"]
        for r in reports:
            row = r["sizes"].get(str(size), {}).get("search_excluding_embedding")
            cells += [f"{row['p50_ms']} ms", f"{row['p95_ms']} ms"] if row else ["–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    add = ["add()"] + [c for r in reports for c in (f"{r['add']['p50_ms']} ms",
                                                         f"{r['add']['p95_ms']} ms")]
    lines.append("| " + " | ".join(add) + " |")
    return "\n".join(lines)
