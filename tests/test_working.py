"""L1 trimming: API validity, budgets, windows, repair and strict policies."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstrata.errors import BudgetError, ToolCallSequenceError, ValidationError
from memstrata.layers.working import group_messages, trim
from memstrata.tokens import count_messages
from memstrata.types import Message, StructuredSummary

TEXTS = ["hello", "What is the weather in Paris tomorrow?", "我想明天去北京出差，帮我订酒店。",
         "The build failed again; please check the logs.", "好的，已经完成了。", "ok"]


def call(cid: str, name: str = "lookup") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": '{"q": "x"}'}}


def assert_api_valid(messages: list[dict]) -> None:
    """Independent of the code under test: every call answered right after it, no orphans."""
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] != "tool", f"orphan tool result at {i}"
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            assert len(set(ids)) == len(ids)
            j = i + 1
            answered = []
            while j < len(messages) and messages[j]["role"] == "tool":
                answered.append(messages[j]["tool_call_id"])
                j += 1
            assert sorted(answered) == sorted(ids), f"calls {ids} answered by {answered}"
            i = j
        else:
            i += 1


@st.composite
def conversations(draw, malformed: bool = False):
    """A random conversation: systems, users, assistants, tool-call groups; optionally broken."""
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(st.sampled_from(["You are helpful.", "你是助手。"]))})
    n = 0
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "system", "orphan", "unanswered"]
                                    if malformed else ["user", "assistant", "tools", "user", "system"]))
        text = draw(st.sampled_from(TEXTS))
        if kind in ("user", "assistant", "system"):
            msgs.append({"role": kind, "content": text})
        elif kind == "orphan":
            msgs.append({"role": "tool", "tool_call_id": f"ghost{n}", "content": "stray"})
            n += 1
        else:
            k = draw(st.integers(1, 3))
            ids = [f"call{n + x}" for x in range(k)]
            n += k
            msgs.append({"role": "assistant", "content": draw(st.sampled_from([None, text])),
                         "tool_calls": [call(c) for c in ids]})
            answered = ids if kind == "tools" else draw(st.lists(st.sampled_from(ids), unique=True))
            order = draw(st.permutations(answered))
            msgs.extend({"role": "tool", "tool_call_id": c, "content": f"result {c}"} for c in order)
    return msgs


def _signature(m: dict) -> tuple:
    return (m["role"], m.get("content"), m.get("tool_call_id"))


def assert_subsequence(out: list[dict], source: list[dict]) -> None:
    it = iter(_signature(m) for m in source)
    for m in out:
        if m["role"] == "system" and m.get("content", "").startswith(("Conversation summary", "对话摘要")):
            continue
        assert any(s == _signature(m) for s in it), "output order differs from input order"


FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(conversations(malformed=True), st.integers(20, 400),
       st.sampled_from(["budget", "window", "summary+window"]))
def test_trim_output_is_api_valid_and_within_budget(msgs, budget, strategy):
    systems = [m for m in msgs if m["role"] == "system"]
    try:
        result = trim(msgs, budget, strategy=strategy, window=3,
                      summary="Conversation summary:\n- Goal: test")
    except BudgetError:
        assert count_messages(systems) > budget
        return
    out = result.messages
    assert_api_valid(out)
    assert count_messages(out) <= budget
    assert result.report.tokens == count_messages(out)
    extra = [m for m in out if m["role"] == "system" and m not in systems]
    assert all(m["content"].startswith("Conversation summary") for m in extra)
    assert len(extra) <= (strategy == "summary+window")
    for s in systems:
        assert s in out, "a system message was dropped"
    assert_subsequence(out, msgs)
    group_messages(out, policy="strict")  # the library agrees the output is well formed


@FAST
@given(conversations())
def test_well_formed_input_with_big_budget_is_unchanged(msgs):
    result = trim(msgs, 100_000)
    assert [_signature(m) for m in result.messages] == [_signature(m) for m in msgs]
    assert result.report.dropped == ()


@FAST
@given(conversations(malformed=True))
def test_strict_raises_exactly_when_repair_repairs(msgs):
    repairs = group_messages(msgs).repairs
    if repairs:
        with pytest.raises(ToolCallSequenceError):
            group_messages(msgs, policy="strict")
    else:
        group_messages(msgs, policy="strict")


def test_tool_group_is_never_split():
    msgs = [{"role": "system", "content": "sys"},
            {"role": "user", "content": "look it up"},
            {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
            {"role": "tool", "tool_call_id": "a", "content": "x" * 400},
            {"role": "tool", "tool_call_id": "b", "content": "short"},
            {"role": "assistant", "content": "Here you go."}]
    full = count_messages(msgs)
    # a budget that would fit the last tool result but not the whole group
    result = trim(msgs, full - 50)
    roles = [m["role"] for m in result.messages]
    assert roles == ["system", "assistant"]
    assert {d.reason for d in result.report.dropped} == {"over_budget"}
    assert result.report.groups_dropped == 2


def test_orphan_and_unanswered_are_repaired_and_reported():
    msgs = [{"role": "tool", "tool_call_id": "ghost", "content": "stray"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "checking", "tool_calls": [call("a"), call("b")]},
            {"role": "tool", "tool_call_id": "a", "content": "A"},
            {"role": "assistant", "content": None, "tool_calls": [call("c")]}]
    result = trim(msgs, 10_000)
    assert_api_valid(result.messages)
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool"]
    assert [c["id"] for c in result.messages[1]["tool_calls"]] == ["a"]
    reasons = [(d.reason, d.sources) for d in result.report.dropped]
    assert ("orphan_tool_result", (0,)) in reasons
    assert ("unanswered_tool_call", (2,)) in reasons
    assert ("unanswered_tool_call", (4,)) in reasons


def test_unanswered_call_with_text_keeps_the_text():
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [call("a")]}]
    out = trim(msgs, 1000).messages
    assert out[-1] == {"role": "assistant", "content": "Let me check."}


@pytest.mark.parametrize("msgs, index, cid", [
    ([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x1", "content": "r"}], 1, "x1"),
    ([{"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
      {"role": "tool", "tool_call_id": "a", "content": "r"}], 0, "b"),
    ([{"role": "assistant", "content": None, "tool_calls": [call("a")]},
      {"role": "user", "content": "wait"},
      {"role": "tool", "tool_call_id": "a", "content": "late"}], 0, "a"),
])
def test_strict_names_index_and_id(msgs, index, cid):
    with pytest.raises(ToolCallSequenceError) as err:
        trim(msgs, 1000, policy="strict")
    assert f"message {index}" in str(err.value) and repr(cid) in str(err.value)


def test_budget_smaller_than_system_prompt():
    msgs = [{"role": "system", "content": "You are a careful assistant. " * 20},
            {"role": "user", "content": "hi"}]
    with pytest.raises(BudgetError, match="system messages need .* budget is 10"):
        trim(msgs, 10)


def test_window_keeps_last_turns_and_all_systems():
    msgs = [{"role": "system", "content": "sys"}]
    for t in range(10):
        msgs += [{"role": "user", "content": f"question {t}"},
                 {"role": "assistant", "content": None, "tool_calls": [call(f"c{t}")]},
                 {"role": "tool", "tool_call_id": f"c{t}", "content": "r"},
                 {"role": "assistant", "content": f"answer {t}"}]
    msgs.insert(20, {"role": "system", "content": "mid-session note"})
    result = trim(msgs, strategy="window")  # default: 6 turns, no budget
    users = [m["content"] for m in result.messages if m["role"] == "user"]
    assert users == [f"question {t}" for t in range(4, 10)]
    assert [m["content"] for m in result.messages if m["role"] == "system"] == ["sys", "mid-session note"]
    assert_api_valid(result.messages)
    assert {d.reason for d in result.report.dropped} == {"outside_window"}


def test_summary_window_places_summary_after_leading_system_messages():
    summary = StructuredSummary(goal="我想去东京旅行", constraints="预算一万元以内")
    msgs = [{"role": "system", "content": "你是旅行助手。"}]
    for t in range(8):
        msgs += [{"role": "user", "content": f"第{t}个问题"}, {"role": "assistant", "content": f"第{t}个回答"}]
    result = trim(msgs, 2000, strategy="summary+window", window=2, summary=summary)
    out = result.messages
    assert out[0]["content"] == "你是旅行助手。"
    assert out[1] == {"role": "system", "content": summary.render()}
    assert out[1]["content"].startswith("对话摘要")
    assert [m["content"] for m in out[2:]] == ["第6个问题", "第6个回答", "第7个问题", "第7个回答"]
    assert result.report.summary_tokens > 0


def test_summary_left_out_when_it_does_not_fit():
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    result = trim(msgs, 30, strategy="summary+window", summary="long summary " * 50)
    assert all("long summary" not in (m["content"] or "") for m in result.messages)
    assert result.report.dropped[0].reason == "summary_over_budget"


def test_accepts_message_objects_and_returns_dicts():
    msgs = [Message.from_dict({"role": "user", "content": "hello"}),
            {"role": "assistant", "content": "hi there", "created_at": "2024-05-08T13:56:00Z"}]
    out = trim(msgs, 100).messages
    assert out == [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]


@pytest.mark.parametrize("kwargs, match", [
    ({"budget": None}, "needs a budget"),
    ({"budget": 0}, "positive number of tokens"),
    ({"budget": 100, "strategy": "fifo"}, "strategy must be"),
    ({"budget": 100, "strategy": "window", "window": 0}, "window must be"),
    ({"budget": 100, "policy": "lenient"}, "policy must be"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        trim([{"role": "user", "content": "hi"}], **kwargs)


@pytest.mark.parametrize("bad", [
    [{"role": "robot", "content": "hi"}],
    [{"role": "user", "content": ""}],
    [{"role": "tool", "content": "no id"}],
    "not a list",
])
def test_bad_messages_are_rejected(bad):
    with pytest.raises(ValidationError):
        trim(bad, 100)
