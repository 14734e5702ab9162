"""Search latency at scale: one user at growing sizes, fresh processes, other
processes' writes, many users in one store; add() throughput and memory.

The corpus is made of real conversational text: LoCoMo-like sentences generated from a
fixed vocabulary of templates (no data file needed), as memory items. Vectors for the
bulk come from the default embedder on a base set of texts, each reused with a small
random perturbation so that 100k items do not cost 100k embedding calls (about 20
minutes on two cores); exact cosine search does not care where vectors came from.
Queries are embedded for real, separately, to report latency with and without the
query embedding (with it: each query embedded, none found in the query cache).

:func:`run_latency` measures one store (SQLite or PostgreSQL): per size, search
p50/p95; at the largest size also a *fresh process*'s open and first search (spawned,
so nothing is inherited) and, in rounds, the first search of this warm process after
*another process* wrote 100 items — and whether every one of them is found.
:func:`run_many_users` loads thousands of users into one SQLite file and searches
them from a fresh process under an ``index_memory_mb`` budget, reporting resident
memory beside what the index holds.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..memory import Memory
from ..requests import SearchRequest
from ..retrieval.documents import item_texts
from ..stores.base import IndexDoc, Store
from ..types import Filters, ItemVersion, Kind, Layer, MemoryItem, Scope, new_id, utcnow

__all__ = ["run_latency", "run_many_users", "build_users", "render", "render_users", "render_comparison",
           "synthetic_texts"]

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


def _bulk_items(store: Store, scope: Scope, texts: list[str], base_vectors: np.ndarray,
                rng: np.random.Generator, progress: bool, batch: int = 2000) -> list[str]:
    """Write ``texts`` as memory items of ``scope`` with their index documents (vectors:
    a random base vector plus noise); the item ids, in order."""
    now = utcnow()
    out = []
    for start in tqdm(range(0, len(texts), batch), desc=f"load {len(texts):,}", disable=not progress,
                      leave=False):
        chunk = texts[start:start + batch]
        noise = rng.normal(0, 0.02, size=(len(chunk), base_vectors.shape[1])).astype(np.float32)
        vectors = base_vectors[rng.integers(0, len(base_vectors), len(chunk))] + noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        with store.transaction():
            docs = []
            for i, text in enumerate(chunk):
                created = now - timedelta(minutes=len(texts) - start - i)
                item = MemoryItem(id=new_id("mem"), user_id=scope.user_id, namespace=scope.namespace,
                                  kind=Kind.FACT, content=text, created_at=created, updated_at=created)
                store.write_item(scope, item, ItemVersion(item.id, 1, "create", "bench",
                                                          "latency bench", created, None, None))
                display, body, context, _ = item_texts(item)
                docs.append(IndexDoc(item.id, Layer.SEMANTIC, display, body, context, created,
                                     kind="fact", status="active", importance=0.5, vector=vectors[i]))
                out.append(item.id)
            store.index(scope, docs)
    return out


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


def _rss_mb() -> float:
    """This process's resident memory now (Linux ``/proc``; elsewhere its peak)."""
    try:
        with open("/proc/self/statm") as f:
            return round(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _in_child(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` in a fresh Python process (spawned: nothing inherited but the
    arguments), its result returned."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(func, *args).result()


def _fresh_search(url: str, user: str, texts: list[str], vectors: np.ndarray) -> dict[str, float]:
    """In a fresh process: load the embedder, open the store, search it in English (the
    first search loads the user's index), then in Chinese (the first Chinese text loads
    jieba's dictionary), again, and once with the query embedding. ``texts``: English,
    Chinese, any."""
    from ..providers.embedders import parse_embedder

    started = time.perf_counter()
    embedder = parse_embedder(None)
    loaded = time.perf_counter()
    with Memory(url, embedder=embedder, worker="off") as memory:
        opened = time.perf_counter()
        scope = Scope(user)
        times = []
        for text, vec in zip(texts, vectors):
            t0 = time.perf_counter()
            memory.retriever.search(scope, SearchRequest(text, k=10), query_vector=vec)
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        memory.retriever.search(scope, SearchRequest(texts[0] + " today", k=10))
        embedded = time.perf_counter() - t0
        index_memory = getattr(memory.store, "index_memory", None)
        scopes = index_memory()["scopes"] if index_memory else 0
    return {"embedder_load_s": round(loaded - started, 3), "open_s": round(opened - loaded, 3),
            "first_search_ms": round(times[0] * 1000, 1),
            "first_chinese_search_ms": round(times[1] * 1000, 1),
            "third_search_ms": round(times[2] * 1000, 1),
            "open_and_first_search_s": round(opened - loaded + times[0], 3),
            "first_search_with_embedding_ms": round(embedded * 1000, 1), "mirrors_loaded": scopes}


def _by_language(texts: list[str]) -> list[int]:
    """Indexes of the first English text, the first Chinese one, and the next English."""
    zh = [i for i, t in enumerate(texts) if any("\u4e00" <= c <= "\u9fff" for c in t)]
    en = [i for i in range(len(texts)) if i not in set(zh)]
    return [en[0], zh[0], en[1]]


def _write_items(url: str, user: str, texts: list[str], base_vectors: np.ndarray,
                 seed: int) -> list[str]:
    """In another process: write ``texts`` as items of ``user`` (one transaction)."""
    from ..stores import open_store

    store = open_store(url)
    try:
        return _bulk_items(store, Scope(user), texts, base_vectors, np.random.default_rng(seed),
                           False)
    finally:
        store.close()


def _after_other_writes(memory: Memory, url: str, scope: Scope, base_vectors: np.ndarray,
                        query_texts: list[str], qvecs: np.ndarray, rounds: int,
                        writes: int) -> dict[str, Any]:
    """Rounds of: another process writes ``writes`` items; this (warm) process's next
    search is timed, then every written item is looked up by its own text."""
    first, second, visible, total = [], [], 0, 0
    for r in range(rounds):
        texts = [f"{t} [round {r}]" for t in synthetic_texts(writes, seed=1000 + r)]
        ids = _in_child(_write_items, url, scope.user_id, texts, base_vectors, 2000 + r)
        q = (r * 7) % len(query_texts)
        t0 = time.perf_counter()
        memory.retriever.search(scope, SearchRequest(query_texts[q], k=10), query_vector=qvecs[q],
                                touch=False)
        first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        memory.retriever.search(scope, SearchRequest(query_texts[q + 1], k=10), query_vector=qvecs[q + 1],
                                touch=False)
        second.append(time.perf_counter() - t0)
        found = memory.retriever.search  # every written item, found by its own words
        for item_id, text in zip(ids, texts):
            hits = found(scope, SearchRequest(text, k=10, mode="lexical"), touch=False).hits
            visible += any(h.id == item_id for h in hits)
        total += len(ids)
    return {"rounds": rounds, "writes_per_round": writes,
            "first_search_ms": [round(t * 1000, 1) for t in first],
            "next_search_ms": [round(t * 1000, 1) for t in second],
            "visible": visible, "written": total}


def _dense_recall(memory: Memory, scope: Scope, qvecs: np.ndarray, k: int = 10) -> float | None:
    """Recall@k of the store's vector search against an exact scan of every stored float32
    vector (SQLite: the int8 first pass + exact re-scoring)."""
    from ..stores.sqlite import SQLiteStore

    store = memory.store
    if not isinstance(store, SQLiteStore):
        return None
    rows = store._x("SELECT d.id, v.vec FROM doc_vectors v JOIN docs d ON d.rowid = v.rowid "
                    "WHERE v.namespace=? AND v.user_id=?", (scope.namespace, scope.user_id)).fetchall()
    ids = [r[0] for r in rows]
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    found = 0
    filters = Filters()
    for vec in qvecs:
        exact = np.argsort(-(matrix @ vec), kind="stable")[:k]
        got = {d for d, _ in store.vector_search(scope, vec, filters, k)}
        found += sum(ids[i] in got for i in exact)
    return round(found / (k * len(qvecs)), 4)


def _add_throughput(memory: Memory, progress: bool) -> dict[str, Any]:
    """add(): real messages through the public API. It returns once the raw turns, their
    words and their job are stored; flush() then waits for the background job (embedding
    + extraction), whose rate is the sustained write throughput."""
    add_times = []
    for i, text in enumerate(tqdm(synthetic_texts(100, seed=5), desc="add()",
                                  disable=not progress, leave=False)):
        started = time.perf_counter()
        memory.add([{"role": "user", "content": text}], "latency-add", f"s{i // 20}")
        add_times.append(time.perf_counter() - started)
    started = time.perf_counter()
    memory.flush()
    drained = time.perf_counter() - started
    return _percentiles(add_times) | {
        "messages_per_s": round(len(add_times) / sum(add_times), 1),
        "processed_per_s": round(len(add_times) / (sum(add_times) + drained), 1)}


def _query_embedding(memory: Memory, query_texts: list[str]) -> tuple[np.ndarray, dict[str, Any]]:
    """The queries' vectors (one batch), and the cost of embedding a query alone and in
    a batch."""
    started = time.perf_counter()
    qvecs = memory.embedder.embed(query_texts, kind="query")
    embed_each = (time.perf_counter() - started) / len(query_texts)
    single = []
    for text in query_texts[:50]:
        t0 = time.perf_counter()
        memory.embedder.embed([text], kind="query")
        single.append(time.perf_counter() - t0)
    return qvecs, _percentiles(single) | {"batched_ms": round(embed_each * 1000, 2)}


def _search_at_size(memory: Memory, scope: Scope, query_texts: list[str], qvecs: np.ndarray,
                    size: int, progress: bool) -> dict[str, Any]:
    """Search latency over what is loaded now: without the query embedding, with it (no
    cache hit), with the query's vector cached; beside dense recall and an FTS5 baseline."""
    memory.retriever.search(scope, SearchRequest(query_texts[0], k=10), query_vector=qvecs[0],
                            touch=False)
    excluded, included, repeated = [], [], []
    for i, text in enumerate(tqdm(query_texts, desc=f"search @{size:,}",
                                  disable=not progress, leave=False)):
        t0 = time.perf_counter()
        memory.retriever.search(scope, SearchRequest(text, k=10), query_vector=qvecs[i])
        excluded.append(time.perf_counter() - t0)
    memory.retriever.queries.clear()  # every query below is embedded (no cache hit)
    for text in query_texts[:50]:
        t0 = time.perf_counter()
        memory.retriever.search(scope, SearchRequest(text, k=10))
        included.append(time.perf_counter() - t0)
    for text in query_texts[:50]:  # the same queries again: their vectors cached
        t0 = time.perf_counter()
        memory.retriever.search(scope, SearchRequest(text, k=10))
        repeated.append(time.perf_counter() - t0)
    row: dict[str, Any] = {"search_excluding_embedding": _percentiles(excluded),
                           "search_including_embedding": _percentiles(included),
                           "search_repeated_query": _percentiles(repeated)}
    recall = _dense_recall(memory, scope, qvecs[:50])
    if recall is not None:
        row["dense_recall_at_10_vs_exact"] = recall
    baseline = _fts5_baseline(memory, scope, query_texts)
    if baseline:
        row["baseline_fts5_bm25"] = baseline
    return row


def run_latency(sizes: list[int], *, queries: int = 200, store: str | None = None,
                progress: bool = True, processes: bool = True, rounds: int = 3) -> dict[str, Any]:
    """One user's search latency at ``sizes`` (see the module); with ``processes``, at the
    largest size also a fresh process's first search and, ``rounds`` times, the first
    search after another process wrote 100 items."""
    rng = np.random.default_rng(7)
    query_texts = list(dict.fromkeys(
        t.split(" (note")[0].split("（")[0] for t in synthetic_texts(3 * queries, seed=99)))[:queries]
    report: dict[str, Any] = {"benchmark": "latency", "queries": len(query_texts), "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="memstrata-latency-") as tmp:
        url = store or f"sqlite:///{Path(tmp) / 'latency.db'}"
        with Memory(url) as memory:
            report["embedder"] = memory.embedder.name
            report["store"] = memory.store.url.split("@")[-1]
            report["backend"] = type(memory.store).__name__.removesuffix("Store")
            base_texts = synthetic_texts(512, seed=3)
            base_vectors = memory.embedder.embed(base_texts, kind="passage")
            report["add"] = _add_throughput(memory, progress)
            qvecs, report["query_embedding"] = _query_embedding(memory, query_texts)
            scope = Scope("latency-user")
            loaded = 0
            for size in sorted(sizes):
                texts = synthetic_texts(size - loaded, seed=size)
                _bulk_items(memory.store, scope, texts, base_vectors, rng, progress)
                loaded = size
                report["sizes"][str(size)] = _search_at_size(memory, scope, query_texts, qvecs,
                                                             size, progress)
            if processes and sizes:
                pick = _by_language(query_texts)
                report["fresh_process"] = _in_child(_fresh_search, url, scope.user_id,
                                                    [query_texts[i] for i in pick], qvecs[pick])
                report["fresh_process"]["items"] = max(sizes)
                report["after_other_process_writes"] = _after_other_writes(
                    memory, url, scope, base_vectors, query_texts, qvecs, rounds, 100)
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return report


# -- many users in one store -----------------------------------------------------------
def _load_users(url: str, users: int, per_user: int, base_vectors: np.ndarray,
                progress: bool) -> float:
    """Write ``per_user`` items for each of ``users`` users; the seconds it took."""
    from ..stores import open_store

    started = time.perf_counter()
    rng = np.random.default_rng(11)
    texts = synthetic_texts(per_user * 50, seed=13)
    store = open_store(url)
    try:
        for first in tqdm(range(0, users, 20), desc=f"load {users:,} users", disable=not progress,
                          leave=False):
            with store.transaction():  # 20 users a transaction
                for u in range(first, min(first + 20, users)):
                    chunk = [texts[(u * per_user + i) % len(texts)] for i in range(per_user)]
                    _bulk_items(store, Scope(f"user-{u:05d}"), chunk, base_vectors, rng, False)
    finally:
        store.close()
    return time.perf_counter() - started


def _search_users(url: str, users: int, queries: int, budget_mb: float) -> dict[str, Any]:
    """In a fresh process on a store of ``users`` users: every user searched once in a
    random order (the first search of each loads its index), then ``queries`` searches
    of random users; latency, resident memory and the index's own accounting."""
    from ..providers.embedders import parse_embedder

    embedder = parse_embedder(None)
    rng = random.Random(5)
    texts = [t.split(" (note")[0].split("（")[0] for t in synthetic_texts(200, seed=99)]
    vectors = embedder.embed(texts, kind="query")
    with Memory(url, embedder=embedder, worker="off", index_memory_mb=budget_mb) as memory:
        for i in _by_language(texts)[:2]:  # English, then Chinese: jieba's dictionary loaded
            memory.retriever.search(Scope("user-00000"), SearchRequest(texts[i], k=10),
                                    query_vector=vectors[i])
        rss_open = _rss_mb()
        order = list(range(users))
        rng.shuffle(order)
        first, again = [], []
        empty = 0
        for n, u in enumerate(order):
            q = n % len(texts)
            t0 = time.perf_counter()
            hits = memory.retriever.search(Scope(f"user-{u:05d}"), SearchRequest(texts[q], k=10),
                                           query_vector=vectors[q]).hits
            first.append(time.perf_counter() - t0)
            empty += len(hits) < 10
        for n in range(queries):
            q, u = n % len(texts), rng.randrange(users)
            t0 = time.perf_counter()
            hits = memory.retriever.search(Scope(f"user-{u:05d}"), SearchRequest(texts[q], k=10),
                                           query_vector=vectors[q]).hits
            again.append(time.perf_counter() - t0)
            empty += len(hits) < 10
        held = memory.store.index_memory() if hasattr(memory.store, "index_memory") else {}
        rss_end = _rss_mb()
    return {"first_search_of_each_user": _percentiles(first), "random_users": _percentiles(again),
            "searches_with_fewer_than_10_hits": empty,
            "rss_after_open_mb": rss_open, "rss_after_searches_mb": rss_end,
            "rss_growth_mb": round(rss_end - rss_open, 1),
            "index_budget_mb": budget_mb, "index_held_mb": round(held.get("bytes", 0) / 2**20, 1),
            "index_scopes_held": held.get("scopes"), "index_evictions": held.get("evictions"),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


#: users written through the store's API in the many-users file; the rest copy their rows
TEMPLATE_USERS = 20
_CLONE = [  # one user's rows as the store wrote them, copied to another user (SQLite)
    "INSERT INTO items SELECT id, namespace, :uid, kind, content, subject, attribute, value, "
    "confidence, importance, status, version, supersedes, created_at, updated_at, last_accessed, "
    "access_count, source_session_id, source_message_ids, tags, metadata FROM items "
    "WHERE namespace = '' AND user_id = :t",
    "INSERT INTO item_versions (item_id, namespace, user_id, version, op, actor, reason, at, before, "
    "after) SELECT item_id, namespace, :uid, version, op, actor, reason, at, before, after "
    "FROM item_versions WHERE namespace = '' AND user_id = :t ORDER BY id",
    "INSERT INTO docs SELECT rowid + :off, namespace, :uid, id, layer, text, session_id, kind, status, "
    "importance, created_at, tags FROM docs WHERE namespace = '' AND user_id = :t",
    "INSERT INTO docs_fts (rowid, scope, body, context) SELECT f.rowid + :off, :key, f.body, f.context "
    "FROM docs_fts f JOIN docs d ON d.rowid = f.rowid WHERE d.namespace = '' AND d.user_id = :t",
    "INSERT INTO doc_vectors SELECT rowid + :off, namespace, :uid, dim, vec FROM doc_vectors "
    "WHERE namespace = '' AND user_id = :t",
    "INSERT INTO doc_records SELECT rowid + :off, namespace, :uid, id, visible, terms, q8 "
    "FROM doc_records WHERE namespace = '' AND user_id = :t",
    "INSERT INTO index_log (namespace, user_id, doc) SELECT namespace, :uid, doc + :off "
    "FROM index_log WHERE namespace = '' AND user_id = :t ORDER BY seq",
    "INSERT INTO index_state (namespace, user_id, generation, floor, logged, snapshot_seq, "
    "snapshot_rows, since_snapshot) SELECT namespace, :uid, generation, 0, logged, 0, 0, "
    "since_snapshot FROM index_state WHERE namespace = '' AND user_id = :t",
]


def _clone_users(path: Path, first: int, users: int, progress: bool) -> None:
    """Users ``first…users-1`` as copies of the rows of users ``0…first-1`` (ids and
    texts kept, row ids moved past every template's)."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        stride = int(conn.execute("SELECT COALESCE(max(rowid), 0) + 1 FROM docs").fetchone()[0])
        for start in tqdm(range(first, users, 500), desc="copy users", disable=not progress,
                          leave=False):
            with conn:
                for u in range(start, min(start + 500, users)):
                    uid = f"user-{u:05d}"
                    params = {"uid": uid, "t": f"user-{u % first:05d}", "off": u * stride,
                              "key": Scope(uid).key}
                    for sql in _CLONE:
                        conn.execute(sql, params)
    finally:
        conn.close()


def build_users(path: str | Path, users: int, per_user: int, *, progress: bool = True) -> float | None:
    """The many-users SQLite file at ``path`` (``users`` × ``per_user`` items): built
    when missing — the first :data:`TEMPLATE_USERS` users through the store's API, the
    others as SQL copies of their rows (a million items through the API take an hour on
    two busy cores) — and reused when a complete one is there; the seconds building took
    (None when reused)."""
    path = Path(path)
    url = f"sqlite:///{path}"
    shape = f"{users}x{per_user}"
    if path.exists():
        with Memory(url, worker="off") as memory:
            if memory.store.get_meta("bench_users") == shape:
                return None
        raise FileExistsError(f"{path} is not a complete {shape} many-users store; remove it")
    started = time.perf_counter()
    with Memory(url, worker="off") as memory:  # records the embedder in the store
        base_vectors = memory.embedder.embed(synthetic_texts(512, seed=3), kind="passage")
    written = min(users, TEMPLATE_USERS)
    _load_users(url, written, per_user, base_vectors, progress)
    if users > written:
        _clone_users(path, written, users, progress)
    with Memory(url, worker="off") as memory:
        memory.store.set_meta("bench_users", shape)
    return time.perf_counter() - started


def run_many_users(users: int, per_user: int, *, queries: int = 2000, budget_mb: float | None = None,
                   path: str | Path | None = None, progress: bool = True) -> dict[str, Any]:
    """``users`` users × ``per_user`` items in one SQLite store (a temporary file, or
    ``path``: built there if missing, else reused), searched by a fresh process whose
    search index may hold ``budget_mb`` (default: the setting)."""
    from ..config import Settings

    budget = Settings.load().index_memory_mb if budget_mb is None else budget_mb
    with tempfile.TemporaryDirectory(prefix="memstrata-users-") as tmp:
        file = Path(path) if path else Path(tmp) / "users.db"
        load_s = build_users(file, users, per_user, progress=progress)
        size_mb = round(file.stat().st_size / 2**20, 1)
        found = _in_child(_search_users, f"sqlite:///{file}", users, queries, budget)
    return {"users": users, "items_per_user": per_user,
            "load_s": None if load_s is None else round(load_s, 1),
            "file_mb": size_mb, **found}


# -- rendering -------------------------------------------------------------------------
def render(report: dict[str, Any]) -> str:
    lines = [f"{report['backend']}: store {report['store']}, embedder {report['embedder']}, "
             f"{report['queries']} queries",
             f"add(): p50 {report['add']['p50_ms']} ms, p95 {report['add']['p95_ms']} ms; "
             f"with the background jobs (embedding + extraction) drained: "
             f"{report['add']['processed_per_s']} messages/s",
             f"query embedding alone: p50 {report['query_embedding']['p50_ms']} ms, "
             f"p95 {report['query_embedding']['p95_ms']} ms",
             "| items | search p50 | search p95 | with embedding p50 | p95 | repeated query "
             "(vector cached) p95 | dense recall@10 vs exact | baseline: FTS5 bm25() alone p50 | p95 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for size, row in report["sizes"].items():
        ex, inc = row["search_excluding_embedding"], row["search_including_embedding"]
        rep = row.get("search_repeated_query", {})
        base = row.get("baseline_fts5_bm25")
        lines.append(f"| {int(size):,} | {ex['p50_ms']} ms | {ex['p95_ms']} ms | "
                     f"{inc['p50_ms']} ms | {inc['p95_ms']} ms | {rep.get('p95_ms', '–')} ms | "
                     f"{row.get('dense_recall_at_10_vs_exact', '–')} | "
                     + (f"{base['p50_ms']} ms | {base['p95_ms']} ms |" if base else "– | – |"))
    fresh = report.get("fresh_process")
    if fresh:
        lines.append(f"fresh process at {fresh['items']:,} items: open {fresh['open_s']} s + first "
                     f"search {fresh['first_search_ms']} ms = {fresh['open_and_first_search_s']} s; "
                     f"first Chinese search {fresh['first_chinese_search_ms']} ms (jieba's "
                     f"dictionary), then {fresh['third_search_ms']} ms; the first search with "
                     f"the query embedding {fresh['first_search_with_embedding_ms']} ms (the "
                     f"model loads on first use; constructing the embedder "
                     f"{fresh['embedder_load_s']} s)")
    after = report.get("after_other_process_writes")
    if after:
        lines.append(f"after another process wrote {after['writes_per_round']} items "
                     f"({after['rounds']} rounds): first search {after['first_search_ms']} ms, "
                     f"next {after['next_search_ms']} ms; written items found by their own text "
                     f"{after['visible']}/{after['written']}")
    lines.append(f"peak RSS {report['peak_rss_mb']} MB")
    return "\n".join(lines)


def render_users(report: dict[str, Any]) -> str:
    first, again = report["first_search_of_each_user"], report["random_users"]
    return "\n".join([
        f"{report['users']:,} users × {report['items_per_user']} items in one SQLite store "
        f"({report['file_mb']} MB, "
        + (f"loaded in {report['load_s']} s" if report["load_s"] is not None else "built beforehand")
        + "), a fresh process, "
        f"index_memory_mb = {report['index_budget_mb']}",
        f"first search of each user: p50 {first['p50_ms']} ms, p95 {first['p95_ms']} ms; "
        f"random users after: p50 {again['p50_ms']} ms, p95 {again['p95_ms']} ms",
        f"RSS {report['rss_after_open_mb']} MB after the first two searches, "
        f"{report['rss_after_searches_mb']} MB after all (+{report['rss_growth_mb']} MB); the index "
        f"holds {report['index_held_mb']} MB for {report['index_scopes_held']} users "
        f"({report['index_evictions']} evicted); searches with fewer than 10 hits: "
        f"{report['searches_with_fewer_than_10_hits']}"])


def render_comparison(reports: list[dict[str, Any]]) -> str:
    """Several stores' runs as one table: search p50/p95 (query embedding excluded) per
    size, and each store's p95 over the first one's."""
    names = [r.get("backend") or r["store"] for r in reports]
    head = ["items"] + [f"{n} {p}" for n in names for p in ("p50", "p95")]
    head += [f"{n} / {names[0]} p95" for n in names[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    sizes = sorted({int(s) for r in reports for s in r["sizes"]})
    for size in sizes:
        cells = [f"{size:,}"]
        rows = [r["sizes"].get(str(size), {}).get("search_excluding_embedding") for r in reports]
        for row in rows:
            cells += [f"{row['p50_ms']} ms", f"{row['p95_ms']} ms"] if row else ["–", "–"]
        first = rows[0]
        for row in rows[1:]:
            cells.append(f"{row['p95_ms'] / first['p95_ms']:.2f}×"
                         if row and first and first["p95_ms"] else "–")
        lines.append("| " + " | ".join(cells) + " |")
    add = ["add()"] + [c for r in reports for c in (f"{r['add']['p50_ms']} ms",
                                                         f"{r['add']['p95_ms']} ms")]
    lines.append("| " + " | ".join(add + ["–"] * (len(head) - len(add))) + " |")
    return "\n".join(lines)
