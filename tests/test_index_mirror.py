"""The in-process index: BM25 and cosine as specified, through every change a mirror
goes through (appends, deaths, folding, snapshots), under a memory budget, forgetting
for real — on real SQLite files."""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memstrata.stores import open_store
from memstrata.stores.base import IndexDoc
from memstrata.stores.dense import quantize
from memstrata.stores.lexical import B, K1, term_hash
from memstrata.stores.mirror import MirrorCache, ScopeMirror
from memstrata.stores.sqlite.index import SQLiteIndex
from memstrata.types import Filters, Layer, Scope, Status

WORDS = [f"w{i}" for i in range(40)] + ["上海", "咖啡", "tennis"]


def _bm25(docs: dict[str, tuple[str, str]], terms: list[str], bw: float, cw: float) -> dict[str, float]:
    """FTS5's bm25() with field weights, per the lexical module's docstring, written plainly."""
    n = len(docs)
    lengths = {d: len(b.split()) + len(c.split()) + 1 for d, (b, c) in docs.items()}
    avg = sum(lengths.values()) / n
    out: dict[str, float] = {}
    for term in set(terms):
        holding = [d for d, (b, c) in docs.items() if term in b.split() or term in c.split()]
        if not holding:
            continue
        idf = max(math.log((n - len(holding) + 0.5) / (len(holding) + 0.5)), 1e-6)
        for d in holding:
            b, c = docs[d]
            f = bw * Counter(b.split())[term] + cw * Counter(c.split())[term]
            if f > 0:
                out[d] = out.get(d, 0.0) + idf * f * (K1 + 1) / (f + K1 * (1 - B + B * lengths[d] / avg))
    return out


def _doc(doc_id: str, body: str, context: str = "", vector=None, status="active") -> IndexDoc:
    return IndexDoc(doc_id, Layer.SEMANTIC, body, body, context, datetime(2026, 1, 1, tzinfo=UTC),
                    kind="fact", status=status, importance=0.5, vector=vector)


def _unit(rng: np.random.Generator, dim: int = 48) -> np.ndarray:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def test_scores_match_the_formula_through_writes_deaths_folds_and_snapshots(tmp_path: Path) -> None:
    rng, pick = np.random.default_rng(1), random.Random(1)
    store = open_store(f"sqlite:///{tmp_path / 'bm25.db'}")
    store.fold_min, store.snapshot_min, store.snapshot_every = 5, 10, 7  # every path, often
    scope = Scope("bm25")
    model: dict[str, tuple[str, str]] = {}
    vectors: dict[str, np.ndarray] = {}
    for step in range(120):
        doc_id = f"d{pick.randrange(60)}"
        if pick.random() < 0.15 and doc_id in model:
            store.delete_messages(scope, [doc_id])
            model.pop(doc_id)
            vectors.pop(doc_id)
        else:
            body = " ".join(pick.choices(WORDS, k=pick.randrange(1, 8)))
            context = " ".join(pick.choices(WORDS, k=pick.randrange(0, 5)))
            vectors[doc_id] = _unit(rng)
            store.index(scope, [_doc(doc_id, body, context, vectors[doc_id])])
            model[doc_id] = (body, context)
        if step % 10 == 9:
            terms = pick.sample(WORDS, 3)
            want = _bm25(model, terms, 3.0, 0.5)
            got = dict(store.lexical_search(scope, " ".join(terms), Filters(), 100,
                                            body_weight=3.0, context_weight=0.5))
            assert got.keys() == want.keys()
            for d, score in want.items():
                assert got[d] == pytest.approx(score, rel=1e-5)
            query = _unit(rng)
            exact = sorted(((float(v @ query), d) for d, v in vectors.items()), reverse=True)[:5]
            found = store.vector_search(scope, query, Filters(), 5)
            assert [d for d, _ in found] == [d for _, d in exact]
            assert [c for _, c in found] == pytest.approx([c for c, _ in exact], abs=1e-6)
    fresh = open_store(f"sqlite:///{tmp_path / 'bm25.db'}")  # another connection: snapshot + log
    terms = WORDS[:5]
    assert dict(fresh.lexical_search(scope, " ".join(terms), Filters(), 100)) == pytest.approx(
        dict(store.lexical_search(scope, " ".join(terms), Filters(), 100)))
    store.close()
    fresh.close()


def test_snapshot_round_trip_and_compaction_search_the_same() -> None:
    rng = np.random.default_rng(2)
    records = []
    for i in range(300):
        from memstrata.stores.lexical import encode_terms

        body = " ".join(random.Random(i).choices(WORDS, k=5))
        records.append((i * 3 + 1, f"id{i}", i % 7 != 0, encode_terms(body, "w1"),
                        quantize(_unit(rng)) if i % 5 else None))
    mirror = ScopeMirror.build(42, records)
    mirror.apply(43, [4, 7, 1000], {1000: (1000, "late", 1, encode_terms("tennis w3", ""),
                                           quantize(_unit(rng)))})
    compact = mirror.compacted()
    again = ScopeMirror.from_parts(compact.to_parts())
    query, terms = _unit(rng), ["w3", "tennis", "w9"]
    for m in (compact, again):
        assert m.seq == 43 and len(m) == len(mirror) == m.rows
        for allowed in (None, [1, 13, 1000, 4]):
            a = mirror.lexical_search(terms, 20, mirror.mask(allowed), context_weight=0.5, body_weight=3.0)
            b = m.lexical_search(terms, 20, m.mask(allowed), context_weight=0.5, body_weight=3.0)
            assert a == b
            assert mirror.vector_candidates(query, 30, mirror.mask(allowed)) == \
                m.vector_candidates(query, 30, m.mask(allowed))


def _peak_bytes(work) -> int:  # type: ignore[no-untyped-def]
    """The most memory ``work()`` had allocated at once (numpy arrays included)."""
    import tracemalloc

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        work()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_loading_a_snapshot_and_applying_a_few_writes_copy_nothing_of_the_int8_matrix() -> None:
    """A fresh process loads the stored int8 matrix as it is, and the first search after
    another process's 100 writes appends 100 rows — neither copies the whole matrix (the
    first append used to reallocate it at 1.5× and copy it: 76 ms of an 80 ms first search
    after others' writes at 100k items)."""
    from memstrata.stores.lexical import encode_terms

    rng, dim, n = np.random.default_rng(4), 384, 6000
    vectors = rng.standard_normal((n + 100, dim)).astype(np.float32)
    records = [(i + 1, f"id{i}", 1, encode_terms(f"w{i % 40} w{i % 7}", ""), quantize(vectors[i]))
               for i in range(n + 100)]
    parts = ScopeMirror.build(7, records[:n]).to_parts()
    matrix = n * dim
    loaded: list[ScopeMirror] = []
    assert _peak_bytes(lambda: loaded.append(ScopeMirror.from_parts(parts))) < matrix // 2
    mirror = loaded[0]
    new = {r[0]: r for r in records[n:]}
    assert _peak_bytes(lambda: mirror.apply(8, list(new), new)) < matrix // 4
    # and it searches as a mirror built from all the records does
    whole = ScopeMirror.build(8, records)
    query = vectors[n + 50]
    assert mirror.vector_candidates(query, 20, mirror.mask(None)) == \
        whole.vector_candidates(query, 20, whole.mask(None))
    assert mirror.lexical_search(["w3"], 10, mirror.mask(None), context_weight=0.3, body_weight=1) == \
        whole.lexical_search(["w3"], 10, whole.mask(None), context_weight=0.3, body_weight=1)
    # a loaded row deleted: gone from the first pass (its bytes in the stored snapshot,
    # read-only, are left as they are)
    assert 1 in mirror.vector_candidates(vectors[0], 5, mirror.mask(None))
    mirror.apply(9, [1], {})
    assert 1 not in mirror.vector_candidates(vectors[0], 5, mirror.mask(None))
    assert parts["q8"][:dim] == quantize(vectors[0])[:dim]


def test_ties_rank_by_insertion_whatever_order_the_changes_came_in() -> None:
    from memstrata.stores.lexical import encode_terms

    mirror = ScopeMirror.build(1, [(r, f"d{r}", 1, encode_terms("same words", ""), None)
                                   for r in (1, 2, 3, 4)])
    mirror.apply(2, [1], {1: (1, "d1", 1, encode_terms("same words", ""), None)})  # rewritten
    hits = mirror.lexical_search(["same"], 3, mirror.mask(None), context_weight=0.3, body_weight=1)
    assert [d for d, _ in hits] == ["d1", "d2", "d3"]


def test_mirrors_stay_within_the_memory_budget_across_many_users(tmp_path: Path) -> None:
    cache = MirrorCache(budget=10)
    store = open_store(f"sqlite:///{tmp_path / 'many.db'}", index_memory_mb=0.25)
    rng = np.random.default_rng(3)
    users = [Scope(f"u{i}") for i in range(40)]
    for i, scope in enumerate(users):
        store.index(scope, [_doc(f"{scope.user_id}-{j}", f"common w{j} own{i}", vector=_unit(rng, 384))
                            for j in range(60)])
    for _ in range(2):
        for i, scope in enumerate(users):
            hits = store.lexical_search(scope, f"own{i}", Filters(), 100)
            assert len(hits) == 60 and all(d.startswith(f"{scope.user_id}-") for d, _ in hits)
            assert store._mirrors.total <= store._mirrors.budget
    assert store._mirrors.evictions > 0 and len(store._mirrors) < len(users)
    held = store.index_memory()
    assert held == {"scopes": len(store._mirrors), "bytes": store._mirrors.total,
                    "budget": int(0.25 * 2**20), "evictions": store._mirrors.evictions}
    assert len(cache) == 0
    store.close()


def test_a_fresh_process_applies_the_log_since_the_snapshot_without_folding(tmp_path: Path) -> None:
    """Snapshots are written again before the log since them outgrows the fold threshold
    (where the ratios decide: from 82k rows as shipped, from 160 here), so a fresh
    process loading a large scope appends what was logged after the snapshot to the tail
    and searches — it never re-sorts the whole scope first (at 100k items with snapshots
    10% apart the load applied 6,300 rows and folded them: 0.2 s)."""
    path = tmp_path / "fold.db"
    store = open_store(f"sqlite:///{path}")
    store.fold_min = store.snapshot_every = 8  # the ratios as shipped decide at this size
    store.snapshot_min = 16
    scope = Scope("big")
    rng = np.random.default_rng(6)
    written = 0
    for batch in range(70):
        store.index(scope, [_doc(f"d{written + i}", f"w{(written + i) % 40} tennis", vector=_unit(rng))
                            for i in range(9)])
        written += 9
        since, rows = store._x("SELECT since_snapshot, snapshot_rows FROM index_state").fetchone()
        if rows:
            assert since <= max(store.fold_min, int(store.fold_ratio * rows)), (batch, since, rows)
    fresh = open_store(f"sqlite:///{path}")
    fresh.fold_min, fresh.snapshot_every, fresh.snapshot_min = 8, 8, 16
    query = _unit(rng)
    assert fresh.lexical_search(scope, "tennis w3", Filters(), 20) == \
        store.lexical_search(scope, "tennis w3", Filters(), 20)
    assert fresh.vector_search(scope, query, Filters(), 10) == store.vector_search(scope, query, Filters(), 10)
    store.close()
    fresh.close()


def test_hidden_rows_are_found_only_when_asked_for(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'hidden.db'}")
    scope = Scope("h")
    rng = np.random.default_rng(4)
    v = _unit(rng)
    store.index(scope, [_doc("old", "moved to lisbon", vector=v, status="superseded"),
                        _doc("new", "moved to porto", vector=_unit(rng))])
    assert [d for d, _ in store.lexical_search(scope, "moved", Filters(), 10)] == ["new"]
    wide = Filters(statuses=(Status.ACTIVE, Status.SUPERSEDED))
    assert {d for d, _ in store.lexical_search(scope, "moved", wide, 10)} == {"old", "new"}
    assert store.vector_search(scope, v, wide, 1)[0][0] == "old"
    assert all(d != "old" for d, _ in store.vector_search(scope, v, Filters(), 2))
    store.close()


def test_a_forgotten_document_leaves_no_vector_or_term_bytes_in_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "forget.db"
    store = open_store(f"sqlite:///{path}")
    store.snapshot_min = 20
    scope = Scope("f")
    rng = np.random.default_rng(5)
    secret = _unit(rng, 384)
    store.index(scope, [_doc(f"d{i}", f"filler w{i % 9}", vector=_unit(rng, 384)) for i in range(40)]
                + [_doc("secret", "zanzibarword", vector=secret)])
    store.lexical_search(scope, "filler", Filters(), 5)  # loads and snapshots the scope
    assert store._x("SELECT count(*) FROM index_snapshots").fetchone()[0] > 0
    traces = [quantize(secret)[:-4], secret.tobytes()[:64],
              np.uint64(term_hash("zanzibarword")).tobytes()]


    def stored() -> bytes:
        return b"".join(Path(str(path) + s).read_bytes() for s in ("", "-wal")
                        if Path(str(path) + s).exists())

    assert all(t in stored() for t in traces)  # the check below can fail
    store.delete_messages(scope, ["secret"])
    assert store.lexical_search(scope, "zanzibarword", Filters(), 5) == []
    assert store._x("SELECT count(*) FROM index_snapshots").fetchone()[0] > 0  # written again
    store.compact()
    store.close()
    assert not [t for t in traces if t in stored()]


def test_a_store_from_before_the_records_existed_is_filled_in(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = open_store(url)
    scope = Scope("old")
    rng = np.random.default_rng(6)
    v = _unit(rng)
    store.index(scope, [_doc("a", "sourdough starter", vector=v), _doc("b", "road bike")])
    assert [d for d, _ in store.lexical_search(scope, "road", Filters(), 5)] == ["b"]  # loaded
    # as a file written before migration 0009_p13 reads, or one whose fill was cut short
    store._x("DELETE FROM doc_records WHERE id = 'a'")
    store._x("DELETE FROM meta WHERE key = 'index_records'")
    store.close()
    again = open_store(url)
    assert [d for d, _ in again.lexical_search(scope, "sourdough", Filters(), 5)] == ["a"]
    assert again.vector_search(scope, v, Filters(), 1)[0][0] == "a"
    assert [d for d, _ in again.lexical_search(scope, "road", Filters(), 5)] == ["b"]
    again.close()


def test_budget_setting_is_checked() -> None:
    from memstrata.config import Settings
    from memstrata.errors import ConfigError

    assert Settings.load(index_memory_mb=64).index_memory_mb == 64.0
    with pytest.raises(ConfigError, match="index_memory_mb"):
        Settings.load(index_memory_mb=0)
    assert SQLiteIndex.snapshot_min > 0
