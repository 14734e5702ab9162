"""Clauses and who they are about (pure functions): the structure the extraction rules
read, so that one predicate family serves every subject.

:func:`clauses` splits an utterance into clauses (sentence ends, semicolons, and commas
or conjunctions before a new subject) and gives each a :class:`Clause`: its
``subject`` — ``"user"`` (I/我, we/我们, a subjectless clause), a relation of the user's
("husband", "上司", "son"), or a named person — and its ``body``, the clause restated
in the first person, so the rules written for "I …"/"我…" read "my husband is diabetic"
as "I am diabetic" about the husband. Pronouns (he/she/他/她/其) refer to the last
person named, across clauses and turns (:class:`People`). "My cardiologist says no more
red meat for me" is advice about the user: its body is the advice. Corrections ("6,
not 5", "不是5岁，是6岁") are read as :attr:`Clause.corrects`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memstrata.text import detect_language

__all__ = ["Clause", "People", "clauses", "sentences", "RELATIONS_EN", "RELATIONS_ZH"]

#: Relations of the user's, English (singular, the canonical subject) and their plurals.
RELATIONS_EN = (
    "husband|wife|partner|spouse|son|daughter|kid|child|baby|mom|mum|mother|dad|father|"
    "parent|brother|sister|sibling|grandma|grandmother|grandpa|grandfather|grandson|"
    "granddaughter|aunt|uncle|cousin|nephew|niece|girlfriend|boyfriend|fiance|fiancee|"
    "friend|best friend|roommate|flatmate|neighbor|neighbour|boss|manager|colleague|"
    "coworker|co-worker|teammate|mentor|teacher|student|client|doctor|dog|cat|puppy|kitten|"
    "pet|in-laws|mother-in-law|father-in-law|sister-in-law|brother-in-law|stepson|"
    "stepdaughter").split("|")
_PLURAL_EN = {"kids": "kid", "children": "child", "parents": "parent", "sons": "son",
              "daughters": "daughter", "brothers": "brother", "sisters": "sister",
              "friends": "friend", "colleagues": "colleague", "coworkers": "coworker",
              "grandkids": "grandkid", "dogs": "dog", "cats": "cat", "pets": "pet",
              "cousins": "cousin", "grandparents": "grandparent", "siblings": "sibling"}
RELATIONS_ZH = (
    "老公|老婆|丈夫|妻子|爱人|先生|太太|媳妇|儿子|女儿|孩子|宝宝|闺女|爸爸|妈妈|父亲|母亲|爸妈|父母|哥哥|"
    "姐姐|弟弟|妹妹|表哥|表姐|表弟|表妹|堂哥|堂姐|堂弟|堂妹|爷爷|奶奶|外公|外婆|姥姥|姥爷|叔叔|阿姨|舅舅|"
    "姑姑|姨妈|婆婆|公公|岳父|岳母|男朋友|女朋友|男友|女友|对象|未婚夫|未婚妻|好朋友|闺蜜|朋友|室友|"
    "邻居|上司|老板|领导|经理|主管|同事|同学|导师|老师|学生|客户|医生|狗狗|狗|猫咪|猫").split("|")
_REL_ZH = "|".join(sorted(RELATIONS_ZH, key=len, reverse=True))
_REL_EN = "|".join(sorted(RELATIONS_EN + list(_PLURAL_EN), key=len, reverse=True))

_MALE = {"husband", "son", "dad", "father", "brother", "grandpa", "grandfather", "grandson",
         "uncle", "nephew", "boyfriend", "fiance", "stepson", "father-in-law", "brother-in-law"}
_FEMALE = {"wife", "daughter", "mom", "mum", "mother", "sister", "grandma", "grandmother",
           "granddaughter", "aunt", "niece", "girlfriend", "fiancee", "stepdaughter",
           "mother-in-law", "sister-in-law"}

_ADVISERS = (r"doctor|cardiologist|dentist|nutritionist|dietitian|dietician|physician|gp|"
             r"therapist|trainer|coach|allergist|pediatrician|physio|physiotherapist|"
             r"dermatologist|endocrinologist")
_ADVICE_EN = re.compile(
    r"^(?:(?:my|the|our) )?(?P<who>" + _ADVISERS + r")(?: \w+)? (?:says|said|told me|tells me|"
    r"advised(?: me)?|recommended|recommends|wants me to|insists|ordered(?: me)?)(?: that)?,? "
    r"(?P<rest>.+)$", re.I)
_ADVICE_ZH = re.compile(r"^(?:我的)?(?P<who>医生|大夫|营养师|教练|牙医|心脏科医生|主治医生)"
                        r"(?:说|建议|让我|叫我|要求我|告诉我)(?:我)?(?P<rest>.+)$")

_LEAD_EN = re.compile(
    r"^(?:(?:(?:and|but|so|also|actually|anyway|btw|by the way|honestly|plus|oh|well)\b[,!:]?\s*)"
    r"|(?:(?:yeah|yes|yep|no|nope|sorry|ok|okay|haha|lol|wow|um|hmm|then|now|oops|ah|hey|"
    r"guess what|fun fact|just so you know|fyi|i mean|you know|correction|wait|i was wrong|"
    r"my bad|scratch that|(?:some |great |good |big )?news|(?:quick |small )?update|great|"
    r"good|finally|so anyway|heads up)[,!:.]+\s*))+", re.I)
_LEAD_ZH = re.compile(r"^(?:(?:哦|噢|嗯|对了|其实|另外|还有|不过|但是|而且|所以|顺便说一下|顺便|说起来|唉|哎|"
                      r"好吧|嗯嗯|哈哈+|对|是的|不对|抱歉|不好意思|纠正一下|更正一下|那个|然后|话说|好消息|告诉你|"
                      r"跟你说|报告一下|更新一下|终于)[，,!！:：\s]*)+")
_NOT_NAMES = frozenset(
    "I The This That These Those It He She They We You Yesterday Today Tomorrow Last Next My "
    "Our Your His Her Their What How Why When Where Who Which Thanks Thank Also Oh Yeah Hey Hi "
    "Hello Well So But And Just There Here Anyway Wow Sounds Sorry Yes No Maybe Please Let "
    "Good Great Nice Cool Awesome Love Glad Congrats Congratulations Happy Oops Ok Okay "
    "Everything Nothing Something Someone Everyone Life Work Family Monday Tuesday Wednesday "
    "Thursday Friday Saturday Sunday January February March April May June July August "
    "September October November December Christmas Easter God Mom Dad Haha Lol Definitely "
    "Totally Absolutely Really Actually Honestly Lately Recently Sometimes Now Then Not".split())
_NAME_VERB = (r"is|was|has|had|just|loves|likes|enjoys|hates|works|lives|moved|got|turned|"
              r"started|plays|wants|needs|went|studies|teaches|runs|owns|recently|finally|"
              r"always|never|usually|also|can't|cannot|doesn't|does|will|'s")
_NAMED_EN = re.compile(r"^(?P<name>[A-Z][a-z]{1,15})(?: (?P<last>[A-Z][a-z]{1,15}))?"
                       r" (?P<rest>(?:" + _NAME_VERB + r")\b.*)$")
_MY_REL_EN = re.compile(r"^(?:my|our) (?:(?:little|older|younger|big|baby|eldest|youngest|oldest|"
                        r"best|new|old|twin|two|three) )*(?P<rel>" + _REL_EN + r")\b"
                        r"(?:,? (?P<name>(?-i:[A-Z][a-z]{1,15}))(?= |,))?,?"
                        r"(?P<rest>(?!'s\b)(?:\s.*)?)$", re.I)
_PRONOUN_EN = re.compile(r"^(?P<p>he|she)(?P<rest>(?:'s|’s|\s).*)$", re.I)
_WE_EN = re.compile(r"^we(?P<rest>(?:'re|'ve|'ll|'d|’re|’ve|\s).*)$", re.I)
_VERB_START_EN = re.compile(
    r"^(?:gonna|going to|just|got|went|heading|working|planning|thinking|started|took|"
    r"love|loved|have|had|finally|recently|currently|still|really|also|off to|can't wait|"
    r"looking forward)\b", re.I)

#: characters a name after a relation never starts with ("我的上司就只有…", "我同事也在…")
#: characters a name after "我姐姐" does not start with (adverbs of time and degree:
#: "我姐姐如今住在北京", "我老公目前在…", "我女儿后来…" are not people called 如今, 目前, 后来)
_NOT_NAME_START_ZH = ("[就也都还今在是很最又刚已现每一不没经会要想能对把被给和跟说让去来住喜有的了"
                      "如目后前平常总先才]")
_MY_REL_ZH = re.compile(r"^我(?:的)?(?P<rel>" + _REL_ZH + r")"
                        r"(?P<name>(?!" + _NOT_NAME_START_ZH + r")[\u4e00-\u9fff]{2,3}?(?=[，,是在今喜有住])"
                        r"|[A-Z][a-z]+)?(?P<rest>.*)$")
_NAME_IS_REL_ZH = re.compile(r"^(?P<name>[\u4e00-\u9fff]{2,4}|[A-Z][a-z]+)是我的?(?P<rel>" + _REL_ZH + r")"
                             r"(?P<rest>.*)$")
_PRONOUN_ZH = re.compile(r"^(?P<p>他|她|其|它)(?P<rest>.*)$")
_WE_ZH = re.compile(r"^我们(?:团队|公司|组|部门)?(?P<rest>.*)$")
_SUBJECTLESS_ZH = re.compile(
    r"^(?:做|常用|主要|平时|一般|现在|目前|已经|最近|刚刚?|正在|住在|喜欢|爱|想|要|打算|准备|每天|周末|"
    r"很|挺|不再|不|没|去|也|还|一直|换成|改用|搬到|在|对|吃|喝|从|基本)")

#: a full stop after a title or a common abbreviation ends no sentence: "I've been assigned to
#: Dr. Okafor" is one sentence, not "…assigned to Dr" and "Okafor"
_ABBREVIATIONS = ("Dr", "Mr", "Mrs", "Ms", "Mx", "Prof", "St", "Jr", "Sr", "Mt", "vs", "etc", "approx",
                  "Inc", "Ltd", "Ave", "Rd")
_NOT_AN_END = "".join(rf"(?<!\b{a}\.)" for a in _ABBREVIATIONS) + r"(?<!\be\.g\.)(?<!\bi\.e\.)"
_SPLIT = re.compile(r"(?<=[。！？；\n])\s*|(?<=[.!?;])" + _NOT_AN_END + r"(?:\s+|$)")
_SPLIT_EN = re.compile(r",?\s+(?:and|but|so|because|though|although|while)\s+(?=(?:i|my|we|he|she)\b)"
                       r"|,\s+(?=(?:i|my|we)\b)", re.I)
_SPLIT_ZH = re.compile(r"[，,]\s*(?=(?:我|他|她|其|但|不过|而且|所以|现在|已经|不是|是|常用|主要|平时|"
                       r"一般|目前|最近|每天|周末|住在|喜欢|不再|换成|改用|搬到|打算|准备|今年|在)|"
                       r"(?:" + _REL_ZH + r"))|(?<=[^，,])(?:但是|不过|而且)(?=我)")
_CORRECT_EN = re.compile(r"(?:,\s*|\s+)(?:and )?not (?P<old>[\w'’-]+(?: [\w'’-]+){0,2})[.!]*$"
                         r"|^(?:it's|its|it is) (?P<new>[\w'’ -]{1,30}?),? not "
                         r"(?P<old2>[\w'’ -]{1,30})$", re.I)
_CORRECT_ZH = re.compile(r"^不是(?P<old>[^，,。]{1,15}?)[，,]?(?:而)?是(?P<new>[^，,。]{1,15}?)[。！!]*$"
                         r"|^(?P<new2>[^，,。]{1,15}?)[，,]不是(?P<old2>[^，,。]{1,15}?)[。！!]*$")
_MAX_CLAUSES = 200  # an utterance pasted at 100k characters: read a bounded prefix
_MAX_CLAUSE_CHARS = 600  # and no clause longer than a statement: the rules' cost is bounded


@dataclass(slots=True)
class People:
    """Who the conversation is about so far: the last person named, for pronouns."""

    last: tuple[str, str | None] | None = None  # (subject, gender "m"/"f"/None)
    names: dict[str, str] = field(default_factory=dict)  # name → relation ("Tom" → "husband")

    def note(self, subject: str, relation: str | None = None) -> None:
        gender = "m" if relation in _MALE else "f" if relation in _FEMALE else None
        self.last = (subject, gender)

    def resolve(self, pronoun: str) -> str | None:
        if self.last is None:
            return None
        subject, gender = self.last
        want = {"he": "m", "she": "f", "他": "m", "她": "f"}.get(pronoun.casefold())
        return subject if gender is None or want is None or want == gender else None


@dataclass(frozen=True, slots=True)
class Clause:
    """One clause of an utterance and who it is about."""

    text: str
    body: str
    subject: str = "user"
    relation: str | None = None
    name: str | None = None
    lang: str = "en"
    advice: str | None = None
    corrects: str | None = None
    #: the subject was not said ("做前端的", "是银行行长"): it continues the previous clause's
    implicit: bool = False

    @property
    def about_user(self) -> bool:
        return self.subject == "user"


def _third_to_first_en(rest: str) -> str:
    """"is diabetic" → "am diabetic", "just turned 5" → "just turned 5", "loves X" → "love X"."""
    words = rest.split()
    for i, w in enumerate(words):
        low = w.casefold()
        if low in ("just", "really", "also", "still", "now", "recently", "finally", "usually",
                   "always", "often", "never", "already", "currently", "mostly", "basically"):
            continue
        repl = {"is": "am", "has": "have", "does": "do", "doesn't": "don't", "was": "was",
                "'s": "am", "’s": "am"}.get(low)
        if repl is None and len(low) > 3 and low.endswith("ies"):
            repl = w[:-3] + "y"
        elif repl is None and low.endswith(("ches", "shes", "sses", "xes", "oes")):
            repl = w[:-2]
        elif repl is None and low.endswith("s") and not low.endswith(("ss", "us", "is")) and len(low) > 2:
            repl = w[:-1]
        if repl is not None:
            words[i] = repl
        break
    return " ".join(words)


#: a time that opens a clause before its subject ("Since last month I…", "从上个月开始我…"):
#: read through, like a lead-in (the clause's text keeps it, so a change is still seen)
_TIME_LEAD_EN = re.compile(
    r"^(?:(?:since|from|as of|starting|beginning|ever since)(?: (?!i\b|my\b|we\b)[\w']+){1,5}?|"
    r"these days|nowadays|lately|recently|now|at the moment|currently|these past (?:few )?\w+|"
    r"for (?:a few|some|the past few) \w+)[,]?\s+(?=(?:i|i'm|i've|my|we)\b)", re.I)
_TIME_LEAD_ZH = re.compile(r"^(?:从)?(?:上个?月|上周|上星期|去年|今年|年初|最近|这几天|这段时间|"
                           r"现在|如今|目前|后来|前不久|前段时间|[^，,。我你他她]{1,6}(?:以后|之后))"
                           r"(?:开始|起|以来)?[，,]?\s*(?=我)")


def _en_clause(text: str, people: People) -> Clause:
    core = _TIME_LEAD_EN.sub("", _LEAD_EN.sub("", text).strip()).strip()
    m = _ADVICE_EN.match(core)
    if m:
        rest = m.group("rest").strip()
        if not re.match(r"(?i)(?:i|i'm|i've|no more|to|you|stop|cut|quit|avoid)\b", rest):
            rest = "I " + rest if not rest.lower().startswith(("that", "no ")) else rest
        return Clause(text, rest, lang="en", advice=m.group("who").lower())
    m = _MY_REL_EN.match(core)
    if m and not m.group("rest").strip(" ,."):  # "my boss, he is from Ohio": who "he" is
        rel = _PLURAL_EN.get(m.group("rel").casefold(), m.group("rel").casefold())
        people.note(rel, rel)
        return Clause(text, "", rel, rel, m.group("name"), "en")
    if m and m.group("rest").strip():
        rel = m.group("rel").casefold()
        rel = _PLURAL_EN.get(rel, rel)
        name = m.group("name")
        people.note(name or rel, rel)  # "my friend Tom": Tom, the user's friend
        if name:
            people.names[name] = rel
        # "my boss, he is from Ohio": the resumptive pronoun is the relation itself
        rest = re.sub(r"(?i)^\s*(?:he|she)(?='s\b|’s\b|\s)", "", m.group("rest")).strip()
        rest = "is" + rest[2:] if rest[:2] in ("'s", "’s") else rest
        return Clause(text, "I " + _third_to_first_en(rest), name or rel, rel, name, "en")
    m = _PRONOUN_EN.match(core)
    if m:
        who = people.resolve(m.group("p"))
        if who is not None:
            rest = m.group("rest")
            rest = rest[2:] if rest[:2] in ("'s", "’s") and not rest[2:3].isalpha() else rest
            body = ("I am " + rest.strip()) if m.group("rest")[:2] in ("'s", "’s") \
                else "I " + _third_to_first_en(rest.strip())
            return Clause(text, body, who, who if who in RELATIONS_EN else people.names.get(who),
                          who if who not in RELATIONS_EN else None, "en")
    m = _NAMED_EN.match(core)
    if m and m.group("name") not in _NOT_NAMES and not core.startswith("I "):
        name = m.group("name")
        rest = m.group("rest")
        body = ("I am " + rest[2:].strip()) if rest.startswith("'s") else "I " + _third_to_first_en(rest)
        rel = people.names.get(name)
        people.note(name, rel)
        return Clause(text, body, name, rel, name, "en")
    m = _WE_EN.match(core)
    if m:
        rest = m.group("rest")
        body = "I" + {"'re": "'m", "’re": "'m"}.get(rest[:3], rest[:3]) + rest[3:] \
            if rest[:3] in ("'re", "’re", "'ve", "’ve", "'ll", "’ll") else "I" + rest
        return Clause(text, re.sub(r"\bour\b", "my", body, flags=re.I), lang="en")
    if _VERB_START_EN.match(core):
        progressive = re.match(r"(?i)gonna|going|heading|working|planning|thinking|off to|"
                               r"looking|currently|still", core)
        core = ("I'm " if progressive else "I ") + core
    return Clause(text, core, lang="en")


def _zh_clause(text: str, people: People, first: bool) -> Clause:
    core = _TIME_LEAD_ZH.sub("", _LEAD_ZH.sub("", text).strip()).strip()
    m = _ADVICE_ZH.match(core)
    if m:
        return Clause(text, "我" + m.group("rest").lstrip("我"), lang="zh", advice=m.group("who"))
    m = _NAME_IS_REL_ZH.match(core)
    if m:
        name, rel = m.group("name"), m.group("rel")
        people.names[name] = rel
        people.note(name, rel)
        rest = m.group("rest").strip("，, ")
        return Clause(text, "我是用户的" + rel + (("，" + rest) if rest else ""), name, rel, name, "zh")
    m = _MY_REL_ZH.match(core)
    if m and not m.group("rest").strip(" ，,。"):  # "我的上司，他老家是重庆的": who "他" is
        people.note(m.group("name") or m.group("rel"), m.group("rel"))
        return Clause(text, "", m.group("name") or m.group("rel"), m.group("rel"), m.group("name"), "zh")
    if m and m.group("rest").strip():
        rel, name = m.group("rel"), m.group("name")
        rest = re.sub(r"^[他她它]", "", m.group("rest").lstrip("，, "))
        people.note(name or rel, rel)
        if name:
            people.names[name] = rel
        body = "我" + rest if not rest.startswith("的") else "我" + rest
        return Clause(text, body, name or rel, rel, name, "zh")
    m = _PRONOUN_ZH.match(core)
    if m and not m.group("rest").startswith(("们", "实", "他", "中", "余", "次")):
        who = people.resolve(m.group("p"))
        if who is not None:
            rest = m.group("rest")
            body = ("我的" + rest) if m.group("p") == "其" else "我" + rest
            return Clause(text, body, who, people.names.get(who, who if who in RELATIONS_ZH else None),
                          who if who not in RELATIONS_ZH else None, "zh")
    m = _WE_ZH.match(core)
    if m:
        return Clause(text, "我" + m.group("rest"), lang="zh")
    if first and (_SUBJECTLESS_ZH.match(core) or core.startswith("是")):
        # Chinese drops the subject: "做前端的" is "我做前端的", and after "我的上司今年44岁，"
        # "是银行行长" is still about the boss (see :func:`clauses`)
        return Clause(text, "我" + core, lang="zh", implicit=True)
    return Clause(text, core, lang="zh")


def sentences(text: str) -> list[str]:
    """The sentences of a message, either language."""
    return [s.strip() for s in _SPLIT.split(text or "") if s.strip()]


def _split(text: str) -> list[str]:
    out: list[str] = []
    for sentence in _SPLIT.split(text or ""):
        sentence = sentence.strip()[:_MAX_CLAUSE_CHARS * 4]
        if not sentence:
            continue
        # both splitters: "我周末喜欢爬山 and I switched to Go" is two clauses in two languages
        for piece in _SPLIT_EN.split(sentence):
            out += [part.strip(" ,，")[:_MAX_CLAUSE_CHARS] for part in _SPLIT_ZH.split(piece or "")
                    if part and part.strip(" ,，")]
        if len(out) >= _MAX_CLAUSES:
            break
    return out[:_MAX_CLAUSES]


def _corrections(parts: list[str]) -> list[tuple[str, str | None]]:
    """Each part with the value it says was wrong; "不是5岁，是6岁" (two parts) → one."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(parts):
        part = parts[i]
        nxt = parts[i + 1] if i + 1 < len(parts) else ""
        joined = f"{part}，{nxt}"
        m = _CORRECT_ZH.match(joined) if part.startswith("不是") and nxt else None
        if m and m.group("new"):
            out.append((m.group("new"), m.group("old")))
            i += 2
            continue
        if detect_language(part) == "zh":
            m = _CORRECT_ZH.match(part)
            if m:
                out.append((m.group("new") or m.group("new2"), m.group("old") or m.group("old2")))
            elif nxt.startswith("不是") and (m2 := re.match(r"^不是(?P<old>[^，,。]{1,15}?)[。！!]*$", nxt)):
                out.append((part, m2.group("old")))
                i += 2
                continue
            else:
                out.append((part, None))
        else:
            m = _CORRECT_EN.search(part)
            if m and (m.group("old") or m.group("old2")):
                kept = part[:m.start()] if m.group("old") else m.group("new")
                out.append((kept.strip(), (m.group("old") or m.group("old2")).strip()))
            else:
                out.append((part, None))
        i += 1
    return out


def clauses(text: str, people: People | None = None) -> list[Clause]:
    """The clauses of one utterance, each with its subject and first-person body."""
    people = people if people is not None else People()
    out: list[Clause] = []
    for part, old in _corrections(_split(text)):
        lang = detect_language(part)
        clause = _zh_clause(part, people, first=True) if lang == "zh" else _en_clause(part, people)
        prev = out[-1] if out else None
        if clause.implicit and prev is not None and not prev.about_user and prev.lang == lang:
            clause = Clause(clause.text, clause.body, prev.subject, prev.relation, prev.name, lang,
                            implicit=True)
        if old:
            clause = Clause(clause.text, clause.body, clause.subject, clause.relation, clause.name,
                            clause.lang, clause.advice, old, clause.implicit)
        out.append(clause)
    return out
