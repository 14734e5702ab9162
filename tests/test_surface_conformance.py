"""One conformance suite, four faces: the local handle (``Memory.user``), the async one
(``AsyncMemory.user``, awaited), the remote one (``Client.user`` against a live
``memstrata serve`` app) and the async remote one (``AsyncClient.user``, awaited, against
the same). Same calls, same values, same errors."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest
from service_fixture import LiveServer

from memstrata import (AsyncClient, AsyncMemory, Client, ConflictError, ContextRequest, ItemVersion, Memory,
                       MemoryItem, NotFoundError, SearchHit, SearchResult, Status, ValidationError)
from memstrata.layers.context import ContextResult
from memstrata.layers.semantic.forget import ForgetReport
from memstrata.stores.base import Job, SessionRecord
from memstrata.usage import UsageReport


class Blocking:
    """Calls an async handle's coroutines from sync test code, on a loop in a thread."""

    def __init__(self, handle, loop):
        self._handle, self._loop = handle, loop

    def __getattr__(self, name):
        attr = getattr(self._handle, name)
        if not inspect.iscoroutinefunction(attr):
            return attr
        return lambda *a, **k: asyncio.run_coroutine_threadsafe(attr(*a, **k), self._loop).result(30)


@pytest.fixture(params=["local", "async", "remote", "async-remote"])
def face(request, tmp_path):
    db = f"sqlite:///{tmp_path / 'm.db'}"
    if request.param == "local":
        with Memory(db, embedder="hash:256") as memory:
            yield memory.user
        return
    if request.param == "async":
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        memory = AsyncMemory(db, embedder="hash:256")
        yield lambda user_id: Blocking(memory.user(user_id), loop)
        asyncio.run_coroutine_threadsafe(memory.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        return
    with Memory(db, embedder="hash:256") as memory, LiveServer(memory) as live:
        if request.param == "remote":
            with Client(live.url, live.key("acme", "app")) as client:
                yield client.user
            return
        # memstrata.AsyncClient on its own event loop, against the same real server
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        aclient = AsyncClient(live.url, live.key("acme", "app"))
        yield lambda user_id: Blocking(aclient.user(user_id), loop)
        asyncio.run_coroutine_threadsafe(aclient.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def test_turns_sessions_and_state(face):
    lin = face("lin")
    added = lin.add([{"role": "user", "content": "I switched our routing service from Java to Go."},
                     {"role": "assistant", "content": None,
                      "tool_calls": [{"id": "c1", "type": "function",
                                      "function": {"name": "log", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "logged"}], "s1")
    assert added.session_id == "s1" and [m.seq for m in added.messages] == [0, 1, 2]
    lin.add("提醒我下周三之前续签护照。", session_id="s1")
    log = lin.messages("s1")
    assert [m.role.value for m in log] == ["user", "assistant", "tool", "user"]
    assert log[1].tool_calls[0]["function"]["name"] == "log" and log[2].tool_call_id == "c1"
    assert [m.id for m in log[:3]] == added.message_ids
    sessions = lin.sessions()
    assert all(isinstance(s, SessionRecord) for s in sessions)
    assert [(s.session_id, s.message_count) for s in sessions] == [("s1", 4)]
    state = lin.session("s1")
    assert state.version == sessions[0].version and state.message_count == 4
    assert state.recent[-1].content == "提醒我下周三之前续签护照。"
    assert lin.archive_session("s1").status == "archived"
    assert lin.messages("nope") == [] and lin.session("nope").version == 0


def test_items_versions_and_concurrency(face):
    lin = face("lin")
    pref = lin.remember("Prefers short answers", kind="preference", tags=["style"], importance=0.7)
    assert isinstance(pref, MemoryItem) and pref.version == 1 and pref.tags == ("style",)
    assert lin.get(pref.id) == pref
    edited = lin.update(pref.id, content="Prefers very short answers", expected_version=1)
    assert edited.version == 2 and lin.get(pref.id).content == "Prefers very short answers"
    with pytest.raises(ConflictError):
        lin.update(pref.id, content="stale", expected_version=1)
    history = lin.history(pref.id)
    assert all(isinstance(v, ItemVersion) for v in history)
    assert [v.op for v in history] == ["create", "edit"] and history[1].after["content"].startswith("Prefers very")
    assert lin.feedback(pref.id, "up").confidence > edited.confidence
    todo = lin.remember("续签护照", kind="todo")
    assert lin.complete(todo.id).status is Status.DONE
    assert lin.undo(todo.id).status is Status.ACTIVE
    assert todo.content in lin.resume().open_todos
    assert lin.undo(lin.remember("temporary").id) is None  # undoing a creation deletes it
    report = lin.forget(pref.id)  # what was removed, per store: the same on every face
    assert isinstance(report, ForgetReport) and report.user_id == "lin"
    assert report.per_store()["store"] == {"items": 1, "turns": 0, "cached_vectors": 2,
                                           "reembedded": 0, "summaries": 0, "stages": 0,
                                           "profile": False}
    with pytest.raises(NotFoundError):
        lin.get(pref.id)
    with pytest.raises(NotFoundError):
        lin.forget(pref.id)
    with pytest.raises(ValidationError):
        lin.feedback(todo.id, "sideways")


def test_list_filters_and_pages(face):
    lin = face("lin")
    made = [lin.remember(f"fact number {n}", importance=0.1 * n) for n in range(5)]
    lin.remember("likes tea", kind="preference")
    everything = lin.list(limit=10)
    assert len(everything) == 6
    first, second = lin.list(limit=2), lin.list(limit=2, offset=2)
    assert len(first) == len(second) == 2 and not {i.id for i in first} & {i.id for i in second}
    assert [i.content for i in lin.list(filters={"kind": "preference"})] == ["likes tea"]
    lin.update(made[0].id, status="inactive")
    assert made[0].id not in {i.id for i in lin.list()}
    assert made[0].id in {i.id for i in lin.list(filters={"status": ["active", "inactive"]})}
    with pytest.raises(ValidationError):
        lin.list(limit=-1)


def test_search_explain_and_context(face):
    lin = face("lin")
    lin.add([{"role": "user", "content": "提醒我下周三之前续签护照。"},
             {"role": "assistant", "content": "好的，我记下了。"}], "s1")
    lin.add([{"role": "user", "content": "I keep bees on my roof."},
             {"role": "assistant", "content": "Lovely."}], "s2")
    hits = lin.search("护照", k=3)
    assert hits and all(isinstance(h, SearchHit) for h in hits) and "护照" in hits[0].text
    assert hits[0].parts.role_weight == 1.0 and hits[0].role in ("user", None)
    # min_score, roles and the merged ids of a hit cross every surface
    assert lin.search("护照", k=3, min_score=5.0) == []
    turns = lin.search("护照", k=3, roles=["assistant"], filters={"layer": "episodic"})
    assert all(h.role == "assistant" for h in turns)
    again = SearchHit.from_dict(hits[0].to_dict())
    assert (again.ids, again.role, again.parts) == (hits[0].ids, hits[0].role, hits[0].parts)
    assert lin.search("bees", k=2, filters={"session_id": "s2"})[0].session_id == "s2"
    explained = lin.explain("bees on the roof", k=2)
    assert isinstance(explained, SearchResult) and explained.lexical_candidates
    for bad in ({"query": ""}, {"query": "bees", "k": 0}, {"query": "bees", "mode": "fuzzy"}):
        with pytest.raises(ValidationError):
            lin.search(bad.pop("query"), **bad)
    result = lin.context("s3", [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Last time, what did I say about bees?"}],
                         budget=1500)
    assert isinstance(result, ContextResult)
    assert result.messages[0]["content"].startswith("Be brief.") and result.messages[-1]["role"] == "user"
    assert result.report.recall == "deep" and result.report.tokens <= 1500
    assert set(result.report.reasons) == set(result.report.kept_ids)
    none = lin.context("s3", [{"role": "user", "content": "Last time, what did I say about bees?"}],
                       budget=1500, min_score=5.0, filters={"layer": "semantic"}, roles=["user"])
    assert none.report.layers["memories"] == 0
    assert any("bees" in m["content"] for m in result.messages[:-1])
    light = lin.context(ContextRequest("s3", ({"role": "user", "content": "hi"},), budget=200,
                                       recall="light"))
    assert light.report.recall == "light"
    with pytest.raises(ValidationError):
        lin.context("s3", [{"role": "user", "content": "hi"}], budget=0)


def test_profile_jobs_usage_and_forgetting_the_user(face):
    lin = face("lin")
    lin.add([{"role": "user", "content": "I use Go at work."}, {"role": "assistant", "content": "ok"}], "s1")
    assert lin.update_profile(name="Lin", goals=["ship v2"]).name == "Lin"
    profile = lin.profile()
    assert profile.name == "Lin" and profile.goals == ("ship v2",)
    assert [v.data.get("name") for v in lin.profile_history()] == ["Lin"]
    jobs = lin.jobs()
    assert jobs and all(isinstance(j, Job) and j.kind == "extract" for j in jobs)
    assert isinstance(lin.usage(), UsageReport) and lin.usage().total.calls == 0
    other = face("max")
    other.remember("max's own")
    report = lin.forget_all()
    assert isinstance(report, ForgetReport) and report.erase_by is not None
    assert (report.user_id, report.turns, report.compact) == ("lin", 2, None)
    assert report.to_dict()["sessions"] == {"backend": "main store", "held": 0, "keys": 0}
    assert lin.sessions() == [] and lin.list() == [] and lin.profile_history() == []
    assert [i.content for i in other.list()] == ["max's own"]


def test_an_add_retried_with_its_idempotency_key_is_stored_once(face):
    lin = face("lin")
    turns = [{"role": "user", "content": "我对花生过敏。"}, {"role": "assistant", "content": "Noted."}]
    first = lin.add(turns, "s1", idempotency_key="req-42")
    again = lin.add(turns, "s1", idempotency_key="req-42")
    assert (first.replayed, again.replayed) == (False, True)
    assert again.message_ids == first.message_ids
    assert [m.content for m in lin.messages("s1")] == ["我对花生过敏。", "Noted."]
    with pytest.raises(ValidationError, match="idempotency key 'req-42'"):
        lin.add([{"role": "user", "content": "something else"}], "s1", idempotency_key="req-42")
    with pytest.raises(ValidationError):
        lin.add(turns, "s1", idempotency_key="bad\nkey")
