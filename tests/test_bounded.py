"""Bounded work: what retrieval reads of a query is capped (parts and characters), so a
hostile 100k-character "X? Also, Y? …" costs what a short one does (CPU numbers:
``memstrata bench hostile``, docs/benchmarks.md)."""

from __future__ import annotations

import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory
from memstrata.retrieval import documents
from memstrata.retrieval.documents import window_texts
from memstrata.types import Filters


def test_a_compound_query_is_searched_in_at_most_max_query_parts(memory: Memory):
    lin = memory.user("lin")
    lin.add([{"role": "user", "content": "My friend lives in Oslo."}], "s1")
    query = " ".join(f"Where does friend{i} live? Also, what does friend{i} like?"
                     for i in range(2000))
    assert len(query) > 100_000
    result = lin.explain(query, k=5)
    parts = result.query_tokens.split(" | ")
    assert len(parts) == memory.settings.max_query_parts == 4
    assert "friend0" in parts[0] and "friend1999" not in result.query_tokens  # cut at 1,000 chars
    assert result.hits  # still a search


def test_the_caps_are_settings(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64", max_query_parts=2,
                max_query_chars=50) as memory:
        lin = memory.user("lin")
        lin.add("I live in Oslo.", "s1")
        result = lin.explain("Where do I live? Also, what do I like? Also, where do I work?")
        assert len(result.query_tokens.split(" | ")) == 2
        assert "work" not in result.query_tokens  # past the first 50 characters


def _long_chinese(chars: int = 60_000) -> str:
    return ("我叫小明我在上海工作我喜欢打篮球我对花生过敏今天天气很好我们明天去公园散步吧" * (chars // 40 + 1))[:chars]


@pytest.mark.parametrize("url", ["sqlite", "postgres"])
def test_the_job_embeds_a_long_turn_without_analysing_its_words_again(url, tmp_path, monkeypatch,
                                                                      request):
    """add() analyses a turn's words once; its background job only embeds it (before:
    the job analysed a 100k-character Chinese message's words again, ~0.5 s of jieba)."""
    store = (f"sqlite:///{tmp_path / 'm.db'}" if url == "sqlite"
             else request.getfixturevalue("pg_url"))
    long = _long_chinese()
    with Memory(store, embedder="hash:256", worker="off",
                max_message_chars=len(long) + 100) as memory:
        lin = memory.user("lin")
        lin.add([{"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好！"}], "s1")
        memory.flush()
        stored = lin.add([{"role": "user", "content": long}], "s1").messages
        seen: list[int] = []
        real = documents.tokenize
        monkeypatch.setattr(documents, "tokenize", lambda text: seen.append(len(text)) or real(text))
        memory.flush()
        assert [n for n in seen if n > 10_000] == []  # the long turn's words: not again
        monkeypatch.undo()
        turns = lin.messages("s1")
        dense = window_texts(turns, len(turns) - 1)[3]
        assert dense.startswith("你好！\n")  # its predecessor, as index_turns embeds it
        vector = memory.embedder.embed([dense], kind="passage")[0]
        [(best, cosine)] = memory.store.vector_search(lin.scope, vector, Filters(), 1)
        assert best == stored[0].id and cosine == pytest.approx(1.0, abs=1e-5)
        words = memory.store.lexical_search(lin.scope, documents.tokenize("花生过敏"), Filters(), 5)
        assert stored[0].id in [doc for doc, _ in words]  # its words are still indexed
