"""The final ordering pass of current truth (retrieval/currency.py), as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime

from memstrata.retrieval.currency import asks_about_past, current_first, stale_marks, until_label
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
