"""``memstrata bench updates``: knowledge updates — does the memory know what is true now?

A generated bilingual suite. Each case is a user who states a fact in one session
("I live in Hangzhou" / "我住在杭州"), states a change of it in passing in a later one,
and in a third session asks about now. 25 slots (22 of the user's own life, 3 of other
people: a sister's city, a daughter's age, a husband's job) × 8 ways of saying a change
per language (:data:`CHANGE_EN`, :data:`CHANGE_ZH`: a plain "now", "these days", a
cessation and the new value, a correction "not X", "since last month", the slot's own
verb — moved, sold, quit, switched —, "things changed", "switched… instead"), plus the
same changes said in the other language than the fact (cross-language). Completions
(a todo, then "I renewed my passport yesterday" in either language) are a second table.

**The templates are split in two**: even-numbered ways of saying a change are the
development half (the rules and thresholds of :mod:`memstrata.layers.semantic.state`
were tuned on them), odd-numbered ones the held-back half (``--half held``, the default).
Four more sets, :data:`UNSEEN` (``--half unseen`` … ``unseen4``), were written
by hand by people who had not seen the rules: other slots, other people, everyday phrasing.
Each was measured once when it was written and its failures then read, so only the newest
is the unseen measure; the earlier ones are development data.

Metrics per system (memstrata, and the same retriever with only its lexical or only
its dense list): *current at top 1* (the first hit holds the new value), *stale above
current* (a hit holding only the old value ranks above the first one holding the new
value, or no hit holds the new value and one holds the old). For memstrata also:
*current in context* (the new value is in the ``context()`` memories of the question
asked in a new session, and an old value shown there is labelled as past), *ill-formed
items* (:func:`ill_formed` over every item the suite wrote), the *memory share* of the
context's tokens, and the share of todos a stated completion closed. With every half, the
seeds' measures of the prompt over their own hand-written cases (:func:`recall_needs`):
*preference hit rate* and *cross-session task resumption*; and the other side of every
change, :func:`no_change_controls`: 170 pairs of statements written by hand where the later
one does *not* replace the earlier (a second pet, a detail, a change of another slot, an
event), where the earlier value must stay in the prompt as current, not labelled as past.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..layers.semantic.state import is_negation
from ..types import Layer, Scope
from ..requests import SearchRequest
from .common import SYSTEMS, bench_memory, search_as

__all__ = ["run_updates", "cases", "unseen_cases", "ill_formed", "SLOTS", "CHANGE_EN", "CHANGE_ZH", "Case"]

T0 = datetime(2026, 6, 2, 9, tzinfo=UTC)


@dataclass(frozen=True)
class Slot:
    """One slot in both languages. ``en``/``zh`` are predicates after "I"/"我" with a
    ``{v}`` for the value; ``verb_en``/``verb_zh`` the slot's own way of saying it
    changed (``{old}``, ``{new}``); ``neg_zh`` the Chinese "no longer" form when
    "不再" + predicate does not read."""

    name: str
    en: str
    zh: str
    old_en: str
    new_en: str
    old_zh: str
    new_zh: str
    ask_en: str
    ask_zh: str
    verb_en: str
    verb_zh: str
    neg_zh: str = "不再{p}了"
    neg_en: str = "don't {p} anymore"


SLOTS: tuple[Slot, ...] = (
    Slot("city", "live in {v}", "住在{v}", "Hangzhou", "Shanghai", "杭州", "上海",
         "Where do I live?", "我住在哪里？", "We moved to {new} last month.", "我们上个月搬到{new}了。"),
    Slot("employer", "work at {v}", "在{v}上班", "Alibaba", "Tencent", "阿里巴巴", "腾讯",
         "Where do I work?", "我在哪里上班？", "I left {old} and joined {new}.",
         "我从{old}离职了，去了{new}。"),
    Slot("job", "work as a {v}", "当{v}", "nurse", "teacher", "护士", "老师",
         "What is my job?", "我是做什么工作的？", "I changed careers, I'm a {new} now.",
         "我转行当{new}了。"),
    Slot("car", "drive a {v}", "开一辆{v}", "Toyota Corolla", "Tesla Model 3", "丰田卡罗拉", "特斯拉",
         "What car do I drive?", "我开什么车？", "I sold the {old} and bought a {new}.",
         "我把{old}卖了，换了一辆{new}。"),
    Slot("weight", "weigh {v}", "体重{v}", "80 kg", "72 kg", "80公斤", "72公斤",
         "How much do I weigh?", "我体重多少？", "I'm down to {new} after the diet.",
         "减肥以后我的体重降到{new}了。", neg_zh="体重已经不是{p_old}了"),
    Slot("phone", "use {v}", "用{v}", "an iPhone", "a Pixel", "苹果手机", "华为手机",
         "What phone do I use?", "我用什么手机？", "I switched from {old} to {new}.",
         "我把{old}换成{new}了。"),
    Slot("code", "write {v} at work", "工作中写{v}", "Java", "Go", "Java", "Go",
         "Which programming language do I use at work?", "我工作用什么编程语言？",
         "Our team migrated from {old} to {new}, so that's what I write.",
         "我们组从{old}迁到{new}了，我现在主要写{new}。"),
    Slot("gym", "go to the gym in the {v}", "{v}去健身房", "mornings", "evenings", "早上", "晚上",
         "When do I go to the gym?", "我一般什么时候去健身房？",
         "I moved my gym time to the {new}.", "我把健身时间改到{new}了。"),
    Slot("diet", "follow a {v} diet", "坚持{v}饮食", "vegetarian", "keto", "素食", "生酮",
         "What diet do I follow?", "我现在是什么饮食习惯？", "I gave up the {old} diet and went {new}.",
         "我放弃了{old}，改成{new}饮食了。"),
    Slot("drink", "drink {v} every morning", "每天早上喝{v}", "coffee", "green tea", "咖啡", "绿茶",
         "What do I drink in the morning?", "我早上喝什么？", "I quit {old}; it's {new} every morning.",
         "我戒了{old}，早上改喝{new}了。"),
    Slot("commute", "commute by {v}", "{v}上班", "bus", "bike", "坐公交", "骑自行车",
         "How do I get to work?", "我怎么去上班？", "I sold my bus pass, I go by {new} now.",
         "我不坐公交了，改成{new}了。", neg_zh="不再{p}了"),
    Slot("sport", "play {v} on weekends", "周末打{v}", "tennis", "badminton", "网球", "羽毛球",
         "What sport do I play on weekends?", "我周末打什么球？", "I swapped {old} for {new}.",
         "我把{old}换成{new}了。"),
    Slot("pet", "have a {v}", "养了一只{v}", "cat", "dog", "猫", "狗",
         "What pet do I have?", "我养了什么宠物？", "My {old} went to my parents, and we adopted a {new}.",
         "我的{old}送给爸妈了，我们新养了一只{new}。"),
    Slot("study", "study {v}", "学{v}", "law", "medicine", "法律", "医学",
         "What do I study?", "我学的是什么专业？", "I transferred from {old} to {new}.",
         "我从{old}转到{new}专业了。"),
    Slot("bedtime", "go to bed at {v}", "{v}睡觉", "midnight", "10 pm", "半夜十二点", "晚上十点",
         "When do I go to bed?", "我一般几点睡觉？", "I moved my bedtime to {new}.",
         "我把睡觉时间提前到{new}了。"),
    Slot("salary", "earn {v} a month", "每个月挣{v}", "8000 yuan", "12000 yuan", "8000元", "12000元",
         "How much do I earn a month?", "我每个月挣多少钱？", "I got a raise, it's {new} a month now.",
         "我涨工资了，现在每个月{new}。", neg_zh="每个月已经不是{p_old}了"),
    Slot("instrument", "play the {v}", "弹{v}", "piano", "guitar", "钢琴", "吉他",
         "What instrument do I play?", "我弹什么乐器？", "I stopped the {old} and picked up the {new}.",
         "我不弹{old}了，开始学{new}。"),
    Slot("browser", "use {v} as my browser", "用{v}浏览器", "Chrome", "Firefox", "Chrome", "Firefox",
         "Which browser do I use?", "我用什么浏览器？", "I ditched {old} for {new}.",
         "我把浏览器从{old}换成{new}了。"),
    Slot("bank", "bank with {v}", "在{v}办业务", "HSBC", "Citibank", "招商银行", "工商银行",
         "Which bank do I use?", "我在哪家银行办业务？", "I closed my {old} account and moved to {new}.",
         "我把{old}的账户销了，转到{new}了。"),
    Slot("lunch", "have {v} for lunch", "中午吃{v}", "noodles", "salad", "面条", "沙拉",
         "What do I usually have for lunch?", "我中午一般吃什么？", "I replaced my {old} lunches with {new}.",
         "我午饭把{old}换成{new}了。"),
    Slot("language", "take {v} lessons", "上{v}课", "Spanish", "Japanese", "西班牙语", "日语",
         "Which language am I learning?", "我在学什么外语？", "I dropped {old} and started {new}.",
         "我放弃了{old}，开始学{new}。"),
    Slot("run", "run {v} a week", "每周跑{v}", "20 km", "35 km", "20公里", "35公里",
         "How far do I run each week?", "我每周跑多少公里？", "I've built up to {new} a week.",
         "我每周的跑量已经加到{new}了。", neg_zh="每周已经不是跑{p_old}了"),
    Slot("sister_city", "", "", "Chengdu", "Beijing", "成都", "北京",
         "Where does my sister live?", "我姐姐住在哪里？", "My sister moved to {new}.",
         "我姐姐搬到{new}了。"),
    Slot("daughter_age", "", "", "8", "9", "8", "9",
         "How old is my daughter?", "我女儿几岁了？", "My daughter just turned {new}.",
         "我女儿刚过了{new}岁生日。"),
    Slot("husband_job", "", "", "Huawei", "ByteDance", "华为", "字节跳动",
         "Where does my husband work?", "我老公在哪里上班？", "My husband left {old} for {new}.",
         "我老公从{old}跳槽到{new}了。"),
)

#: the first statement of each slot: (English, Chinese) with ``{v}``
_FIRST_OTHER = {"sister_city": ("My sister lives in {v}.", "我姐姐住在{v}。"),
                "daughter_age": ("My daughter is {v} years old.", "我女儿今年{v}岁。"),
                "husband_job": ("My husband works at {v}.", "我老公在{v}上班。")}
#: ways of saying a change for the other people's slots: (English, Chinese) per template
_CHANGE_OTHER = {
    "sister_city": [("My sister lives in {new} now.", "我姐姐现在住在{new}了。"),
                    ("These days my sister lives in {new}.", "最近我姐姐住在{new}。"),
                    ("My sister doesn't live in {old} anymore, she lives in {new}.",
                     "我姐姐已经不住在{old}了，现在住在{new}。"),
                    ("Actually my sister lives in {new}, not {old}.", "其实我姐姐住在{new}，不是{old}。"),
                    ("Since last month my sister has been living in {new}.", "从上个月开始我姐姐住在{new}。"),
                    None,
                    ("Things changed for my sister, she lives in {new} these days.",
                     "跟你说一下，我姐姐如今住在{new}。"),
                    ("My sister switched cities, she's in {new} now instead.", "我姐姐后来搬去{new}了。")],
    "daughter_age": [("My daughter is {new} now.", "我女儿现在{new}岁了。"),
                     ("These days my daughter is {new} years old.", "我女儿今年已经{new}岁了。"),
                     ("My daughter isn't {old} anymore, she's {new}.",
                      "我女儿已经不是{old}岁了，现在{new}岁。"),
                     ("Actually my daughter is {new}, not {old}.", "其实我女儿是{new}岁，不是{old}岁。"),
                     ("Since her birthday last month my daughter is {new}.",
                      "上个月过完生日，我女儿{new}岁了。"),
                     None,
                     ("Time flies, my daughter is {new} years old already.",
                      "时间过得真快，我女儿都{new}岁了。"),
                     ("My daughter had her birthday, she's {new} now.", "我女儿过了生日，现在{new}岁。")],
    "husband_job": [("My husband works at {new} now.", "我老公现在在{new}上班了。"),
                    ("These days my husband works at {new}.", "最近我老公在{new}上班。"),
                    ("My husband doesn't work at {old} anymore, he's at {new}.",
                     "我老公已经不在{old}上班了，现在在{new}。"),
                    ("Actually my husband works at {new}, not {old}.", "其实我老公在{new}上班，不是{old}。"),
                    ("Since last month my husband has been working at {new}.",
                     "从上个月开始我老公在{new}上班。"),
                    None,
                    ("Big news, my husband works at {new} these days.",
                     "跟你说一下，我老公如今在{new}上班。"),
                    ("My husband switched jobs, he's at {new} now instead.", "我老公后来换到{new}上班了。")],
}

#: ways of saying a change, with the predicate ``{p_new}``/``{p_old}`` and values; index 5
#: is the slot's own verb. Even indices: development half; odd: held-back half.
CHANGE_EN: tuple[str, ...] = (
    "I {p_new} now.",
    "These days I {p_new}.",
    "Quick update: I {neg_old}, I {p_new}.",
    "Actually I {p_new}, not {old}.",
    "Since last month I {p_new}.",
    "{verb}",
    "Things changed a bit, I {p_new} these days.",
    "I switched, I {p_new} now instead.",
)
CHANGE_ZH: tuple[str, ...] = (
    "我现在{p_new}了。",
    "最近我{p_new}。",
    "我{neg_old}，现在{p_new}。",
    "其实我{p_new}，不是{old}。",
    "从上个月开始我{p_new}。",
    "{verb}",
    "跟你说一下，我如今{p_new}。",
    "我后来改成{p_new}了。",
)


@dataclass(frozen=True)
class Case:
    """One generated case: what is said when, what is asked, and the values to find."""

    slot: str
    lang: str  # the language of the change and the question
    first_lang: str  # the language of the first statement
    template: int
    first: str
    change: str
    ask: str
    old: str
    new: str
    kind: str  # "change" | "cross-language" | "other-person"
    #: the old value as the first statement said it (another language for cross-language)
    old_first: str = ""
    #: "unseen"/"unseen2" for the hand-written sets of :data:`UNSEEN`, written apart from the rules
    origin: str = "generated"

    @property
    def half(self) -> str:
        if self.origin in UNSEEN:
            return self.origin
        return "dev" if self.template % 2 == 0 else "held"


def _first(slot: Slot, lang: str) -> str:
    if slot.name in _FIRST_OTHER:
        return _FIRST_OTHER[slot.name][lang == "zh"].format(v=slot.old_zh if lang == "zh" else slot.old_en)
    if lang == "zh":
        return "我" + slot.zh.format(v=slot.old_zh) + "。"
    return "I " + slot.en.format(v=slot.old_en) + "."


def _change(slot: Slot, lang: str, n: int) -> str | None:
    old, new = (slot.old_zh, slot.new_zh) if lang == "zh" else (slot.old_en, slot.new_en)
    if slot.name in _CHANGE_OTHER:
        pair = _CHANGE_OTHER[slot.name][n]
        if pair is None:
            verb = slot.verb_zh if lang == "zh" else slot.verb_en
            return verb.format(old=old, new=new)
        return pair[lang == "zh"].format(old=old, new=new)
    if lang == "zh":
        p_old, p_new = slot.zh.format(v=old), slot.zh.format(v=new)
        neg = slot.neg_zh.format(p=p_old, p_old=old)
        return CHANGE_ZH[n].format(p_new=p_new, neg_old=neg, old=old,
                                   verb=slot.verb_zh.format(old=old, new=new))
    p_old, p_new = slot.en.format(v=old), slot.en.format(v=new)
    return CHANGE_EN[n].format(p_new=p_new, neg_old=slot.neg_en.format(p=p_old), old=old,
                               verb=slot.verb_en.format(old=old, new=new))


def cases() -> list[Case]:
    """Every case of the suite, both halves."""
    out: list[Case] = []
    for slot in SLOTS:
        kind = "other-person" if slot.name in _FIRST_OTHER else "change"
        for lang in ("en", "zh"):
            old, new = (slot.old_zh, slot.new_zh) if lang == "zh" else (slot.old_en, slot.new_en)
            ask = slot.ask_zh if lang == "zh" else slot.ask_en
            for n in range(len(CHANGE_EN)):
                change = _change(slot, lang, n)
                assert change is not None
                out.append(Case(slot.name, lang, lang, n, _first(slot, lang), change, ask, old, new, kind))
            # the change said in the other language than the fact (one per half)
            other = "en" if lang == "zh" else "zh"
            for n in (4, 5):
                change = _change(slot, lang, n)
                assert change is not None
                out.append(Case(slot.name, lang, other, n, _first(slot, other), change, ask, old, new,
                                "cross-language", slot.old_zh if other == "zh" else slot.old_en))
    return out


#: Cases written by hand, one by one, by someone who had not seen the rules of
#: :mod:`memstrata.layers.semantic` nor the templates' misses: other slots, other people,
#: everyday chat ("busy week — finally signed the lease for the flat in X"). Measured
#: once they were written (``--half unseen``). Its failures were then read to find what to
#: build next (the query-time order of :func:`memstrata.retrieval.currency.latest_first`),
#: so it is now development data, and so are ``unseen2`` and ``unseen3`` (240 cases and 40
#: completions each, by other writers who saw neither the rules nor the earlier results),
#: each read after its one measurement; ``unseen4`` (240 + 40, by a fourth writer) is the
#: unseen measure.
UNSEEN = {name: Path(__file__).with_name(f"updates_{name}.json")
          for name in ("unseen", "unseen2", "unseen3", "unseen4")}


def unseen_cases(name: str = "unseen") -> list[Case]:
    """The hand-written cases of the set ``name`` of :data:`UNSEEN`."""
    data = json.loads(UNSEEN[name].read_text(encoding="utf-8"))
    return [Case(c["slot"], c["lang"], c["first_lang"], -1, c["first"], c["change"], c["ask"],
                 c.get("old_in_lang") or c["old"], c["new"], c["kind"],
                 c["old"] if c.get("old_in_lang", c["old"]) != c["old"] else "", origin=name)
            for c in data["cases"]]


def unseen_completions(name: str = "unseen") -> list[tuple[str, str, str]]:
    """The hand-written (todo, completion, ``name``) pairs of the set ``name``."""
    data = json.loads(UNSEEN[name].read_text(encoding="utf-8"))
    return [(c["todo"], c["completion"], name) for c in data["completions"]]


COMPLETIONS: tuple[tuple[str, str, str], ...] = (
    # (todo, completion, half)
    ("Remind me to renew my passport next week.", "Good news: I renewed my passport yesterday.", "dev"),
    ("提醒我下周续签护照。", "好消息，护照已经续签了。", "dev"),
    ("Remind me to book the dentist for Friday.", "I booked the dentist this morning.", "dev"),
    ("提醒我周五之前交房租。", "房租已经交了。", "dev"),
    ("Remind me to renew my passport next week.", "护照已经续签好了。", "dev"),
    ("Remind me to call the plumber tomorrow.", "Finally called the plumber, he's coming Monday.", "held"),
    ("提醒我明天给妈妈寄生日礼物。", "给妈妈的生日礼物已经寄出去了。", "held"),
    ("I need to pay the electricity bill this week.", "Paid the electricity bill last night.", "held"),
    ("提醒我这周把车送去保养。", "车已经保养完了。", "held"),
    ("Remind me to return the library books.", "图书馆的书已经还了。", "held"),
    ("提醒我下周一交季度报告。", "I submitted the quarterly report today.", "held"),
    ("Remind me to cancel the gym membership.", "I cancelled the gym membership, finally.", "held"),
)

_BAD = re.compile(
    r"\bUser (?:User|user)\b|\bUser's User\b|用户用户|用户的用户|用户我|用户的我"
    r"|用户[^，,。的]{0,10}用户(?!的)"
    r"|\b(?:User|they|he|she) (?:(?!(?:flies|applies|relies|replies|supplies)\b)\w+lies|\w+[^e]eds|"
    r"solds|boughts|wents|tooks|mades|gots|quits|\w+ings)\b"
    r"|\bUser (?:am|are|have|do|don't|go|were)\b|\b(?:their|User's) (?:their|User's)\b"
    r"|\b(?:thes|ands|ofs|ors|tos|wannas|gonnas)\b|\w+(?:ment|tion|ness)ses\b|\bthey am\b"
    r"|\bUser['’](?:ve|m|d|ll)\b|^User [A-Z][a-z]|^我|^用户是[啊呀吧嘛]"
    r"|\b(?:should|can't|cannot|will|would|must) (?:\w+ly )?(?!is\b|has\b|was\b|does\b)\w+[^s'’]s\b"
    r"|[。.]\s*[。.]|，，|^[^\w\"“'‘]|[,，]$")


def ill_formed(text: str) -> bool:
    """An item text no person would write: a doubled subject ("User User", "用户我"), a
    broken verb ("barelies", "solds", "User have", "sort ofs", "should starts", "they am"),
    a contraction left on the subject ("User've"), a capital after it ("User Got"), the
    speaker's own "我" at the start, a dangling comma, an empty start."""
    return bool(_BAD.search(text.strip())) or len(text.strip()) < 3


def _say(memory: Any, user: str, session: str, text: str, at: datetime) -> None:
    memory.add([{"role": "user", "content": text, "created_at": at.isoformat()},
                {"role": "assistant", "content": "Got it." if not re.search(r"[\u4e00-\u9fff]", text)
                 else "好的。", "created_at": (at + timedelta(seconds=5)).isoformat()}], user, session)


def _labelled_past(line: str) -> bool:
    """Whether a memory line of the prompt is labelled as a past state."""
    return bool(re.search(r"until \d{4}-\d{2}|\d{4}年\d{1,2}月之前", line))


def _memory_lines(ctx: Any) -> list[str]:
    """The lines of the memories block of a ``context()`` result."""
    block = "\n".join(m["content"] for m in ctx.messages if "memories recalled" in m["content"])
    return block.splitlines()


def _has(text: str, value: str) -> bool:
    return value.casefold() in text.casefold()


def _old(text: str, case: Case) -> bool:
    """Whether a text holds the old value (in either form) and not the new one, and does
    not say it no longer holds ("User doesn't live in Hangzhou anymore" is current)."""
    return (_has(text, case.old) or bool(case.old_first) and _has(text, case.old_first)) \
        and not _has(text, case.new) and not is_negation(text)


def _order(hits: list[Any], case: Case) -> tuple[bool, bool]:
    """(current at top 1, stale above current) for one ranked list."""
    texts = [h.text for h in hits]
    top = bool(texts) and _has(texts[0], case.new)
    first_new = next((i for i, t in enumerate(texts) if _has(t, case.new)), None)
    first_old = next((i for i, t in enumerate(texts) if _old(t, case)), None)
    stale = first_old is not None and (first_new is None or first_old < first_new)
    return top, stale


def _iter(items: list[Any], progress: bool, desc: str) -> Iterator[Any]:
    return iter(tqdm(items, desc=desc, disable=not progress))


def _rank_case(memory: Any, scope: Scope, case: Case, k: int, groups: tuple[str, ...],
               rows: dict[str, dict[str, list[float]]]) -> None:
    """Current at top 1 and stale above current, per system, into ``rows``."""
    for system in SYSTEMS:
        result = search_as(memory.retriever, system, scope, SearchRequest(case.ask, k=k),
                           touch=False)
        top, stale = _order(result.hits, case)
        for g in groups:
            rows[f"{system}/{g}"]["top1"].append(float(top))
            rows[f"{system}/{g}"]["stale_above"].append(float(stale))


def _context_case(memory: Any, user: str, case: Case, budget: int) -> tuple[bool, float]:
    """Whether the new value is in the prompt ``context()`` builds, with every line that
    holds the old one labelled as past; and the memories' share of the prompt's tokens."""
    ctx = memory.context(user, "s3", [{"role": "user", "content": case.ask}], budget=budget)
    lines = _memory_lines(ctx)
    block = "\n".join(lines)
    # the value is looked for in the memory's text, not in its date
    labelled = all(_labelled_past(line)
                   for line in lines if _old(re.sub(r"^\W*\[[^\]]*\]", "", line), case))
    total = sum(ctx.report.layers.values()) or 1
    return _has(block, case.new) and labelled, ctx.report.layers.get("memories", 0) / total


def _completions(memory: Any, half: str, bad_items: list[str]) -> tuple[int, int]:
    """Todos closed by a later stated completion, of the completion cases of ``half``."""
    done = total_todos = 0
    completions = unseen_completions(half) if half in UNSEEN else COMPLETIONS
    for n, (todo, said, h) in enumerate(completions):
        if half != "all" and h != half:
            continue
        user = f"todo{n}"
        _say(memory, user, "s1", todo, T0)
        _say(memory, user, "s2", said, T0 + timedelta(days=3))
        memory.flush()
        open_todos = memory.list(user, filters={"kinds": ["todo"], "statuses": ["active"]})
        total_todos += 1
        done += not open_todos
        bad_items += [i.content for i in memory.list(user, limit=50) if ill_formed(i.content)]
    return done, total_todos


def run_updates(*, half: str = "held", store: str | None = None, embedder: str | None = None,
                limit: int | None = None, k: int = 10, budget: int = 2000,
                progress: bool = True) -> dict[str, Any]:
    """Run the suite's ``half`` (``dev``, ``held`` or ``all``); see the module doc."""
    pool = unseen_cases(half) if half in UNSEEN else cases()
    chosen = [c for c in pool if half == "all" or c.half == half][: limit or None]
    rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    failures: list[dict[str, Any]] = []
    bad_items: list[str] = []
    shares: list[float] = []
    with bench_memory(store, embedder, embed_on_add="inline") as memory:
        for n, case in enumerate(_iter(chosen, progress, "cases")):
            user = f"u{n}-{case.slot}-{case.lang}"
            _say(memory, user, "s1", case.first, T0)
            _say(memory, user, "s2", case.change, T0 + timedelta(days=60))
            memory.flush()
            groups = ("all", case.lang, case.kind)
            _rank_case(memory, Scope(user, memory.settings.namespace), case, k, groups, rows)
            in_ctx, share = _context_case(memory, user, case, budget)
            for g in groups:
                rows[f"memstrata/{g}"]["in_context"].append(float(in_ctx))
            shares.append(share)
            items = memory.list(user, filters={"statuses": ["active", "superseded", "done"]}, limit=200)
            bad_items += [i.content for i in items if ill_formed(i.content)]
            hits = memory.search(case.ask, user, k=k)
            top, stale = _order(hits, case)
            if not top or stale or not in_ctx:
                failures.append({"slot": case.slot, "lang": case.lang, "kind": case.kind,
                                 "template": case.template, "first": case.first,
                                 "change": case.change, "ask": case.ask, "top1": top,
                                 "stale_above": stale, "in_context": in_ctx,
                                 "hits": [h.text[:80] for h in hits[:3]],
                                 "items": [(i.status.value, i.content) for i in items]})
        done, total_todos = _completions(memory, half, bad_items)
        needs = recall_needs(memory, budget=budget, progress=progress, limit=limit)
        controls = no_change_controls(memory, budget=budget, progress=progress, limit=limit)
    table = {group: {metric: round(sum(v) / len(v), 4) for metric, v in metrics.items()} | {
        "cases": len(next(iter(metrics.values())))} for group, metrics in sorted(rows.items())}
    return {"benchmark": "updates", "half": half, "cases": len(chosen), "k": k, **needs, **controls,
            "embedder": memory.embedder.name, "table": table,
            "ill_formed_items": len(bad_items), "ill_formed_examples": bad_items[:20],
            "memory_share": round(sum(shares) / len(shares), 4) if shares else 0.0,
            "completions_closed": round(done / total_todos, 4) if total_todos else None,
            "completion_cases": total_todos, "failures": failures}


#: The seeds' own measures of the prompt, on cases written apart from the code
#: (``recall_needs.json``: 60 preferences or constraints said in passing, 40 tasks left
#: half done, each in English and Chinese): is what a later request depends on — without
#: naming it — in the ``context()`` that memstrata builds for that request?
NEEDS = Path(__file__).with_name("recall_needs.json")


def recall_needs(memory: Any, *, budget: int = 2000, progress: bool = False,
                 limit: int | None = None) -> dict[str, Any]:
    """*Preference hit rate*: a preference, constraint or circumstance said in passing in an
    early session ("I'm allergic to shellfish") is in the prompt memstrata adds (profile,
    memories, summary) for a request weeks later that depends on it without naming it
    ("What should I cook for my date on Friday?"). *Task resumption*: an open step of a
    task left half done in an earlier session is in the prompt when the user comes back
    to the task days later ("let's pick up the speech again"). Per language and overall;
    ``limit`` takes the first N cases of each."""
    data = json.loads(NEEDS.read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    for part, gap, metric in (("preferences", 30, "preference_hit_rate"),
                              ("tasks", 3, "task_resumption")):
        hits: dict[str, list[float]] = defaultdict(list)
        misses = []
        for n, case in enumerate(_iter(data[part][: limit or None], progress, part)):
            user = f"{part}-{n}"
            _say(memory, user, "s1", case["said"], T0)
            memory.flush()
            asked = [{"role": "user", "content": case["request"],
                      "created_at": (T0 + timedelta(days=gap)).isoformat()}]
            ctx = memory.context(user, "s2", asked, budget=budget)
            added = "\n".join(m["content"] for m in ctx.messages if m.get("role") == "system")
            hit = case["needs"].casefold() in added.casefold()
            for group in ("all", case["lang"]):
                hits[group].append(float(hit))
            if not hit:
                misses.append({"id": case["id"], "said": case["said"], "request": case["request"]})
        out[metric] = {g: round(sum(v) / len(v), 4) for g, v in sorted(hits.items())} | {
            "cases": len(hits["all"])}
        out[f"{metric}_misses"] = misses
    return out


#: The other side of a change (``updates_controls.json``, 170 cases written apart from the
#: code, half in each language): a later statement that does not replace the earlier one —
#: *additive* (a second pet, another hobby: "we just got a new kitten" after "my dog Max"),
#: *related* (a detail: "my car needed new brakes"), *unrelated* (a change of another slot),
#: *reaffirm* (the same value in other words), *event* (a one-off: "moved my dentist
#: appointment to Friday").
CONTROLS = Path(__file__).with_name("updates_controls.json")


def no_change_controls(memory: Any, *, budget: int = 2000, progress: bool = False,
                       limit: int | None = None) -> dict[str, Any]:
    """*Kept as current*: after a later statement that does not replace it, the earlier
    value is in the ``context()`` of a question about now and not labelled as past; and
    *wrongly labelled past*: the share where it is shown only labelled "until …". Per
    kind, per language and overall; ``limit`` takes the first N cases."""
    data = json.loads(CONTROLS.read_text(encoding="utf-8"))["cases"][: limit or None]
    kept: dict[str, list[float]] = defaultdict(list)
    wrong: dict[str, list[float]] = defaultdict(list)
    misses = []
    for n, case in enumerate(_iter(data, progress, "controls")):
        user = f"control-{n}"
        _say(memory, user, "s1", case["first"], T0)
        _say(memory, user, "s2", case["later"], T0 + timedelta(days=30))
        memory.flush()
        ctx = memory.context(user, "s3", [{"role": "user", "content": case["ask"]}], budget=budget)
        showing = [line for line in _memory_lines(ctx) if _has(line, case["keep"])]
        as_past = bool(showing) and all(_labelled_past(line) for line in showing)
        ok = bool(showing) and not as_past
        for group in ("all", case["lang"], case["kind"]):
            kept[group].append(float(ok))
            wrong[group].append(float(as_past))
        if not ok:
            misses.append({"id": case["id"], "kind": case["kind"], "ask": case["ask"],
                           "shown": bool(showing), "labelled_past": as_past})
    summary = {g: round(sum(v) / len(v), 4) for g, v in sorted(kept.items())}
    return {"controls_kept_current": summary | {"cases": len(kept["all"])},
            "controls_labelled_past": {g: round(sum(v) / len(v), 4) for g, v in sorted(wrong.items())},
            "controls_misses": misses}


def markdown(report: dict[str, Any]) -> str:
    """The report's table: one row per system and group."""
    lines = ["| system / group | cases | current at top 1 | stale above current | current in context |",
             "|---|---|---|---|---|"]
    for group, m in report["table"].items():
        ctx = f"{m['in_context']:.3f}" if "in_context" in m else "–"
        lines.append(f"| {group} | {m['cases']} | {m['top1']:.3f} | {m['stale_above']:.3f} | {ctx} |")
    lines.append("")
    lines.append(f"ill-formed items: {report['ill_formed_items']}; memory share of the context's "
                 f"tokens: {report['memory_share']:.3f}; todos closed by a stated completion: "
                 f"{report['completions_closed']} of {report['completion_cases']} cases")
    for metric, label in (("preference_hit_rate", "preference hit rate"),
                          ("task_resumption", "cross-session task resumption")):
        if metric in report:
            m = report[metric]
            lines.append(f"{label}: {m['all']:.3f} (en {m.get('en', 0):.3f}, zh {m.get('zh', 0):.3f}) "
                         f"of {m['cases']} cases")
    if "controls_kept_current" in report:
        m, w = report["controls_kept_current"], report["controls_labelled_past"]
        kinds = ", ".join(f"{k} {m[k]:.3f}" for k in ("additive", "related", "unrelated", "reaffirm",
                                                       "event") if k in m)
        lines.append(f"no-change controls, earlier value kept as current in context: {m['all']:.3f} "
                     f"(en {m.get('en', 0):.3f}, zh {m.get('zh', 0):.3f}; {kinds}) of {m['cases']} "
                     f"cases; shown only labelled as past: {w['all']:.3f}")
    return "\n".join(lines)


#: how a LongMemEval question asks about the state before the update (the grading's
#: reading of the question, not the retriever's)
_ASKS_BEFORE = re.compile(r"\b(?:previous(?:ly)?|before I|used to|originally|initially|at first)\b", re.I)


def _session_ranks(memory: Any, scope: Scope, hits: list[Any], answers: set[str],
                   session_of: dict[str, str]) -> dict[str, int]:
    """Each answer session's rank: that of the first hit standing for one of its
    ``has_answer`` turns (an item stands for the turns it was drawn from)."""
    infos = memory.store.doc_info(scope, [h.id for h in hits if h.layer is Layer.SEMANTIC])
    rank: dict[str, int] = {}
    for n, h in enumerate(hits):
        turns = set(h.ids) | {t[7:] for t in (infos[h.id].tags if h.id in infos else ())
                              if t.startswith("source:")}
        for t in turns & answers:
            rank.setdefault(session_of[t], n)
    return rank


def run_longmemeval_updates(data: str, *, limit: int | None = None, k: int = 50,
                            embedder: str | None = None, embedding_cache: str | None = None,
                            progress: bool = True) -> dict[str, Any]:
    """LongMemEval_S dev knowledge-update questions: each haystack imported with extraction
    (so the write path can supersede what the later session updates), then: is the
    latest answer session's evidence ranked above the earlier, superseded one (for a
    question about the earlier state, the other way round; ``/present`` rows count only
    the questions about now)? A session's
    rank is that of the first hit standing for one of its ``has_answer`` turns (an item
    stands for the turns it was drawn from). ``limit`` takes the first N questions (a
    haystack is ~480 turns to embed)."""
    import json
    from pathlib import Path

    from ..providers.embedders import parse_embedder
    from .embedding_cache import DiskCachedEmbedder
    from .longmemeval import _import, parse_date

    questions = [q for q in json.loads(Path(data).read_text())
                 if q["question_type"] == "knowledge-update" and not q["question_id"].endswith("_abs")]
    questions = questions[: limit or None]
    cached = DiskCachedEmbedder(parse_embedder(embedder), embedding_cache) if embedding_cache else None
    rows: dict[str, list[float]] = defaultdict(list)
    detail: list[dict[str, Any]] = []
    with bench_memory(None, cached or embedder) as memory:
        for q in _iter(questions, progress, "knowledge-update"):
            user = f"lme-{q['question_id']}"
            scope = Scope(user, memory.settings.namespace)
            session_of, answers = _import(memory, user, q, extract=True)
            memory.flush()
            dates = dict(zip(q["haystack_session_ids"], q["haystack_dates"]))
            gold = sorted(q["answer_session_ids"], key=lambda s: parse_date(dates[s]))
            stale_s, latest_s = gold[0], gold[-1]
            past = bool(_ASKS_BEFORE.search(q["question"]))
            row: dict[str, Any] = {"question_id": q["question_id"], "question": q["question"],
                                   "asks_about_before": past}
            request = SearchRequest(q["question"], k=k, scoring="relevance",
                                    now=parse_date(q["question_date"]))
            for system in SYSTEMS:
                hits = search_as(memory.retriever, system, scope, request, touch=False).hits
                rank = _session_ranks(memory, scope, hits, answers, session_of)
                latest, stale = rank.get(latest_s), rank.get(stale_s)
                # a question about the earlier state ("What was my previous goal…") is
                # answered by the earlier session: then that one should come first
                want, other = (stale, latest) if past else (latest, stale)
                ok = want is not None and (other is None or want < other)
                rows[system].append(float(ok))
                if not past:
                    rows[f"{system}/present"].append(float(ok))
                row[system] = {"latest_rank": latest, "stale_rank": stale, "asked_above_other": ok}
            superseded = memory.list(user, filters={"statuses": ["superseded"]}, limit=10_000)
            row["superseded_items"] = len(superseded)
            detail.append(row)
        original = memory.embedder.name
    if cached is not None:
        cached.close()
    return {"benchmark": "updates/longmemeval-knowledge-update", "data": data,
            "questions": len(questions), "k": k, "embedder": original,
            "asked_above_other": {s: round(sum(v) / len(v), 4) for s, v in rows.items()},
            "per_question": detail}

