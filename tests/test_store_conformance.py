"""One conformance suite for the Store seam, run against every backend with real SQL.

``store`` is parametrized: "sqlite" is a file in ``tmp_path`` (reopened where a test
checks durability), "postgres" a fresh database on the session's pgserver (PostgreSQL 16
+ pgvector, see ``pgserver_fixture``). No mocks: every assertion reads what the
database answers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from pgserver_fixture import PgServer, database_url, pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import errors
from memstrata.stores import open_store
from memstrata.stores.base import IndexDoc, ProfileVersion, Store
from memstrata.text import tokenize
from memstrata.types import Filters, ItemVersion, Kind, Layer, MemoryItem, Message, Role, Scope, Status

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
ALICE = Scope("alice")
DIM = 8


def unit(i: int, j: int | None = None) -> np.ndarray:
    """A unit vector along axis i (or halfway between axes i and j)."""
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    if j is not None:
        v[j] = 1.0
    return v / np.linalg.norm(v)


@dataclass
class Backend:
    name: str
    url: str
    raw: Callable[[], Store]  # the backend's class, not yet migrated

    def open(self) -> Store:
        return open_store(self.url)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path) -> Backend:
    if request.param == "sqlite":
        from memstrata.stores.sqlite import SQLiteStore

        path = str(tmp_path / "memstrata.db")
        return Backend("sqlite", f"sqlite:///{path}", lambda: SQLiteStore(path))
    from memstrata.stores.postgres import PostgresStore

    url = request.getfixturevalue("pg_url")
    return Backend("postgres", url, lambda: PostgresStore(url))


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    with backend.open() as opened:
        yield opened


def msg(text: str, minutes: int = 0, **kw) -> Message:
    return Message(role=kw.pop("role", Role.USER), content=text,
                   created_at=T0 + timedelta(minutes=minutes), **kw)


def item(scope: Scope, item_id: str, content: str, *, kind: Kind = Kind.FACT, days: int = 0,
         status: Status = Status.ACTIVE, tags: tuple[str, ...] = (), session: str | None = None,
         version: int = 1) -> MemoryItem:
    at = T0 + timedelta(days=days)
    return MemoryItem(id=item_id, user_id=scope.user_id, namespace=scope.namespace, kind=kind,
                      content=content, status=status, tags=tags, created_at=at, updated_at=at,
                      source_session_id=session, version=version, metadata={"n": 1, "中": "文"})


def put_item(store: Store, scope: Scope, it: MemoryItem, vector: np.ndarray | None = None) -> None:
    """Write an item, its version row and its index document in one transaction."""
    with store.transaction():
        store.write_item(scope, it, ItemVersion(it.id, it.version, "create" if it.version == 1
                                                else "edit", "test", "conformance", it.updated_at,
                                                None, it.to_dict()))
        store.index(scope, [IndexDoc(id=it.id, layer=Layer.SEMANTIC, text=it.content,
                                     body=tokenize(it.content), context=tokenize(" ".join(it.tags)),
                                     created_at=it.created_at, session_id=it.source_session_id,
                                     kind=it.kind.value, status=it.status.value, tags=it.tags,
                                     importance=it.importance, vector=vector)])


def turn_doc(m: Message, context: str = "", vector: np.ndarray | None = None) -> IndexDoc:
    return IndexDoc(id=m.id, layer=Layer.EPISODIC, text=m.content or "", body=tokenize(m.content or ""),
                    context=tokenize(context), created_at=m.created_at, session_id=m.session_id,
                    vector=vector)


def ids(hits: list[tuple[str, float]]) -> list[str]:
    return [h[0] for h in hits]


# -- lifecycle ----------------------------------------------------------------------------
def test_migrations_are_named_and_idempotent(backend: Backend) -> None:
    first = backend.raw()
    try:
        applied = first.setup()
        assert applied and applied[0].startswith("0001")
        assert first.setup() == []
    finally:
        first.close()
    with backend.open() as again:  # a second process opening a migrated store
        assert again.setup() == []
        assert again.list_users() == []


# -- raw session log ----------------------------------------------------------------------
def test_messages_append_in_seq_order_and_survive_reopen(backend: Backend, store: Store) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    first = store.append_messages(ALICE, "s1", [msg("hello"), msg("", 1, role=Role.ASSISTANT,
                                                                    tool_calls=(call,))])
    second = store.append_messages(ALICE, "s1", [msg("晚上好", 2, name="bob",
                                                     metadata={"lang": "zh"})])
    assert [m.seq for m in first + second] == [0, 1, 2]
    assert all(m.id and m.session_id == "s1" for m in first + second)
    store.close()
    with backend.open() as reopened:
        got = reopened.get_messages(ALICE, "s1")
        assert got == first + second
        assert got[1].tool_calls == (call,) and got[2].metadata == {"lang": "zh"}
        assert reopened.get_messages(ALICE, "s1", start=1, limit=1) == [first[1]]
        assert reopened.get_messages(ALICE, "other") == []
        [info] = reopened.list_sessions(ALICE)
        assert (info.session_id, info.message_count, info.version) == ("s1", 3, 2)
        assert info.created_at == T0 and info.updated_at == T0 + timedelta(minutes=2)
        with pytest.raises(errors.ValidationError):
            reopened.append_messages(ALICE, "s1", [msg("again", id=first[0].id)])
        assert len(reopened.get_messages(ALICE, "s1")) == 3


# -- items --------------------------------------------------------------------------------
def test_items_write_get_list_with_filters(store: Store) -> None:
    put_item(store, ALICE, item(ALICE, "m1", "likes green tea", kind=Kind.PREFERENCE,
                                tags=("drink",), session="s1"))
    put_item(store, ALICE, item(ALICE, "m2", "lives in Berlin", days=1))
    put_item(store, ALICE, item(ALICE, "m3", "used to live in Paris", days=2,
                                status=Status.SUPERSEDED, tags=("drink", "old")))
    got = store.get_item(ALICE, "m1")
    assert got == item(ALICE, "m1", "likes green tea", kind=Kind.PREFERENCE, tags=("drink",),
                       session="s1")
    assert [i.id for i in store.list_items(ALICE, Filters())] == ["m2", "m1"]
    everything = Filters(statuses=())
    assert [i.id for i in store.list_items(ALICE, everything)] == ["m3", "m2", "m1"]
    assert [i.id for i in store.list_items(ALICE, everything, limit=1, offset=1)] == ["m2"]
    assert [i.id for i in store.list_items(ALICE, Filters(kinds=(Kind.PREFERENCE,)))] == ["m1"]
    assert [i.id for i in store.list_items(ALICE, Filters(statuses=(), tags=("drink",)))] == ["m3", "m1"]
    assert [i.id for i in store.list_items(ALICE, Filters(statuses=(), tags=("drink", "old")))] == ["m3"]
    assert [i.id for i in store.list_items(ALICE, Filters(session_ids=("s1",)))] == ["m1"]
    window = Filters(statuses=(), since=T0 + timedelta(hours=1), until=T0 + timedelta(days=1))
    assert [i.id for i in store.list_items(ALICE, window)] == ["m2"]
    with pytest.raises(errors.NotFoundError):
        store.get_item(ALICE, "nope")
    with pytest.raises(errors.ValidationError):
        store.write_item(Scope("bob"), got, ItemVersion("m1", 1, "create", "t", "r", T0, None, None))


def test_slot_items_are_the_active_ones_of_a_prefix_among_the_newest(store: Store) -> None:
    said = [("f1", "family:daughter", Status.ACTIVE), ("f2", "family:son", Status.SUPERSEDED),
            ("x3", "job", Status.ACTIVE), ("f4", "family:wife", Status.ACTIVE), ("x5", None, Status.ACTIVE)]
    for day, (item_id, attribute, status) in enumerate(said):
        put_item(store, ALICE, replace(item(ALICE, item_id, f"said {item_id}", days=day, status=status),
                                       attribute=attribute, value=item_id))
    put_item(store, Scope("bob"), replace(item(Scope("bob"), "b1", "bob's", days=9), attribute="family:son"))
    assert [i.id for i in store.list_slot_items(ALICE, "family:", among=100)] == ["f4", "f1"]
    # what list_items and a filter give: among the newest active items only
    newest = store.list_items(ALICE, Filters(), limit=3)
    assert [i.id for i in store.list_slot_items(ALICE, "family:", among=3)] == \
        [i.id for i in newest if (i.attribute or "").startswith("family:")] == ["f4"]
    assert store.list_slot_items(ALICE, "family:", among=100)[0] == store.get_item(ALICE, "f4")
    assert store.list_slot_items(ALICE, "health:", among=100) == []


def test_history_keeps_every_version_oldest_first(store: Store) -> None:
    v1 = item(ALICE, "m1", "likes tea")
    put_item(store, ALICE, v1)
    v2 = v1.evolve(content="likes coffee", version=2, updated_at=T0 + timedelta(days=1))
    store.write_item(ALICE, v2, ItemVersion("m1", 2, "edit", "user", "changed mind", v2.updated_at,
                                            v1.to_dict(), v2.to_dict()))
    history = store.history(ALICE, "m1")
    assert [(h.version, h.op) for h in history] == [(1, "create"), (2, "edit")]
    assert history[1].before == v1.to_dict() and history[1].after == v2.to_dict()
    assert history[1].at == T0 + timedelta(days=1)
    assert store.get_item(ALICE, "m1").content == "likes coffee"
    with pytest.raises(errors.NotFoundError):
        store.history(ALICE, "nope")


def test_delete_is_hard(store: Store) -> None:
    put_item(store, ALICE, item(ALICE, "m1", "allergic to peanuts"), vector=unit(0))
    put_item(store, ALICE, item(ALICE, "m2", "allergic to cats"), vector=unit(0, 1))
    store.delete_item(ALICE, "m1")
    with pytest.raises(errors.NotFoundError):
        store.get_item(ALICE, "m1")
    with pytest.raises(errors.NotFoundError):
        store.history(ALICE, "m1")
    assert store.doc_info(ALICE, ["m1", "m2"]).keys() == {"m2"}
    assert ids(store.lexical_search(ALICE, tokenize("peanuts allergic"), Filters(), 10)) == ["m2"]
    assert ids(store.vector_search(ALICE, unit(0), Filters(), 10)) == ["m2"]
    with pytest.raises(errors.NotFoundError):
        store.delete_item(ALICE, "m1")


def test_touch_counts_access(store: Store) -> None:
    put_item(store, ALICE, item(ALICE, "m1", "plays chess"))
    put_item(store, ALICE, item(ALICE, "m2", "plays go"))
    store.touch_items(ALICE, ["m1"], T0 + timedelta(days=3))
    store.touch_items(ALICE, ["m1", "m2"], T0 + timedelta(days=4))
    store.touch_items(ALICE, [], T0)
    m1, m2 = store.get_item(ALICE, "m1"), store.get_item(ALICE, "m2")
    assert (m1.access_count, m1.last_accessed) == (2, T0 + timedelta(days=4))
    assert (m2.access_count, m2.last_accessed) == (1, T0 + timedelta(days=4))


# -- retrieval index ----------------------------------------------------------------------
def test_index_upsert_is_incremental_and_keeps_vectors(store: Store) -> None:
    [a, b] = store.append_messages(ALICE, "s1", [msg("I adopted a puppy"), msg("What breed?", 1)])
    store.index(ALICE, [turn_doc(a, "", unit(0)), turn_doc(b, "", unit(1))])
    assert ids(store.lexical_search(ALICE, tokenize("breed"), Filters(), 10)) == [b.id]
    # the next turn arrives: a's context changes, its vector is not re-sent
    store.index(ALICE, [turn_doc(a, "What breed? a labrador")])
    assert ids(store.lexical_search(ALICE, tokenize("labrador"), Filters(), 10)) == [a.id]
    assert ids(store.vector_search(ALICE, unit(0), Filters(), 1)) == [a.id]
    store.index(ALICE, [turn_doc(a, "a poodle")])  # the old context is gone, not appended
    assert store.lexical_search(ALICE, tokenize("labrador"), Filters(), 10) == []
    assert ids(store.lexical_search(ALICE, tokenize("poodle"), Filters(), 10,
                                    context_weight=0.0)) == []
    store.index(ALICE, [turn_doc(a, "", unit(2))])  # a new vector replaces the old one
    assert ids(store.vector_search(ALICE, unit(2), Filters(), 1)) == [a.id]
    assert store.doc_info(ALICE, [a.id])[a.id].text == "I adopted a puppy"


def test_lexical_search_english_and_chinese(store: Store) -> None:
    texts = ["Caroline went to the LGBTQ support group yesterday",
             "Melanie painted a sunrise over the lake",
             "我昨天去了自然语言处理的讲座",
             "Caroline 喜欢 画画 and painting sunsets",
             "support support support"]
    msgs = store.append_messages(ALICE, "s1", [msg(t, i) for i, t in enumerate(texts)])
    store.index(ALICE, [turn_doc(m, "8 May 2023") for m in msgs])
    hits = store.lexical_search(ALICE, tokenize("When did Caroline go to the support group?"),
                                Filters(), 10)
    assert ids(hits)[0] == msgs[0].id and set(ids(hits)) == {msgs[0].id, msgs[3].id, msgs[4].id}
    assert all(score > 0 for _, score in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert ids(store.lexical_search(ALICE, tokenize("语言处理讲座"), Filters(), 10)) == [msgs[2].id]
    assert ids(store.lexical_search(ALICE, tokenize("画画"), Filters(), 10)) == [msgs[3].id]
    assert set(ids(store.lexical_search(ALICE, tokenize("painting"), Filters(), 10))) == \
        {msgs[1].id, msgs[3].id}  # stems: painted, painting -> paint
    assert store.lexical_search(ALICE, "", Filters(), 10) == []
    assert store.lexical_search(ALICE, tokenize("zebra"), Filters(), 10) == []
    # context matches count, scaled by context_weight; at 0 they do not match at all
    assert len(store.lexical_search(ALICE, tokenize("May 2023"), Filters(), 10)) == 5
    assert store.lexical_search(ALICE, tokenize("May 2023"), Filters(), 10, context_weight=0.0) == []


def test_vector_search_with_filters(store: Store) -> None:
    turns = store.append_messages(ALICE, "s1", [msg("turn one"), msg("turn two", 60 * 24 * 5)])
    store.index(ALICE, [turn_doc(turns[0], vector=unit(0, 1)), turn_doc(turns[1], vector=unit(0, 2))])
    put_item(store, ALICE, item(ALICE, "fact", "a fact", tags=("t1",), session="s2"), unit(0))
    put_item(store, ALICE, item(ALICE, "pref", "a pref", kind=Kind.PREFERENCE, days=2), unit(0, 3))
    put_item(store, ALICE, item(ALICE, "old", "old fact", status=Status.SUPERSEDED), unit(0))
    q = unit(0)
    hits = store.vector_search(ALICE, q, Filters(), 10)
    assert ids(hits)[0] == "fact" and "old" not in ids(hits) and len(hits) == 4
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert hits[1][1] == pytest.approx(np.sqrt(0.5), abs=1e-5)
    assert ids(store.vector_search(ALICE, q, Filters(statuses=()), 10))[:2] in (["fact", "old"],
                                                                                 ["old", "fact"])
    assert set(ids(store.vector_search(ALICE, q, Filters(statuses=(Status.SUPERSEDED,)), 10))) == \
        {"old", turns[0].id, turns[1].id}  # raw turns have no status and always pass
    assert ids(store.vector_search(ALICE, q, Filters(kinds=(Kind.PREFERENCE,)), 10)) == ["pref"]
    assert ids(store.vector_search(ALICE, q, Filters(session_ids=("s2",)), 10)) == ["fact"]
    assert ids(store.vector_search(ALICE, q, Filters(tags=("t1",)), 10)) == ["fact"]
    assert set(ids(store.vector_search(ALICE, q, Filters(layers=(Layer.EPISODIC,)), 10))) == \
        {turns[0].id, turns[1].id}
    window = Filters(since=T0 + timedelta(days=1), until=T0 + timedelta(days=3))
    assert ids(store.vector_search(ALICE, q, window, 10)) == ["pref"]
    assert ids(store.vector_search(ALICE, q, Filters(), 2)) == ids(hits)[:2]
    # a status change re-indexed without a vector (what the item writer does) hides the
    # document and keeps its stored vector
    fact = store.get_item(ALICE, "fact").evolve(status=Status.INACTIVE, version=2)
    put_item(store, ALICE, fact)
    assert "fact" not in ids(store.vector_search(ALICE, q, Filters(), 10))
    assert ids(store.vector_search(ALICE, q, Filters(statuses=(Status.INACTIVE,)), 10))[0] == "fact"
    assert "fact" not in ids(store.lexical_search(ALICE, tokenize("fact"), Filters(), 10))
    assert store.doc_info(ALICE, ["fact"])["fact"].status == "inactive"


# -- store-wide values --------------------------------------------------------------------
def test_embedding_cache_and_meta(store: Store) -> None:
    assert store.cached_vectors("hash:8", ["a", "b"]) == {}
    store.cache_vectors("hash:8", {"a": unit(1), "b": unit(2)})
    store.cache_vectors("hash:8", {"a": unit(3)})  # a cached vector is never replaced
    got = store.cached_vectors("hash:8", ["a", "b", "c"])
    assert got.keys() == {"a", "b"} and np.array_equal(got["a"], unit(1))
    assert got["b"].dtype == np.float32
    assert store.cached_vectors("other", ["a"]) == {}
    assert store.get_meta("embedder") is None
    store.set_meta("embedder", "hash:8")
    store.set_meta("embedder", "hash:16")
    assert store.get_meta("embedder") == "hash:16"


def test_list_users_and_scope_isolation(store: Store) -> None:
    scopes = [Scope("alice"), Scope("bob"), Scope("alice", "agent-x")]
    for n, scope in enumerate(scopes):
        [m] = store.append_messages(scope, "s1", [msg(f"secret number {n} 秘密")])
        store.index(scope, [turn_doc(m, vector=unit(0))])
        put_item(store, scope, item(scope, f"m{n}", f"secret fact {n}"), unit(0))
    assert store.list_users() == sorted(scopes, key=lambda s: (s.namespace, s.user_id))
    for n, scope in enumerate(scopes):
        found = store.lexical_search(scope, tokenize("secret 秘密"), Filters(), 10)
        assert len(found) == 2 and f"m{n}" in ids(found)
        assert len(store.vector_search(scope, unit(0), Filters(), 10)) == 2
        assert [i.id for i in store.list_items(scope, Filters())] == [f"m{n}"]
        assert len(store.get_messages(scope, "s1")) == 1
        others = [f"m{k}" for k in range(3) if k != n]
        assert store.doc_info(scope, others) == {}
        for other in others:
            with pytest.raises(errors.NotFoundError):
                store.get_item(scope, other)
            with pytest.raises(errors.NotFoundError):
                store.delete_item(scope, other)
    store.touch_items(Scope("bob"), ["m0"], T0)
    assert store.get_item(ALICE, "m0").access_count == 0


def test_transaction_rollback_and_savepoints(store: Store) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.transaction():
        store.append_messages(ALICE, "s1", [msg("never stored")])
        put_item(store, ALICE, item(ALICE, "m1", "never stored"), unit(0))
        raise Boom
    assert store.get_messages(ALICE, "s1") == [] and store.list_sessions(ALICE) == []
    assert store.vector_search(ALICE, unit(0), Filters(), 10) == []
    assert store.lexical_search(ALICE, tokenize("stored"), Filters(), 10) == []
    with store.transaction():
        put_item(store, ALICE, item(ALICE, "kept", "kept fact"))
        with pytest.raises(Boom), store.transaction():
            put_item(store, ALICE, item(ALICE, "dropped", "dropped fact"))
            raise Boom
    assert [i.id for i in store.list_items(ALICE, Filters())] == ["kept"]
    assert ids(store.lexical_search(ALICE, tokenize("fact"), Filters(), 10)) == ["kept"]


# -- durable jobs -------------------------------------------------------------------------
def test_jobs_claim_head_of_each_users_queue_and_finish(store: Store) -> None:
    bob = Scope("bob")
    a1 = store.enqueue_job(ALICE, "extract", {"session_id": "s1", "to_seq": 1})
    a2 = store.enqueue_job(ALICE, "extract", {"session_id": "s1", "to_seq": 3})
    b1 = store.enqueue_job(bob, "extract", {"session_id": "s9"})
    assert [j.id for j in store.list_jobs(statuses=["pending"])] == [a1.id, a2.id, b1.id]
    first = store.claim_job("w1", 60)
    assert first is not None and first.id == a1.id and first.status == "running"
    assert first.attempts == 1 and first.worker == "w1" and first.payload["to_seq"] == 1
    second = store.claim_job("w2", 60)  # alice's next job waits for her running one
    assert second is not None and second.id == b1.id
    assert store.claim_job("w3", 60) is None
    store.finish_job(first)
    third = store.claim_job("w3", 60)
    assert third is not None and third.id == a2.id
    store.finish_job(third)
    store.finish_job(second)
    assert {j.status for j in store.list_jobs()} == {"done"}
    assert [j.id for j in store.list_jobs(bob)] == [b1.id]


def test_jobs_expired_lease_is_reclaimed_and_the_old_claim_cannot_finish(store: Store) -> None:
    job = store.enqueue_job(ALICE, "extract", {})
    dead = store.claim_job("dead-worker", 30, now=T0)
    assert dead is not None
    assert store.claim_job("w2", 30, now=T0 + timedelta(seconds=10)) is None  # lease still valid
    taken = store.claim_job("w2", 30, now=T0 + timedelta(seconds=31))
    assert taken is not None and taken.id == job.id and taken.attempts == 2
    with pytest.raises(errors.ConflictError):
        store.finish_job(dead)
    store.finish_job(taken)
    with pytest.raises(errors.ConflictError):  # finishing twice is refused, too
        store.finish_job(taken)
    assert store.list_jobs()[0].status == "done"


def test_jobs_errors_retry_then_fail_and_roll_back_with_the_transaction(store: Store) -> None:
    class Boom(Exception):
        pass

    job = store.enqueue_job(ALICE, "extract", {})
    claimed = store.claim_job("w", 60)
    with pytest.raises(Boom), store.transaction():  # the job's writes and its finish: one unit
        put_item(store, ALICE, item(ALICE, "m1", "half applied"))
        store.finish_job(claimed)
        raise Boom
    assert store.list_items(ALICE, Filters()) == []
    assert store.list_jobs()[0].status == "running"
    store.finish_job(claimed, error="boom 1", max_attempts=2)
    assert store.list_jobs()[0].status == "pending"
    again = store.claim_job("w", 60)
    store.finish_job(again, error="boom 2", max_attempts=2)
    [failed] = store.list_jobs()
    assert failed.id == job.id and failed.status == "failed" and failed.last_error == "boom 2"
    assert store.claim_job("w", 60) is None
    with pytest.raises(Boom), store.transaction():  # an enqueue rolls back with its messages
        store.append_messages(ALICE, "s1", [msg("raw")])
        store.enqueue_job(ALICE, "extract", {})
        raise Boom
    assert len(store.list_jobs()) == 1


# -- forgetting ---------------------------------------------------------------------------
def turn(m: Message, vector: np.ndarray) -> IndexDoc:
    return IndexDoc(id=m.id, layer=Layer.EPISODIC, text=m.content or "", body=tokenize(m.content or ""),
                    context="", created_at=m.created_at, session_id=m.session_id, vector=vector)


def test_delete_messages_and_delete_user_remove_everything(store: Store) -> None:
    bob = Scope("bob")
    stored = store.append_messages(ALICE, "s1", [msg("alice lives in zanzibar"), msg("ok", 1)])
    store.index(ALICE, [turn(m, unit(0)) for m in stored])
    put_item(store, ALICE, item(ALICE, "m1", "alice likes zanzibar"), unit(1))
    store.enqueue_job(ALICE, "extract", {})
    store.add_profile_version(ALICE, ProfileVersion(1, {"name": "Alice"}, "api", "edit", T0))
    kept = store.append_messages(bob, "s1", [msg("bob lives in zanzibar")])
    store.index(bob, [turn(kept[0], unit(0))])
    store.delete_messages(ALICE, [stored[0].id])
    assert [m.content for m in store.get_messages(ALICE, "s1")] == ["ok"]
    assert ids(store.lexical_search(ALICE, tokenize("zanzibar"), Filters(), 10)) == ["m1"]
    store.delete_user(ALICE)
    assert store.get_messages(ALICE, "s1") == [] and store.list_sessions(ALICE) == []
    assert store.list_items(ALICE, Filters(statuses=tuple(Status))) == []
    assert store.list_jobs(ALICE) == [] and store.profile_versions(ALICE) == []
    assert store.lexical_search(ALICE, tokenize("zanzibar"), Filters(), 10) == []
    assert store.vector_search(ALICE, unit(1), Filters(), 10) == []
    assert store.list_users() == [bob]
    assert ids(store.lexical_search(bob, tokenize("zanzibar"), Filters(), 10)) == [kept[0].id]
    assert ids(store.vector_search(bob, unit(0), Filters(), 10)) == [kept[0].id]
    store.cache_vectors("m", {"h1": unit(0), "h2": unit(1)})
    store.forget_vectors("m", ["h1"])
    assert set(store.cached_vectors("m", ["h1", "h2"])) == {"h2"}
    store.compact()


def test_profile_versions_are_append_only(store: Store) -> None:
    store.add_profile_version(ALICE, ProfileVersion(1, {"name": "Alice"}, "api", "edit", T0))
    store.add_profile_version(ALICE, ProfileVersion(2, {"name": "Al"}, "user", "edit", T0))
    with pytest.raises(errors.ConflictError):
        store.add_profile_version(ALICE, ProfileVersion(2, {"name": "X"}, "api", "edit", T0))
    assert [(v.version, v.data["name"]) for v in store.profile_versions(ALICE)] == [(1, "Alice"),
                                                                                    (2, "Al")]
    assert store.profile_versions(Scope("bob")) == []


# -- errors -------------------------------------------------------------------------------
def test_bad_location_is_a_clear_store_error(backend: Backend, tmp_path) -> None:
    if backend.name == "sqlite":
        with pytest.raises(errors.StoreError, match="does not exist"):
            open_store(f"sqlite:///{tmp_path}/missing/dir/x.db")
        return
    url = database_url(backend.url, "no_such_db")
    with pytest.raises(errors.StoreUnavailableError, match="unknown database") as info:
        open_store(url)
    assert "no_such_db" in str(info.value) and info.value.__cause__ is not None
    with pytest.raises(errors.StoreUnavailableError, match="cannot reach"):
        open_store("postgresql://memstrata:pw@127.0.0.1:1/memstrata")


def test_postgres_wrong_password_is_named(pg_server: PgServer, pg_url: str) -> None:
    if pg_server.pgdata is None:
        pytest.skip("wrong-password check edits pg_hba.conf: needs the suite's own server")
    pg_server.execute("DO $$ BEGIN CREATE ROLE memstrata_pw LOGIN PASSWORD 'right'; "
                      "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    hba = pg_server.pgdata / "pg_hba.conf"
    rules = hba.read_text()
    if "memstrata_pw" not in rules:  # trust for everyone else; this role must send a password
        hba.write_text("local all memstrata_pw scram-sha-256\n" + rules)
        pg_server.execute("SELECT pg_reload_conf()")
    bad = pg_url.replace("postgres:@", "memstrata_pw:wrong@", 1)
    with pytest.raises(errors.StoreUnavailableError, match="refused the password") as info:
        open_store(bad)
    assert "wrong" not in str(info.value)  # the password itself is never echoed


def test_postgres_survives_a_server_restart(pg_server: PgServer, pg_url: str) -> None:
    if pg_server.pgdata is None:
        pytest.skip("restarting needs the suite's own server")
    with open_store(pg_url) as store:
        put_item(store, ALICE, item(ALICE, "m1", "acknowledged before the restart"), unit(0))
        pg_server.restart()
        # connections cut by the restart are checked and replaced on checkout
        assert store.get_item(ALICE, "m1").content == "acknowledged before the restart"
        put_item(store, ALICE, item(ALICE, "m2", "written after the restart"), unit(1))
        assert ids(store.vector_search(ALICE, unit(1), Filters(), 1)) == ["m2"]


def test_postgres_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an absent package looks like
    monkeypatch.delitem(sys.modules, "memstrata.stores.postgres", raising=False)
    with pytest.raises(errors.ConfigError, match=r"pip install 'memstrata\[postgres\]'"):
        open_store("postgresql://u@localhost/db")


# -- end to end ---------------------------------------------------------------------------
def test_memory_end_to_end(backend: Backend) -> None:
    from memstrata import Memory

    with Memory(store=backend.url, embedder="hash:256") as memory:
        memory.add([{"role": "user", "content": "I switched from Java to Go last spring"},
                    {"role": "assistant", "content": "Nice, how do you like Go?"},
                    {"role": "user", "content": "我很喜欢 Go 的并发模型"}], user_id="alice",
                   session_id="s1")
        fact = memory.remember("Prefers short answers", user_id="alice", kind="preference")
        memory.update(fact.id, "alice", content="Prefers very short answers")
    with Memory(store=backend.url, embedder="hash:256") as memory:
        hits = memory.search("what language does she program in? Go", user_id="alice", k=3)
        assert hits and "Go" in hits[0].text
        assert memory.search("并发模型", user_id="alice", k=1,  # the raw turn, not its item
                             filters={"layer": "episodic"})[0].text.startswith("我很喜欢")
        assert memory.search("short answers", user_id="alice", k=1)[0].id == fact.id
        assert [h.version for h in memory.history(fact.id, "alice")] == [1, 2]
        assert memory.search("Java", user_id="bob", k=3) == []
        memory.delete(fact.id, "alice")
        assert all(h.id != fact.id for h in memory.search("short answers", user_id="alice", k=5))


# -- backend parity -----------------------------------------------------------------------
def test_lexical_scores_match_sqlite_bm25(tmp_path, pg_url: str) -> None:
    """Within one scope, PostgreSQL's stored-statistics BM25 equals FTS5's bm25()."""
    from memstrata.providers.embedders import HashEmbedder

    texts = ["Caroline went to the LGBTQ support group", "Melanie ran a charity race for mental health",
             "support group support", "我昨天去了自然语言处理的讲座", "讲座 很 有意思 Caroline",
             "Melanie and Caroline talked about painting", "painting painting sunsets"]
    vectors = HashEmbedder(DIM).embed(texts)
    queries = ["Caroline support group", "Melanie painting", "自然语言 讲座", "charity race health"]
    results = []
    for url in (f"sqlite:///{tmp_path}/parity.db", pg_url):
        with open_store(url) as store:
            msgs = store.append_messages(ALICE, "s1", [msg(t, i) for i, t in enumerate(texts)])
            store.index(ALICE, [turn_doc(m, texts[(i + 1) % len(texts)], vectors[i])
                                for i, m in enumerate(msgs)])
            seq = {m.id: m.seq for m in msgs}
            results.append([[(seq[d], s) for d, s in store.lexical_search(ALICE, tokenize(q), Filters(),
                                                                           10, context_weight=w)]
                            for q in queries for w in (0.0, 0.3, 1.0)]
                           + [[(seq[d], s) for d, s in store.vector_search(ALICE, v, Filters(), 10)]
                              for v in vectors[:3]])
    sqlite, postgres = results
    for a, b in zip(sqlite, postgres):
        assert [d for d, _ in a] == [d for d, _ in b]
        assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-9, abs=1e-6)


def test_postgres_vector_search_agrees_with_pgvector_exact(pg_url: str) -> None:
    """The int8 first pass in process and the exact re-scoring by pgvector give what an
    exact ``ORDER BY embedding <=> q`` over every document gives, filters included."""
    with open_store(pg_url) as store:
        rng = np.random.default_rng(7)
        vectors = rng.normal(size=(300, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        msgs = store.append_messages(ALICE, "s1", [msg(f"turn {i}", i) for i in range(300)])
        store.index(ALICE, [turn_doc(m, vector=vectors[i]) for i, m in enumerate(msgs)])
        import psycopg
        from pgvector.psycopg import register_vector

        with psycopg.connect(pg_url) as conn:
            register_vector(conn)
            for q in vectors[:5]:
                exact = [r[0] for r in conn.execute(
                    "SELECT id FROM docs WHERE namespace=%s AND user_id=%s ORDER BY "
                    "embedding <=> %s, seq LIMIT 10", (ALICE.namespace, ALICE.user_id, q))]
                got = store.vector_search(ALICE, q, Filters(), 10)
                assert ids(got) == exact
                assert [c for _, c in got] == sorted((c for _, c in got), reverse=True)
        assert ids(store.vector_search(ALICE, vectors[5], Filters(), 10))[0] == msgs[5].id
        assert store.vector_search(ALICE, vectors[5], Filters(session_ids=("none",)), 10) == []
