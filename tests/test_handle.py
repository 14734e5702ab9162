"""The per-user handle, and the regressions the architecture step fixed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memstrata import ConfigError, Memory, UserMemory, ValidationError
from memstrata.errors import ConflictError
from memstrata.requests import SearchRequest
from memstrata.types import Filters, Layer, Role, Scope, Status, utcnow


def test_the_handle_carries_its_scope(memory: Memory) -> None:
    lin = memory.user("lin", agent="support")
    assert isinstance(lin, UserMemory) and lin.scope == Scope("lin", "support")
    lin.add("I keep bees on my roof.", session_id="s1")
    item = lin.remember("Likes honey", kind="preference")
    # the remembered item (and, once its job ran, the statement the turn made)
    assert item.id in [i.id for i in lin.list()]
    assert item.id in [i.id for i in memory.list("lin", agent_id="support")]  # the old signature
    assert memory.list("lin") == [] and memory.user("lin").list() == []  # another namespace
    assert "bees on" in lin.search("bees")[0].text  # the turn, or the item made from it
    request = SearchRequest("bees", k=1, filters=Filters(layers=(Layer.EPISODIC,)))
    assert [h.text for h in lin.search(request)] == ["I keep bees on my roof."]


def test_update_then_undo_leaves_no_stale_index_entry(memory: Memory) -> None:
    """Regression: undo re-indexed only when content, tags, kind or status changed, so a
    slot edit undone stayed searchable by the undone value."""
    u = memory.user("u")
    item = u.remember("Uses a language at work", attribute="language", value="Java")
    u.update(item.id, value="Rust")
    assert [h.id for h in u.search("Rust", mode="lexical")] == [item.id]
    u.undo(item.id)
    assert u.get(item.id).value == "Java"
    assert u.search("Rust", mode="lexical") == []
    assert [h.id for h in u.search("Java", mode="lexical")] == [item.id]


def test_every_item_change_is_the_next_version(memory: Memory) -> None:
    u = memory.user("u")
    item = u.remember("I live in Paris")
    u.feedback(item.id, "up")
    u.update(item.id, content="I live in Lyon")
    u.undo(item.id)
    history = u.history(item.id)
    assert [v.version for v in history] == [1, 2, 3, 4]
    assert [v.op for v in history] == ["create", "feedback", "edit", "undo"]
    assert u.get(item.id).content == "I live in Paris"
    with pytest.raises(ConflictError, match="version 4, not 2"):
        u.update(item.id, content="stale write", expected_version=2)
    assert u.update(item.id, content="fresh write", expected_version=4).version == 5


def test_archive_sweep_extracts_in_the_sessions_own_namespace(tmp_path) -> None:
    """Regression: a Memory whose default namespace differs from the session's turned
    the scope back into (user_id, agent_id) and queued extraction in its own namespace,
    finding nothing to extract."""
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256",
                namespace="support") as memory:
        lin = memory.user("lin", agent="")
        lin.add([{"role": "user", "content": "I live in Berlin."},
                 {"role": "assistant", "content": "Noted."}], session_id="s1", extract=False)
        memory.flush()
        assert lin.list() == []
        archived = memory.archive_idle(now=utcnow() + timedelta(hours=2))
        assert archived == [(Scope("lin", ""), "s1")]
        memory.flush()
        assert any("Berlin" in i.content for i in lin.list())
        assert memory.user("lin").list() == []  # nothing leaked into the default namespace


@pytest.mark.parametrize("message, role, content", [
    ("a plain string", Role.USER, "a plain string"),
    ({"role": "developer", "content": "Be brief."}, Role.SYSTEM, "Be brief."),
    ({"role": "assistant", "content": ""}, Role.ASSISTANT, ""),
    ({"role": "assistant", "content": None}, Role.ASSISTANT, ""),
    ({"role": "user", "content": [{"type": "text", "text": "look at"},
                                  {"type": "image_url", "image_url": {"url": "x"}},
                                  {"type": "text", "text": "this"}]}, Role.USER, "look at\nthis"),
])
def test_what_real_clients_send_is_accepted(memory: Memory, message, role, content) -> None:
    stored = memory.user("u").add(message).messages[0]
    assert (stored.role, stored.content) == (role, content)


def test_content_parts_keep_the_other_parts_types(memory: Memory) -> None:
    stored = memory.user("u").add({"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x/cat.png"}}]}).messages[0]
    assert stored.content == "" and stored.metadata["parts"] == ["image_url"]


def test_tool_call_messages_as_the_openai_sdk_sends_them(memory: Memory) -> None:
    call = {"id": "c1", "type": "function",
            "function": {"name": "weather", "arguments": {"city": "Paris"}}}
    stored = memory.user("u").add([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]).messages
    assert stored[1].content is None
    assert stored[1].tool_calls[0]["function"]["arguments"] == '{"city": "Paris"}'


@pytest.mark.parametrize("bad, fragment", [
    ({"role": "assistant", "tool_calls": [{"id": "c1", "function": "weather"}]}, "function"),
    ({"role": "assistant", "tool_calls": [{"id": "c1", "function": None}]}, "function"),
    ({"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": 3}}]}, "function"),
    ({"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f",
                                                                    "arguments": 7}}]},
     "arguments"),
    ({"role": "user", "content": [{"text": "no type"}]}, "type"),
    ({"role": "user", "content": [{"type": "text", "text": 5}]}, "string 'text'"),
    ({"role": "system", "content": ""}, "empty"),
])
def test_what_cannot_be_meant_is_refused_and_nothing_stored(memory: Memory, bad, fragment) -> None:
    with pytest.raises(ValidationError, match=fragment):
        memory.user("u").add([{"role": "user", "content": "first"}, bad])
    assert memory.user("u").messages() == []


@pytest.mark.parametrize("setting, value, fragment", [
    ("scoring", "typo", "balanced, fresh, decay, support, relevance"),
    ("fusion", "max", "weighted, rrf"),
    ("worker", "process", "thread, off"),
    ("embed_on_add", "later", "background, inline"),
    ("dedup_threshold", 1.5, "between 0 and 1"),
    ("candidates", 0, "between 1 and 1000"),
    ("summary_every", "10", "must be an integer, not .10."),
    ("dedup_threshold", "high", "must be a number"),
    ("forget_messages", "yes", "must be true or false"),
])
def test_settings_are_checked_when_memory_is_built(tmp_path, setting, value, fragment) -> None:
    with pytest.raises(ConfigError, match=fragment):
        Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:64", **{setting: value})


def test_scoring_presets_in_the_settings_table_are_the_real_ones() -> None:
    from memstrata.config import SCORING_PRESETS, SETTINGS
    from memstrata.retrieval.fusion import FUSION_METHODS
    from memstrata.retrieval.scoring import PRESETS

    by_name = {s.name: s for s in SETTINGS}
    assert by_name["scoring"].choices == tuple(PRESETS) == SCORING_PRESETS
    assert by_name["fusion"].choices == FUSION_METHODS


def test_bad_search_and_context_requests(memory: Memory) -> None:
    u = memory.user("u")
    for options, fragment in [({"k": 0}, "k must be"), ({"mode": "fuzzy"}, "mode must be"),
                              ({"scoring": "typo"}, "unknown scoring preset"),
                              ({"recent": "one string"}, "list of strings")]:
        with pytest.raises(ValidationError, match=fragment):
            u.search("x", **options)
    for options, fragment in [({"recall": "deeper"}, "recall must be"),
                              ({"budget": 0}, "budget must be"),
                              ({"policy": "lenient"}, "policy must be"),
                              ({"quotas": (0.9, 0.9, 0.9)}, "add up to")]:
        with pytest.raises(ValidationError, match=fragment):
            u.context(messages=[{"role": "user", "content": "hi"}], **options)


def test_status_changes_follow_into_the_index(memory: Memory) -> None:
    u = memory.user("u")
    todo = u.remember("Renew the passport", kind="todo")
    assert [h.id for h in u.search("passport", mode="lexical")] == [todo.id]
    u.complete(todo.id)
    assert u.get(todo.id).status is Status.DONE
    assert u.search("passport", mode="lexical") == []
    done = Filters(statuses=(Status.DONE,), layers=(Layer.SEMANTIC,))
    assert [h.id for h in u.search("passport", mode="lexical", filters=done)] == [todo.id]
