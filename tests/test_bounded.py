"""Bounded work: what retrieval reads of a query is capped (parts and characters), so a
hostile 100k-character "X? Also, Y? …" costs what a short one does (CPU numbers:
``memstrata bench hostile``, docs/benchmarks.md)."""

from __future__ import annotations

from memstrata import Memory


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
