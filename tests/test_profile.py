"""The core profile: aggregation from active items, latest wins, rendering."""

from datetime import UTC, datetime, timedelta

from memstrata.layers.semantic.decide import to_item
from memstrata.layers.semantic.extract import extract_text
from memstrata.layers.semantic.profile import Profile, aggregate, render
from memstrata.types import Status

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def items(*texts, start=0):
    out = []
    for n, text in enumerate(texts):
        for k, c in enumerate(extract_text(text, message_id=f"m{start + n}")):
            out.append(to_item(c, id=f"i{start + n}_{k}", user_id="u",
                               now=NOW + timedelta(minutes=start + n)))
    return out


def test_aggregate_fills_every_part():
    p = aggregate(items("My name is Anna and I'm a software engineer at Google.",
                        "My goal is to become a staff engineer", "Keep it short please",
                        "I love hiking", "Remind me to renew my passport next week",
                        "I'm learning Rust"))
    assert p.name == "Anna"
    assert "software engineer" in p.role and "Google" in p.role
    assert p.goals == ("User's goal is to become a staff engineer",)
    assert "User needs to renew their passport next week" in p.current
    assert "User is learning Rust" in p.current
    assert "User wants short, concise answers" in p.preferences
    assert "User likes hiking" in p.preferences
    assert p.language == "en"
    assert len(p.sources) >= 6


def test_latest_single_value_wins_and_inactive_items_do_not_count():
    old = items("I'm a teacher", "I use Java")
    new = items("I'm a nurse", "I switched to Go", start=10)
    p = aggregate(old + new)
    assert p.role == "User is a nurse"
    assert "User uses Go" in p.preferences and "User uses Java" not in p.preferences
    gone = [i.evolve(status=Status.SUPERSEDED) for i in new]
    assert aggregate(old + gone).role == "User is a teacher"


def test_answer_language_and_chinese_profile():
    p = aggregate(items("我叫小王，我是一名后端工程师", "别啰嗦", "提醒我下周续签护照"))
    assert p.name == "小王" and p.role == "用户是后端工程师" and p.language == "zh"
    text = render(p, "zh")
    assert text.startswith("[用户档案]") and "称呼：小王" in text and "用户需要下周续签护照" in text
    assert aggregate(items("我叫小王", "Please answer in English")).language == "en"


def test_render_english_and_empty():
    text = render(aggregate(items("My name is Anna", "I love hiking")), "en")
    assert text.splitlines()[0] == "[User profile]"
    assert "- Name: Anna" in text and "User likes hiking" in text
    assert render(Profile(), "en") == "[User profile]\n(nothing known yet)"
    assert Profile().is_empty and aggregate([]) == Profile()


def test_parts_are_capped():
    p = aggregate(items(*(f"I love {x}" for x in "abcdefgh")), max_per_part=3)
    assert len(p.preferences) == 3
