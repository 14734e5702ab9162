"""Fusion, scoring and text analysis as pure functions."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.errors import ConfigError
from memstrata.retrieval.documents import build_query, date_words, split_question
from memstrata.retrieval.fusion import fuse, rrf, weighted
from memstrata.retrieval.scoring import PRESETS, final_score, get_preset, recency
from memstrata.retrieval.units import own_words
from memstrata.stores.base import DocInfo
from memstrata.text import analyze, detect_language, tokenize
from memstrata.types import Layer

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def test_english_is_stemmed_and_stop_words_dropped():
    assert analyze("The cats were running to the parks") == ["cat", "run", "park"]
    assert analyze("Caroline's painting") == analyze("caroline paints")


def test_chinese_is_segmented_for_search():
    tokens = analyze("我最喜欢自然语言处理")
    assert "自然" in tokens and "语言" in tokens and "处理" in tokens
    assert "我" not in tokens  # function words carry no topic


def test_mixed_text_keeps_both_scripts():
    tokens = analyze("我在学习Python和Go语言")
    assert "python" in tokens and "go" in tokens and "学习" in tokens


def test_language_detection():
    assert detect_language(["我喜欢喝咖啡"]) == "zh"
    assert detect_language(["I like coffee"]) == "en"


def test_rrf_top_in_both_lists_scores_one():
    out = rrf([("a", 0.9), ("b", 0.8)], [("a", 12.0), ("c", 3.0)])
    assert out[0].id == "a" and out[0].similarity == pytest.approx(1.0)
    assert {f.id for f in out} == {"a", "b", "c"}
    assert out[0].dense_rank == 1 and out[0].lexical_rank == 1


def test_weighted_fusion_keeps_score_gaps():
    out = weighted([("a", 0.9), ("b", 0.1)], [("b", 10.0), ("a", 9.9)], dense_weight=0.5,
                   lexical_weight=0.5)
    by = {f.id: f for f in out}
    assert by["a"].similarity > by["b"].similarity
    assert by["b"].dense == pytest.approx(0.0) and by["b"].lexical == pytest.approx(1.0)
    assert by["a"].lexical == pytest.approx(0.99)  # a near-tie in BM25 stays a near-tie


def test_fusion_with_one_empty_list_uses_the_other_alone():
    out = weighted([], [("x", 5.0), ("y", 1.0)])
    assert [f.id for f in out] == ["x", "y"] and out[0].similarity == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="weighted, rrf"):
        fuse([], [], method="nope")


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(0, 1)), max_size=8),
       st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(0, 50)), max_size=8),
       st.sampled_from(["rrf", "weighted"]))
def test_fused_similarity_is_a_unit_interval_and_ids_are_the_union(dense, lexical, method):
    dense = sorted(dict(dense).items(), key=lambda x: -x[1])
    lexical = sorted(dict(lexical).items(), key=lambda x: -x[1])
    out = fuse(dense, lexical, method=method)
    assert {f.id for f in out} == {d for d, _ in dense} | {d for d, _ in lexical}
    assert all(-1e-9 <= f.similarity <= 1 + 1e-9 for f in out)
    assert [f.similarity for f in out] == sorted((f.similarity for f in out), reverse=True)


def test_balanced_preset_matches_seed_002_weights_when_ungated():
    preset = get_preset("balanced").with_overrides(gated=False)
    score, fresh, _ = final_score(0.5, NOW, 0.2, "semantic", NOW, preset)
    assert fresh == pytest.approx(1.0)
    assert score == pytest.approx(0.6 * 0.5 + 0.3 * 1.0 + 0.1 * 0.2)


def test_gating_keeps_irrelevant_fresh_items_below_relevant_old_ones():
    preset = get_preset("balanced")
    fresh_irrelevant, _, _ = final_score(0.05, NOW, 0.9, "semantic", NOW, preset)
    old_relevant, _, _ = final_score(0.9, NOW - timedelta(days=400), 0.5, "episodic", NOW, preset)
    assert old_relevant > fresh_irrelevant


def test_recency_curves():
    assert recency(NOW - timedelta(days=30), NOW, PRESETS["balanced"]) == pytest.approx(0.5)
    assert recency(NOW - timedelta(days=15), NOW, PRESETS["fresh"]) == pytest.approx(0.5)
    assert recency(NOW - timedelta(days=45), NOW, PRESETS["fresh"]) == 0.0
    assert recency(NOW - timedelta(days=7), NOW, PRESETS["support"]) == pytest.approx(0.5)


def test_decay_preset_multiplies_layer_weight():
    score, _, weight = final_score(1.0, NOW, 0.5, "episodic", NOW, PRESETS["decay"])
    assert weight == 0.5 and score == pytest.approx(0.5)
    with pytest.raises(ValueError):
        get_preset("unknown")


def test_query_is_built_from_current_and_recent_turns():
    lexical, dense = build_query("what about the hike?", ["We talked about Wutong mountain", "old"], 1)
    assert "hike" in lexical and "old" in lexical and "wutong" not in lexical
    assert dense.endswith("what about the hike?")


def test_date_words_in_either_language():
    when = datetime(2023, 5, 8, tzinfo=UTC)
    assert date_words(when) == "8 May 2023"
    assert date_words(when, chinese=True) == "2023年5月8日"
    assert tokenize(date_words(when)).split() == ["8", "may", "2023"]


def test_turn_fields_are_weighted_by_repetition_and_dense_text_looks_back():
    from memstrata.retrieval.documents import REPEAT, window_texts
    from memstrata.types import Message, Role

    turns = [Message(Role.USER, text, NOW, id=str(i)) for i, text in
             enumerate(["alpha", "bravo", "charlie", "delta", "echo"])]
    display, body, context, dense = window_texts(turns, 2)
    assert display == "charlie" and body == "charli"
    words = context.split()
    assert words.count("bravo") == REPEAT["prev1"] and words.count("alpha") == REPEAT["prev2"]
    assert words.count("delta") == REPEAT["next1"] and words.count("echo") == REPEAT["next2"]
    assert words.count("2026") == REPEAT["date"]
    assert dense == "bravo\ncharlie"
    assert window_texts(turns, 0)[3] == "alpha"


def test_turns_hours_apart_are_not_each_others_context():
    from memstrata.retrieval.documents import window_texts
    from memstrata.types import Message, Role

    turns = [Message(Role.USER, "alpha", NOW), Message(Role.USER, "bravo", NOW + timedelta(hours=5)),
             Message(Role.USER, "charlie", NOW + timedelta(hours=5, minutes=1))]
    _, _, context, dense = window_texts(turns, 1)
    assert "alpha" not in context and dense == "bravo"  # five hours later: a new conversation
    _, _, context, dense = window_texts(turns, 2)
    assert "bravo" in context and dense == "bravo\ncharlie"


@pytest.mark.parametrize("query, questions", [
    ("我上司的电话是多少？另外，我住的小区叫什么？", ["我上司的电话是多少？", "我住的小区叫什么？"]),
    ("Where does she work? Also, when did she move?", ["Where does she work?", "when did she move?"]),
    ("她去哪了？此外：几点回来？还有，跟谁？", ["她去哪了？", "几点回来？", "跟谁？"]),
    ("Where does she work?", ["Where does she work?"]),
    ("What did Mr. Smith also say about it?", ["What did Mr. Smith also say about it?"]),
    ("Also, where?", ["Also, where?"]),  # nothing before the connective
    ("她说了什么。此外：他的呢？", ["她说了什么。 他的呢？"]),  # no index word after it: kept together
    ("那个\"探讨技术。\"的活动？另外，时间？", ["那个\"探讨技术。\"的活动？", "时间？"]),
    # a choice: one question per option
    ("Which did I do first, the volleyball league or the charity run?",
     ["Which did I do first the volleyball league?", "Which did I do first the charity run?"]),
    ("我先参加的是哪个，排球联赛还是慈善跑？", ["我先参加的是哪个 排球联赛？", "我先参加的是哪个 慈善跑？"]),
    ("Do you want tea or coffee?", ["Do you want tea or coffee?"]),  # no comma: not split
    ("我喜欢猫还是狗？", ["我喜欢猫还是狗？"]),
])
def test_compound_questions_split_only_at_a_connective_after_a_sentence(query, questions):
    assert split_question(query) == questions


def test_dense_text_reads_the_turn_itself_after_a_long_one():
    from memstrata.retrieval.documents import (ASSISTANT_DENSE_CHARS, PRIOR_DENSE_CHARS,
                                               clip_words, dense_text, window_texts)
    from memstrata.types import Message, Role

    essay = "word " * 1000
    turns = [Message(Role.ASSISTANT, essay, NOW, id="a"),
             Message(Role.USER, "I graduated in marine biology.", NOW, id="u"),
             Message(Role.ASSISTANT, essay, NOW, id="b")]
    assert window_texts(turns, 1)[3] == "I graduated in marine biology."  # the essay left out
    reply = dense_text(turns[2], turns[1])  # an assistant turn: its opening, after the prior
    assert reply.startswith("I graduated in marine biology.\nword word")
    assert len(reply) <= len(turns[1].text) + 1 + ASSISTANT_DENSE_CHARS
    short = Message(Role.ASSISTANT, "x" * PRIOR_DENSE_CHARS, NOW)
    assert dense_text(turns[1], short) == f"{short.text}\n{turns[1].text}"  # a short one stays
    long_user = Message(Role.USER, "我" * 3000, NOW)
    assert dense_text(long_user, None) == long_user.text  # a user's own text is never cut here
    assert clip_words("alpha beta gamma", 12) == "alpha beta"  # at a word boundary
    assert clip_words("海" * 700, 600) == "海" * 600  # Chinese: at the limit
    assert clip_words("short", 240) == "short"


@pytest.mark.parametrize("query, about", [
    ("What did you say my main language was?", True),
    ("What was the book you recommended?", True),
    ("Remind me of that dessert shop with the giant milkshakes we talked about last time?", True),
    ("I wanted to check back on our previous conversation about Netflix.", True),
    ("Can you suggest some useful accessories for my phone?", False),  # a request, not a reference
    ("Can you recommend a hotel in Lisbon?", False),
    ("你之前说我的主要语言是什么？", True),
    ("你推荐过的那家店叫什么？", True),
    ("我们上次聊到的那家甜品店叫什么？", True),
    ("你推荐一下周末去哪玩", False),
    ("我住在哪里？", False),
])
def test_asks_about_assistant_tells_a_reference_from_a_request(query, about):
    from memstrata.retrieval.documents import asks_about_assistant

    assert asks_about_assistant(query) is about


def _turn(text: str, role: str = "user") -> DocInfo:
    return DocInfo(id="t1", layer=Layer.EPISODIC, text=text, created_at=datetime(2026, 1, 1, tzinfo=UTC),
                   session_id="s1", kind=None, status=None, importance=0.5, tags=(f"role:{role}",))


@pytest.mark.parametrize("item, turn, shown", [
    # a restatement that keeps its sentence speaks for it
    ("User works as a nurse at Ruijin Hospital", "I work as a nurse at Ruijin Hospital.", None),
    ("用户转行当老师了", "我转行当老师了。", None),
    # one that drops a clause is shown as the sentence, as said
    ("User got a raise", "I got a raise, it's 12000 yuan a month now.",
     "[user] I got a raise, it's 12000 yuan a month now."),
    ("用户不再吃咖啡", "我戒了咖啡，早上改喝绿茶了。", "[user] 我戒了咖啡，早上改喝绿茶了。"),
    # only the sentence it restates, not the rest of the turn
    ("User no longer eats or drinks coffee",
     "Long week. I quit coffee; it's green tea every morning. Anyway, any book tips?",
     "[user] I quit coffee; it's green tea every morning."),
    # a title's dot ends no sentence
    ("User went to the new dentist",
     "went to the new dentist, Dr. Sato, since Brennan retired. she was so gentle",
     "[user] went to the new dentist, Dr. Sato, since Brennan retired."),
    # an item that restates nothing of the turn is left as it is
    ("User has a cat", "We adopted a dog last week.", None),
])
def test_own_words_shows_the_sentence_an_item_leaves_out(item, turn, shown):
    assert own_words(item, _turn(turn)) == shown
