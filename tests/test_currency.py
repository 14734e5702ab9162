"""The final ordering pass of current truth (retrieval/currency.py), as pure functions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memstrata.retrieval.currency import (asks_about_now, asks_about_past, current_first, latest_first,
                                          stale_marks, until_label)
from memstrata.types import Kind, Layer, MemoryItem, ScoreParts, SearchHit, Status

T = datetime(2026, 11, 20, tzinfo=UTC)
PARTS = ScoreParts(0.5, 0.5, None, 1.0, 0.5, 1.0, 1, None, "balanced")


def hit(id: str, score: float, stale: bool = False, layer: Layer = Layer.EPISODIC) -> SearchHit:
    return SearchHit(id, layer, id, score, PARTS, T, stale_since=T if stale else None)


def test_nothing_stale_leaves_the_list_as_it_is():
    hits = [hit("a", 0.3), hit("b", 0.5), hit("c", 0.1)]  # even scores out of order
    assert current_first(hits, {}, past=False) == hits


def test_a_stale_hit_goes_below_the_current_ones_and_its_replacement_takes_its_place():
    hits = [hit("old-turn", 0.9, stale=True), hit("x", 0.6), hit("y", 0.4)]
    new = hit("new-item", 0.0, layer=Layer.SEMANTIC)
    out = current_first(hits, {"old-turn": new}, past=False)
    assert [h.id for h in out] == ["new-item", "x", "y", "old-turn"]
    assert out[0].score == 0.9 and out[-1].score <= 0.4  # moved scores stay in rank order
    scores = [h.score for h in out]
    assert scores == sorted(scores, reverse=True)


def test_a_question_about_the_past_keeps_the_order():
    hits = [hit("old-turn", 0.9, stale=True), hit("x", 0.6)]
    assert current_first(hits, {}, past=True) == hits
    assert asks_about_past("Where did I live before?") and asks_about_past("我以前做什么工作？")
    assert not asks_about_past("How old is my daughter?") and not asks_about_past("我现在住在哪里？")


def test_marks_follow_the_chain_and_spare_a_turn_that_states_the_current_value():
    def item(id: str, status: Status, sources: tuple[str, ...], **meta: object) -> MemoryItem:
        return MemoryItem(id=id, user_id="u", kind=Kind.FACT, content=id, status=status,
                          created_at=T, updated_at=T, source_message_ids=sources, metadata=meta)
    first = item("i1", Status.SUPERSEDED, ("t1",), replaced_by="i2", until="2026-10-01T00:00:00+00:00")
    second = item("i2", Status.SUPERSEDED, ("t2", "t3"), replaced_by="i3",
                  until="2026-11-20T00:00:00+00:00")
    marks = stale_marks([first, second], {"i3": ["t3"]})
    assert marks["t1"].replaced_by == "i3" and marks["t2"].replaced_by == "i3"
    assert "t3" not in marks  # the turn also states the current value
    assert marks["t1"].since.month == 10 and marks["i2"].since.month == 11
    assert until_label(T, "I live in Hangzhou") == "until 2026-11"
    assert until_label(T, "我住在杭州") == "2026年11月之前"


def said(id: str, score: float, similarity: float, days: int, stale: bool = False) -> SearchHit:
    """A hit said ``days`` after T whose similarity to the query is ``similarity``."""
    return SearchHit(id, Layer.EPISODIC, id, score, replace(PARTS, similarity=similarity),
                     T + timedelta(days=days), stale_since=T if stale else None)


def test_the_latest_of_the_statements_that_answer_the_question_goes_first():
    hits = [said("liverpool", 0.32, 0.48, 0), said("arsenal", 0.30, 0.45, 60), said("weather", 0.05, 0.04, 90)]
    out = latest_first(hits)
    assert [h.id for h in out] == ["arsenal", "liverpool", "weather"]
    assert [h.score for h in out] == [0.32, 0.30, 0.05]  # each place keeps its score


def test_a_hit_that_answers_much_worse_or_lies_below_the_window_is_not_a_competitor():
    weak = [said("hangzhou", 0.6, 0.6, 0), said("visit", 0.15, 0.15, 30)]  # a quarter as good
    assert latest_first(weak) == weak
    deep = [said(f"h{n}", 0.5 - n / 100, 0.5 - n / 100, 0) for n in range(5)] + [said("new", 0.4, 0.4, 9)]
    assert latest_first(deep) == deep  # the sixth hit stays sixth: recall at 5 is the ranker's
    stale = [said("old", 0.5, 0.5, 90, stale=True), said("cur", 0.45, 0.45, 0)]
    assert latest_first(stale) == stale  # already placed by current_first


@pytest.mark.parametrize("query", ["Which football team do I support?", "我住哪个小区？", "我现在开什么车？",
                                   "Recommend a restaurant near where I live", "How old is my daughter?"])
def test_questions_about_now(query):
    assert asks_about_now(query)


@pytest.mark.parametrize("query", ["When did I move to Shanghai?", "Where did I live before?",
                                   "What did Melanie paint last week?", "我以前住在哪里？",
                                   "我上个月去了哪里？", "我什么时候搬的家？"])
def test_questions_about_an_event_or_the_past_keep_the_order(query):
    assert not asks_about_now(query)


def test_a_question_naming_a_speaker_of_a_transcript_is_not_about_the_users_state():
    """In a conversation between named people (LoCoMo's shape), "What is Caroline reading?"
    asks what Caroline said: the retriever keeps its order (the latest-first pass on every
    present question took LoCoMo dev R@1 from 0.342 to 0.240)."""
    from memstrata.retrieval.search import _speakers_named
    from memstrata.stores.base import DocInfo
    infos = [DocInfo(n, Layer.EPISODIC, "x", T, "s", None, None, 0.5, (f"speaker:{n}",))
             for n in ("Caroline", "Melanie")]
    assert _speakers_named("What is Caroline reading?", infos) == ["speaker:Caroline"]
    assert _speakers_named("What do Caroline and Melanie both paint?", infos) == \
        ["speaker:Caroline", "speaker:Melanie"]
    assert _speakers_named("Which team do I support?", infos) == []
