"""Items read as people write: the offline extractor's restatements of real user
turns — 300 English and 150 Chinese, from the development splits of MADial-Bench and
LongMemEval (tests/data/restatement_clauses.json says where from) — contain no fragment,
doubled subject or broken verb, as :func:`memstrata.bench.updates.ill_formed` reads them.

Before this test, the same turns gave "User just sort ofs made it up", "User hiked, swam,
ands made", "User really should starts", "they am", "User've", "用户和用户哥" and
"我上学的路上是了帮同学…" among their items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstrata.bench.updates import ill_formed
from memstrata.layers.semantic.english import reads_as_statement
from memstrata.layers.semantic.extract import extract_text

CLAUSES = json.loads((Path(__file__).parent / "data" / "restatement_clauses.json").read_text("utf-8"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_restatements_of_real_turns_read_as_people_write(lang):
    turns = CLAUSES[lang]
    assert len(turns) >= 150
    items = [(c.content, t) for t in turns for c in extract_text(t)]
    assert len(items) >= len(turns) // 2  # most turns still give an item: nothing is fixed by refusing all
    bad = [(c, t) for c, t in items if ill_formed(c)]
    assert not bad, bad[:10]


@pytest.mark.parametrize("text, expected", [
    ("I just sort of made it up on the spot.", "User just sort of made it up on the spot"),
    ("I hiked, swam, and made great memories.", "User hiked, swam, and made great memories"),
    ("I really should start a cork board.", "User really should start a cork board"),
    ("I still can't believe it.", "User still can't believe it"),
    ("I wanna start a dance studio.", "User wants to start a dance studio"),
    ("I'm determined to find the right spot - when I have time.",
     "User is determined to find the right spot - when User has time"),
])
def test_english_verbs_are_conjugated_once_and_in_the_right_place(text, expected):
    assert expected in [c.content for c in extract_text(text)]


@pytest.mark.parametrize("text, expected", [
    ("我记得那天我和表哥玩得很开心。", "用户记得那天自己和表哥玩得很开心"),
    ("我记得班主任带我们看了好多实验。", "用户记得班主任带他们看了好多实验"),
])
def test_a_later_wo_refers_back_to_the_user(text, expected):
    assert expected in [c.content for c in extract_text(text)]


def test_the_generator_refuses_what_would_not_read_as_written():
    assert not reads_as_statement("User thes act of serving meals")
    assert not reads_as_statement("User Got any tips for marketing")
    assert reads_as_statement("User has been to Paris")
