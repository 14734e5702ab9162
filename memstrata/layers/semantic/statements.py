"""Predicate families that read a clause's first-person body whatever its subject
(pure functions): ages, health, cessation ("no more X for me", "基本不…了"), stated
completion ("I already booked the dentist", "牙医已经约好了"), attribute statements
("X的Y是Z", "my phone number is …") and, last, the plain statement a clause makes about
its subject when no family read it — in the third person, so the user's own words
stay findable and comparable.

Each returns :class:`~.extract.Candidate` values about the *user*; :func:`retarget`
then moves a candidate to the clause's real subject ("User is diabetic" → "User's
husband is diabetic", subject ``husband``): the rules are written once, for "I"/"我".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from memstrata.types import Kind

from .clauses import Clause
from .english import third_person
from .lexicon import is_programming_language
from .numbers import parse_number

__all__ = ["families", "attribute_statement", "generic", "retarget", "completes", "COMPLETION"]

#: The attribute of a stated completion: the pipeline matches it to an open todo.
COMPLETION = "done"

_NUM = r"(?P<n>\d{1,3}|[a-z]+(?:-[a-z]+)?|[零一二两三四五六七八九十百]{1,4})"
_AGE_EN = re.compile(r"^i (?:am|'m|’m)(?: now| already| only| almost)? " + _NUM
                     + r"(?: (?:years?|yrs?) old| years of age)?(?: now| already| this year)?$"
                     r"|^i (?:just |recently |finally )?turned " + _NUM.replace("?P<n>", "?P<n2>")
                     + r"\b", re.I)
_AGE_ZH = re.compile(r"^我(?:今年|现在|已经|刚|刚刚|才)*(?:满)?" + _NUM + r"(?:周)?岁")
_HEALTH_EN = re.compile(
    r"^i (?:am|'m|’m) (?:a |now |also )?(?P<v>diabetic|asthmatic|epileptic|anemic|anaemic|"
    r"pregnant|colou?r ?blind|deaf|hard of hearing|celiac|coeliac|autistic|dyslexic|"
    r"pre-?diabetic|hypertensive|immunocompromised|in remission)\b"
    r"|^i (?:have|'ve got|’ve got|was diagnosed with|suffer from|live with) (?:a |an )?"
    r"(?P<v2>diabetes|type [12] diabetes|asthma|epilepsy|high blood pressure|hypertension|"
    r"high cholesterol|celiac disease|arthritis|migraines|adhd|depression|anxiety|cancer|"
    r"a heart condition|heart disease|gout|eczema|\w+itis|\w+ disease|\w+ disorder)\b", re.I)
_HEALTH_ZH = re.compile(r"^我(?:有|患有|得了|被诊断出|查出)(?P<v>[^，,。]{1,8}?(?:病|症|炎|癌))"
                        r"|^我是(?P<v2>[^，,。]{1,6}?)(?:患者|病人)")
_LACTOSE_ZH = re.compile(r"^我(?:有点|有)?(?P<v>乳糖不耐受?|麸质不耐受|吃素|不吃肉)")
_STOP_EN = re.compile(
    r"\bno more (?P<v>[\w' -]{2,30}?) for me\b"
    r"|^i (?:have to|need to|must|should|am supposed to|'m supposed to|was told to) "
    r"(?:stop|quit|give up|cut out|avoid|cut back on) (?:eating |drinking |having )?(?P<v2>[\w' -]{2,30})"
    r"|^i(?:'ve| have)? (?:quit|stopped|gave up|cut out|given up) (?:eating |drinking |having )?"
    r"(?P<v3>[\w' -]{2,30})"
    r"|^(?:no more|stop|avoid|cut out|quit) (?:eating |drinking )?(?P<v4>[\w' -]{2,30})$", re.I)
_STOP_ZH = re.compile(
    r"^我(?:现在|已经|最近|以后)*(?:(?:基本(?:上)?|几乎|再也)?(?:不再|不能再|不要再?|别再?|不|没)(?:怎么)?|很少|极少|几乎不)"
    r"(?P<verb>吃|喝|用|写|碰)"
    r"(?P<v>[^，,。]{1,12}?)了"
    r"|^我(?:已经)?(?:戒了|戒掉了|不碰)(?P<v2>[^，,。]{1,10})"
    r"|^(?:以后)?(?:不能|不要|别)(?:再)?(?P<verb3>吃|喝)(?P<v3>[^，,。]{1,10}?)了?$")
_DONE_EN = re.compile(
    r"^i(?:'ve| have)? (?:already|finally|just) (?P<v>(?:booked|made|called|paid|sent|finished|"
    r"bought|scheduled|submitted|renewed|fixed|done|emailed|cancelled|canceled|returned|picked up|"
    r"signed|filed|cleaned|ordered|replied to|written|wrote|got|taken|took)\b[^,;]*)"
    r"|^i (?P<v2>(?:booked|made|called|paid|sent|finished|bought|scheduled|submitted|renewed|"
    r"fixed|emailed|cancelled|canceled|returned|picked up|signed|filed|ordered)\b[^,;]*?) already$"
    r"|^(?:the )?(?P<v3>[\w' -]{2,40}?) (?:is|are) (?:all )?(?:done|booked|sorted|taken care of|"
    r"paid|finished|scheduled)(?: already| now)?$", re.I)
_FOODISH = re.compile(
    r"\b(?:eat(?:ing)?|drink(?:ing)?|having|meat|sugar|dairy|alcohol|coffee|caffeine|beer|wine|"
    r"soda|gluten|carbs|bread|rice|pork|beef|chicken|fish|seafood|sweets|snacks|junk food|fast food|"
    r"fried food|booze|tea|chocolate|desserts?|milk|cheese|eggs?|nuts)\b",
    re.I)
_DONE_VERB_ZH = (r"(?:约|订|预约|预订|买|交|付|缴|办|做|写|发|寄|取|还|修|提交|完成|报名|打|回|改|"
                 r"整理|收拾|准备)")
_DONE_ZH = re.compile(r"^(?:我)?(?P<v>[^，,。]{1,14}?)(?:已经|早就|都)" + _DONE_VERB_ZH + r"(?:好|完|过)?了"
                      r"|^我(?:已经|早就)(?P<v2>" + _DONE_VERB_ZH + r"[^，,。]{1,12}?)了$"
                      r"|^(?:我)?(?P<v3>[^，,。]{1,14}?)(?:搞定|弄好|办好|约好|订好|交了|做完|写完)了")
_DONE_ANY_ZH = re.compile(r"^(?:我)?(?P<v>[^，,。我你他她]{1,10}?)(?:已经|早就|终于|都)"
                          r"(?:[\u4e00-\u9fff]{1,4}?)(?:好|完|过|掉)?了[。！!]*$")
_ATTR_ZH = re.compile(r"^(?P<x>[^，,。是的]{1,16}?)的(?P<y>[^，,。是]{1,10}?)(?:是|为(?![了何])|在)"
                      r"(?P<z>[^。]{1,100}?)[。！!]*$")
_ATTR_EN = re.compile(r"^(?:i (?:am|'m) |)?(?:my|the) (?P<y>[\w -]{2,30}?)(?: of (?P<x>[\w' -]{2,30}))?"
                      r" (?:is|are|was) (?P<z>[^,;]{1,60}?)[.!]*$", re.I)
_EN_STOPWORDS = frozenset("i me my the a an is am are was were to of and in on at for with it that "
                          "this be have has had do so just really very".split())
_FILLER_EN = re.compile(
    r"^i (?:am |'m |’m )?(?:so |really |totally |just |also )?(?:think|know|mean|guess|bet|agree|"
    r"hope|wish|see|understand|feel you|get it|can imagine|can't imagine|can relate|believe|"
    r"suppose|appreciate|love (?:that|it|this|how|your|you)|like (?:that|it|this|your)|"
    r"glad|happy (?:to hear|for you)|sorry|excited for you|proud of you|thank|am thankful|"
    r"wonder|remember (?:that|when)|have to say|must say|'d love to|would love to|can't wait to (?:see|hear)|"
    r"totally get|hear you|was wondering|was just|have a question|'m curious|am curious|"
    r"can't wait|cannot wait|got your back|(?:am |'m )?(?:always )?here for|(?:am |'m )?sorry)\b"
    r"|^i (?:would|'d|could|might|should) ", re.I)
_FILLER_ZH = re.compile(r"^我(?:也|真的|觉得|认为|想问|想知道|知道|明白|理解|同意|希望你|猜|相信|"
                        r"感觉|看|谢谢|很高兴|好开心)")
_PAST = re.compile(r"^i (?:just |recently |finally |also |actually )?(?:\w+ed|went|got|made|took|"
                   r"ran|began|won|lost|read|wrote|met|bought|saw|did|had|was|found|gave|came|"
                   r"left|kept|told|brought|sent|spent|built|sang|drew|felt|taught|caught|"
                   r"tried|grew|held|flew|drove|threw|knew|thought|ate|swam)\b", re.I)


_MODALS = frozenset("will would can could should must might may shall can't cannot won't wouldn't "
                    "couldn't shouldn't mustn't".split())
_NEG_HAVE = {"haven't": "hasn't", "don't": "doesn't", "aren't": "isn't", "am": "is", "have": "has"}


def _render_en(body: str) -> str:
    rest = re.sub(r"\bi(?:'m|’m)\b", "I am", body, flags=re.I)
    rest = re.sub(r"\bi(?:'ve|’ve)\b", "I have", rest, flags=re.I)
    rest = re.sub(r"\bi(?:'ll|’ll)\b", "I will", rest, flags=re.I)
    rest = re.sub(r"\bi(?:'d|’d)\b", "I would", rest, flags=re.I)
    if re.match(r"(?i)^i\b", rest):
        pred = rest[2:].strip()
        first = pred.split(" ", 1)[0].casefold() if pred else ""
        if first in _MODALS:  # "will definitely try" / "can't wait": nothing to conjugate
            out = "User " + pred
        elif first in _NEG_HAVE:
            out = "User " + _NEG_HAVE[first] + pred[len(first):]
        else:
            out = "User " + third_person(pred)
    else:
        out = rest[:1].upper() + rest[1:]
    # "…to find the right spot when I have time": a later "I" takes its own verb's form
    out = re.sub(r"(?<=[\w,;:—–-] )I (?P<rest>[^,;:.!?\"“”]+)",
                 lambda m: "User " + third_person(m["rest"]), out)
    out = re.sub(r"\bmyself\b", "themselves", out)
    out = re.sub(r"\bme\b", "User", out)
    out = re.sub(r"\b(?:my|mine)\b", "User's", out, flags=re.I)
    out = re.sub(r"\bI(?:'m|’m)\b", "User is", out)
    out = re.sub(r"\bI\b", "User", out)
    return out.rstrip(" .!")


def _render_zh(body: str) -> str:
    """The user's clause about themselves: the first "我" is the user, a later one refers
    back as a person would write it ("用户记得那天自己和表哥玩得很开心", not "…那天用户和表哥…";
    "老师带他们看了实验", not "老师带用户和家人…")."""
    text = body.rstrip("。！!~～")
    if text.startswith("我们"):  # "我们搬到上海了": the user's household
        text = "用户和家人" + text[2:]
    head, sep, tail = text.partition("我")
    return head + "用户" + tail.replace("我们", "他们").replace("我", "自己") if sep else text


def _cand(kind: Kind, content: str, attribute: str | None, value: str | None, rule: str,
          lang: str, **kw: object) -> dict:
    return {"kind": kind, "content": content, "attribute": attribute, "value": value,
            "rule": rule, "lang": lang, **kw}


def _age(body: str, lang: str) -> dict | None:
    m = (_AGE_ZH if lang == "zh" else _AGE_EN).search(body)
    if not m:
        return None
    n = parse_number(m.group("n") if m.group("n") else m.groupdict().get("n2"))
    if n is None or not 0 < n < 125:
        return None
    content = f"用户{n}岁" if lang == "zh" else f"User is {n} years old"
    return _cand(Kind.FACT, content, "age", str(n), f"{lang}.age", lang, importance=0.8)


def _health(body: str, lang: str) -> dict | None:
    if lang == "zh":
        m = _LACTOSE_ZH.search(body)
        if m:
            v = m.group("v")
            return _cand(Kind.FACT, f"用户{v}", "diet", v, "zh.diet", lang, importance=0.8)
        m = _HEALTH_ZH.search(body)
        if not m:
            return None
        v = m.group("v") or m.group("v2")
        return _cand(Kind.FACT, f"用户患有{v}", "health", v, "zh.health", lang, importance=0.85)
    m = _HEALTH_EN.search(body)
    if not m:
        return None
    v = (m.group("v") or m.group("v2")).lower()
    content = f"User is {v}" if m.group("v") else f"User has {v}"
    return _cand(Kind.FACT, content, "health", v, "en.health", lang, importance=0.85)


def _cessation(body: str, lang: str) -> dict | None:
    if lang == "zh":
        m = _STOP_ZH.search(body)
        if not m:
            return None
        v = (m.group("v") or m.group("v2") or m.group("v3") or "").strip()
        verb = m.group("verb") or m.group("verb3") or "吃"
        if not v:
            return None
        if verb in ("用", "写") or is_programming_language(v):
            attr = "language" if is_programming_language(v) else "tools"
            return _cand(Kind.FACT, f"用户不再使用{v}", attr, v, "zh.stop_using", lang,
                         polarity=False, change=True, importance=0.7)
        return _cand(Kind.PREFERENCE, f"用户不再{verb}{v}", "food", v, "zh.stop", lang,
                     polarity=False, change=True, importance=0.75)
    m = _STOP_EN.search(body)
    if not m:
        return None
    v = next(g for g in (m.group("v"), m.group("v2"), m.group("v3"), m.group("v4")) if g)
    v = re.sub(r"\s+(?:anymore|any more|now|for now|for good)$", "", v.strip(), flags=re.I)
    if len(v.split()) > 4 or re.match(r"(?i)^(?:it|that|this|worrying|talking)\b", v):
        return None
    if not _FOODISH.search(m.group(0)) and (m.group("v2") or m.group("v3")):
        # "I quit the hospital", "I stopped the piano": a state that ended, in the
        # user's own words — not a food ("no longer eats or drinks the hospital")
        return _cand(Kind.FACT, _render_en(body), "notes", None, "en.stopped", lang,
                     change=True, importance=0.6)
    return _cand(Kind.PREFERENCE, f"User no longer eats or drinks {v}", "food", v, "en.stop",
                 lang, polarity=False, change=True, importance=0.75)


def _completion(body: str, lang: str) -> dict | None:
    m = (_DONE_ZH if lang == "zh" else _DONE_EN).search(body)
    if not m and lang == "zh" and (m := _DONE_ANY_ZH.search(body)):
        # "护照已经续签了": the form of a completion, whatever the verb; it is kept only
        # when it closes an open todo (the pipeline drops it otherwise)
        text = body.rstrip("。！!")
        return _cand(Kind.EVENT, _render_zh(text) if text.startswith("我") else text, COMPLETION,
                     m.group("v"), "zh.done_any", lang, importance=0.6)
    if not m:
        return None
    v = next((g for g in m.groups() if g), "").strip()
    if lang == "zh" and (len(v) < 2 or v.startswith(("不", "没"))):
        return None
    content = (f"用户已完成：{body.lstrip('我').rstrip('。！!')}" if lang == "zh"
               else _render_en(body))
    return _cand(Kind.EVENT, content, COMPLETION, v, f"{lang}.done", lang, importance=0.6)


#: "我爸…", "我女儿…": a relative named by the user (the spoken short forms made whole)
_KIN_ZH = re.compile(r"^我(?:的)?(爸爸|妈妈|爸|妈|老公|老婆|丈夫|妻子|女儿|儿子|哥哥|姐姐|弟弟|妹妹|哥|姐|"
                     r"爷爷|奶奶|外公|外婆|男朋友|女朋友)")
_KIN_NAMES = {"爸": "爸爸", "妈": "妈妈", "哥": "哥哥", "姐": "姐姐"}


def _attribute(body: str, lang: str, clause: Clause) -> dict | None:
    if lang == "zh":
        m = _ATTR_ZH.search(body)
        if not m:
            return None
        x, y, z = m.group("x"), m.group("y"), m.group("z")
        if x in ("我", "这", "那", "你", "他", "她") or len(z) < 1 or x.startswith(("你", "这个", "那个")):
            if x != "我":
                return None
        if x == "我":
            return _cand(Kind.FACT, f"用户的{y}是{z}", f"attr:{y}", z, "zh.attribute", lang,
                         importance=0.7)
        kin = _KIN_ZH.match(x)
        if kin:  # "我爸最大的爱好是养鸽子": the father's, not the user's
            who = _KIN_NAMES.get(kin[1], kin[1])
            return _cand(Kind.FACT, f"用户的{who}{x[kin.end():]}的{y}是{z}", f"attr:{y}", z,
                         "zh.attribute", lang, importance=0.6, subject=who)
        if x.startswith("我"):  # "我租的房子是…", "我现在的医生是…": the user's, said as they said it
            return _cand(Kind.FACT, f"用户{x[1:]}的{y}是{z}", f"attr:{y}", z, "zh.attribute", lang,
                         importance=0.7)
        # an entity of the user's life (an event, an item, a place): it is the subject
        return _cand(Kind.FACT, f"{x}的{y}是{z}", f"attr:{y}", z, "zh.attribute", lang,
                     importance=0.6, subject=x)
    m = _ATTR_EN.search(body)
    if not m or not re.match(r"(?i)^(?:my|i)\b", body):
        return None
    y, z = m.group("y").strip().lower(), m.group("z").strip()
    if m.group("x") or len(y.split()) > 4 or re.match(r"(?i)^(?:favou?rite|goal|dream|name|main)\b", y):
        return None  # the specific rules read those
    return _cand(Kind.FACT, f"User's {y} is {z}", f"attr:{y}", z, "en.attribute", lang,
                 importance=0.7)


def families(clause: Clause) -> list[dict]:
    """What the structural families read in a clause's body (candidate fields)."""
    # "My daughter is 8 years old." reads as "I am 8 years old": the full stop is no part
    # of the statement (a question mark is)
    body, lang = clause.body.rstrip(" .!。！~～"), clause.lang
    out: list[dict] = []
    readers: tuple[Callable[[str, str], dict | None], ...] = (_age, _health, _cessation,
                                                              _completion)
    for read in readers:
        found = read(body, lang)
        if found is not None:
            out.append(found)
    return out


def attribute_statement(clause: Clause) -> dict | None:
    """"X的Y是Z" / "my Y is Z" when no specific rule read the clause."""
    return _attribute(clause.body, clause.lang, clause)


def generic(clause: Clause) -> dict | None:
    """The plain statement a clause makes about its subject, when it makes one."""
    body, lang = clause.body.strip(), clause.lang
    if lang == "zh":
        if not body.startswith("我") or body.startswith("我们") or _FILLER_ZH.match(body):
            return None
        rest = body[1:]
        # "是啊，…"/"是呀": an answer to the assistant, not a statement about the user
        if len(rest) < 4 or len(rest) > 120 or re.search(r"[吗呢？?]$", rest) \
                or re.match(r"是[啊呀吧嘛的]", rest):
            return None
        return _cand(Kind.FACT, _render_zh(body), "notes", None, "zh.statement", lang,
                     importance=0.45, confidence=0.7)
    words = re.findall(r"[\w'’]+", body)
    if len(words) > 40 or body.endswith("?") or _FILLER_EN.match(body):
        return None
    lowered = [w.casefold() for w in words]
    content_words = [w for w in lowered if w not in _EN_STOPWORDS]
    starts_i = bool(re.match(r"(?i)^i\b|^i['’]", body))
    mentions = starts_i or any(w in ("me", "my", "myself") for w in lowered)
    addressed = any(w.startswith(("you", "your")) for w in lowered)
    # a statement not opening with "I" needs a value (a name, a number) to be a fact
    valued = any(w[:1].isupper() or w[1:2].isupper() or w[:1].isdigit() for w in words[1:])
    # "I study law", "I play the piano": a verb and its object are a fact about the user
    least = 2 if starts_i else (3 if valued else 4)
    if not mentions or len(content_words) < least or addressed:
        return None
    kind, attr = (Kind.EVENT, "events") if _PAST.match(body) else (Kind.FACT, "notes")
    return _cand(kind, _render_en(body), attr, None, "en.statement", lang, importance=0.45,
                 confidence=0.7)


def retarget(content: str, clause: Clause) -> str:
    """A "User …" statement restated about the clause's subject."""
    if clause.about_user:
        return content
    who = clause.subject
    if clause.lang == "zh" or content.startswith("用户"):
        label = f"用户的{clause.relation}{clause.name or ''}" if clause.relation else who
        if content.startswith("用户是用户的"):
            tail = content[len("用户是用户的") + len(clause.relation or ""):]
            return f"{who}是用户的{clause.relation}{tail}"
        return re.sub(r"^用户", label, content, count=1)
    label = f"User's {clause.relation}" + (f" {clause.name}" if clause.name else "") \
        if clause.relation else who
    out = re.sub(r"^User's\b", f"{label}'s", content, count=1)
    if out == content:
        out = re.sub(r"^User\b", label, content, count=1)
    return out


_DONE_STOP = frozenset("user needs need to the a an my their already just finally have has had i "
                       "is are was were all now done it for with of".split())


def _stems(text: str) -> set[str]:
    out = set()
    for w in re.findall(r"[a-z0-9]+", text.casefold()):
        if w in _DONE_STOP or len(w) < 3:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if w.endswith(suffix) and len(w) - len(suffix) >= 3:
                w = w[: -len(suffix)]
                break
        out.add(w)
    zh = re.sub(r"用户|需要|已经|完成|好了|了|的|得|要|去|把|我", " ", text)
    for run in re.findall(r"[\u4e00-\u9fff]+", zh):
        out.update(run[i:i + 2] for i in range(max(1, len(run) - 1)))
    return out


def completes(cand: Any, todos: Sequence[Any]) -> Any | None:
    """The open todo a stated completion finishes, or None: the todo sharing most of the
    completion's words (stems; Chinese character pairs), at least half of them."""
    words = _stems(f"{cand.value or ''} {cand.content}")
    best, best_share = None, 0.0
    for todo in todos:
        own = _stems(f"{todo.value or ''} {todo.content}")
        if not words or not own:
            continue
        share = len(words & own) / min(len(words), len(own))
        if share > best_share:
            best, best_share = todo, share
    return best if best_share >= 0.5 else None
