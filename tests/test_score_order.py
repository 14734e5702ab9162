"""The score is the order (issue P16), through the public API on the default embedder
(multilingual-e5-small): every list is sorted by the score it shows, ``min_score`` cuts
that list, a filler reply never outscores the answer, and in a store of a handful of
memories an unrelated one does not look certain (the score is not a min-max of the few
candidates)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memstrata import Memory
from memstrata.cli.demo import _T0, QUERIES, SCRIPT


@pytest.fixture(scope="module")
def e5(tmp_path_factory):
    path = tmp_path_factory.mktemp("order") / "m.db"
    with Memory(f"sqlite:///{path}", embed_on_add="inline") as memory:
        yield memory


def _in_order(hits):
    return all(a.score >= b.score for a, b in zip(hits, hits[1:]))


def test_the_demo_lists_scores_in_rank_order_and_min_score_cuts_that_list(e5):
    """`memstrata demo` showed 0.188 above 0.392 (the order was one number, the score another)."""
    for session_id, day, turns in SCRIPT:
        when = _T0 + timedelta(days=day)
        e5.add([{"role": role, "content": text, "created_at": when + timedelta(minutes=i)}
                for i, (role, text) in enumerate(turns)], "lin", session_id)
    e5.remember("Lin prefers short answers (reads on the phone)", "lin", kind="preference",
                importance=0.8, session_id="s1-onboarding")
    e5.flush()
    for query in [*QUERIES, "What's the capital of France?", "法国的首都是哪里？"]:
        hits = e5.search(query, "lin", k=10)
        assert hits and _in_order(hits), [(h.score, h.text) for h in hits]
        for h in hits:  # parts say what ordered it: the value the score is a map of
            assert h.parts.value is not None and h.parts.relevance is not None
        values = [h.parts.value for h in hits]
        assert all(a >= b - 1e-12 for a, b in zip(values, values[1:])) or any(
            h.role == "assistant" for h in hits)  # weak units are placed last by rule
        # a cut between two scores that differ (the time of the search moves recency a little)
        gaps = [(a.score + b.score) / 2 for a, b in zip(hits, hits[1:]) if a.score > 1.01 * b.score]
        for cut in gaps[:2]:
            kept = e5.search(query, "lin", k=10, min_score=cut)
            assert [h.id for h in kept] == [h.id for h in hits if h.score >= cut]
    top = e5.search("护照的事情", "lin", k=3)[0]
    assert "护照" in top.text
    unrelated = e5.search("What's the capital of France?", "lin", k=10)
    assert max(h.score for h in unrelated) < 0.05, [(h.score, h.text) for h in unrelated]


FILLER = [("en", "My sister works as a nurse in Shanghai.", "That's great!", "haha", "OK.",
           "What does my sister do?", "nurse"),
          ("zh", "我姐姐在上海当护士。", "真不错！", "哈哈", "好的", "我姐姐是做什么的？", "护士")]


@pytest.mark.parametrize("lang, fact, reply, filler, ack, query, word", FILLER)
def test_a_filler_reply_does_not_outscore_the_answer(e5, lang, fact, reply, filler, ack, query, word):
    user = f"filler-{lang}"
    e5.add([{"role": "user", "content": fact}, {"role": "assistant", "content": reply},
            {"role": "user", "content": filler}, {"role": "assistant", "content": ack}], user, "s1")
    e5.add([{"role": "user", "content": {"en": "I bought a new bike yesterday.",
                                         "zh": "我昨天买了一辆新自行车。"}[lang]},
            {"role": "assistant", "content": ack}], user, "s2")
    e5.flush()
    for layer in (None, "episodic"):
        hits = e5.search(query, user, filters={"layer": layer} if layer else None)
        assert hits and word in hits[0].text and _in_order(hits), [(h.score, h.text) for h in hits]
        answer = hits[0].score
        others = [h for h in hits if word not in h.text]
        assert all(h.score < answer / 2 for h in others), [(h.score, h.text) for h in hits]


TINY = [("en", ["I keep bees in my garden.", "My daughter is eight.", "I drive a blue Volvo."],
         "What's the capital of France?", "what car do I drive?", "Volvo"),
        ("zh", ["我在院子里养蜜蜂。", "我女儿八岁了。", "我开一辆蓝色的沃尔沃。"],
         "法国的首都是哪里？", "我开什么车？", "沃尔沃")]


@pytest.mark.parametrize("lang, facts, unrelated, related, word", TINY)
def test_in_a_tiny_store_an_unrelated_memory_does_not_look_certain(e5, lang, facts, unrelated,
                                                                  related, word):
    """With three memories the best of three is first in both lists: a per-query min-max
    gave it 1.0 (a learned ranker on those features gave 0.96)."""
    user = f"tiny-{lang}"
    for fact in facts:
        e5.remember(fact, user)
    far = e5.search(unrelated, user)
    assert far and max(h.score for h in far) < 0.05, [(h.score, h.text) for h in far]
    near = e5.search(related, user)
    assert word in near[0].text and _in_order(near)
    assert near[0].score > 5 * max(h.score for h in far)
    assert all(h.score < near[0].score / 2 for h in near[1:]), [(h.score, h.text) for h in near]


NEIGHBOUR = [("朵朵对什么过敏", "我女儿对花生过敏"), ("我女儿对什么过敏？", "我女儿对花生过敏"),
             ("What is my daughter allergic to?", "我女儿对花生过敏")]


@pytest.mark.xfail(strict=True, reason="P16 item 3, not done: a turn's vector embeds the turn "
                   "before it ('prev\\nturn', docs/retrieval.md, Documents), so the unrelated turn "
                   "after a fact scores with the fact")
@pytest.mark.parametrize("query, fact", NEIGHBOUR)
def test_a_turns_vector_reads_the_turn_not_the_one_before(e5, query, fact):
    """After "我女儿对花生过敏" an unrelated "I mostly write Java at work, but I'm learning
    Rust." ranked with it for "朵朵对什么过敏" (its vector embeds the allergy too)."""
    user = "neighbour"
    if not e5.messages(user, "s1"):
        e5.add([{"role": "user", "content": fact},
                {"role": "user", "content": "I mostly write Java at work, but I'm learning Rust."}],
               user, "s1")
        e5.add([{"role": "user", "content": "朵朵今天去幼儿园了。"},
                {"role": "user", "content": "周末我们去了海边。"}], user, "s2")
        e5.flush()
    hits = e5.search(query, user, filters={"layer": "episodic"})
    assert fact in hits[0].text
    java = next(h for h in hits if "Java" in h.text)
    assert java.score < 0.01, [(h.score, h.text) for h in hits]
