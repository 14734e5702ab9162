"""The state model: which stored fact a new statement updates.

A durable fact has a subject (the user, or a person in their life), a slot (what it is
about), a value and the time from which it holds; what replaced it is the item that
``supersedes`` it. The slot rules of :mod:`.decide` settle statements whose slot a rule
named (``city``, ``job``, ``age``…). Most everyday statements name none — "I drive a
Toyota Corolla", "我每天早上跑步" — and a later "I sold the Corolla and bought a Tesla" or
"我现在改成晚上游泳了" must still end them. :class:`SlotMatcher` decides that **by
meaning**, for one candidate against the stored facts of the same subject:

* the *form* of the statement says whether it reports a change (:func:`is_change`:
  "now", "switched", "moved", "sold", "quit", "no longer", "down to", "现在", "已经",
  "搬到", "改成", "不再", "辞职", "减到"…): the words of a change, not a list of
  sentences;
* the *slot similarity* is the cosine of the two statements with their values, change
  words and times taken out (:func:`slot_text`: "User weighs 80 kg" and "User is down to
  72 kg now" both become about weight), mapped through the embedder's calibration
  (:mod:`memstrata.retrieval.calibration`) so that one threshold means the same in both
  languages and for any embedder;
* *value types* must agree: a quantity of the same kind (a weight, an age, a height, a
  price…) with another number is a new value in a single-valued slot, whatever the
  form; a shared anchor word ("Corolla", "Java", "跑步") ties a change to the fact it
  changes.

A change updates the best-matching fact when an anchor or a quantity ties them, or when
its slot similarity stands out (calibrated ≥ ``min_slot`` and ahead of the next fact by
``margin``). A statement without a change form updates a fact only through a quantity
of the same kind with a different number ("I weigh 75 kg" after "I weigh 80 kg").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memstrata.providers.embedders import Embedder
from memstrata.retrieval.currency import CHANGE_FORM_EN, CHANGE_FORM_ZH, is_change, is_negation
from memstrata.text import is_cjk_text, pos_tags
from memstrata.types import Kind, MemoryItem

from .clauses import sentences
from .extract import FREE_TEXT_ATTRIBUTES, Candidate
from .numbers import parse_number

__all__ = ["SlotMatcher", "is_change", "changed_near", "is_irrealis", "is_negation", "slot_text",
           "quantities", "anchors", "Slotted", "SLOTS", "slot_named", "same_name"]

#: The slots a person names when they speak of a part of their life ("forget my work",
#: "忘掉我的住址"): each slot's attributes (what the rules of :mod:`.extract` write) and
#: its names in both languages. A vocabulary of slots, not of sentences.
SLOTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "work": (("job", "employer"), ("work", "job", "career", "occupation", "profession", "employer",
                                   "workplace", "company", "office", "工作", "职业", "单位", "公司",
                                   "上班", "职位")),
    "home": (("city", "address"), ("home", "address", "city", "where i live", "where i'm living",
                                   "住址", "地址", "住在哪", "住处", "城市", "家庭住址")),
    "age": (("age",), ("age", "how old i am", "年龄", "岁数")),
    "health": (("health",), ("health", "illness", "condition", "medical", "健康", "病", "病情")),
    "diet": (("diet", "food"), ("diet", "food", "eating", "饮食", "吃的")),
    "name": (("name",), ("name", "名字", "姓名")),
}

#: words that report a change or a time but say nothing of the slot
_DROP_EN = re.compile(
    r"\b(?:now|nowadays|these days|no longer|any ?more|just|recently|finally|actually|already|"
    r"currently|today|yesterday|last (?:week|month|year)|this (?:week|month|year)|"
    r"(?:a few|two|three|\d+) (?:days|weeks|months|years) ago|instead(?: of)?|not \d+|"
    r"good news|so|well|anyway|oh)\b", re.I)
_DROP_ZH = re.compile(r"现在|如今|目前|已经|最近|其实|刚刚|刚|上个?月|上周|上星期|去年|今年|前几天|昨天|"
                      r"好消息|了|呢|啦|吧")
_NUMBER = r"(?P<n>\d+(?:\.\d+)?|[零一二两三四五六七八九十百]{1,4})"
_QUANTITIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("weight", re.compile(_NUMBER + r"\s*(?:kg|kgs|kilos?|kilograms?|lbs?|pounds|公斤|千克|斤)", re.I)),
    ("age", re.compile(_NUMBER + r"\s*(?:years? old|yrs? old|岁|周岁)|(?:is|turned|am|'m) "
                       + _NUMBER.replace("?P<n>", "?P<n2>") + r"(?: now)?\b(?!\s*(?:kg|cm|km|%|am|pm))",
                       re.I)),
    ("height", re.compile(_NUMBER + r"\s*(?:cm|centimet(?:er|re)s?|厘米|公分|米)", re.I)),
    ("distance", re.compile(_NUMBER + r"\s*(?:km|kilomet(?:er|re)s?|miles?|公里)", re.I)),
    ("duration", re.compile(_NUMBER + r"\s*(?:hours?|hrs?|minutes?|mins?|小时|个小时|分钟)", re.I)),
    ("money", re.compile(r"(?:[$¥€£]\s*" + _NUMBER + r"|" + _NUMBER.replace("?P<n>", "?P<n2>")
                         + r"\s*(?:k\b|dollars|yuan|euros|元|块|万))", re.I)),
    ("count", re.compile(_NUMBER + r"\s*(?:times|days|cups|cigarettes|steps|次|天|杯|根|步)", re.I)),
)
_STOP_EN = frozenset("user user's users the a an is am are was were be been to of and in on at for with "
                     "it that this have has had do does did so just really very my their they them "
                     "not no but or from by as into about than then there here what which who "
                     "some any more most much many one two new".split())
_STOP_ZH = set("用户的了是在我你他她它们这那个一有和也都就还很")


def _spelled(name: str) -> str:
    """A name as letters: Chinese characters in pinyin without tones ("朵朵" → "duoduo")."""
    from pypinyin import lazy_pinyin  # one table of readings; imported on first use
    return re.sub(r"[^a-z]", "", "".join(lazy_pinyin(name)).casefold())


def same_name(a: str, b: str) -> bool:
    """Whether two names are one person's, across scripts ("朵朵" / "Duoduo", "王芳" /
    "Wang Fang"); the same script must be the same name."""
    if not a or not b:
        return False
    if a.casefold() == b.casefold():
        return True
    if is_cjk_text(a) == is_cjk_text(b):
        return False
    spelled_a, spelled_b = _spelled(a), _spelled(b)
    return len(spelled_a) >= 2 and spelled_a == spelled_b


def slot_named(query: str) -> str | None:
    """The slot a short description names ("my work", "工作", "where I live"), or None."""
    q = re.sub(r"^(?:my|our|the|about)\s+|^(?:我的|我|关于)", "", query.casefold().strip()).strip()
    for slot, (_, names) in SLOTS.items():
        if q in names or any(q == f"{n}s" for n in names):
            return slot
    return None


#: the sentences of a short message, said together: a change said in one of them ("I quit
#: coffee; it's green tea every morning") is the message's; in a longer one each sentence
#: speaks for itself
SHORT_MESSAGE = 3


def changed_near(sentence: str, message: str) -> bool:
    """Whether the message reports a change that covers ``sentence``: anywhere in a short
    message, only in the sentence itself in a longer one — the words of a change are
    local, and a long message that says "just" or "new" somewhere does not make each of
    its statements a change."""
    parts = sentences(message)
    if len(parts) <= SHORT_MESSAGE:
        return is_change(message)
    return is_change(sentence)


#: What is wished, planned, intended or asked for is not a state: "I'm planning to move"
#: has not moved, "I'm looking for a new laptop" still has the old one. Such a statement
#: neither ends a fact nor is ended as one (its own life is a todo's or an event's).
_IRREALIS_EN = re.compile(
    r"\b(?:will|'ll|going to|gonna|plan(?:s|ning)? (?:to|on)|thinking (?:of|about)|consider(?:s|ing)|"
    r"look(?:s|ing) (?:for|into|forward)|want(?:s|ed)? to|would (?:like|love)|'d (?:like|love)|"
    r"hop(?:e|es|ing) to|might|try(?:ing)? to|tries to|need(?:s)? to|wish(?:es)? to|"
    r"interested in|curious|excited to)\b", re.I)
_IRREALIS_ZH = re.compile(r"打算|计划|准备|想要|考虑|希望|正在找|在找|将要|将会|想试|想去|想学|想买|有兴趣")
def is_irrealis(text: str) -> bool:
    """Whether a statement is a wish, plan, intention or request rather than a state."""
    return bool((_IRREALIS_ZH if is_cjk_text(text) else _IRREALIS_EN).search(text))


def quantities(text: str) -> dict[str, float]:
    """The quantities a statement states, by kind: {"weight": 80.0}."""
    out: dict[str, float] = {}
    for kind, pattern in _QUANTITIES:
        for m in pattern.finditer(text):
            raw = next((g for g in m.groups() if g), None)
            n = parse_number(raw) if raw else None
            if n is not None and kind not in out:
                out[kind] = float(n)
    return out


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word[-1] == word[-2] else word


def anchors(text: str) -> set[str]:
    """The content words of a statement ("Corolla", "java", "跑步"), without the change
    words: what ties a change to the fact it changes."""
    stripped = _DROP_ZH.sub(" ", _DROP_EN.sub(" ", text))
    stripped = (CHANGE_FORM_ZH.sub(" ", stripped))
    # a value may be short: a capitalised word of two letters ("Go") is an anchor too
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z0-9+#'-]*", stripped)
             if len(w) >= 3 or (len(w) == 2 and any(c.isupper() for c in w))]
    out = {_stem(w.casefold()) for w in words
           if w.casefold() not in _STOP_EN and not CHANGE_FORM_EN.fullmatch(w)}
    for run in re.findall(r"[\u4e00-\u9fff]+", stripped):
        chars = [c for c in run]
        out.update(a + b for a, b in zip(chars, chars[1:]) if a not in _STOP_ZH and b not in _STOP_ZH)
    return out


#: the change words of :data:`CHANGE_FORM_ZH` / :data:`CHANGE_FORM_EN` that say nothing of the slot
#: (not "不…了", whose verb is the slot)
_CHANGE_WORDS_ZH = re.compile(r"现在|如今|目前|已经|改成|改用|改为|换成|转行|转而|后来|开始|最近|不再")
_CHANGE_WORDS_EN = re.compile(r"\b(?:now|nowadays|these days|no longer|any ?more|switched|instead|"
                              r"since last \w+)\b", re.I)


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


def slot_text(text: str) -> str:
    """A statement with its numbers, change words and times taken out: what it is about."""
    out = _CHANGE_WORDS_ZH.sub("", _CHANGE_WORDS_EN.sub(" ", text))
    out = _DROP_ZH.sub("", _DROP_EN.sub(" ", out))
    out = re.sub(r"\d+(?:\.\d+)?", " ", out)
    out = re.sub(r"\s+", " ", out).strip(" ,.，。")
    return out or text


@dataclass(frozen=True, slots=True)
class Slotted:
    """Why a candidate updates a stored fact (the version's *why*)."""

    item: MemoryItem
    reason: str
    similarity: float


#: which stored fact a candidate updates, or None
Updates = Callable[[Candidate, Sequence[MemoryItem]], "Slotted | None"]

_STATEFUL = (Kind.FACT, Kind.PREFERENCE, Kind.EVENT)


#: Everyday facts on unrelated slots, per language: the background a slot similarity is
#: measured against (a standard score), as :mod:`.values` does for values. Raw cosines
#: of multilingual-e5-small put any two short Chinese statements about the user at
#: 0.92–0.96, any two English ones at 0.78–0.86, so no fixed cosine names "the same slot".
BACKGROUND: dict[str, tuple[str, ...]] = {
    "en": ("User has a cat", "User likes spicy food", "User plays the piano",
           "User is allergic to peanuts", "User has two children", "User reads novels",
           "User goes hiking on weekends", "User's name is Alex", "User drinks coffee every morning",
           "User is learning Spanish", "User's birthday is in May", "User supports Liverpool",
           "User studied marine biology", "User is afraid of spiders", "User collects stamps",
           "User's sister lives abroad"),
    "zh": ("用户养了一只猫", "用户喜欢吃辣", "用户会弹钢琴", "用户对花生过敏", "用户有两个孩子",
           "用户喜欢看小说", "用户周末去爬山", "用户叫小明", "用户每天早上喝咖啡", "用户在学西班牙语",
           "用户的生日在五月", "用户支持利物浦队", "用户学的是海洋生物", "用户怕蜘蛛", "用户集邮",
           "用户的姐姐住在国外"),
}


class SlotMatcher:
    """Matches a new statement to the stored fact of the same subject it updates.

    Slot similarity is a standard score: the cosine of the two slot texts against the
    cosines of the new one with :data:`BACKGROUND` facts of its language. On the pairs
    of ``tests/test_current_truth.py`` and the development half of ``bench updates`` a
    change and the fact it changes score 1.8–11, the user's unrelated facts under 1.
    """

    def __init__(self, embedder: Embedder, *, min_z: float = 1.5, anchored_z: float = 0.0,
                 margin: float = 0.3) -> None:
        self.embedder = embedder
        self.min_z = min_z
        self.anchored_z = anchored_z
        self.margin = margin
        self._cache: dict[str, np.ndarray] = {}

    def _vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        found = {t: self._cache[t] for t in texts if t in self._cache}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            fresh = self.embedder.embed(missing, kind="passage")
            found.update(zip(missing, fresh))
            self.keep(missing, fresh)
        return [found[t] for t in texts]

    def keep(self, texts: Sequence[str], vectors: "Sequence[np.ndarray] | np.ndarray") -> None:
        """Cache the vectors of slot texts (those :meth:`slot_texts` names)."""
        if len(self._cache) + len(texts) > 4096:
            self._cache.clear()
        self._cache.update(zip(texts, vectors))

    def slot_texts(self, cands: Sequence[Candidate]) -> list[str]:
        """The slot texts the candidates will be compared by, not cached yet — each
        candidate's own, which is also its text as a stored fact that a later candidate
        is compared with — so that the worker can embed those of many jobs in one batch
        before the jobs run (the vectors are the same in any batch)."""
        texts = [slot_text(c.content) for c in cands if self._may_update(c)]
        return [t for t in dict.fromkeys(texts) if t not in self._cache]

    @staticmethod
    def _may_update(cand: Candidate) -> bool:
        return cand.kind in _STATEFUL and bool(cand.polarity or cand.change) \
            and not is_irrealis(cand.content)

    def scores(self, text: str, others: Sequence[str]) -> list[float]:
        """Standard scores of the slot similarity of ``text`` with each of ``others``,
        each against the background of the other text's language (a cross-language
        pair is measured against the facts of the stored fact's language)."""
        probe, *rest = self._vectors([slot_text(text), *(slot_text(o) for o in others)])
        bands: dict[str, tuple[float, float]] = {}
        out = []
        for other, vector in zip(others, rest):
            lang = "zh" if is_cjk_text(other) else "en"
            if lang not in bands:
                back = np.array([float(probe @ v) for v in self._vectors(BACKGROUND[lang])])
                bands[lang] = (float(back.mean()), max(float(back.std()), 1e-3))
            mean, std = bands[lang]
            out.append((float(probe @ vector) - mean) / std)
        return out

    def updates(self, cand: Candidate, items: Sequence[MemoryItem]) -> Slotted | None:
        """The stored fact ``cand`` replaces, if any (see the module's rules)."""
        if not self._may_update(cand):
            return None
        pool = [i for i in items if (i.subject or "user") == cand.subject
                and not is_irrealis(i.content)
                and (i.kind in (Kind.FACT, Kind.PREFERENCE)
                     or i.kind is Kind.EVENT and is_change(i.content))  # a past event stays
                and not _structured_apart(cand, i)]
        if not pool:
            return None
        text = cand.evidence or cand.content
        # the form of the whole message: "I don't drive the Corolla anymore, I drive a
        # Tesla" reports a change in both clauses
        change = cand.change or is_change(text) or changed_near(text, cand.context)
        ended = is_negation(cand.content)
        mine_q, mine_a = quantities(text), anchors(cand.content)
        scored = sorted(zip(self.scores(cand.content, [i.content for i in pool]), pool),
                        key=lambda x: -x[0])
        for rank, (z, item) in enumerate(scored):
            theirs_q = quantities(item.content)
            shared_q = [k for k in mine_q if k in theirs_q]
            if shared_q and all(abs(mine_q[k] - theirs_q[k]) < 1e-9 for k in shared_q):
                continue  # the same number again: not an update of this slot
            if shared_q and z >= self.anchored_z:
                return Slotted(item, "state.quantity", z)
            if not change:
                continue
            theirs_a = anchors(item.content)
            if ended and not is_negation(item.content):
                if mine_a & theirs_a and z >= self.anchored_z:
                    return Slotted(item, "state.ended", z)  # "I don't X anymore" ends "I X"
                continue
            # says nothing the old one did not (numbers included: "I go to bed at 10 pm"
            # is not "… at midnight" again): a restatement, not a change
            if mine_a and mine_a | _numbers(cand.content) <= theirs_a | _numbers(item.content):
                continue
            if mine_a & theirs_a and z >= self.anchored_z:
                return Slotted(item, "state.anchor", z)
            nxt = scored[rank + 1][0] if rank + 1 < len(scored) else -1e9
            if rank == 0 and z >= self.min_z and z - nxt >= self.margin \
                    and value_type_agrees(cand.content, item):
                return Slotted(item, "state.slot", z)
        return None


    def completes(self, cand: Candidate, todos: Sequence[MemoryItem]) -> MemoryItem | None:
        """The open todo a stated completion means, by meaning (either language): the
        best one, ``min_z`` above the background and ``margin`` ahead of the next."""
        if not todos:
            return None
        scored = sorted(zip(self.scores(cand.content, [t.content for t in todos]), todos),
                        key=lambda x: -x[0])
        z, best = scored[0]
        nxt = scored[1][0] if len(scored) > 1 else -1e9
        return best if z >= self.min_z and z - nxt >= self.margin else None


#: what a new value of a typed slot is: a place for where one lives or comes from, a
#: number for an age, a name for a name
_TYPED_SLOTS = {"city": "place", "hometown": "place", "age": "number", "name": "name"}
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b(?!User\b|I\b)[A-Z][a-z]")


def value_type_agrees(text: str, item: MemoryItem) -> bool:
    """Whether ``text`` holds a value of the type the stored fact's slot takes: a
    statement that names no place cannot say where the user lives now ("I barely drive my
    Corolla anymore, I take the metro everywhere now" ended "User lives in Shanghai" by
    meaning alone), one with no number cannot be a new age. Places and names are read by
    jieba's part-of-speech tags in Chinese (``ns``, ``nr``) and by a capital letter inside
    an English sentence; slots without a type (a job, a habit) always agree."""
    kind = _TYPED_SLOTS.get(item.attribute or "")
    if kind is None:
        return True
    if kind == "number":
        return bool(_numbers(text) or quantities(text))
    if is_cjk_text(text):
        want = "ns" if kind == "place" else "nr"
        return any(flag.startswith(want) for _, flag in pos_tags(text))
    return bool(_CAPITALISED.search(text))


def _structured_apart(cand: Candidate, item: MemoryItem) -> bool:
    """Both name a structured slot (a rule's attribute), and not the same one."""
    a, b = cand.attribute, item.attribute
    if not a or not b or a in FREE_TEXT_ATTRIBUTES or b in FREE_TEXT_ATTRIBUTES:
        return False
    return a != b
