"""Query vectors cached by text: a repeated query is not embedded again, the cache stays
within its size, and a search through the cache ranks exactly as one without it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memstrata import Memory
from memstrata.errors import ConfigError
from memstrata.providers.embedders import HashEmbedder, QueryCache, TextKind


class CountingEmbedder(HashEmbedder):
    """The real feature-hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        super().__init__(64)
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        if kind == "query":
            self.calls.append(list(texts))
        return super().embed(texts, kind=kind)


def test_repeated_queries_are_embedded_once_and_the_cache_is_bounded() -> None:
    embedder = CountingEmbedder()
    cache = QueryCache(embedder, size=3)
    first = cache.embed(["上海的咖啡", "tennis on Sunday"])
    assert embedder.calls == [["上海的咖啡", "tennis on Sunday"]]
    again = cache.embed(["tennis on Sunday", "上海的咖啡", "tennis on Sunday"])
    assert embedder.calls == [["上海的咖啡", "tennis on Sunday"]]  # nothing new embedded
    np.testing.assert_array_equal(again[1], first[0])
    np.testing.assert_array_equal(again[0], embedder.embed(["tennis on Sunday"], kind="query")[0])
    embedder.calls.clear()
    cache.embed(["a", "b", "c"])  # "上海的咖啡" and "tennis on Sunday" fall out (LRU)
    assert len(cache) == 3 and embedder.calls == [["a", "b", "c"]]
    cache.embed(["上海的咖啡", "c"])
    assert embedder.calls[-1] == ["上海的咖啡"]
    assert len(cache) == 3 and cache.hits == 4 and cache.misses == 6
    result = cache.embed(["a"])
    result[0][0] = 99.0  # changing a result does not change the cached vector
    assert cache.embed(["a"])[0][0] != 99.0


def test_size_zero_embeds_every_time() -> None:
    embedder = CountingEmbedder()
    cache = QueryCache(embedder, size=0)
    cache.embed(["x"])
    cache.embed(["x"])
    assert embedder.calls == [["x"], ["x"]] and len(cache) == 0


def test_search_through_the_cache_ranks_as_without_it(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    with Memory(f"sqlite:///{tmp_path / 'q.db'}", embedder=embedder, worker="off",
                embed_on_add="inline") as memory:
        memory.add("我周末喜欢去上海喝咖啡。", "lin", "s1")
        memory.add("I play tennis every Sunday.", "lin", "s1")
        embedder.calls.clear()
        first = memory.search("where I drink coffee in 上海", "lin", k=5)
        second = memory.search("where I drink coffee in 上海", "lin", k=5)
        assert [h.id for h in first] == [h.id for h in second] and first
        assert [h.parts.similarity for h in first] == [h.parts.similarity for h in second]
        # the query embedded once (other query-kind calls: the retriever's one-time calibration)
        assert sum(t == "where I drink coffee in 上海" for c in embedder.calls for t in c) == 1
    with pytest.raises(ConfigError):
        Memory("memory://", embedder="hash:64", query_cache=-1)


def test_a_fresh_process_reads_the_score_calibration_from_the_store(tmp_path: Path) -> None:
    """The bands that calibrate dense scores are fitted once per store and embedder, not
    once per process: a process opening a store where they were fitted embeds only its
    query (every fresh process's first search used to load the model and embed the 48
    calibration texts — 0.3 s on a quiet machine, 2–4 s under load — even when it was
    handed the query's vector)."""
    from memstrata.retrieval import calibration

    url = f"sqlite:///{tmp_path / 'cal.db'}"
    embedder = CountingEmbedder()
    with Memory(url, embedder=embedder, worker="off", embed_on_add="inline") as memory:
        memory.add("我周末喜欢去上海喝咖啡。", "lin", "s1")
        memory.add("I play tennis every Sunday.", "lin", "s1")
        first = memory.search("tennis on Sunday", "lin", k=5)
    fitted = calibration._fitted.pop(embedder.name)  # a fresh process: nothing fitted yet
    fresh = CountingEmbedder()
    with Memory(url, embedder=fresh, worker="off") as memory:
        again = memory.search("tennis on Sunday", "lin", k=5)
        again_zh = memory.search("上海的咖啡", "lin", k=5)
    assert fresh.calls == [["tennis on Sunday"], ["上海的咖啡"]]  # the queries, nothing else
    assert calibration._fitted.get(embedder.name, fitted) == fitted
    assert [(h.id, h.parts.similarity, h.parts.dense) for h in again] == \
        [(h.id, h.parts.similarity, h.parts.dense) for h in first] and again_zh
    # a store opened read-only reads them too
    calibration._fitted.pop(embedder.name, None)
    with Memory(url, embedder=CountingEmbedder(), worker="off", read_only=True) as memory:
        assert [h.id for h in memory.search("tennis on Sunday", "lin", k=5)] == [h.id for h in first]
