"""The write path embeds in batches across sessions, jobs and users, each text once, and
an import that was interrupted resumes without storing or embedding anything twice."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory
from memstrata.errors import ProviderError
from memstrata.providers.embedders import Coalescer, HashEmbedder, TextKind
from memstrata.retrieval.documents import window_dense_text
from memstrata.retrieval.indexer import cache_key
from memstrata.types import Filters, Role


class Counting(HashEmbedder):
    """The hash embedder, recording each passage batch it embeds; with ``fail_after`` it
    raises on that call (an import interrupted half way)."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__(64)
        self.batches: list[list[str]] = []
        self.fail_after = fail_after

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        if kind == "passage":
            if self.fail_after is not None and len(self.batches) == self.fail_after:
                raise ProviderError("the embedding endpoint went away")
            self.batches.append(list(texts))
        return super().embed(texts, kind=kind)

    @property
    def texts(self) -> Counter[str]:
        return Counter(t for batch in self.batches for t in batch)


def _sessions(n: int, turns: int = 3) -> list[dict]:
    said = ["我搬到了杭州，在西湖边租了房子", "That sounds lovely. How is the commute?",
            "I cycle to the office every morning, about twenty minutes", "好的"]
    return [{"session_id": f"s{i}", "messages": [
        {"role": "user" if t % 2 == 0 else "assistant", "content": f"{said[t % 4]} (day {i}, turn {t})"}
        for t in range(turns)]} for i in range(n)]


def _dense_texts(memory: Memory, user: str) -> list[str]:
    handle = memory.user(user)
    out = []
    for info in handle.sessions():
        turns = [m for m in handle.messages(info.session_id) if m.role is not Role.SYSTEM]
        out += [window_dense_text(turns, i) for i in range(len(turns))]
    return out


def _vectors_of(memory: Memory, user: str) -> int:
    """How many of the user's turns have a vector in the index (a vector search with
    room for every document returns each one that has a vector)."""
    handle = memory.user(user)
    ids = {m.id for info in handle.sessions() for m in handle.messages(info.session_id)}
    probe = np.ones(memory.embedder.dim, dtype=np.float32) / np.sqrt(memory.embedder.dim)
    found = {d for d, _ in memory.store.vector_search(handle.scope, probe, Filters(), 1000)}
    return len(ids & found)


def test_an_import_embeds_across_sessions_in_batches_each_text_once(tmp_path):
    counting = Counting()
    sessions = _sessions(10)
    sessions.append({**sessions[0], "session_id": "again"})  # the same turns in another session
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder=counting, worker="off",
                embed_batch=8) as m:
        m.import_conversation(sessions, "lin", progress=False)
        sizes = [len(b) for b in counting.batches]
        assert max(sizes) == 8 and all(s <= 8 for s in sizes)  # sessions of 3 turns, batches of 8
        texts = _dense_texts(m, "lin")
        assert len(texts) == 33 and len(set(texts)) == 30
        assert counting.texts == Counter(set(texts))  # each distinct text embedded once
        assert _vectors_of(m, "lin") == 33


def test_an_interrupted_import_resumes_without_storing_or_embedding_twice(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    sessions = _sessions(12)
    first = Counting(fail_after=2)  # two batches of 8 embedded, then the embedder fails
    with Memory(url, embedder=first, worker="off", embed_batch=8) as m:
        with pytest.raises(ProviderError):
            m.import_conversation(sessions, "lin", progress=False, extract=True)
        assert sum(len(m.messages("lin", f"s{i}")) for i in range(12)) == 36  # stored first
        assert sum(first.texts.values()) == 16
        # the five sessions whose turns were all in those batches are indexed, with their jobs
        assert _vectors_of(m, "lin") == 15
        assert sorted(j.payload["session_id"] for j in m.jobs("lin")) == [f"s{i}" for i in range(5)]
    second = Counting()
    with Memory(url, embedder=second, worker="off", embed_batch=8) as m:
        m.import_conversation(sessions, "lin", progress=False, extract=True)
        assert [len(m.messages("lin", f"s{i}")) for i in range(12)] == [3] * 12
        assert len(m.jobs("lin")) == 12  # one extraction job per session, not two
        assert not set(first.texts) & set(second.texts)  # nothing embedded again
        assert set(first.texts) | set(second.texts) == set(_dense_texts(m, "lin"))
        assert _vectors_of(m, "lin") == 36
    third = Counting()
    with Memory(url, embedder=third, worker="off", embed_batch=8) as m:
        results = m.import_conversation(sessions, "lin", progress=False)
        assert all(r.replayed for r in results) and third.batches == []


def test_an_import_queues_each_sessions_job_as_soon_as_its_turns_are_indexed(tmp_path):
    class Watching(Counting):
        memory: Memory | None = None
        jobs: list[list[str]]

        def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
            if self.memory is not None and kind == "passage":
                self.jobs.append([j.payload["session_id"] for j in self.memory.jobs("lin")])
            return super().embed(texts, kind=kind)

    watching = Watching()
    watching.jobs = []
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder=watching, worker="off", embed_batch=8) as m:
        watching.memory = m
        m.import_conversation(_sessions(6), "lin", progress=False, extract=True)
        watching.memory = None
        # batches of 8 turns over sessions of 3: before the second batch sessions s0 and s1
        # are whole, indexed and have their jobs (the worker extracts while s2… embed)
        assert watching.jobs[:3] == [[], ["s0", "s1"], ["s0", "s1", "s2", "s3", "s4"]]
        assert sorted(j.payload["session_id"] for j in m.jobs("lin")) == [f"s{i}" for i in range(6)]
        assert _vectors_of(m, "lin") == 18
        m.flush()


def _extracted(memory: Memory, user: str) -> list[tuple[str, str, str | None, str | None]]:
    return sorted((i.kind.value, i.content, i.attribute, i.value) for i in memory.user(user).list(limit=1000))


def test_the_worker_embeds_what_queued_extraction_jobs_will_compare_in_a_few_batches(tmp_path):
    said = ["I moved to Hangzhou last spring", "我女儿叫朵朵", "朵朵今年九岁了",
            "I work as a nurse at the city hospital", "I don't drink coffee anymore", "我现在住在北京"]
    sessions = [{"session_id": f"s{i}", "messages": [{"role": "user", "content": text},
                                                     {"role": "assistant", "content": "Noted."}]}
                for i, text in enumerate(said)]
    runs = {}
    for prepared in (True, False):
        counting = Counting()
        with Memory(f"sqlite:///{tmp_path / f'{prepared}.db'}", embedder=counting, worker="off",
                    embed_batch=64) as m:
            if not prepared:
                m.worker.prepare = None
            m.import_conversation(sessions, "lin", progress=False)
            for s in sessions:
                m.enqueue_extraction("lin", s["session_id"])
            before = len(counting.batches)
            m.flush()
            runs[prepared] = (_extracted(m, "lin"), counting.batches[before:])
    items, batches = runs[True]
    assert items == runs[False][0] and len(items) == 4  # the same memory, whoever embedded it
    unprepared = runs[False][1]
    assert len(batches) < len(unprepared) / 2  # a few batches, not a call or two per job


def test_the_worker_embeds_queued_jobs_of_several_users_together(tmp_path):
    counting = Counting()
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder=counting, worker="off",
                embed_batch=16) as m:
        for user in ("lin", "bo"):
            for s in _sessions(4, turns=2):
                m.add(s["messages"], user, s["session_id"])  # one extraction job each
        assert counting.batches == []  # add() indexed the words; vectors wait for the jobs
        m.flush()
        first = counting.batches[0]
        assert len(first) == 16  # 8 jobs of 2 turns, 2 users, in one call
        for user in ("lin", "bo"):
            texts = _dense_texts(m, user)
            assert all(counting.texts[t] >= 1 for t in texts)
            assert _vectors_of(m, user) == 8
        # a user's turns are embedded once for them (the cache is per user): a text two
        # users said is embedded twice, once each, never once for both
        assert all(counting.texts[t] == 2 for t in _dense_texts(m, "lin"))


def test_a_forget_while_jobs_are_prepared_keeps_their_vectors_out_of_the_cache(tmp_path):
    class Forgetting(Counting):
        memory: Memory | None = None

        def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
            if self.memory is not None and kind == "passage":
                memory, self.memory = self.memory, None
                memory.user("lin").forget_all()  # commits while the batch is embedded
            return super().embed(texts, kind=kind)

    forgetting = Forgetting()
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder=forgetting, worker="off") as m:
        m.add([{"role": "user", "content": "My passport number is X1234567"}], "lin", "s")
        texts = _dense_texts(m, "lin")
        jobs = m.jobs("lin", status="pending")
        forgetting.memory = m
        m._prepare_jobs(jobs)
        scope = m.user("lin").scope
        embedded = [t for batch in forgetting.batches for t in batch]
        assert set(texts) < set(embedded)  # the turn, and what its job will compare (its probe)
        assert m.store.cached_vectors(forgetting.name, [cache_key(scope, t) for t in embedded]) == {}
        assert m.pipeline.slots._cache.keys().isdisjoint(embedded)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path) -> str:
    return request.getfixturevalue("pg_url") if request.param == "postgres" \
        else f"sqlite:///{tmp_path / 'm.db'}"


def test_the_profile_kept_in_memory_follows_every_change_made_elsewhere(url):
    with Memory(url, embedder="hash:64", worker="off") as reader, \
            Memory(url, embedder="hash:64", worker="off") as writer:
        lin_r, lin_w = reader.user("lin"), writer.user("lin")
        assert lin_r.profile().name is None
        state = reader.store.items_state(lin_r.scope)
        item = lin_w.remember("My name is Lin Wei", attribute="name", value="Lin Wei")
        assert reader.store.items_state(lin_r.scope) != state
        assert lin_r.profile().name == "Lin Wei"  # another Memory wrote it: seen at once
        lin_w.update(item.id, value="Lin Mei", content="My name is Lin Mei")
        assert lin_r.profile().name == "Lin Mei"
        state = reader.store.items_state(lin_r.scope)
        reader.store.touch_items(lin_r.scope, [item.id], item.created_at)
        assert reader.store.items_state(lin_r.scope) == state  # access statistics only
        lin_w.forget(item.id)
        assert lin_r.profile().name is None
        assert reader.user("bo").profile().name is None  # kept per user


class Gated(HashEmbedder):
    """The hash embedder; its first call waits for ``gate`` (so other calls queue behind
    it), and a text containing "bad" fails the call it is in."""

    def __init__(self) -> None:
        super().__init__(64)
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        self.calls.append(list(texts))
        if len(self.calls) == 1:
            self.entered.set()
            self.gate.wait(30)
        if any("bad" in t for t in texts):
            raise ProviderError("the model refused a text")
        return super().embed(texts, kind=kind)


def test_concurrent_query_embeddings_are_one_batch_and_one_bad_text_fails_only_its_call():
    gated = Gated()
    batcher = Coalescer(gated, "query")
    results: dict[str, object] = {}

    def ask(text: str) -> None:
        try:
            results[text] = batcher.embed([text])
        except ProviderError as exc:
            results[text] = exc

    first = threading.Thread(target=ask, args=("where do I live",))
    first.start()
    assert gated.entered.wait(30)
    texts = [f"question {i}" for i in range(7)] + ["a bad question"]
    others = [threading.Thread(target=ask, args=(t,)) for t in texts]
    for thread in others:
        thread.start()
    while sum(len(r.texts) for r in batcher._queue) < 8:  # all queued behind the first call
        threading.Event().wait(0.01)
    gated.gate.set()
    for thread in [first, *others]:
        thread.join(30)
    assert gated.calls[0] == ["where do I live"] and sorted(gated.calls[1]) == sorted(texts)
    for text in ["where do I live", *texts[:7]]:
        assert np.array_equal(results[text], HashEmbedder(64).embed([text], kind="query"))
    assert isinstance(results["a bad question"], ProviderError)  # alone, after the batch failed
    assert len(gated.calls) == 2 + 8  # the failed batch, then each caller alone
