"""L2 progressive summaries: structure, limits, bilingual extraction, incremental steps."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.errors import ValidationError
from memstrata.layers.episodic import ExtractiveSummariser, Summariser, plan_incremental, update_summary
from memstrata.text import detect_language
from memstrata.types import PARTS, StructuredSummary

ZH = [{"role": "user", "content": "我想下个月去东京旅行，帮我规划一下。预算在一万元以内。不要安排红眼航班。"},
      {"role": "assistant", "content": "好的。我们决定住在新宿。机票已经订好了。你需要办签证吗？"}]
EN = [{"role": "user", "content": "I want to migrate our API to Postgres. We must not lose data."},
      {"role": "assistant", "content": "We decided to use logical replication. I already created the "
                                       "replica. Should we switch reads first?"}]


def test_chinese_parts_and_headings():
    s = ExtractiveSummariser().summarise(None, ZH)
    assert "东京" in s.goal
    assert "新宿" in s.decisions
    assert "订好" in s.done
    assert "签证" in s.open_questions
    assert "一万元" in s.constraints and "红眼" in s.constraints
    text = s.render()
    assert text.startswith("对话摘要") and "核心目标" in text and "约束与偏好" in text


def test_english_parts_and_headings():
    s = ExtractiveSummariser().summarise(None, EN)
    assert "Postgres" in s.goal
    assert "logical replication" in s.decisions
    assert "replica" in s.done
    assert "switch reads" in s.open_questions
    assert "lose data" in s.constraints
    assert s.render().startswith("Conversation summary:") and "Open questions" in s.render()
    assert s.render(language="zh").startswith("对话摘要")


def test_goal_only_from_user_and_kept_until_a_new_one():
    s1 = ExtractiveSummariser().summarise(None, EN)
    s2 = ExtractiveSummariser().summarise(s1, [{"role": "assistant", "content": "I want to help you."},
                                               {"role": "tool", "tool_call_id": "x", "content": "I want"}])
    assert s2.goal == s1.goal and s2.version == s1.version + 1


def test_previous_summary_is_carried_forward():
    s1 = ExtractiveSummariser().summarise(None, ZH)
    s2 = ExtractiveSummariser().summarise(s1, [{"role": "user", "content": "必须住在地铁站附近。"}])
    assert "红眼" in s2.constraints and "地铁站" in s2.constraints


def test_part_limit_is_enforced():
    with pytest.raises(ValidationError, match="over the limit of 200"):
        StructuredSummary(goal="x" * 201)
    s = StructuredSummary.clipped(goal="目标" * 300, max_chars=50)
    assert len(s.goal) == 50 and s.goal.endswith("…")
    with pytest.raises(ValidationError, match="unknown summary part"):
        StructuredSummary.clipped(mood="happy")


def test_round_trip_and_empty():
    s = ExtractiveSummariser().summarise(None, EN)
    assert StructuredSummary.from_dict(s.to_dict()) == s
    assert StructuredSummary().is_empty and StructuredSummary().render() == ""
    assert ExtractiveSummariser().summarise(None, [{"role": "user", "content": "ok"}]).is_empty


def test_detect_language():
    assert detect_language("我想去北京") == "zh"
    assert detect_language("I want to go to Beijing") == "en"
    assert detect_language("帮我 review 这个 PR 的代码") == "zh"


class CountingSummariser:
    """Wraps a summariser and counts how often each message is shown to it."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummariser()
        self.seen: Counter[str] = Counter()
        self.calls = 0

    def summarise(self, previous, new_messages):
        self.calls += 1
        for m in new_messages:
            self.seen[m["id"]] += 1
        return self.inner.summarise(previous, new_messages)


SENTENCES = ["我想把网站迁移到云上。", "我们决定用 PostgreSQL。", "备份已经完成了。", "还需要买域名吗？",
             "不要在工作日白天停机。", "I want a faster build.", "We decided to cache wheels.",
             "The CI job is done.", "Should we pin numpy?", "Never push to main directly.",
             "ok", "thanks", "让我想想"]


def _session(turns: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    msgs = []
    for t in range(turns):
        msgs.append({"id": f"u{t}", "role": "user", "content": " ".join(rng.sample(SENTENCES, 2))})
        if t % 5 == 0:
            msgs.append({"id": f"a{t}", "role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{t}", "type": "function", "function": {"name": "run", "arguments": "{}"}}]})
            msgs.append({"id": f"r{t}", "role": "tool", "tool_call_id": f"c{t}", "content": "exit 0"})
        msgs.append({"id": f"b{t}", "role": "assistant", "content": " ".join(rng.sample(SENTENCES, 2))})
    return msgs


def test_200_turn_session_sees_each_message_once_and_stays_small():
    log = _session(200)
    counter = CountingSummariser()
    assert isinstance(counter, Summariser)
    summary, range_end = None, 0
    # messages arrive one by one; the summary step runs after each, as a session would
    for n in range(1, len(log) + 1):
        summary, range_end = update_summary(counter, summary, log[:n], range_end)
        assert summary is None or all(len(getattr(summary, p)) <= 200 for p in PARTS)
    summary, range_end = update_summary(counter, summary, log, range_end, force=True)
    assert range_end == len(log)
    assert counter.seen == Counter({m["id"]: 1 for m in log})
    assert counter.calls == summary.version == -(-len(log) // 10)
    assert all(len(getattr(summary, p)) <= 200 for p in PARTS)
    assert len(summary.render()) < 6 * 200 + 100


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 25), max_size=30), st.integers(1, 12))
def test_plan_incremental_covers_every_message_exactly_once(arrivals, every_n):
    total, range_end, covered = 0, 0, []
    for k in arrivals:
        total += k
        plan = plan_incremental(list(range(total)), range_end, every_n)
        if plan.due:
            assert plan.start == range_end and plan.end == total >= range_end + every_n
            covered.extend(plan.messages)
            range_end = plan.end
        else:
            assert plan.messages == () and total - range_end < every_n
    final = plan_incremental(list(range(total)), range_end, every_n, force=True)
    covered.extend(final.messages)
    assert covered == list(range(total))


@pytest.mark.parametrize("range_end, every_n, match", [
    (-1, 10, "outside"), (6, 10, "outside"), (0, 0, "every_n"), (True, 10, "outside")])
def test_plan_incremental_bad_input(range_end, every_n, match):
    with pytest.raises(ValidationError, match=match):
        plan_incremental([1, 2, 3, 4, 5], range_end, every_n)


def test_summariser_rejects_malformed_messages():
    with pytest.raises(ValidationError):
        ExtractiveSummariser().summarise(None, [{"role": "user"}])
