"""A write path that follows the conversation — the bilingual scenario suite,
through the public API on the real default embedder (multilingual-e5-small) and a real
SQLite file, asserting final state and history. One case per promise of the write
path; the pure parts (clauses, numbers, dates, forget requests, grounding) are tested
as functions at the end.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from memstrata import Memory, Status
from memstrata.layers.semantic.clauses import clauses
from memstrata.layers.semantic.decide import forget_request
from memstrata.layers.semantic.extract import extract_text
from memstrata.layers.semantic.llm import llm_candidates
from memstrata.layers.semantic.numbers import parse_number, resolve_date
from memstrata.types import Message, Role, utcnow

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def memory(tmp_path_factory) -> Memory:
    path = tmp_path_factory.mktemp("p8") / "m.db"
    with Memory(f"sqlite:///{path}") as m:  # the default embedder: local:e5-small
        yield m


def say(memory: Memory, user: str, *turns, session: str = "s1") -> None:
    """Each turn as its own add() (user-only, as a chat UI would send it), then wait."""
    for turn in turns:
        memory.user(user).add(turn if isinstance(turn, list) else [{"role": "user", "content": turn}],
                              session)
    memory.flush(timeout=120)


def every(memory: Memory, user: str):
    return memory.user(user).list(filters={"statuses": ["active", "superseded", "done"]}, limit=500)


def one(memory: Memory, user: str, **slots):
    found = [i for i in every(memory, user) if all(getattr(i, k) == v for k, v in slots.items())]
    assert len(found) == 1, (slots, [(i.attribute, i.value, i.status) for i in every(memory, user)])
    return found[0]


# -- Why 1 / Build 1, 3: a main tool stated without "my", then a change -------------------

def test_a_stated_tool_without_my_is_superseded_by_the_switch(memory: Memory) -> None:
    say(memory, "zh-tool", "做前端的，常用语言是TypeScript", "我们已经换成Rust了，现在很少写TypeScript了")
    ts = one(memory, "zh-tool", attribute="language", value="TypeScript")
    rust = one(memory, "zh-tool", attribute="language", value="Rust")
    assert ts.status is Status.SUPERSEDED and rust.status is Status.ACTIVE
    assert rust.supersedes == ts.id and rust.version == 2
    assert [v.op for v in memory.user("zh-tool").history(ts.id)] == ["create", "supersede"]
    assert one(memory, "zh-tool", attribute="job").value == "前端"


# -- Build 1: every predicate family, in both languages ------------------------------------

@pytest.mark.parametrize("said, attribute, value", [
    ("My name is Lin", "name", "Lin"), ("我叫林小雨", "name", "林小雨"),
    ("I moved to Boston last year", "city", "Boston"), ("我搬到了杭州", "city", "杭州"),
    ("I work as a nurse", "job", "nurse"), ("我是一名护士", "job", "护士"),
    ("I have a dog named Max", "family", "a dog named Max"), ("我有一只猫", "family", "一只猫"),
    ("I'm a vegetarian", "diet", "vegetarian"), ("我对海鲜过敏", "allergies", "海鲜"),
    ("I hate horror movies", "likes", "horror movies"), ("我喜欢爬山", "likes", "爬山"),
    ("I'm good at Python", "skills", "Python"), ("我最近在学吉他", "learning", "吉他"),
    ("我每天早上跑步", "habits", "每天早上跑步"),
    ("I'm planning to visit Japan next month", "plans", "visit Japan next month"),
    ("Remind me to call mom tomorrow", "todo", "call mom tomorrow"),
])
def test_each_predicate_family_in_both_languages(memory: Memory, said, attribute, value) -> None:
    user = f"family-{abs(hash(said))}"
    say(memory, user, said)
    item = one(memory, user, attribute=attribute)
    assert item.value == value and item.subject == "user" and item.status is Status.ACTIVE
    assert [v.op for v in memory.user(user).history(item.id)] == ["create"]


# -- Build 1, 3: negation, change and cessation markers end the slot they name ------------

@pytest.mark.parametrize("before, after, attribute, old, new", [
    ("I like jazz", "I no longer like jazz", "likes", "jazz", "jazz"),
    ("我喜欢爵士乐", "我不再喜欢爵士乐", "likes", "爵士乐", "爵士乐"),
    ("我爱喝咖啡", "我基本不喝咖啡了", "food", "咖啡", "咖啡"),
    ("我平时用Java", "我改用Go了", "language", "Java", "Go"),
    ("I use Java at work", "I switched to Kotlin", "language", "Java", "Kotlin"),
    ("我爱吃牛排", "医生让我以后别吃牛排了", "food", "牛排", "牛排"),
])
def test_change_and_cessation_markers_supersede_with_history(memory: Memory, before, after,
                                                             attribute, old, new) -> None:
    user = f"stop-{abs(hash(after))}"
    say(memory, user, before, after)
    items = every(memory, user)
    was = next(i for i in items if i.value == old and i.status is Status.SUPERSEDED)
    now = next(i for i in items if i.value == new and i.status is Status.ACTIVE)
    assert now.attribute == attribute and now.supersedes == was.id and now.version == 2
    assert [v.op for v in memory.user(user).history(was.id)] == ["create", "supersede"]
    if old == new:  # a cessation: the active item says it stopped
        assert now.metadata["polarity"] is False


# -- Why 2 / Build 3: cessation said through someone else's advice -------------------------

def test_advice_ends_the_liking_it_covers(memory: Memory) -> None:
    say(memory, "steak", "I love steak", "My cardiologist says no more red meat for me")
    steak = one(memory, "steak", attribute="likes", value="steak")
    meat = one(memory, "steak", attribute="food", value="red meat")
    assert steak.status is Status.SUPERSEDED and meat.status is Status.ACTIVE
    assert meat.metadata["polarity"] is False and meat.supersedes == steak.id
    assert meat.metadata["scenario"] == "advice:cardiologist"
    assert memory.user("steak").history(steak.id)[-1].reason == "slot.cessation"


# -- Why 3 / Build 1, 3: adverbs between 我 and the verb; ages and their corrections -------

def test_an_adverb_between_wo_and_the_verb(memory: Memory) -> None:
    say(memory, "adverb", "我周末一般最爱去钓鱼")
    assert one(memory, "adverb", attribute="likes").value == "钓鱼"


def test_an_age_and_its_correction_through_a_pronoun(memory: Memory) -> None:
    say(memory, "age", "my son just turned 5", "sorry, he's 6, not 5")
    five = one(memory, "age", attribute="age", value="5")
    six = one(memory, "age", attribute="age", value="6")
    assert five.subject == six.subject == "son"
    assert five.status is Status.SUPERSEDED and six.status is Status.ACTIVE
    assert six.metadata["replaces"] == "5" and six.content == "User's son is 6 years old"


@pytest.mark.parametrize("first, fix, old, new", [
    ("I live in Munich", "Actually I live in Berlin, not Munich", "Munich", "Berlin"),
    ("我住在上海", "不是上海，是北京", "上海", "北京"),
    ("I work at Google", "I was wrong, I work at Microsoft", "Google", "Microsoft"),
])
def test_corrections_supersede_the_right_slot(memory: Memory, first, fix, old, new) -> None:
    user = f"fix-{old}"
    say(memory, user, first, fix)
    was, now = one(memory, user, value=old), one(memory, user, value=new)
    assert was.status is Status.SUPERSEDED and now.status is Status.ACTIVE
    assert now.attribute == was.attribute and now.supersedes == was.id


# -- Why 4 / Build 2: facts about other people ---------------------------------------------

def test_other_people_keep_their_subject_are_searchable_and_in_the_profile(memory: Memory) -> None:
    say(memory, "family", "My husband is diabetic", "我的上司今年44岁，是银行行长",
        "张伟是我的表弟，其家乡是北京。")
    lin = memory.user("family")
    husband = one(memory, "family", subject="husband")
    assert husband.attribute == "health" and husband.content == "User's husband is diabetic"
    assert one(memory, "family", subject="上司", attribute="age").value == "44"
    assert one(memory, "family", subject="张伟", attribute="attr:家乡").value == "北京"
    assert all(i.subject != "user" for i in every(memory, "family"))  # none is the user's own
    assert any(h.id == husband.id for h in lin.search("diabetic", k=5))
    profile = lin.profile()
    assert profile.role is None and profile.preferences == ()
    assert any(line.startswith("husband: ") and "diabetic" in line for line in profile.people)
    assert any(line.startswith("上司: ") for line in profile.people)
    assert "People in the user's life" in lin.context(messages=[{"role": "user", "content": "hi"}]
                                                       ).messages[0]["content"]


@pytest.mark.parametrize("said, subject, content", [
    ("My sister Mia works at a bakery.", "Mia", "User's sister Mia works at a bakery"),
    ("I work at a bakery.", "user", "User works at a bakery"),
    ("我妹妹小美在面包店工作。", "小美", None),
])
def test_a_workplace_without_a_proper_name_is_remembered(memory: Memory, said, subject,
                                                         content) -> None:
    # found by trying the README path as a new user: "works at a bakery" left no item
    user = f"work-{abs(hash(said))}"
    say(memory, user, said)
    item = one(memory, user, attribute="employer")
    assert item.subject == subject and (content is None or item.content == content)


def test_a_named_friend_and_a_resumptive_pronoun_keep_their_subject(memory: Memory) -> None:
    say(memory, "friend", "My friend Tom lives in Boston. He is allergic to nuts.",
        "我的上司，他老家是重庆的。", "我的朋友小王住在成都")
    assert {(i.subject, i.attribute, i.value) for i in every(memory, "friend")} == {
        ("Tom", "city", "Boston"), ("Tom", "allergies", "nuts"), ("上司", "hometown", "重庆"),
        ("小王", "city", "成都")}
    tom = one(memory, "friend", subject="Tom", attribute="allergies")
    assert tom.content == "User's friend Tom is allergic to nuts"
    lin = memory.user("friend")
    profile = lin.profile()
    assert not any("nuts" in line or "Boston" in line for line in profile.current)
    assert any(line.startswith("Tom: ") and "nuts" in line for line in profile.people)
    assert type(profile).from_dict(profile.to_dict()) == profile  # people survive the round trip


# -- Why 5 / Build 3: a stated completion marks the todo done, undoably --------------------

@pytest.mark.parametrize("todo, done", [
    ("Remind me to book a dentist appointment", "I already booked the dentist"),
    ("提醒我约牙医", "牙医已经约好了"),
])
def test_a_stated_completion_marks_the_todo_done_as_an_undoable_version(memory, todo, done) -> None:
    user = f"done-{todo[:4]}"
    say(memory, user, todo, done)
    [item] = [i for i in every(memory, user) if i.kind.value == "todo"]
    assert item.status is Status.DONE and item.version == 2
    assert memory.user(user).history(item.id)[-1].reason == "said done"
    assert memory.user(user).resume().open_todos == ()
    assert memory.user(user).undo(item.id).status is Status.ACTIVE


# -- Why 6 / Build 4: one item across languages, by value similarity -----------------------

def test_the_same_value_in_two_languages_is_one_boosted_item(memory: Memory) -> None:
    say(memory, "lactose", "I'm lactose intolerant", "我乳糖不耐受")
    [item] = every(memory, "lactose")
    assert item.confidence > 0.8 and len(item.source_message_ids) == 2
    assert memory.user("lactose").history(item.id)[-1].reason == "slot.same_value"
    say(memory, "lactose", "我对花生过敏")  # a different value of the same family stays apart
    assert len(every(memory, "lactose")) == 2


# -- Why 7 / Build 5: spoken forgetting that forgets ---------------------------------------

def _job_results(memory: Memory, user: str) -> list[dict]:
    return [j.result for j in memory.user(user).jobs() if j.result and "forgotten" in j.result]


def test_forget_that_in_the_same_add_as_the_statement(memory: Memory) -> None:
    say(memory, "same-add", [{"role": "user", "content": "My phone number is 555-0134"},
                             {"role": "user", "content": "Actually, could you please forget that?"}])
    lin = memory.user("same-add")
    assert every(memory, "same-add") == []
    assert [m.content for m in lin.messages("s1")] == ["Actually, could you please forget that?"]
    assert lin.search("555-0134", mode="lexical") == []
    [result] = _job_results(memory, "same-add")
    assert result["forgotten"] == {"requests": 1, "items": 0, "statements": 1, "turns": 1}
    assert "555" not in str(result)


@pytest.mark.parametrize("statement, ask, secret", [
    ("My phone number is 555-0199", "Please forget my phone number", "555-0199"),
    ("我的手机号是13800138000", "麻烦忘掉我刚才说的手机号吧", "13800138000"),
])
def test_forget_a_described_item_deletes_it_and_the_turns_that_state_it(tmp_path: Path, statement,
                                                                         ask, secret) -> None:
    path = tmp_path / "forget.db"
    with Memory(f"sqlite:///{path}") as memory:
        say(memory, "f", statement, "I like tennis")
        assert any(secret in i.content for i in every(memory, "f"))
        say(memory, "f", ask)
        lin = memory.user("f")
        assert not any(secret in i.content for i in every(memory, "f"))
        assert [m.content for m in lin.messages("s1")] == ["I like tennis"]
        assert lin.search(secret, mode="lexical") == [] and lin.search(secret) == [] or \
            all(secret not in h.text for h in lin.search(secret))
        [result] = _job_results(memory, "f")
        assert result["forgotten"]["items"] == 1 and result["forgotten"]["turns"] == 2
        memory.compact()
    for suffix in ("", "-wal"):
        file = Path(str(path) + suffix)
        if file.exists():
            assert secret.encode() not in file.read_bytes(), suffix


# -- Build 7: no statement left waiting; a short session leaves a summary and todos -------

def test_a_single_user_only_add_is_extracted_and_a_short_session_resumes(memory: Memory) -> None:
    say(memory, "short", "Remind me to renew my passport")
    assert [i.kind.value for i in every(memory, "short")] == ["todo"]
    lin = memory.user("short")
    lin.archive_session("s1")
    memory.flush(timeout=120)
    resume = lin.resume()
    assert resume.session_id == "s1" and "passport" in resume.summary.goal
    assert resume.open_todos == ("User needs to renew their passport",)


# -- Build 8: consolidation as a durable, idempotent job -----------------------------------

def test_archive_consolidates_a_session_once(memory: Memory) -> None:
    say(memory, "sleep", "We decided to use Postgres for the new service.", "I live in Oslo")
    lin = memory.user("sleep")
    lin.archive_session("s1")
    memory.flush(timeout=120)
    [stage] = [i for i in lin.list(limit=100) if "stage" in i.tags]
    assert stage.attribute == "stage:s1" and "Postgres" in stage.content and "Oslo" in stage.content
    assert any(h.id == stage.id for h in lin.search("what did we decide about the database", k=10))
    lin.archive_session("s1")  # again: nothing changes
    memory.flush(timeout=120)
    results = [j.result for j in lin.jobs() if j.kind == "consolidate"]
    assert len(results) == 2 and results[0]["stage"] is True and results[1]["skipped"] is True
    assert lin.get(stage.id).version == 1


# -- Build 1: relative dates and bounded extraction ----------------------------------------

def test_relative_dates_resolve_against_the_message_time(memory: Memory) -> None:
    sent = datetime(2024, 5, 8, 9, 0, tzinfo=UTC)
    say(memory, "dates", [{"role": "user", "content": "I went hiking with my sister yesterday",
                           "created_at": sent.isoformat()}])
    [item] = every(memory, "dates")
    assert item.metadata["date"] == "2024-05-07"


def test_a_100k_character_message_gives_a_bounded_number_of_candidates() -> None:
    text = "I like tea. My boss is called Anna. 我喜欢爬山。" * 3000  # ~100k characters
    found = extract_text(text)
    assert 0 < len(found) <= 60


# -- the pure parts --------------------------------------------------------------------

def test_clauses_find_who_each_clause_is_about() -> None:
    got = [(c.subject, c.body) for c in clauses(
        "My husband is diabetic and I love steak. 我的上司他在深圳上班，是银行行长")]
    assert got == [("husband", "I am diabetic"), ("user", "I love steak."),
                   ("上司", "我在深圳上班"), ("上司", "我是银行行长")]
    assert clauses("我们已经换成Rust了")[0].about_user
    assert clauses("My cardiologist says no more red meat for me")[0].advice == "cardiologist"


def test_numbers_and_dates() -> None:
    assert [parse_number(x) for x in ("5", "five", "twenty-one", "四十五", "两", "x")] == \
        [5, 5, 21, 45, 2, None]
    at = datetime(2024, 5, 8, tzinfo=UTC)  # a Wednesday
    assert resolve_date("last friday", at) == date(2024, 5, 3)
    assert resolve_date("3 days ago", at) == date(2024, 5, 5)
    assert resolve_date("明天", at) == date(2024, 5, 9)
    assert resolve_date("下周三", at) == date(2024, 5, 15)
    assert resolve_date("三天前", at) == date(2024, 5, 5)
    assert resolve_date("every week", at) is None


@pytest.mark.parametrize("text, query", [
    ("Forget that", ""), ("could you please not remember what I just said?", ""),
    ("I'd rather you didn't keep that, thanks", ""), ("Please forget my phone number", "phone number"),
    ("忘掉我刚才说的电话号码", "电话号码"), ("刚才那句别记了", ""), ("把我的手机号删了吧", "手机号"),
    ("forget it", None), ("Don't forget my keys", None), ("remove the header", None),
    ("I forgot my keys", None),
])
def test_polite_and_hedged_forget_requests(text: str, query: str | None) -> None:
    assert forget_request(text) == query


def test_grounding_rejects_what_only_the_assistant_said() -> None:
    window = [Message(Role.USER, "Hi Lin, nice name! My back hurts", utcnow(), id="u1"),
              Message(Role.ASSISTANT, "Hi! My name is Lin. What brings you to my office today?",
                      utcnow(), id="a1")]
    items = [{"kind": "fact", "content": "User's name is Lin", "value": "Lin"},
             {"kind": "fact", "content": "User has back pain", "value": "back pain"}]
    cands, rejected = llm_candidates(items, window, own_ids=["u1", "a1"], source="llm:x")
    assert [c.content for c in cands] == ["User has back pain"]
    assert rejected[0].reason == "grounded in the assistant's turn, not the user's"
