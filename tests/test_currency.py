"""The final ordering pass of current truth (retrieval/currency.py), as pure functions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memstrata.retrieval.currency import (asks_about_now, asks_about_past, asks_for_one, current_first,
                                          earlier_states, latest_first, stale_marks, tells_of_change,
                                          until_label)
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


def statement(text: str, similarity: float, days: int) -> SearchHit:
    """A user's statement said ``days`` after T, in a session of its own."""
    return SearchHit(text, Layer.EPISODIC, text, similarity, replace(PARTS, similarity=similarity),
                     T + timedelta(days=days), session_id=f"s{days}", role="user")


def test_news_of_a_new_value_for_a_one_value_question_marks_the_earlier_statement():
    old = statement("My Honda Civic needs new tyres, what should four cost?", 0.50, 0)
    new = statement("Can't believe I finally sold the Civic. The Model 3 is a dream to drive", 0.45, 60)
    out = earlier_states(latest_first([old, new]), query="What car do I drive?")
    assert [h.id for h in out] == [new.id, old.id]
    assert out[0].stale_since is None and out[1].stale_since == new.created_at


@pytest.mark.parametrize("query, later, similarity", [
    ("What pets do I have?", "We just got a new kitten, her name is Luna", 0.45),  # a list is asked
    ("What car do I drive?", "The car wash on Elm Street is great", 0.45),  # no news of a change
    ("What car do I drive?", "Finally got my new bike yesterday", 0.25),  # answers much worse (half as well)
])
def test_an_earlier_statement_that_may_still_hold_is_not_marked(query, later, similarity):
    old = statement("My dog Max and my Honda Civic are my whole life", 0.50, 0)
    out = earlier_states(latest_first([old, statement(later, similarity, 60)]), query=query)
    assert all(h.stale_since is None for h in out)


def test_statements_of_one_session_are_not_a_change_of_each_other():
    first = SearchHit("a", Layer.EPISODIC, "I drive a Civic", 0.5, replace(PARTS, similarity=0.5), T,
                      session_id="s1", role="user")
    second = replace(first, id="b", text="I just got a new Model 3", created_at=T + timedelta(hours=1))
    assert all(h.stale_since is None for h in earlier_states([second, first], query="What car do I drive?"))


@pytest.mark.parametrize("text, news", [("Pottery got moved to Thursdays", True),
                                        ("Signed the lease in Walthamstow last week", True),
                                        ("我们上个月搬到厦门了", True), ("终于换了新手机", True),
                                        ("I love my Civic", False), ("我喜欢吃火锅", False)])
def test_tells_of_change(text, news):
    assert tells_of_change(text) is news


@pytest.mark.parametrize("query, one", [("What car do I drive?", True), ("我住在哪里？", True),
                                        ("What are my working hours?", True), ("What pets do I have?", False),
                                        ("Which clubs am I in?", False), ("我有哪些爱好？", False),
                                        ("Who are my favourite authors?", False)])
def test_asks_for_one(query, one):
    assert asks_for_one(query) is one


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


@pytest.mark.parametrize("text, states", [
    ("ugh it's been raining in Leeds for 9 days straight 🙃 can you give me a packing list?", True),
    ("我家狗狗豆豆最近老是掉毛，有什么办法吗？", True), ("I live in Leeds.", True),
    ("Hi, where do I live now?", False), ("我住在哪里？", False),
    ("So what do you think about my new job? Is it good?", False)])
def test_a_message_that_asks_may_still_state_something(text, states):
    """A user's turn competes as a statement of their state (latest first) when some part
    of it states something, though the message ends in a question."""
    from memstrata.retrieval.documents import states_something
    assert states_something(text) is states
