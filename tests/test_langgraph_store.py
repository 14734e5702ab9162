"""MemstrataStore against the behaviour LangGraph's own store tests expect
(``libs/checkpoint/tests/test_store.py``: namespaces, invalid namespaces, put/get/delete,
search with queries, filters and pages, updates, ``index=False``, the async twins),
plus what memstrata adds: versions, Chinese search, forgetting the bytes."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph")
from langgraph.store.base import InvalidNamespaceError, PutOp

from memstrata import Memory
from memstrata.integrations.langgraph import MemstrataStore, item_text, matches


@pytest.fixture
def memory(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off") as m:
        yield m


@pytest.fixture
def store(memory):
    return MemstrataStore(memory)


def test_pure_helpers():
    assert item_text({"text": "red apple", "n": 3, "tags": ["a", {"b": "c"}]}, None) == "red apple\n3\na\nc"
    assert item_text({"a": {"b": "deep"}, "x": "no"}, ["a.b"]) == "deep"
    assert matches({"color": "red", "score": 4.5, "meta": {"k": 1}}, {"color": "red", "score": {"$gt": 4},
                                                                     "meta": {"k": 1}})
    assert not matches({"score": 3.0}, {"score": {"$gte": 3.5}})
    assert matches({"score": 3.0}, {"score": {"$ne": 4, "$lte": 3}})


def test_list_namespaces_basic(store):
    namespaces = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"),
                  ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"), ("admin", "users", "789")]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces(prefix=("a", "b"))) == [
        ("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(store.list_namespaces(suffix=("f",))) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert sorted(store.list_namespaces(prefix=("a",), suffix=("f",))) == [("a", "b", "f"), ("a", "c", "f")]
    assert sorted(store.list_namespaces(prefix=("a", "b"), max_depth=3)) == [
        ("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(store.list_namespaces(prefix=("a", "*", "f"))) == [("a", "b", "f"), ("a", "c", "f")]
    assert sorted(store.list_namespaces(suffix=("*", "f"))) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards_pagination_depth_and_empty(store):
    assert store.list_namespaces() == []
    for i, ns in enumerate([("users", "123"), ("users", "456"), ("users", "789", "settings"),
                            ("admin", "users", "789"), ("guests", "123"), ("guests", "456", "preferences")]):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces(prefix=("users", "*"))) == [
        ("users", "123"), ("users", "456"), ("users", "789", "settings")]
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    assert sorted(store.list_namespaces(max_depth=1)) == [("admin",), ("guests",), ("users",)]
    for i in range(12):
        store.put(namespace=("namespace", f"sub_{i:02d}"), key=f"id_{i:02d}", value={"data": i})
    assert store.list_namespaces(prefix=("namespace",), limit=5, offset=5) == [
        ("namespace", f"sub_{i:02d}") for i in range(5, 10)]


def test_cannot_put_an_invalid_namespace(store):
    doc = {"foo": "bar"}
    for bad in ((), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")):
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            asyncio.run(store.aput(bad, "foo", doc))
    store.put(("foo", "langgraph", "foo"), "bar", doc)
    assert store.get(("foo", "langgraph", "foo"), "bar").value == doc
    assert store.search(("foo", "langgraph", "foo"))[0].value == doc
    store.delete(("foo", "langgraph", "foo"), "bar")
    assert store.get(("foo", "langgraph", "foo"), "bar") is None
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])  # past the public put: allowed
    assert store.get(("langgraph", "foo"), "bar").value == doc


def test_put_get_update_delete_with_versions(store, memory):
    ns = ("memories", "lin")
    store.put(ns, "tea", {"text": "Lin drinks oolong tea", "since": 2019})
    first = store.get(ns, "tea")
    assert (first.namespace, first.key, first.value) == (ns, "tea", {"text": "Lin drinks oolong tea", "since": 2019})
    store.put(ns, "tea", {"text": "Lin drinks green tea now"})
    second = store.get(ns, "tea")
    assert second.value == {"text": "Lin drinks green tea now"}
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    item_id = memory.list("memories.lin", agent_id="langgraph")[0].id
    assert [v.op for v in memory.history(item_id, "memories.lin", agent_id="langgraph")] == ["create", "edit"]
    assert store.get(ns, "nope") is None and store.get(("other",), "tea") is None
    store.delete(ns, "tea")
    store.delete(ns, "tea")  # twice is fine
    assert store.get(ns, "tea") is None and store.list_namespaces() == []


@pytest.mark.slow
def test_search_with_queries_updates_and_index_false(e5_memory_factory):
    # the real embedder: with the hash one every dense-only hit of a query ties at the top
    memory = e5_memory_factory("langgraph")
    store = MemstrataStore(memory)
    for key, text in (("doc1", "zany zebra Xerxes"), ("doc2", "something about dogs"), ("doc3", "text about birds")):
        store.put(("test",), key, {"text": text})
    initial = store.search(("test",), query="Zany Xerxes")
    assert initial[0].key == "doc1" and initial[0].score is not None
    store.put(("test",), "doc1", {"text": "new text about dogs"})
    after = store.search(("test",), query="Zany Xerxes")
    assert next((r.score or 0.0) for r in after if r.key == "doc1") < initial[0].score
    assert store.search(("test",), query="new text about dogs")[0].key in ("doc1", "doc2")
    store.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    ranked = store.search(("test",), query="new text about dogs", limit=3)
    assert not any(r.key == "doc4" for r in ranked)
    assert store.get(("test",), "doc4").value == {"text": "new text about dogs"}
    memory.close()


def test_search_filters_pages_and_edge_cases(store):
    for key, value in (("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
                       ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
                       ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
                       ("doc4", {"text": "blue car", "color": "blue", "score": 3.5})):
        store.put(("test",), key, value)
    results = store.search(("test",), query="apple", filter={"color": "red"})
    assert [r.key for r in results][:1] == ["doc1"] and len(results) == 2
    results = store.search(("test",), query="car", filter={"color": "red"})
    assert len(results) == 2 and results[0].key == "doc2"
    results = store.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})
    assert sorted(r.key for r in results) == ["doc1", "doc3", "doc4"]
    results = store.search(("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in results] == ["doc3"]
    page1 = store.search(("test",), query="car", limit=2)
    page2 = store.search(("test",), query="car", limit=2, offset=2)
    assert len(page1) == len(page2) == 2 and not {r.key for r in page1} & {r.key for r in page2}
    assert len(store.search(("test",), query="car", limit=10)) == 4
    for query in ("", None, "test " * 100, "test!@#$%^&*()"):
        assert len(store.search(("test",), query=query)) == 4
    assert store.search(("nothing",), query="apple") == []


def test_async_twins(store):
    async def run():
        await store.aput(("test",), "doc1", {"text": "long text document"})
        await store.aput(("test", "sub"), "doc2", {"text": "short note"})
        got = await store.aget(("test",), "doc1")
        found = await store.asearch(("test",), query="long text")
        spaces = await store.alist_namespaces(prefix=("test",))
        both = await asyncio.gather(store.aget(("test",), "doc1"), store.aget(("test", "sub"), "doc2"))
        await store.adelete(("test",), "doc1")
        return got, found, spaces, both, await store.aget(("test",), "doc1")

    got, found, spaces, both, gone = asyncio.run(run())
    assert got.value == {"text": "long text document"} and found[0].key == "doc1"
    assert {r.key for r in found} == {"doc1", "doc2"}  # a prefix search covers sub-namespaces
    assert sorted(spaces) == [("test",), ("test", "sub")] and [b.key for b in both] == ["doc1", "doc2"]
    assert gone is None


def test_chinese_search_and_forgetting_the_bytes(store, memory, tmp_path):
    store.put(("memories", "lin"), "passport", {"text": "提醒我下周三之前续签护照"})
    store.put(("memories", "lin"), "bees", {"text": "I keep bees on my roof"})
    assert store.search(("memories", "lin"), query="护照什么时候到期")[0].key == "passport"
    store.delete(("memories", "lin"), "passport")
    memory.compact()
    raw = (tmp_path / "m.db").read_bytes()
    assert "续签护照".encode() not in raw
    memory.forget_user("memories.lin", agent_id="langgraph")
    memory.compact()
    assert b"bees on my roof" not in (tmp_path / "m.db").read_bytes()
    assert store.list_namespaces() == []
