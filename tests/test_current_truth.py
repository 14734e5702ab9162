"""Current truth, through the public API with default settings and no LLM
(the default embedder, multilingual-e5-small): a user mentions a change of their life in
passing, then asks about now or makes a request in a later session. The memory must
know what is true now, rank it above the turns that stated the old value, and show an
old value in the prompt only labelled as past — in English, in Chinese and across them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from memstrata import Memory

OLD, NEW, LATER = (datetime(2026, 9, 3, 9, tzinfo=UTC), datetime(2026, 11, 20, 9, tzinfo=UTC),
                   datetime(2026, 12, 1, 9, tzinfo=UTC))


@pytest.fixture(scope="module")
def e5(tmp_path_factory):
    path = tmp_path_factory.mktemp("truth") / "m.db"
    with Memory(f"sqlite:///{path}", embed_on_add="inline") as memory:
        yield memory


def say(memory, user, session, said, reply="OK.", at=OLD):
    memory.add([{"role": "user", "content": said, "created_at": at.isoformat()},
                {"role": "assistant", "content": reply, "created_at": at.isoformat()}],
               user, session)
    memory.flush()


def active(memory, user):
    return [i for i in memory.list(user, limit=200)]


def memories_block(result):
    return "\n".join(m["content"] for m in result.messages if "memories recalled" in m["content"])


MOVE = {
    "en": ("Hi! I'm Wang Fang, I live in Hangzhou and work as a nurse.",
           "We moved to Shanghai last month, new apartment in Pudong.",
           "where do I live?", "Can you plan a dinner for my family this weekend?",
           "Shanghai", "Hangzhou", "where did I live before?", "until 2026-11"),
    "zh": ("你好！我叫王芳，我住在杭州，是一名护士。", "我们上个月搬到上海了，新家在浦东。",
           "我住在哪里？", "这个周末帮我给家人安排一顿晚饭吧？", "上海", "杭州",
           "我以前住在哪里？", "2026年11月之前"),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_move_ranks_the_new_city_first_and_labels_the_old_one(e5, lang):
    first, moved, ask, request, new, old, before, label = MOVE[lang]
    user = f"move-{lang}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", moved, at=NEW)
    hits = e5.search(ask, user)
    assert new in hits[0].text, [(h.score, h.text) for h in hits]
    # the turn that stated the old city never ranks above the current fact
    first_new = next(n for n, h in enumerate(hits) if new in h.text)
    assert all(n > first_new for n, h in enumerate(hits) if old in h.text and new not in h.text)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True), scores  # displayed scores in rank order
    # the prompt of a request carries the current city; an old one only labelled as past
    block = memories_block(e5.context(user, "s3", [{"role": "user", "content": request}],
                                      budget=2000))
    assert new in block, block
    for line in block.splitlines():
        if old in line and new not in line:
            assert label in line, block
    # a question about the past still finds the old value
    past = e5.search(before, user, k=5)
    assert any(old in h.text for h in past[:3]), [h.text for h in past]


CHANGES = [
    ("car-en", "I drive a Toyota Corolla.", "I sold the Corolla and bought a Tesla Model 3 last week.",
     "What car do I drive?", "Tesla", "Corolla"),
    ("job-en", "I work as a nurse at Ruijin Hospital.",
     "I quit the hospital, now I teach math at a middle school.", "What do I do for work?",
     "math", "nurse"),
    ("habit-en", "I run every morning before work.",
     "I switched to swimming in the evenings instead of running.", "What exercise do I do?",
     "swimming", "run every morning"),
    ("weight-en", "I weigh 80 kg.", "I'm down to 72 kg now.", "How much do I weigh?", "72", "80"),
    ("car-zh", "我开一辆丰田卡罗拉。", "我把卡罗拉卖了，上周买了一辆特斯拉。", "我开什么车？", "特斯拉", "卡罗拉"),
    ("job-zh", "我在阿里巴巴做产品经理。", "我已经辞职了，现在在腾讯做设计师。", "我现在做什么工作？",
     "腾讯", "阿里巴巴"),
    ("habit-zh", "我每天早上跑步。", "我现在改成晚上游泳了，不跑步了。", "我平时做什么运动？", "游泳",
     "早上跑步"),
    ("weight-zh", "我现在体重80公斤。", "我的体重已经减到72公斤了。", "我体重多少？", "72", "80"),
]


@pytest.mark.parametrize("name, first, changed, ask, new, old", CHANGES)
def test_a_change_supersedes_the_old_fact_and_its_turn(e5, name, first, changed, ask, new, old):
    user = f"chg-{name}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", changed, at=NEW)
    current = active(e5, user)
    assert not any(old in i.content and new not in i.content for i in current), \
        [i.content for i in current]
    assert any(new in i.content for i in current), [i.content for i in current]
    hits = e5.search(ask, user)
    assert new in hits[0].text, [(h.score, h.text) for h in hits]
    first_new = next(n for n, h in enumerate(hits) if new in h.text)
    assert all(n > first_new for n, h in enumerate(hits) if old in h.text and new not in h.text)


def test_a_person_is_one_person_across_languages_and_a_correction_replaces_the_age(e5):
    user = "duoduo"
    say(e5, user, "s1", "我女儿今年八岁，叫朵朵", "好的", at=OLD)
    say(e5, user, "s2", "Actually Duoduo is 9 now", "Got it.", at=NEW)
    current = active(e5, user)
    ages = [i for i in current if i.attribute == "age"]
    assert ages and all(i.value == "9" for i in ages), [(i.content, i.value) for i in current]
    assert not any(re.search(r"8岁|八岁|\b8\b", i.content) for i in current), \
        [i.content for i in current]
    assert not any(i.subject and i.subject.lower().startswith("duoduo") and i.attribute != "age"
                   for i in current), [(i.subject, i.content) for i in current]


@pytest.mark.parametrize("first, fix, old", [
    ("My daughter is 8 years old and loves drawing.", "Actually my daughter is 9, not 8.", "8"),
    ("我女儿8岁了，特别喜欢画画。", "其实我女儿是9岁，不是8岁。", "8"),
])
def test_a_correction_in_another_slot_leaves_no_old_value_active(e5, first, fix, old):
    user = f"fix-{hash(first) % 10_000}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", fix, at=NEW)
    current = active(e5, user)
    assert any("9" in i.content for i in current), [i.content for i in current]
    assert not any(re.search(rf"(?<!\d){old}(?!\d)", i.content) for i in current), \
        [i.content for i in current]


@pytest.mark.parametrize("todo, done", [
    ("Remind me to renew my passport next week.", "Good news: I renewed my passport yesterday."),
    ("提醒我下周续签护照。", "好消息，护照已经续签了。"),
    ("Remind me to renew my passport next week.", "护照已经续签好了。"),
])
def test_a_stated_completion_closes_the_todo(e5, todo, done):
    user = f"done-{hash(todo + done) % 10_000}"
    say(e5, user, "s1", todo, "Sure.", at=OLD)
    assert [i.kind.value for i in active(e5, user)].count("todo") == 1
    say(e5, user, "s2", done, "Great!", at=NEW)
    current = active(e5, user)
    assert not any(i.kind.value == "todo" for i in current), [i.content for i in current]
    assert not any("User's passport" in i.content or "Good news" in i.content for i in current)
    assert e5.resume(user).open_todos == ()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_statement_made_before_a_todo_existed_does_not_close_it(tmp_path, lang):
    """Only a todo that was open when the completion was said is closed by it: a past
    event said in September does not finish a todo set in November."""
    past, todo, done = (("I renewed my passport last year.", "Remind me to renew my passport next week.",
                         "I renewed my passport yesterday.") if lang == "en"
                        else ("去年我续签了护照，已经续签好了。", "提醒我下周续签护照。", "护照已经续签好了。"))
    # worker off: the turn's extraction runs at flush(), after the todo is remembered
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", worker="off") as memory:
        memory.add([{"role": "user", "content": past, "created_at": OLD.isoformat()},
                    {"role": "assistant", "content": "Nice.", "created_at": OLD.isoformat()}],
                   "u", "s1")
        memory.user("u").remember(todo, kind="todo")
        memory.flush()
        assert [i.content for i in active(memory, "u") if i.kind.value == "todo"] == [todo]
        # said after the todo, the same words close it
        memory.add([{"role": "user", "content": done}], "u", "s2")
        memory.flush()
        assert not [i for i in active(memory, "u") if i.kind.value == "todo"]


@pytest.mark.parametrize("first, later, kept", [
    ("I live in Hangzhou.",
     "I'm planning to move to Shanghai next year. I just got a new bike and I love it. The weather "
     "has been great for a few weeks now. Anyway, can you help me plan a budget for the move?",
     "Hangzhou"),
    ("我住在杭州。", "我打算明年搬到上海。我刚买了一辆新自行车，很喜欢。这几个星期天气一直很好。"
     "对了，你能帮我做个搬家的预算吗？", "杭州"),
])
def test_a_plan_or_a_change_word_elsewhere_in_a_long_message_ends_nothing(e5, first, later, kept):
    """A plan is not a change ("I'm planning to move" has not moved), and "just", "new" or
    "for weeks now" in other sentences of a long message do not make its statements
    changes: the stored city stays current."""
    user = f"plan-{hash(first) % 10_000}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", later, at=NEW)
    superseded = e5.list(user, filters={"statuses": ["superseded"]}, limit=50)
    assert not superseded, [i.content for i in superseded]
    assert any(kept in i.content for i in active(e5, user))


@pytest.mark.parametrize("said, bad", [
    ("I barely write Java anymore.", r"barelies"),
    ("I sold the Corolla and bought a Tesla.", r"solds|boughts"),
    ("I hardly ever eat meat these days.", r"hardlies|evers"),
])
def test_item_text_reads_as_people_write(e5, said, bad):
    user = f"text-{hash(said) % 10_000}"
    say(e5, user, "s1", "I use Java at work.", at=OLD)
    say(e5, user, "s2", said, at=NEW)
    texts = [i.content for i in active(e5, user)]
    assert not any(re.search(bad, t) for t in texts), texts


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_barely_anymore_ends_the_old_habit(e5, lang):
    first, then = (("I use Java at work.", "I barely write Java anymore.") if lang == "en"
                   else ("我平时工作用Java。", "我现在基本不写Java了。"))
    user = f"java-{lang}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", then, at=NEW)
    current = active(e5, user)
    assert not any(i.attribute == "language" and i.metadata.get("polarity", True)
                   for i in current), [i.content for i in current]


@pytest.mark.parametrize("fact, forget, ask, words", [
    ("I work as a nurse at Ruijin Hospital.", "Please forget my work.", "where do I work?",
     ("Ruijin", "nurse")),
    ("我在瑞金医院当护士。", "忘掉我的工作吧。", "我在哪里工作？", ("瑞金", "护士")),
    ("I work as a nurse at Ruijin Hospital.", "忘掉我的工作吧。", "where do I work?",
     ("Ruijin", "nurse")),
])
def test_forget_my_work_forgets_the_facts_and_the_turns(e5, fact, forget, ask, words):
    user = f"forget-{hash(fact + forget) % 10_000}"
    say(e5, user, "s1", fact, at=OLD)
    say(e5, user, "s2", forget, "Done.", at=NEW)
    hits = e5.search(ask, user, k=20)
    assert not any(w in h.text for h in hits for w in words), [h.text for h in hits]
    assert not any(w in i.content for i in active(e5, user) for w in words)


@pytest.mark.xfail(strict=True, reason="a Chinese question reads an English memory's cosine on the "
                   "Chinese band; a band per direction scored unrelated English memories too "
                   "(docs/retrieval.md)")
def test_a_chinese_question_finds_a_fact_stated_in_english(e5):
    """A Chinese question of an English memory scores 0.00: its cosine is read on the
    Chinese band."""
    user = "cross"
    say(e5, user, "s1", "I live in Hangzhou.", at=OLD)
    hits = e5.search("我住在哪里？", user)
    assert hits and "Hangzhou" in hits[0].text
    assert hits[0].score > 0.05, [(h.score, h.text) for h in hits]


def test_a_new_plain_statement_does_not_overwrite_an_unrelated_one(e5):
    """Two statements that no rule gave a value are not "the same value": on main the
    second overwrote the first ("User keeps bees on their roof" was lost)."""
    user = "plain"
    say(e5, user, "s1", "I keep bees on my roof.", at=OLD)
    say(e5, user, "s2", "I play the piano every evening.", at=NEW)
    texts = sorted(i.content for i in active(e5, user))
    assert texts == ["User keeps bees on their roof", "User plays the piano every evening"], texts


@pytest.mark.parametrize("first, then, new, old", [
    ("I go to bed at midnight.", "These days I go to bed at 10 pm.", "10 pm", "midnight"),
    ("我工作中写Java。", "最近我工作中写Go。", "Go", "Java"),
])
def test_a_short_new_value_is_a_change_not_a_restatement(e5, first, then, new, old):
    """Every word of the old fact is in the new one but the value ("10 pm", "Go"): before,
    it was taken for the same fact said again and the old value stayed current."""
    user = f"short-{hash(first) % 10_000}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", then, at=NEW)
    texts = [i.content for i in active(e5, user)]
    assert any(new in t for t in texts) and not any(old in t for t in texts), texts


LATEST = [  # a change said without any word of a change: only the question says it is one slot
    ("dentist-en", "My dentist is Dr Alvarez on Elm Street, she's very gentle.",
     "Had my cleaning with Dr Huang at the Riverside clinic today, really liked her.",
     "Who is my dentist?", "Huang"),
    ("gym-zh", "我每周去三次力美健身，就在公司楼下。", "办了张超级猩猩的卡，离家近，周末也能去。",
     "我在哪家健身房锻炼？", "超级猩猩"),
]


@pytest.mark.parametrize("user, first, later, ask, new", LATEST)
def test_the_latest_statement_of_what_is_asked_ranks_first(e5, user, first, later, ask, new):
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", later, at=NEW)
    hits = e5.search(ask, user)
    assert hits and new in hits[0].text, [(h.score, h.text) for h in hits]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    with_off = Memory(e5.settings.store, embed_on_add="inline", latest_ratio=0)
    with with_off:  # the same store without the pass: the first statement ranked first
        assert new not in with_off.search(ask, user)[0].text


@pytest.mark.parametrize("lang, first, moved, request_, new, old", [
    ("en", "Hi! I'm Li Na and I live in Chengdu.", "We moved to Xiamen last month.",
     "Can you suggest a restaurant near me for Friday?", "Xiamen", "Chengdu"),
    ("zh", "我叫李娜，我住在成都。", "我们上个月搬到厦门了。", "周五帮我推荐一家附近的餐厅吧？", "厦门", "成都"),
])
def test_a_request_that_depends_on_where_the_user_lives_gets_the_current_city(e5, lang, first, moved,
                                                                                  request_, new, old):
    """"Restaurants near me" names no city: the profile's current facts carry it."""
    user = f"near-{lang}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", moved, at=NEW)
    result = e5.context(user, "s3", [{"role": "user", "content": request_}])
    profile = result.messages[0]["content"]
    assert new in profile and old not in profile, profile
    assert ("Facts as of now" if lang == "en" else "目前情况") in profile



@pytest.mark.parametrize("lang, moved, other, new", [
    ("en", "We moved to Shanghai last month, new apartment in Pudong.",
     "Honestly I barely drive my Corolla anymore, I take the metro everywhere now.", "Shanghai"),
    ("zh", "我们上个月搬到厦门了。", "我现在基本不开车了，出门都坐地铁。", "厦门"),
])
def test_a_change_of_something_else_does_not_end_where_the_user_lives(e5, lang, moved, other, new):
    """A new-user walk found it: the metro sentence (a change, said by meaning close to
    living somewhere) ended "User lives in Shanghai", and the move turn was shown as past."""
    user = f"metro-{lang}"
    say(e5, user, "s1", moved, at=OLD)
    say(e5, user, "s2", other, at=NEW)
    current = [i.content for i in e5.list(user) if i.attribute == "city"]
    assert current and new in current[0], [(i.status.value, i.content) for i in e5.list(
        user, filters={"statuses": ["active", "superseded"]})]
    assert new in e5.profile(user).facts[0]


UNRECOGNISED = {  # a change the write path does not recognise: the question says it is one slot
    "en": ("I'm driving a Mazda 3 at the moment. Any tips for cheaper insurance?",
           "Just picked up my new car, a Kia EV6 — charging it at home is so easy",
           "What car do I drive?", "Kia", "Mazda", "until 2026-11"),
    "zh": ("我用的是华为Mate 40，电池越来越不行了，有什么办法吗？", "终于换了iPhone 15，拍照好太多了",
           "我现在用什么手机？", "iPhone", "华为", "2026年11月之前"),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_news_of_a_new_value_labels_the_earlier_statement_in_the_prompt(e5, lang):
    first, later, ask, new, old, label = UNRECOGNISED[lang]
    user = f"unrecognised-{lang}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", later, at=NEW)
    block = memories_block(e5.context(user, "s3", [{"role": "user", "content": ask}]))
    assert new in block
    shown = [line for line in block.splitlines() if old in line]
    assert shown and all(label in line for line in shown), block


@pytest.mark.parametrize("lang, first, later, ask, kept", [
    ("en", "My dog Max chewed through another lead, any sturdy brands?",
     "We just got a new kitten!! Her name is Luna and she's tiny", "What pets do I have?", "Max"),
    ("zh", "我平时喜欢画水彩，推荐几个入门画笔吧", "最近又迷上了做陶艺，周末去工作室拉坯", "我有哪些爱好？", "水彩"),
])
def test_a_new_value_that_joins_the_old_one_labels_nothing(e5, lang, first, later, ask, kept):
    user = f"joins-{lang}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", later, at=NEW)
    block = memories_block(e5.context(user, "s3", [{"role": "user", "content": ask}]))
    shown = [line for line in block.splitlines() if kept in line]
    assert shown and not any(re.search(r"until \d{4}-\d{2}|年\d{1,2}月之前", line) for line in shown), block


@pytest.mark.parametrize("first, then, ask, new", [
    ("I drink black tea in the afternoon.", "I gave up black tea; it's rooibos every afternoon now.",
     "What do I drink in the afternoon?", "rooibos"),
    ("我中午一般吃食堂。", "不吃食堂了，中午都自己带饭，省钱。", "我中午吃什么？", "带饭"),
])
def test_an_item_that_leaves_out_the_new_value_is_shown_as_the_user_said_it(e5, first, then, ask, new):
    """The write path keeps "User gave up black tea" / "用户不再吃食堂" of the change and
    drops what replaced it; shown as the item, the first hit and the prompt lost the new
    value (before: "User gave up black tea" first, no "rooibos" in it)."""
    user = f"own-words-{hash(first) % 10_000}"
    say(e5, user, "s1", first, at=OLD)
    say(e5, user, "s2", then, at=NEW)
    hits = e5.search(ask, user)
    assert hits and new in hits[0].text, [h.text for h in hits]
    assert new in memories_block(e5.context(user, "s3", [{"role": "user", "content": ask}]))


def test_an_item_a_person_corrected_is_not_shown_in_the_old_words(e5):
    """An edited item's text is the editor's: it is never replaced by its source turn."""
    user = "own-words-edited"
    say(e5, user, "s1", "I live in Hangzhou and work as a nurse.", at=OLD)
    item = next(i for i in active(e5, user) if "Hangzhou" in i.content)
    e5.update(item.id, user, content="User lives in Shanghai")
    texts = [h.text for h in e5.search("Where do I live?", user)]
    assert any("Shanghai" in t for t in texts) and not any("Hangzhou" in t for t in texts
                                                           if "[user]" not in t), texts


def test_an_unrelated_memory_in_the_other_language_does_not_compete(e5):
    """`memstrata demo`: with the cross-language band starting one deviation above the
    centre, "User uses Go" scored 0.16 for "护照的事情", took part in the latest-statement
    pass as a statement of the same slot and, said later, went first."""
    user = "cross-unrelated"
    say(e5, user, "s1", "提醒我下周三之前续签护照。", "好的。", at=OLD)
    say(e5, user, "s2", "Update: I switched from Java to Go last week, for the routing service.",
        "Got it.", at=NEW)
    hits = e5.search("护照的事情", user)
    assert hits and "护照" in hits[0].text, [(h.score, h.text) for h in hits]
