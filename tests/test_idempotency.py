"""``add(..., idempotency_key=...)``: a retried add never stores its messages twice — on
SQLite and PostgreSQL, after a failure that came after the commit (the embedder failed
while indexing) and after one that rolled everything back, under concurrent retries —
and the same key with other messages is refused. Keys are forgotten with the user."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import Memory
from memstrata.errors import ProviderError, StoreError, ValidationError
from memstrata.providers.embedders import HashEmbedder

TURNS = [{"role": "user", "content": "我下周三要去杭州出差，帮我记一下。"},
         {"role": "assistant", "content": "Noted: a business trip to Hangzhou next Wednesday."}]


class FlakyEmbedder:
    """hash:256 that fails the next ``fail`` calls, as an embedding endpoint that is down."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(256)
        self.name, self.dim = self.inner.name, self.inner.dim
        self.fail = 0

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        if self.fail:
            self.fail -= 1
            raise ProviderError("embedding endpoint unavailable (simulated)")
        return self.inner.embed(texts, kind=kind)  # type: ignore[arg-type]


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path):
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    return f"sqlite:///{tmp_path / 'm.db'}"


def _texts(memory: Memory, user: str, session: str = "s1") -> list[str]:
    return [m.content or "" for m in memory.user(user).messages(session)]


@pytest.mark.parametrize("sessions", ["", "redis"])
def test_a_retry_with_the_key_returns_the_first_result(store_url, sessions):
    prefix = f"idem{uuid.uuid4().hex[:8]}"
    with Memory(store_url, embedder="hash:256",
                sessions=f"redis://127.0.0.1:6379/0?prefix={prefix}" if sessions else "") as memory:
        lin = memory.user("idem-lin")
        first = lin.add(TURNS, "s1", idempotency_key="req-0001")
        again = lin.add(TURNS, "s1", idempotency_key="req-0001")
        assert not first.replayed and again.replayed
        assert again.message_ids == first.message_ids
        assert [m.content for m in again.messages] == [t["content"] for t in TURNS]
        assert _texts(memory, "idem-lin") == [t["content"] for t in TURNS]  # stored once
        other = lin.add(TURNS, "s1", idempotency_key="req-0002")  # a new key: a new add
        assert not other.replayed and len(_texts(memory, "idem-lin")) == 4
        # keys are per user: another user's add with the same key is their own
        assert not memory.user("idem-max").add(TURNS, "s1", idempotency_key="req-0001").replayed
        memory.flush(timeout=60)
        assert len(lin.jobs()) == len({j.id for j in lin.jobs()})


def test_the_same_key_with_other_messages_or_session_is_refused(store_url):
    with Memory(store_url, embedder="hash:256") as memory:
        lin = memory.user("idem-lin")
        lin.add(TURNS, "s1", idempotency_key="req-1")
        with pytest.raises(ValidationError, match="idempotency key 'req-1' was used .* other messages"):
            lin.add([{"role": "user", "content": "I'm flying to Oslo instead."}], "s1",
                    idempotency_key="req-1")
        with pytest.raises(ValidationError, match="same messages to the same session"):
            lin.add(TURNS, "s2", idempotency_key="req-1")
        with pytest.raises(ValidationError, match="control character"):
            lin.add(TURNS, "s1", idempotency_key="req\x00-1")
        assert _texts(memory, "idem-lin") == [t["content"] for t in TURNS]
        assert _texts(memory, "idem-lin", "s2") == []


def test_a_retry_after_a_failure_past_the_commit_stores_nothing_twice(store_url):
    """The embedder fails while add() indexes (the turns committed already: add()
    raised, yet they are stored — on PostgreSQL the classic "did it commit?"); the retry
    with the key returns them, indexed now, and stores nothing again."""
    flaky = FlakyEmbedder()
    with Memory(store_url, embedder=flaky, embed_on_add="inline") as memory:
        lin = memory.user("idem-lin")
        flaky.fail = 1
        with pytest.raises(ProviderError):
            lin.add(TURNS, "s1", idempotency_key="req-7")
        assert len(_texts(memory, "idem-lin")) == 2  # committed before the failure
        assert lin.search("杭州出差") == []  # but not indexed
        retry = lin.add(TURNS, "s1", idempotency_key="req-7")
        assert retry.replayed and len(_texts(memory, "idem-lin")) == 2
        assert retry.message_ids == [m.id for m in lin.messages("s1")]
        hits = lin.search("杭州出差")
        assert hits and hits[0].id in retry.message_ids  # indexed by the retry
        memory.flush(timeout=60)


def test_a_retry_after_a_rolled_back_add_stores_it_once(store_url, monkeypatch):
    """A failure inside the transaction rolls back the turns and the key together: the
    retry stores the add (once), not a replay of nothing."""
    with Memory(store_url, embedder="hash:256") as memory:
        lin = memory.user("idem-lin")
        real = memory.store.enqueue_job
        calls = {"n": 0}

        def fails_once(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 1:
                raise StoreError("disk full (simulated)")
            return real(*args, **kwargs)

        monkeypatch.setattr(memory.store, "enqueue_job", fails_once)
        with pytest.raises(StoreError):
            lin.add(TURNS, "s1", idempotency_key="req-9")
        assert _texts(memory, "idem-lin") == []
        assert memory.store.idempotent_add(lin.scope, "req-9") is None
        retry = lin.add(TURNS, "s1", idempotency_key="req-9")
        assert not retry.replayed and _texts(memory, "idem-lin") == [t["content"] for t in TURNS]
        assert lin.add(TURNS, "s1", idempotency_key="req-9").replayed


def test_concurrent_retries_store_one_copy(store_url):
    with Memory(store_url, embedder="hash:256") as memory:
        lin = memory.user("idem-lin")
        results, errors = [], []

        def send() -> None:
            try:
                results.append(lin.add(TURNS, "s1", idempotency_key="req-race"))
            except Exception as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=send) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert len({tuple(r.message_ids) for r in results}) == 1
        assert sum(not r.replayed for r in results) == 1
        assert len(_texts(memory, "idem-lin")) == 2
        memory.flush(timeout=60)


def test_keys_are_forgotten_with_the_user(store_url):
    with Memory(store_url, embedder="hash:256") as memory:
        lin = memory.user("idem-lin")
        lin.add(TURNS, "s1", idempotency_key="req-forget")
        memory.flush(timeout=60)
        memory.forget_user("idem-lin")
        assert memory.store.idempotent_add(lin.scope, "req-forget") is None
        assert not lin.add(TURNS, "s1", idempotency_key="req-forget").replayed
