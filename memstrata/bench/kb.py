"""Knowledge-base retrieval benchmark: DragonBall (zh, en) and COVID-QA dev halves.

Protocol (``shared/bench-data/README.md``, kb section): ingest every document of the
corpus into one knowledge base as the knowledge base would (plain text, cleaned and
chunked); for each question retrieve the top 10 chunks. Chunk Hit@k: a retrieved chunk
overlaps a gold answer span (character offsets into the raw text, mapped through the
cleaning); MRR@10 of the first such chunk; doc recall@5 over the gold documents.
Unanswerable questions are left out of those and reported apart: how often their top
chunk scores under ``min_score`` — beside how often an answerable question's does.

Systems over the same chunks, one index: ``memstrata`` (hybrid, title field, query
expansion), ``bm25`` (lexical only, title field), ``bm25_plain`` (lexical only, chunk
text alone — the README's baseline), ``dense`` (cosine only); the three baselines rank as
their one list does (no ``kb_neighbour_weight`` ordering). ``memstrata_expanded`` is
not a chunk Hit@k: memstrata's hits with neighbouring-chunk expansion on (the default of
``kb.search``), a hit counting when it or the neighbour shown with it holds a gold span.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..knowledge import Knowledge, KnowledgeBase
from ..knowledge.parse import parse
from ..providers.embedders import parse_embedder
from ..retrieval.documents import chunk_texts
from ..retrieval.indexer import embed_cached
from ..types import Scope
from .common import bench_memory
from .embedding_cache import DiskCachedEmbedder

# the store-cache partition of the benchmark's questions (one reader asks them all)
_QUESTIONS = Scope("bench-questions", "bench")

__all__ = ["run_kb", "render", "parse_strategy", "SYSTEM_OPTIONS"]

#: system -> KnowledgeBase.search options (``plain``: the retriever without the title field)
SYSTEM_OPTIONS: dict[str, dict[str, Any]] = {
    "memstrata": {"mode": "hybrid"},
    "bm25": {"mode": "lexical", "expansion": 0.0},
    "bm25_plain": {"mode": "lexical", "expansion": 0.0, "plain": True},
    "dense": {"mode": "dense", "expansion": 0.0},
    # not a chunk Hit@k: memstrata's hits as kb.search returns them by default, a hit that
    # was cut mid-paragraph with its neighbour — counted when either chunk holds the span
    "memstrata_expanded": {"mode": "hybrid", "expand": True},
}
MIN_SCORES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def parse_strategy(text: str) -> dict[str, Any]:
    """``"500/300"`` or ``"500/300/2"``: max chars, min chars, CJK weight."""
    parts = text.split("/")
    try:
        out: dict[str, Any] = {"max_chars": int(parts[0]),
                               "min_chars": int(parts[1]) if len(parts) > 1 else 0}
        if len(parts) > 2:
            out["cjk_weight"] = float(parts[2])
    except (ValueError, IndexError):
        raise ValueError(f"strategy {text!r}: use MAX/MIN or MAX/MIN/CJK_WEIGHT, e.g. 500/300") from None
    return out


def _load(directory: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    corpus = [json.loads(line) for line in (directory / "corpus.jsonl").read_text().splitlines() if line]
    queries = [json.loads(line) for line in (directory / "queries.jsonl").read_text().splitlines() if line]
    return corpus, queries


def _sample(queries: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    if not limit or limit >= len(queries):
        return queries
    step = len(queries) / limit
    return [queries[int(i * step)] for i in range(limit)]


class _Table:
    """Hit@k, MRR@10 and doc recall@5 per system, overall and per question type."""

    def __init__(self, ks: Sequence[int]) -> None:
        self.ks = ks
        self.rows: dict[str, dict[str, list[tuple[float, ...]]]] = defaultdict(lambda: defaultdict(list))

    def add(self, system: str, category: str, hit_ranks: list[int], docs: list[str],
            gold_docs: set[str]) -> None:
        first = min(hit_ranks) if hit_ranks else None
        values = [1.0 if first is not None and first <= k else 0.0 for k in self.ks]
        values.append(1.0 / first if first is not None and first <= 10 else 0.0)
        values.append(len(gold_docs & set(docs[:5])) / len(gold_docs) if gold_docs else 1.0)
        self.rows[system][category].append(tuple(values))

    def _mean(self, rows: list[tuple[float, ...]]) -> dict[str, float]:
        names = [f"hit@{k}" for k in self.ks] + ["mrr@10", "doc_recall@5"]
        if not rows:
            return {n: 0.0 for n in names}
        return {n: round(sum(r[i] for r in rows) / len(rows), 4) for i, n in enumerate(names)}

    def summary(self) -> dict[str, Any]:
        return {system: {"overall": self._mean([r for rows in cats.values() for r in rows]),
                         "by_type": {c: self._mean(rows) | {"n": len(rows)}
                                     for c, rows in sorted(cats.items())}}
                for system, cats in self.rows.items()}


def _raw_embedding_rate(memory: Any, texts: list[str]) -> float:
    """Chunks per second of the embedder alone on these texts (no store, no cache): the
    baseline an ingestion rate is compared with."""
    if not texts:
        return 0.0
    started = time.perf_counter()
    batch = memory.settings.embed_batch
    embedder = getattr(memory.embedder, "inner", memory.embedder)  # past an on-disk cache
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i:i + batch], kind="passage")
    return len(texts) / (time.perf_counter() - started)


def _query_vectors(memory: Any, questions: list[str], progress: bool, name: str) -> np.ndarray:
    """The questions' e5 query vectors, in batches, through the store's vector cache (a
    re-run over the same store embeds no question twice; search time excludes them)."""
    batch = max(1, memory.settings.embed_batch)
    out = []
    for i in tqdm(range(0, len(questions), batch), desc=f"embedding questions {name}",
                  disable=not progress, leave=False):
        out.append(embed_cached(memory.store, memory.embedder, _QUESTIONS,
                                questions[i:i + batch], kind="query"))
    return np.concatenate(out) if out else np.zeros((0, memory.embedder.dim), dtype=np.float32)


def _quick_subset(corpus: list[dict[str, Any]], queries: list[dict[str, Any]],
                  docs: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A quick run: the first ``docs`` documents and the questions they answer (or that
    have no gold span at all)."""
    corpus = corpus[:docs]
    kept = {d["doc_id"] for d in corpus}
    queries = [q for q in queries if set(q.get("gold_doc_ids") or ()) <= kept
               and (q.get("gold_doc_ids") or not q.get("gold_spans"))]
    return corpus, queries


def _ingest(kb: Knowledge, corpus: list[dict[str, Any]], strategy: dict[str, Any], name: str,
            progress: bool) -> tuple[dict[str, tuple[int, ...]], int, int, float]:
    """Add every document as plain text; returns each document's cleaning origin map (for
    mapping gold spans), the chunks made, the chunks embedded and the seconds it took."""
    origins: dict[str, tuple[int, ...]] = {}
    started = time.perf_counter()
    chunks_total = embedded = 0
    for doc in tqdm(corpus, desc=f"ingest {name}", disable=not progress, leave=False):
        parsed = parse(doc["text"], "text")
        assert parsed.origin is not None
        origins[doc["doc_id"]] = parsed.origin
        result = kb.add_text(doc["text"], doc_id=doc["doc_id"], title=doc.get("title") or None,
                             format="text", duplicates="keep", **strategy)
        chunks_total += result.chunks
        embedded += result.added
    return origins, chunks_total, embedded, time.perf_counter() - started


def _gold_ranks(hits: list[Any], question: dict[str, Any],
                spans: dict[str, tuple[int, int]]) -> list[int]:
    """The ranks whose chunk (or the neighbour shown with it) overlaps a gold span."""
    ranks = []
    for rank, hit in enumerate(hits, start=1):
        if any(g["doc_id"] == hit.doc_id and spans[c][0] < g["end"] and g["start"] < spans[c][1]
               for c in (hit.id, *hit.expanded) for g in question["gold_spans"]):
            ranks.append(rank)
    return ranks


class _Asked:
    """What asking every question of one corpus found: the ranking table, memstrata's top
    scores (answerable apart from unanswerable), the counts and memstrata's search time."""

    def __init__(self) -> None:
        self.table = _Table((1, 5, 10))
        self.top_scores: dict[str, list[float]] = {"answerable": [], "unanswerable": []}
        self.answered = self.unanswerable = 0
        self.search_s = 0.0


def _ask(memory: Any, kb: Knowledge, sampled: list[dict[str, Any]],
         spans: dict[str, tuple[int, int]], name: str, progress: bool) -> _Asked:
    """Every system of :data:`SYSTEM_OPTIONS` answers every sampled question."""
    engine: KnowledgeBase = memory.knowledge_base
    # the one-list baselines rank as their list alone does: no neighbour-aware ordering
    alone = KnowledgeBase(engine.store, engine.indexer, engine.embedder,
                          replace(engine.settings, kb_neighbour_weight=0.0))
    plain = KnowledgeBase(engine.store, engine.indexer, engine.embedder,
                          replace(engine.settings, kb_context_weight=0.0, kb_neighbour_weight=0.0))
    out = _Asked()
    vectors = _query_vectors(memory, [q["question"] for q in sampled], progress, name)
    for q, vector in tqdm(list(zip(sampled, vectors)), desc=f"questions {name}",
                          disable=not progress, leave=False):
        meta = q.get("meta") or {}
        is_unanswerable = bool(meta.get("unanswerable")) or not q.get("gold_spans")
        for system, options in SYSTEM_OPTIONS.items():
            opts = dict(options)
            target = plain if opts.pop("plain", False) else engine if opts["mode"] == "hybrid" else alone
            expand = opts.pop("expand", False)
            t0 = time.perf_counter()
            hits = target.search([kb.shared_scope], q["question"], k=10, expand=expand, min_score=0.0,
                                 query_vector=vector if opts["mode"] != "lexical" else None, **opts)
            if system == "memstrata":
                out.search_s += time.perf_counter() - t0
                out.top_scores["unanswerable" if is_unanswerable else "answerable"].append(
                    hits[0].score if hits else 0.0)
            if is_unanswerable:
                continue
            out.table.add(system, str(meta.get("query_type") or "all"), _gold_ranks(hits, q, spans),
                          [h.doc_id for h in hits], set(q.get("gold_doc_ids") or ()))
        if is_unanswerable:
            out.unanswerable += 1
        else:
            out.answered += 1
    return out


def _run_one(memory: Any, directory: Path, strategy: dict[str, Any], namespace: str,
             limit: int | None, progress: bool, docs: int | None = None) -> dict[str, Any]:
    corpus, queries = _load(directory)
    if docs is not None:
        corpus, queries = _quick_subset(corpus, queries, docs)
    kb = memory.knowledge(agent_id=namespace)
    assert isinstance(kb, Knowledge)
    origins, chunks_total, embedded, ingest_s = _ingest(kb, corpus, strategy, directory.name, progress)
    spans: dict[str, tuple[int, int]] = {}
    sizes = []
    # the embedder alone on 24 of the chunks, when this run embedded anything (a re-run
    # over a store that has the vectors measures nothing)
    sample = [c for doc in corpus[:8] for c in kb.chunks(doc["doc_id"])][:24] if embedded else []
    raw_rate = _raw_embedding_rate(memory, [chunk_texts(c.text, c.title, c.heading_path)[3]
                                            for c in sample])
    for doc in corpus:
        for c in kb.chunks(doc["doc_id"]):
            origin = origins[doc["doc_id"]]
            spans[c.id] = (origin[c.start], origin[c.end - 1] + 1)
            sizes.append(c.end - c.start)
    asked = _ask(memory, kb, _sample(queries, limit), spans, directory.name, progress)
    top_scores = asked.top_scores
    below = {f"{t:g}": {kind: round(sum(1 for v in vals if v < t) / len(vals), 4) if vals else None
                        for kind, vals in top_scores.items()} for t in MIN_SCORES}
    return {"data": directory.name, "strategy": strategy, "documents": len(corpus),
            "chunks": chunks_total,
            "chunk_chars": {"median": statistics.median(sizes) if sizes else 0,
                            "min": min(sizes, default=0), "max": max(sizes, default=0)},
            "ingest_s": round(ingest_s, 2),
            "chunks_per_s": round(chunks_total / ingest_s, 2) if ingest_s else 0,
            "chunks_embedded": embedded, "embedder_chunks_per_s": round(raw_rate, 2) if embedded else None,
            "questions": asked.answered, "unanswerable": asked.unanswerable,
            "search_ms_mean": round(1000 * asked.search_s / max(1, asked.answered + asked.unanswerable), 2),
            "systems": asked.table.summary(), "top_score_below": below,
            "top_score_median": {k: round(statistics.median(v), 4) if v else None
                                 for k, v in top_scores.items()}}


def run_kb(directories: Sequence[str | Path], *, strategies: Sequence[str] = ("500/300",),
           store: str | None = None, embedder: str | None = None, limit: int | None = None,
           docs: int | None = None, progress: bool = True, embedding_cache: str | Path | None = None,
           **settings: Any) -> dict[str, Any]:
    """Run the benchmark on each data directory with each chunking strategy, in one
    store (identical chunks are embedded once: the ingestion rate is honest only for
    texts not embedded before — a fresh store). ``docs`` keeps the first documents of
    each corpus and the questions they answer. ``embedding_cache``: an SQLite file of
    vectors kept across runs (:class:`~.embedding_cache.DiskCachedEmbedder`); the
    scores are the same, the ingestion rate then counts cache hits."""
    runs = []
    cached = DiskCachedEmbedder(parse_embedder(embedder), embedding_cache) if embedding_cache else None
    with bench_memory(store, cached or embedder, **settings) as memory:
        for d in directories:
            for i, text in enumerate(strategies):
                # one namespace per corpus, strategy and document subset: runs never share chunks
                namespace = f"bench-kb-{Path(d).name}-{i}" + (f"-d{docs}" if docs else "")
                runs.append(_run_one(memory, Path(d), parse_strategy(text), namespace, limit, progress,
                                     docs))
        name = memory.embedder.name
        s = memory.settings
    cache = None
    if cached is not None:
        cache = {"path": str(cached.path), "hits": cached.hits, "misses": cached.misses}
        cached.close()
    return {"benchmark": "kb", "embedder": name, "strategies": list(strategies), "runs": runs,
            "embedding_cache": cache,
            "settings": {"kb_context_weight": s.kb_context_weight, "dense_weight": s.dense_weight,
                         "lexical_weight": s.lexical_weight, "body_weight": s.body_weight,
                         "expansion_weight": s.expansion_weight, "fusion": s.fusion}}


def _label(strategy: dict[str, Any]) -> str:
    cjk = f"/cjk×{strategy['cjk_weight']:g}" if "cjk_weight" in strategy else ""
    return f"{strategy['max_chars']}/{strategy['min_chars']}{cjk}"


def render(report: dict[str, Any]) -> str:
    """The report as Markdown tables."""
    cache = report.get("embedding_cache")
    out = [f"embedder {report['embedder']}" + (
        f" (embedding cache {cache['path']}: {cache['hits']} hits, {cache['misses']} embedded)"
        if cache else ""), "",
           "| data | chunking | system | Hit@1 | Hit@5 | Hit@10 | MRR@10 | doc R@5 |",
           "|---|---|---|---|---|---|---|---|"]
    for run in report["runs"]:
        label = _label(run["strategy"])
        for system, res in run["systems"].items():
            o = res["overall"]
            out.append(f"| {run['data']} | {label} | {system} | {o['hit@1']:.3f} | {o['hit@5']:.3f} | "
                       f"{o['hit@10']:.3f} | {o['mrr@10']:.3f} | {o['doc_recall@5']:.3f} |")
    out += ["", "| data | chunking | chunks | median chars | ingest s | chunks/s | embedder alone "
            "chunks/s | questions | unanswerable | search ms |", "|---|---|---|---|---|---|---|---|---|---|"]
    for run in report["runs"]:
        out.append(f"| {run['data']} | {_label(run['strategy'])} | {run['chunks']} | "
                   f"{run['chunk_chars']['median']} | {run['ingest_s']} | "
                   f"{run['chunks_per_s']} | {run.get('embedder_chunks_per_s', '-')} | "
                   f"{run['questions']} | {run['unanswerable']} | "
                   f"{run['search_ms_mean']} |")
    out += ["", "Top memstrata chunk under min_score (unanswerable / answerable questions):", "",
            "| data | chunking | " + " | ".join(f"< {t:g}" for t in MIN_SCORES) + " |",
            "|---|---|" + "---|" * len(MIN_SCORES)]
    for run in report["runs"]:
        cells = []
        for t in MIN_SCORES:
            b = run["top_score_below"][f"{t:g}"]
            un = "–" if b["unanswerable"] is None else f"{b['unanswerable']:.2f}"
            cells.append(f"{un} / {b['answerable']:.2f}")
        out.append(f"| {run['data']} | {_label(run['strategy'])} | " + " | ".join(cells) + " |")
    return "\n".join(out)

