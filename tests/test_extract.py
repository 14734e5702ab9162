"""The offline extractor and the credibility screen, in English and Chinese."""

from datetime import UTC, datetime

import pytest

from memstrata.layers.semantic.credibility import CredibilityConfig, assess, screen, write_score
from memstrata.layers.semantic.extract import cardinality, extract, extract_text
from memstrata.types import Kind, Message, Role

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def msg(role: str, text: str, mid: str) -> Message:
    return Message(role=Role(role), content=text, created_at=T0, id=mid)


def one(text: str):
    found = extract_text(text, message_id="m1")
    assert len(found) == 1, found
    return found[0]


def slots(text: str):
    return {(c.attribute, c.value, c.polarity) for c in extract_text(text)}


def test_a_single_user_turn_is_read_at_once():
    # no statement waits for a reply before it is remembered
    assert [c.value for c in extract([msg("user", "I use Java", "m1")])] == ["Java"]
    assert extract([msg("system", "be nice", "s")]) == ()
    assert extract([msg("user", "I use Java", "m1")], min_messages=2) == ()


def test_only_user_messages_produce_candidates():
    found = extract([msg("assistant", "I love Rust and I live in Paris", "a1"),
                     msg("user", "I use Java at work", "u1")])
    assert [(c.attribute, c.value) for c in found] == [("language", "Java")]
    assert found[0].source_message_ids == ("u1",)
    assert found[0].content == "User uses Java"
    assert found[0].confidence == 0.8


def test_window_limits_what_is_read():
    old = [msg("user", "I live in Berlin", "u0")]
    recent = [msg("assistant", "ok", f"a{i}") for i in range(6)]
    assert extract(old + recent + [msg("user", "I use Go", "u9")], window=6)[0].value == "Go"
    assert all(c.value != "Berlin" for c in extract(old + recent, window=6))


@pytest.mark.parametrize("text, expected", [
    ("I use Java.", ("language", "Java", True)),
    ("I switched to Go.", ("language", "Go", True)),
    ("my main language is Python", ("language", "Python", True)),
    ("我的主力语言是Python", ("language", "Python", True)),
    ("我用Python写后端", ("language", "Python", True)),
    ("我改用Go了", ("language", "Go", True)),
    ("My name is Anna", ("name", "Anna", True)),
    ("我叫小王", ("name", "小王", True)),
    ("I work at Stripe", ("employer", "Stripe", True)),
    ("I work at a bakery", ("employer", "a bakery", True)),
    ("I'm working in the local library", ("employer", "the local library", True)),
    ("I live in Berlin", ("city", "Berlin", True)),
    ("我住在上海", ("city", "上海", True)),
    ("我来自成都", ("hometown", "成都", True)),
    ("I'm vegetarian", ("diet", "vegetarian", True)),
    ("I'm allergic to peanuts", ("allergies", "peanuts", True)),
    ("My wife is called Sarah", ("family:wife", "Sarah", True)),
    ("我女儿叫朵朵", ("family:daughter", "朵朵", True)),
    ("I no longer like jazz", ("likes", "jazz", False)),
    ("我不再喜欢咖啡", ("likes", "咖啡", False)),
    ("我最近不吃辣了", ("food", "辣", False)),
    ("Keep it short please", ("answer_length", "short", True)),
    ("别啰嗦", ("answer_length", "short", True)),
    ("Please answer in Chinese", ("answer_language", "Chinese", True)),
    ("用中文回答", ("answer_language", "Chinese", True)),
])
def test_slots(text, expected):
    assert expected in slots(text)


@pytest.mark.parametrize("text, expected", [
    ("Please keep your answers short.", ("answer_length", "short")),
    ("Keep replies brief.", ("answer_length", "short")),
    ("Be brief.", ("answer_length", "short")),
    ("Could you be more concise?", ("answer_length", "short")),
    ("Don't ramble.", ("answer_length", "short")),
    ("Answer in one sentence.", ("answer_length", "short")),
    ("Explain it in detail please.", ("answer_length", "detailed")),
    ("Use bullet points.", ("answer_style", "bullet points")),
    ("No emojis please.", ("answer_style", "no emojis")),
    ("Reply to me in English.", ("answer_language", "English")),
    ("Please write your answers in Chinese.", ("answer_language", "Chinese")),
    ("不要太长", ("answer_length", "short")),
    ("简短点", ("answer_length", "short")),
    ("请回答得简短一些。", ("answer_length", "short")),  # 得, 一些: the person's page reader's case
    ("请简短回答", ("answer_length", "short")),
    ("回复简洁些", ("answer_length", "short")),
    ("别啰嗦，直接说重点", ("answer_length", "short")),
    ("别写那么多", ("answer_length", "short")),
    ("长话短说吧", ("answer_length", "short")),
    ("能详细点吗", ("answer_length", "detailed")),
    ("请分点回答", ("answer_style", "bullet points")),
    ("用列表的形式回答", ("answer_style", "bullet points")),
    ("别用表情", ("answer_style", "no emojis")),
    ("中文回答就行", ("answer_language", "Chinese")),
    ("请用英文回复", ("answer_language", "English")),
])
def test_answer_style_requests(text, expected):
    found = screen(list(extract_text(text)))
    assert [(c.attribute, c.value) for c in found.long_term] == [expected]
    assert found.long_term[0].kind is Kind.INSTRUCTION


@pytest.mark.parametrize("text", ["I keep it short at parties.", "We keep things simple at home.",
                                  "The movie was too long.", "这篇文章太长了"])
def test_answer_style_rules_need_a_request(text):
    assert not [c for c in extract_text(text) if c.attribute and c.attribute.startswith("answer_")]


@pytest.mark.parametrize("text, expected", [
    ("Hi! I'm Wang Fang, I live in Hangzhou and work as a nurse.",
     {("name", "Wang Fang"), ("city", "Hangzhou"), ("job", "nurse")}),
    ("I'm Tom, a software engineer at Google, living in Berlin.",
     {("name", "Tom"), ("job", "software engineer"), ("employer", "Google"), ("city", "Berlin")}),
    ("Hello, I am Brian and I teach maths.", {("name", "Brian")}),
])
def test_a_self_introduction_names_the_speaker(text, expected):
    assert expected <= {(a, v) for a, v, _ in slots(text)}


@pytest.mark.parametrize("text", ["I'm Chinese, and I like tea.", "I'm Japanese.", "Hey, I'm sorry!",
                                  "I'm American, born in Ohio.", "We met Anna. I'm Done with it."])
def test_a_nationality_or_a_word_after_im_is_not_a_name(text):
    assert not any(a == "name" for a, _, _ in slots(text)), slots(text)


@pytest.mark.parametrize("text", ["I work at home.", "I work at night.", "I work in a team of five.",
                                  "I work at the moment on a novel.", "I work in the field of AI."])
def test_a_workplace_needs_an_article_and_a_place(text):
    assert not any(attribute == "employer" for attribute, _, _ in slots(text))


def test_job_and_employer_in_one_sentence():
    found = extract_text("My name is Anna and I'm a software engineer at Google.")
    assert {(c.attribute, c.value) for c in found} == {
        ("name", "Anna"), ("job", "software engineer"), ("employer", "Google")}
    assert {c.content for c in extract_text("我叫小王，我是一名后端工程师")} == {"用户名叫小王", "用户是后端工程师"}


def test_change_markers_and_replaced_value():
    c = one("I switched from Java to Go last month.")
    assert c.change and c.replaces == "Java" and c.time == "last month"
    assert one("我改用Go了").change
    assert not one("I use Java").change


def test_likes_are_multi_valued_and_split_per_clause():
    found = extract_text("I love hiking and I hate running.")
    assert {(c.value, c.polarity) for c in found} == {("hiking", True), ("running", False)}
    assert cardinality("likes") == "multi" and cardinality("city") == "single"
    assert cardinality("skills") == "multi" and cardinality("language") == "single"


def test_pronoun_objects_are_not_likes():
    assert extract_text("I love you") == ()
    assert extract_text("I like that idea") == ()


def test_todos_in_both_languages():
    c = one("Remind me to renew my passport next week.")
    assert c.kind is Kind.TODO and c.time == "next week"
    assert c.content == "User needs to renew their passport next week"
    z = one("提醒我下周续签护照")
    assert z.kind is Kind.TODO and z.time == "下周" and z.content == "用户需要下周续签护照"
    assert one("I need to finish the report by Friday").kind is Kind.TODO


def test_habits_plans_events_are_third_person():
    assert one("I usually go to the gym every morning").content == \
        "User usually goes to the gym every morning"
    assert one("I'm planning to visit my mom next week").content == \
        "User plans to visit their mom next week"
    assert one("我每天早上跑步").content == "用户每天早上跑步"


def test_instructions():
    assert one("Always include code examples").kind is Kind.INSTRUCTION
    assert one("回答时附带代码示例").kind is Kind.INSTRUCTION


# -- credibility --------------------------------------------------------------------------

def test_joke_from_mars_is_not_long_term():
    for text in ("I'm from Mars, haha", "I'm from Mars. Haha", "我来自火星哈哈"):
        found = extract_text(text)
        assert found, text
        result = screen(found)
        assert result.long_term == (), text
        for verdict in result.dropped:
            assert verdict.verdict == "drop"
        assert all(c.confidence < 0.5 for c in result.session_only)


def test_hypotheticals_questions_and_quotes_are_dropped():
    for text in ("If I were a doctor I would live in Paris", "假如我住在北京就好了",
                 "Do I like jazz?", "My friend says I love jazz", "我朋友说我喜欢爬山"):
        found = extract_text(text)
        assert screen(found).long_term == (), text


def test_hedges_lower_confidence():
    c = one("I think I'm allergic to cats")
    assert assess(c).candidate.confidence < 0.8


def test_plain_statements_pass():
    found = extract_text("I live in Berlin and I love hiking")
    assert len(screen(found).long_term) == 2


def test_write_filter_scores_durable_over_transient():
    assert write_score(one("My name is Anna")) > write_score(one("I went to the shop today"))


def test_repetition_rule_keeps_first_mention_in_session():
    config = CredibilityConfig(require_repetition=True)
    first = extract_text("I love jazz")
    assert screen(first, config).session_only == first
    second = extract_text("I really love jazz")
    assert screen(second, config, earlier=first).long_term == second
    todo = extract_text("remind me to call mom")
    assert screen(todo, config).long_term == todo


@pytest.mark.parametrize("text, expected", [
    ("Dr. Patel left the practice, so I've been assigned to Dr. Okafor. Seems nice enough.",
     "User has been assigned to Dr. Okafor"),
    ("I live on Baker St. in London.", "User lives on Baker St. in London"),
])
def test_a_title_or_an_abbreviation_ends_no_sentence(text, expected):
    assert expected in [c.content for c in extract_text(text)]
