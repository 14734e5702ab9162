"""Offline, rule-based extraction of candidate memories from the last few messages.

Rules read first-person self-statements in English and Chinese and turn each into a
:class:`Candidate`: a kind, a normalised third-person statement ("User uses Go" /
"用户使用Go") and slots (subject, attribute, value, polarity) that the conflict rules in
:mod:`.decide` compare. Only user messages produce candidates; assistant messages are
context only. No LLM and no network: an LLM extractor can replace :func:`extract` behind
the same value type.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memstrata.types import Kind, Message, Role

from .english import PRONOUNS, reads_as_statement, third_person
from .clauses import Clause, People, clauses
from .numbers import resolve_date
from .lexicon import canonical_value, is_programming_language
from .statements import attribute_statement, families, generic, retarget

__all__ = ["Candidate", "SINGLE_VALUED", "FREE_TEXT_ATTRIBUTES", "CORRECTION", "cardinality", "extract",
           "extract_text", "normalise_value"]

#: The attribute of a bare correction ("不是上海，是北京"): the pipeline finds the slot.
CORRECTION = "correction"

#: Attributes that hold one value at a time: a new value supersedes the old one.
#: Everything else (likes, skills, tools, family members, habits…) accumulates.
SINGLE_VALUED = frozenset({
    "name", "job", "employer", "city", "hometown", "language", "answer_language",
    "answer_length", "age", "marital_status", "family:wife", "family:husband",
    "family:partner", "family:mother", "family:father", "family:girlfriend",
    "family:boyfriend", "health:status",
})


#: Attributes whose value is a free-text predicate: equal values are the same
#: statement, different values are not a contradiction.
FREE_TEXT_ATTRIBUTES = frozenset({"habits", "plans", "events", "todo", "goals", "learning",
                                  "preferences", "skills", "notes"})


def cardinality(attribute: str | None) -> str:
    """``"single"`` for attributes that hold one value (name, job, city, main language,
    employer…), ``"multi"`` for those that accumulate (likes, skills, tools…)."""
    if attribute is None:
        return "multi"
    if attribute in SINGLE_VALUED or attribute.startswith(("favorite:", "attr:")):
        return "single"
    return "multi"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One memory the extractor proposes; the store decides what to do with it.

    ``polarity`` is False for negated statements ("I don't like X", "我不吃辣");
    ``change`` is True when the user marked a change ("switched to", "改用", "no longer"),
    and ``replaces`` names the old value when it was stated ("from Java to Go").
    ``evidence`` is the sentence the rule read and ``context`` the whole message, both
    kept for the credibility check.
    """

    kind: Kind
    content: str
    subject: str = "user"
    attribute: str | None = None
    value: str | None = None
    polarity: bool = True
    time: str | None = None
    confidence: float = 0.8
    importance: float = 0.5
    source_message_ids: tuple[str, ...] = ()
    rule: str = ""
    lang: str = "en"
    change: bool = False
    replaces: str | None = None
    scenario: str | None = None
    evidence: str = ""
    context: str = ""
    #: the calendar day ``time`` names, resolved against the message's time (ISO date)
    date: str | None = None

    @property
    def cardinality(self) -> str:
        """``"single"`` or ``"multi"``: see :func:`cardinality`."""
        return cardinality(self.attribute)

    @property
    def slot_key(self) -> tuple[str, str | None, str | None, bool]:
        """What two candidates must share to be the same statement."""
        return (self.subject, self.attribute, normalise_value(self.value), self.polarity)


_ARTICLE = re.compile(r"^(?:a|an|the|my|some)\s+", re.I)

_TIME_EN = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|this (?:morning|afternoon|evening|week|weekend|month|year)"
    r"|(?:next|last) (?:week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|(?:on|by|before|until) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow)"
    r"|(?:in|by|before) (?:january|february|march|april|may|june|july|august|september|october"
    r"|november|december)|in (?:a|\d+|two|three|few) (?:days?|weeks?|months?|years?)"
    r"|(?:every|each) (?:day|morning|evening|night|week|weekend|monday|tuesday|wednesday|thursday"
    r"|friday|saturday|sunday)|(?:a few|two|three|\d+) (?:days|weeks|months|years) ago"
    r"|at \d{1,2}(?::\d\d)?\s?(?:am|pm)?|(?:by|before) the end of (?:the )?(?:week|month|year))\b",
    re.I)
_TIME_ZH = re.compile(
    r"今天|今晚|明天|后天|昨天|前天|(?:这|下|上)(?:周|个?星期|个?礼拜)[一二三四五六日天]?|(?:这|下|上)个?月"
    r"|明年|今年|去年|周[一二三四五六日末]|星期[一二三四五六日天]|\d{1,2}月\d{1,2}[日号]?"
    r"|每(?:天|周|晚|月|年|个?星期)(?:早上|晚上)?|\d+(?:天|周|个月|年)(?:后|以后|前|之前)")
_SCENARIO_EN = re.compile(
    r"\b(at work|at home|on weekends?|on weekdays|when travel(?:l)?ing|for work|at the office"
    r"|in (?:the )?summer|in (?:the )?winter|for personal projects|for side projects|at school)\b", re.I)
_SCENARIO_ZH = re.compile(r"(在公司|在家|周末|工作日|出差时|上班时|工作中|夏天|冬天|私下|个人项目)")
_CHANGE_EN = re.compile(
    r"\b(?:switch(?:ed|ing)?|mov(?:ed|ing)|chang(?:ed|ing)|migrat(?:ed|ing)|transition(?:ed|ing))"
    r"(?: over)?(?: from (?P<old>[\w+#. -]+?))? to\b|\bno longer\b|\bnot anymore\b|\banymore\b"
    r"|\bnow i\b|\bi now\b|\bi(?:'ve| have)? stopped\b|\bi quit\b|\bthese days\b|\bnowadays\b"
    r"|\bi(?:'ve| have) started\b", re.I)
_CHANGE_ZH = re.compile(r"(?:从(?P<old>[^，,。]{1,12}?))?(?:改用|换成|换到|转到|转向|切换到|转成)"
                        r"|不再|现在|如今|最近不|已经不|在转|不[^，,。]{1,8}了$")


def normalise_value(value: str | None) -> str | None:
    """The comparable form of a slot value: casefolded, articles and plurals-insensitive,
    aliases resolved ("golang" → "go", "中文" → "chinese")."""
    if value is None:
        return None
    text = canonical_value(value.strip()).casefold()
    text = _ARTICLE.sub("", text).strip(" .,!?。，！？的了")
    if len(text) > 3 and text.endswith("s") and not text.endswith("ss") and text.isascii():
        text = text[:-1]  # "dogs" and "dog", "movies" and "movie": one like
    return re.sub(r"\s+", " ", text)


def _message_text(message: Message | dict) -> tuple[str, str, str]:
    if isinstance(message, Message):
        return message.role.value, message.content or "", message.id
    role = message.get("role", "")
    return (role.value if isinstance(role, Role) else str(role),
            str(message.get("content") or ""), str(message.get("id") or ""))


def extract_text(text: str, *, message_id: str = "", at: datetime | None = None,
                 people: People | None = None) -> tuple[Candidate, ...]:
    """Candidates stated in one user utterance, in order, without duplicates.

    The utterance is read clause by clause (:func:`.clauses.clauses`): each clause's
    first-person body goes through the structural families (:mod:`.statements`) and the
    rules below, and what they find is moved to the clause's subject — the user, or a
    person in the user's life. A clause no family reads still gives its plain statement.
    ``at`` (the message's time) resolves relative dates; ``people`` carries who "he" and
    "她" are across the utterances of one window.
    """
    out: list[Candidate] = []
    seen: set[tuple] = set()
    for clause in clauses(text, people):
        own = _rule_candidates(clause.text, clause.text, text, clause.lang, message_id) \
            if not clause.about_user else []
        # "my wife is called Sarah": a rule about the user's own slot read it; what else
        # the clause says is still about the person ("我女儿今年八岁，叫朵朵": her age too)
        user_clause = Clause(clause.text, clause.text, lang=clause.lang)
        rest = [] if own and not any(c.attribute and c.attribute.startswith("family:") for c in own) \
            else _clause_candidates(clause, text, message_id)
        pairs = [(c, user_clause) for c in own] + [(c, clause) for c in rest
                                                   if not (own and c.attribute in ("notes", "name"))]
        for cand, where in pairs:
            cand = _situate(cand, where, at)
            if clause.lang != "zh" and not reads_as_statement(cand.content):
                continue  # a restatement that would not read as written: the turn keeps it
            key = (cand.subject, cand.kind, cand.slot_key) if cand.attribute and cand.value \
                else (cand.subject, cand.kind, cand.content)
            if key not in seen:
                seen.add(key)
                out.append(cand)
        if len(out) >= _MAX_CANDIDATES:
            break
    return tuple(out)


_MAX_CANDIDATES = 60  # per utterance: a pasted document is not a list of facts


def _clause_candidates(clause: Clause, text: str, message_id: str) -> list[Candidate]:
    body, lang = clause.body, clause.lang
    sources = (message_id,) if message_id else ()
    evidence = body if clause.advice else clause.text
    found = [Candidate(**fields, source_message_ids=sources, evidence=evidence, context=text)
             for fields in families(clause)]
    found += _rule_candidates(body, evidence, text, lang, message_id)
    if not found and (attr := attribute_statement(clause)) is not None:
        found.append(Candidate(**attr, source_message_ids=sources, evidence=evidence, context=text))
    if not found and clause.corrects and len(body.split()) <= 4:
        # "不是上海，是北京": the slot is the one that held the wrong value (the pipeline finds it)
        found.append(Candidate(Kind.FACT, body, attribute=CORRECTION, value=body.strip(" 。.!"),
                               replaces=clause.corrects, change=True, source_message_ids=sources,
                               rule=f"{lang}.correction", lang=lang, evidence=evidence, context=text))
    elif not found and (plain := generic(clause)) is not None:
        found.append(Candidate(**plain, source_message_ids=sources, evidence=evidence, context=text))
    return found


def _rule_candidates(body: str, evidence: str, text: str, lang: str,
                     message_id: str) -> list[Candidate]:
    found: list[Candidate] = []
    taken: list[tuple[int, int]] = []
    for rule in RULES[lang]:
        for match in rule.pattern.finditer(body):
            # the first (more specific) rule that reads a stretch of text owns it
            if not rule.overlap and any(match.start() < end and start < match.end()
                                        for start, end in taken):
                continue
            cand = _build(rule, match, evidence, text, lang, message_id)
            if cand is None:
                continue
            if not rule.overlap:
                taken.append(match.span())
            found.append(cand)
            if rule.exclusive:
                break
    return found


def _situate(cand: Candidate, clause: Clause, at: datetime | None) -> Candidate:
    """The candidate about the clause's subject, with its correction and its date."""
    changes: dict[str, Any] = {}
    if not clause.about_user and cand.subject == "user":
        changes["subject"] = canonical_value(clause.subject)
        changes["content"] = retarget(cand.content, clause)
    if clause.corrects and cand.attribute != CORRECTION:
        changes.update(replaces=clause.corrects, change=True)
    if clause.advice:
        changes["scenario"] = f"advice:{clause.advice}"
    when = resolve_date(cand.time, at) if cand.time else None
    if when is not None:
        changes["date"] = when.isoformat()
    return replace(cand, **changes) if changes else cand


def extract(messages: Sequence[Message | dict], *, window: int = 6,
            min_messages: int = 1) -> tuple[Candidate, ...]:
    """Candidate memories from the last ``window`` messages.

    Only user messages produce candidates: what the assistant says is not a fact about
    the user. A single user turn is read at once (``min_messages`` = 1): nothing the
    user said waits for a reply to be remembered.
    """
    recent = list(messages)[-window:] if window > 0 else list(messages)
    turns = [(_message_text(m), m.created_at if isinstance(m, Message) else None) for m in recent]
    if sum(1 for (role, _, _), _ in turns if role in ("user", "assistant")) < min_messages:
        return ()
    out: list[Candidate] = []
    people = People()
    for (role, text, mid), at in turns:
        if role == "user":
            out.extend(extract_text(text, message_id=mid, at=at, people=people))
    return tuple(out)


def _build(rule: Rule, m: re.Match, sentence: str, text: str, lang: str,
           message_id: str) -> Candidate | None:
    groups = m.groupdict()
    value = _clean(groups.get("v") or groups.get("v2") or "", lang)
    raw_rel = (groups.get("rel") or "").lower()
    rel = canonical_value(raw_rel)
    if not value and rule.needs_value:
        return None
    attribute = rule.attribute
    if attribute == "@tool":
        attribute = "language" if is_programming_language(value) else "tools"
    elif "{rel}" in attribute:
        attribute = attribute.format(rel=rel)
    if rule.check is not None and not rule.check(value):
        return None
    if rule.fixed_value is not None:
        value = rule.fixed_value
    time = _find(_TIME_EN if lang == "en" else _TIME_ZH, sentence)
    scenario = _find(_SCENARIO_EN if lang == "en" else _SCENARIO_ZH, sentence)
    change_match = (_CHANGE_EN if lang == "en" else _CHANGE_ZH).search(sentence)
    change = rule.change or change_match is not None
    replaces = None
    if change_match is not None and change_match.groupdict().get("old"):
        replaces = _clean(change_match.group("old"), lang)
    if time and value and rule.free_text is False:
        value = _clean(value.replace(time, ""), lang)
    content = rule.render(value, lang, change=change, rel=raw_rel)
    value = canonical_value(value) if value else value
    if not content:
        return None
    return Candidate(
        kind=rule.kind, content=content, attribute=attribute, value=value or None,
        polarity=rule.polarity, time=time, importance=rule.importance,
        source_message_ids=(message_id,) if message_id else (), rule=rule.id, lang=lang,
        change=change, replaces=replaces, scenario=scenario, evidence=sentence, context=text)


_TRAIL_EN = re.compile(
    r"(?:\s+(?:too|a lot|so much|very much|as well|anymore|any more|these days|lately|now|"
    r"right now|either|though|at all|honestly|really|haha|lol))+$", re.I)
_CUT_EN = re.compile(r"\s+(?:because|but|since|and i|and it|so that|so i|which|who|when i|"
                     r"if|although|while|though)\b.*$|\s+[-–—]\s.*$|[,;:(].*$", re.I)
_CUT_ZH = re.compile(r"[，,；;：:（(].*$|(?:因为|但是|不过|所以|而且).*$")
_TRAIL_ZH = re.compile(r"(?:了|啦|呢|吧|啊|呀|哦|嘛|的|哈+|呵呵)+$")


def _clean(value: str, lang: str) -> str:
    value = value.strip().strip("\"'“”‘’")
    if lang == "en":
        value = _CUT_EN.sub("", value)
        value = _TRAIL_EN.sub("", value.strip(" .!?"))
    else:
        value = _CUT_ZH.sub("", value)
        value = _TRAIL_ZH.sub("", value.strip(" 。！？!?"))
    return value.strip(" .!?。！？")


def _find(pattern: re.Pattern, text: str) -> str | None:
    found = pattern.search(text)
    return found.group(0) if found else None


_ROLES = {"engineer", "developer", "programmer", "teacher", "student", "nurse", "doctor",
          "designer", "manager", "scientist", "researcher", "writer", "artist", "lawyer",
          "accountant", "consultant", "founder", "ceo", "cto", "analyst", "architect",
          "musician", "dancer", "chef", "cook", "photographer", "freelancer", "intern",
          "professor", "lecturer", "pilot", "driver", "mom", "dad", "mother", "father",
          "parent", "counselor", "therapist", "veteran", "volunteer", "entrepreneur",
          "pharmacist", "dentist", "officer", "firefighter", "athlete", "coach", "painter",
          "singer", "actor", "actress", "journalist", "editor", "blogger", "streamer",
          "retiree", "undergrad", "phd", "sde", "swe", "devops", "sre", "lead", "owner"}
_NOT_ROLES = {"better", "other", "over", "ever", "never", "under", "after", "user", "fan",
              "member", "person", "guy", "lot", "bit", "part", "believer", "sucker", "winner",
              "loser", "beginner", "together", "moment", "event", "student's",
              "vegetarian", "pescatarian", "vegan", "diabetic", "asthmatic"}  # the diet/health families
_PRONOUN_START = re.compile(
    r"^(?:you|it|that|this|them|him|her|those|these|what|how|when|where|which|who|the way|"
    r"seeing|hearing|your|his|their|our|its|there|here|so|such|a lot|to hear|to see)\b", re.I)
_NAME = re.compile(r"^[A-Z][\w'’-]*(?: [A-Z][\w'’-]*){0,2}$")
#: capitalised words after "I'm" that are not a name: the pronoun, a few states, and
#: nationalities ("-ese"/"-ish" by their ending; "-an"/"-ian" ones listed, as that ending
#: is also a name's: Brian, Vivian)
_NOT_NAMES = frozenset("i ok okay fine good great sorry back home here done new not so just also "
                       "still really very english french dutch thai swiss greek american canadian "
                       "mexican brazilian german italian indian russian korean australian "
                       "african european asian malaysian indonesian persian nigerian".split())
_PLACE = re.compile(r"^(?:the )?[A-Z][\w'’.-]*(?:,? [A-Z][\w'’.-]*){0,3}$")


def _role_ok(value: str) -> bool:
    words = value.lower().split()
    if not words or len(words) > 4 or words[-1] in _NOT_ROLES:
        return False
    head = words[-1]
    return head in _ROLES or (len(head) > 4 and head.endswith(("er", "or", "ist", "ian")))


def _object_ok(value: str) -> bool:
    words = value.split()
    return 0 < len(words) <= 8 and not _PRONOUN_START.search(value)


def _plan_ok(value: str) -> bool:
    words = value.split()
    return 2 < len(words) <= 14 and words[-1].lower() not in ("it", "up", "this", "that")


_LOOSE_START = re.compile(r"^(?:about|for|of|at|with|it|that|this|so|out|on|by|off|into|"
                          r"through|over|a few|some time|a lot|there|here|to (?:a few|some))\b", re.I)


def _event_ok(value: str) -> bool:
    _, _, rest = value.partition(" ")  # the verb is checked by the rule
    rest = _TIME_EN.sub("", rest).strip()
    return (2 <= len(rest.split()) <= 15 and not _PRONOUN_START.search(rest)
            and not _LOOSE_START.search(rest))


def _zh_ok(value: str) -> bool:
    return 0 < len(value) <= 16 and not re.match(r"^(?:你|他|她|它|这|那|什么|怎么)", value)


# --- rendering ----------------------------------------------------------------------------

def _zh_third(predicate: str) -> str:
    return predicate.replace("我的", "自己的").replace("我", "自己")


# --- rules --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Rule:
    """One extraction rule: a pattern with a named group ``v`` and how to state its match."""

    id: str
    pattern: re.Pattern
    kind: Kind
    attribute: str
    en: str = ""
    zh: str = ""
    negated: str = ""
    polarity: bool = True
    change: bool = False
    importance: float = 0.5
    check: Callable[[str], bool] | None = None
    fixed_value: str | None = None
    needs_value: bool = True
    free_text: bool = False
    conjugate: bool = True
    exclusive: bool = True
    overlap: bool = False

    def render(self, value: str, lang: str, *, change: bool = False, rel: str = "") -> str:
        """The normalised third-person statement for a matched value."""
        template = self.zh if lang == "zh" else self.en
        if change and self.negated:
            template = self.negated
        if self.free_text:
            value = _zh_third(value) if lang == "zh" else third_person(value, self.conjugate)
        elif lang == "en":  # "talking about my bike" → "talking about their bike"
            value = " ".join(PRONOUNS.get(w.lower(), w) for w in value.split())
        return template.format(v=value, rel=rel) if template else ""


def _r(id: str, regex: str, kind: Kind, attribute: str, en: str = "", zh: str = "",
       **kw: Any) -> Rule:
    # names and places are told apart from common words by their capital letter, so the
    # capital stays case-sensitive inside otherwise case-insensitive patterns
    regex = regex.replace("[A-Z]", "(?-i:[A-Z])")
    return Rule(id, re.compile(regex, re.I), kind, attribute, en, zh, **kw)


F, P, INS, T, E = Kind.FACT, Kind.PREFERENCE, Kind.INSTRUCTION, Kind.TODO, Kind.EVENT
_I = r"\bi(?:'m|’m| am)"
_STOP = r"(?=\s+(?:and|but|because|since|so|when|while|though|if|cause)\s+i\b|\s*[.,;!?]|$)"
_V = r"(?P<v>[^.,;!?]+?)" + _STOP
_FAMILY = (r"(?P<rel>wife|husband|partner|son|daughter|kids?|children|mom|mum|mother|dad|"
           r"father|sister|brother|girlfriend|boyfriend|dog|cat|puppy|kitten)")

_EN = [
    _r("en.name", r"\bmy name(?:'s| is) (?P<v>[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?)", F, "name",
       "User's name is {v}", importance=0.95, check=lambda v: bool(_NAME.match(v))),
    _r("en.call_me", r"\b(?:call me|i go by) (?P<v>[A-Z][\w'’-]*)", F, "name",
       "User's name is {v}", importance=0.95, check=lambda v: bool(_NAME.match(v))),
    # a self-introduction names the speaker: "Hi! I'm Wang Fang, …", "I'm Tom, a nurse" —
    # at the start of the message or after a greeting, and followed by a pause, so "I'm
    # Chinese and…" or "I'm Done" in mid-message stay out
    _r("en.intro", r"(?:^|\b(?:hi|hello|hey)(?: there)?[!,.]*\s+)i(?:'m|’m| am) "
       r"(?P<v>[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?)(?=\s*[,.!;]|\s+(?:and|from|here)\b|$)", F, "name",
       "User's name is {v}", importance=0.95,
       check=lambda v: bool(_NAME.match(v)) and v.split()[0].lower() not in _NOT_NAMES
       and not v.split()[0].lower().endswith(("ese", "ish"))),
    # "I'm Tom, a software engineer at Google": the role said after the name
    _r("en.intro_role", _I + r" [A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?, an? (?P<v>[\w -]+?)"
       r"(?= at | for | in | with |[.,;!?]|$)", F, "job", "User is a {v}", importance=0.9,
       check=_role_ok, overlap=True),
    _r("en.intro_at", _I + r" [A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?, an? [\w -]+? (?:at|for) "
       r"(?P<v>[A-Z][\w&.'’-]*(?: [A-Z][\w&.'’-]*){0,3})", F, "employer", "User works at {v}",
       importance=0.85, overlap=True),
    # "I'm Tom, a nurse, living in Berlin": the place said as an aside of the introduction
    _r("en.intro_city", _I + r" [^.!?]*?, (?:living|based) in (?P<v>[A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,2})",
       F, "city", "User lives in {v}", importance=0.85, overlap=True,
       check=lambda v: bool(_PLACE.match(v))),
    _r("en.job", _I + r" (?:now |currently |still )?(?:working as )?an? (?P<v>[\w -]+?)"
       r"(?= at | for | in | with |[.,;!?]|$)", F, "job", "User is a {v}", importance=0.9,
       check=_role_ok),
    _r("en.role_at", _I + r" (?:now |currently )?an? [\w -]+? (?:at|for) (?P<v>[A-Z][\w&.'’-]*"
       r"(?: [A-Z][\w&.'’-]*){0,3})", F, "employer", "User works at {v}", importance=0.85,
       overlap=True),
    # "I live in Hangzhou and work as a nurse": the subject said once for both
    _r("en.work_as", r"\b(?:i|and) (?:now )?work as an? (?P<v>[\w -]+?)(?= at | for | in |[.,;!?]|$)",
       F, "job", "User works as a {v}", importance=0.9, check=lambda v: len(v.split()) <= 4),
    _r("en.employer", r"\bi (?:now )?(?:work|am working) (?:at|for) (?P<v>[A-Z][\w&.'’-]*"
       r"(?: [A-Z][\w&.'’-]*){0,3})", F, "employer", "User works at {v}", importance=0.85,
       check=lambda v: bool(_NAME.match(v))),
    # a workplace without a proper name ("I work at a bakery", "in the local hospital");
    # the article keeps "at home", "at night" and "at the moment" out
    _r("en.workplace", r"\bi(?:'m|’m| am)? (?:now |currently |still )?(?:work|working) "
       r"(?:at|in) (?P<v>(?:a|an|the) "
       r"(?!(?:moment|weekend|end|same|time|way|team|group|pair|shift|role|position|"
       r"capacity|field|bit|lot|hurry|rush)\b)[a-z][\w'’-]*"
       r"(?: [a-z][\w'’-]*){0,3}?)(?= and | but | because | since | so | as | where | with |"
       r"[.,;!?]|$)", F, "employer", "User works at {v}", importance=0.8,
       check=lambda v: len(v.split()) <= 4),
    _r("en.city", r"\bi (?:now |currently )?(?:live|am living|'m living|am based|'m based|"
       r"(?:have |'ve |just )?moved|relocated) (?:in|to) (?P<v>[\w'’.-]+(?:,? [A-Z][\w'’.-]*){0,3})",
       F, "city", "User lives in {v}", importance=0.85, check=lambda v: bool(_PLACE.match(v))),
    _r("en.hometown", _I + r" (?:originally )?from (?P<v>[\w'’.-]+(?:,? [A-Z][\w'’.-]*){0,3})|"
       r"\bi (?:grew up|was born) in (?P<v2>[A-Z][\w'’.-]*(?:,? [A-Z][\w'’.-]*){0,3})", F,
       "hometown", "User is from {v}", importance=0.8,
       check=lambda v: bool(_PLACE.match(v))),
    _r("en.main_lang", r"\bmy (?:main|primary|favou?rite|go-to|daily) (?:programming )?language "
       r"is (?P<v>[\w+#.-]+)", F, "language", "User's main programming language is {v}",
       importance=0.85, check=is_programming_language),
    _r("en.use", r"\bi (?:mainly |mostly |primarily |now |usually |still |mostly )?(?:use|code in|"
       r"program in|write|develop in|work in|work with|'ve started using|started using|am using|"
       r"'m using) (?P<v>[A-Z][\w+#.-]*(?: [A-Z][\w+#.-]*)?|[a-z+#]{1,10})(?=\b|$)", F, "@tool",
       "User uses {v}", importance=0.75,
       check=lambda v: is_programming_language(v) or v[:1].isupper()),
    _r("en.switch", r"\b(?:switched|moved|changed|migrated)(?: over)?(?: from [\w+#. -]+?)? to "
       r"(?P<v>[\w+#.-]+)", F, "@tool", "User uses {v}", change=True, importance=0.8,
       check=is_programming_language),
    _r("en.switch_tool", r"\b(?:switched|migrated)(?: over)?(?: from [\w+#. -]+?)? to "
       r"(?P<v>[A-Z][\w+#.-]*(?: [A-Z][\w+#.-]*)?)", F, "@tool", "User uses {v}", change=True,
       importance=0.75),
    _r("en.speak", r"\bi (?:can )?speak (?P<v>[A-Z]\w+(?: and [A-Z]\w+)?)", F, "spoken_languages",
       "User speaks {v}", importance=0.6),
    _r("en.skill", _I + r" (?:really |pretty |very )?(?:good|great|skilled|experienced|fluent|an expert)"
       r" (?:at|in|with) " + _V, F, "skills", "User is good at {v}", importance=0.6,
       check=_object_ok),
    _r("en.learning", _I + r" (?:currently |now )?(?:learning|studying) " + _V, F, "learning",
       "User is learning {v}", importance=0.6, check=_object_ok),
    _r("en.no_longer_like", r"\bi (?:no longer|don't|do not) (?:really )?(?:like|love|enjoy) "
       + _V + r" (?:anymore|any more)|\bi no longer (?:like|love|enjoy) (?P<v2>[^.,;!?]+?)" + _STOP,
       P, "likes",
       "User no longer likes {v}", polarity=False, change=True, importance=0.6,
       check=_object_ok),
    _r("en.dislike", r"\bi (?:really |absolutely |just )?(?:hate|dislike|can't stand|cannot stand|"
       r"don't like|do not like|don't enjoy|detest) " + _V, P, "likes", "User dislikes {v}",
       negated="User no longer likes {v}", polarity=False, importance=0.6, check=_object_ok),
    _r("en.like", r"\bi (?:really |absolutely |also |just |totally |kinda |kind of |still |"
       r"especially )?(?:love|like|enjoy|adore) " + _V, P, "likes", "User likes {v}",
       importance=0.6, check=_object_ok),
    _r("en.fan", _I + r" (?:really |also )?(?:into|a (?:big |huge )?fan of|passionate about) "
       + _V, P, "likes", "User likes {v}", importance=0.6, check=_object_ok),
    _r("en.favorite", r"\bmy favou?rite (?P<rel>[\w ]{2,20}?) is " + _V, P, "favorite:{rel}",
       "User's favourite {rel} is {v}", importance=0.6, check=_object_ok),
    _r("en.prefer", r"\bi (?:usually |generally )?prefer " + _V, P, "preferences",
       "User prefers {v}", importance=0.6, check=_object_ok),
    _r("en.diet", _I + r" (?:a |now |strictly )?(?P<v>vegetarian|vegan|pescatarian|"
       r"lactose intolerant|gluten[- ]free|on a diet|keto|teetotal)", F, "diet", "User is {v}",
       importance=0.75),
    _r("en.no_eat", r"\bi (?:don't|do not|no longer|never|can't|cannot|stopped) "
       r"(?:eat|eating|drink|drinking) " + _V, P, "food", "User does not eat or drink {v}",
       polarity=False, importance=0.7, check=_object_ok),
    _r("en.allergy", _I + r" allergic to " + _V, F, "allergies", "User is allergic to {v}",
       importance=0.85, check=_object_ok),
    _r("en.family_name", r"\bmy " + _FAMILY + r"(?:'s name is| is called| is named|,) "
       r"(?P<v>[A-Z][\w'’-]*)", F, "family:{rel}", "User's {rel} is named {v}",
       importance=0.75, check=lambda v: bool(_NAME.match(v))),
    _r("en.have_family", r"\bi have (?P<v>(?:a|an|one|two|three|four|\d+) (?:\w+ )?"
       r"(?:sons?|daughters?|kids?|children|dogs?|cats?|pets?|brothers?|sisters?|grandkids)"
       r"(?: named [A-Z]\w+)?)", F, "family", "User has {v}", importance=0.75),
    _r("en.married", _I + r" (?P<v>married|single|divorced|engaged|widowed)\b", F,
       "marital_status", "User is {v}", importance=0.75),
    _r("en.goal", r"\bmy (?:long[- ]term |main |big )?(?:goal|dream|aim|ambition) is (?:to )?"
       + _V + r"|\bi (?:want|hope|plan|dream) to (?:become|be) (?P<v2>an? [^.,;!?]+)", F, "goals",
       "User's goal is to {v}", importance=0.8, check=_object_ok),
    _r("en.remind", r"\b(?:remind me (?:to|about|that)|(?:don't|do not) let me forget(?: to)?) "
       + _V, T, "todo", "User needs to {v}", importance=0.8, free_text=True, conjugate=False,
       check=_object_ok),
    _r("en.need_by", r"\bi (?:need to|have to|must|got to|gotta|should) (?P<v>[^.,;!?]+? (?:by|before|"
       r"until|on|next|this|tomorrow|tonight)\b[^.,;!?]*)", T, "todo", "User needs to {v}",
       importance=0.75, free_text=True, conjugate=False),
    _r("en.plan", _I + r" (?:planning|going|gonna|about|hoping|thinking of|thinking about|"
       r"looking forward) (?:to )?(?P<v>[^.,;!?]+)", E, "plans", "User plans to {v}",
       importance=0.55, free_text=True, conjugate=False, check=_plan_ok),
    _r("en.habit", r"\bi (?P<v>(?:usually|always|often|normally|typically|regularly|never|"
       r"every (?:day|morning|night|week)) [^.,;!?]+)", F, "habits", "User {v}",
       importance=0.55, free_text=True, check=lambda v: 1 < len(v.split()) <= 14),
    _r("en.event", r"\bi (?:just |recently |finally |also |actually )?(?P<v>(?:went|attended|visited|"
       r"started|joined|finished|adopted|painted|graduated|won|began|completed|celebrated|"
       r"traveled|travelled|published|launched|volunteered|organized|hosted|created|built|"
       r"signed up|took up|ran|received|passed|opened|bought|got|made|lost|read|wrote|tried|met|"
       r"scored|gave|reached|climbed|hiked|performed|donated|raised|earned|baked|cooked|"
       r"designed|learned|learnt|taught|helped|watched|played|took|saw|found|moved)"
       r" [^.,;!?]+)", E, "events", "User {v}", importance=0.5, free_text=True,
       check=_event_ok),
    _r("en.ongoing", r"\bi(?:'ve|’ve| have) (?:also |recently |just |really )?(?:been|started|"
       r"begun) (?P<v>(?:working on|learning|reading|writing|training|practicing|practising|"
       r"studying|volunteering|teaching|playing|painting|taking|doing|building|running|"
       r"focusing on|exploring|collaborating|cooking|baking|going to|attending|trying) "
       r"[^.,;!?]+)", E, "activities", "User has been {v}", importance=0.5, free_text=True,
       conjugate=False, check=lambda v: 2 <= len(v.split()) <= 15 and not _PRONOUN_START.search(
           v.partition(" ")[2])),
    _r("en.goal_is", r"(?P<v>[^.,;!?]{3,60}?) (?:is|was) (?:my|one of my) (?:number one |main |biggest |"
       r"ultimate |long[- ]term |big |dream )?(?:goals?|dreams?)\b", F, "goals",
       "User's goal is {v}", importance=0.8, free_text=True, conjugate=False,
       check=lambda v: _object_ok(v) and not re.match(r"(?i)^(?:it|that|this|what)\b", v)),
    _r("en.will_keep", r"\bi(?:'ll|’ll| will) (?:definitely |totally |surely |really |try to |"
       r"continue to )?(?P<v>keep (?:on )?\w+ing [^.,;!?]+|keep up (?:my|the) [^.,;!?]+)", E, "plans",
       "User plans to {v}", importance=0.5, free_text=True, conjugate=False,
       check=lambda v: len(v.split()) <= 12),
    _r("en.short", r"\b(?:(?<!\bi )(?<!\bwe )keep (?:it|things|them|(?:your |the |all )?"
       r"(?:answers?|replies|reply|"
       r"responses?|explanations?|messages?))(?: nice and| very| really)? (?:short|brief|concise|"
       r"simple|succinct|to the point)|(?:be|please be|stay) (?:more |very )?(?:brief|concise|short|"
       r"succinct|terse)|(?:give|write|send)(?: me)? (?:short|shorter|brief|concise|quick) "
       r"(?:answers|replies|responses)|(?:short|shorter|concise|brief|succinct) (?:answers|"
       r"replies|responses)|get (?:straight )?to the point|no need to elaborate|(?:don't|do not|"
       r"never) (?:ramble|over-?explain|be (?:so |too )?(?:verbose|wordy|long-winded))|"
       r"(?:less|not so|not too) (?:verbose|wordy|long)|(?:answer|reply|respond|explain)(?: it)? "
       r"in (?:one|a|two|a few|one or two) (?:sentences?|lines?|words?))", INS,
       "answer_length", "User wants short, concise answers", fixed_value="short",
       importance=0.85, needs_value=False),
    _r("en.detail", r"\b(?:more detail(?:ed)?|(?:detailed|thorough|in-depth|longer) (?:answers|"
       r"explanations|replies)|explain (?:it |things )?in (?:detail|depth)|(?:go|walk me) "
       r"(?:through it )?step by step|(?:be|please be) (?:more )?(?:thorough|detailed))", INS,
       "answer_length", "User wants detailed answers", fixed_value="detailed",
       importance=0.8, needs_value=False),
    _r("en.bullets", r"\b(?:use|with|in|as|give me|prefer) (?:short )?(?:bullet(?:ed)?[- ]?"
       r"(?:points?|lists?)|bullets|numbered lists?)", INS, "answer_style",
       "User wants answers as bullet points", fixed_value="bullet points", importance=0.75,
       needs_value=False),
    _r("en.answer_lang", r"\b(?:answer|reply|respond|speak|talk|write)(?: to me| me|"
       r" (?:all |your )?(?:answers|replies|responses))? (?:only |always )?in "
       r"(?P<v>English|Chinese|Mandarin|French|German|Spanish|Japanese)", INS, "answer_language",
       "User wants answers in {v}", importance=0.85),
    _r("en.examples", r"\b(?:always )?(?:include|add|give|show)(?: me)? (?P<v>(?:code )?examples?)",
       INS, "answer_style", "User wants answers to include {v}", importance=0.75),
    _r("en.no_emoji", r"\b(?:don't|do not|never|no) (?:use )?emojis?", INS, "answer_style",
       "User wants no emojis in answers", fixed_value="no emojis", importance=0.7,
       needs_value=False),
]

_ZV = r"(?P<v>[^，,。！？!?；;]+)"
_ZH_ROLES = (r"(?:工程师|程序员|开发者?|开发人员|老师|教师|学生|医生|护士|设计师|产品经理|经理|律师|"
             r"会计|销售|研究员|博士生|研究生|本科生|大学生|作家|记者|厨师|司机|架构师|分析师|运营|"
             r"测试|创业者|自由职业者|教授|画家|歌手|演员|编辑|主播|全职妈妈|全职爸爸)")
_ZADV = (r"(?:也|很|非常|特别|超|挺|最|比较|一直|周末|平时|一般|通常|经常|总是|每天|晚上|早上|现在|目前|最近|"
         r"其实|还|都|真的|基本上?|向来|从小|一向|尤其|蛮|更|还是|特|老|就)*")
_ZH = [
    _r("zh.name", r"我(?:叫|名叫|的?名字(?:是|叫))(?P<v>[^，,。！？!?\s]{1,6}?)(?=[，,。！？!?\s]|$|，)", F,
       "name", zh="用户名叫{v}", importance=0.95, check=_zh_ok),
    _r("zh.call_me", r"叫我(?P<v>[^，,。！？!?\s]{1,6}?)(?:就行|就好|吧)?(?=[，,。！？!?\s]|$)", F,
       "name", zh="用户名叫{v}", importance=0.95, check=_zh_ok),
    _r("zh.job", r"我(?:现在|目前)?是(?:一[名个位])?(?P<v>[^，,。！？!?是]{0,8}?" + _ZH_ROLES + ")",
       F, "job", zh="用户是{v}", importance=0.9),
    _r("zh.job_do", r"我(?:是|主要|现在)?做(?P<v>[^，,。！？!?]{1,10}?)的", F, "job", zh="用户从事{v}",
       importance=0.85),
    _r("zh.job_at", r"我(?:现在|目前)?(?P<v>在[^，,。！？!?在]{1,12}?(?:当|做|担任)[^，,。！？!?]{1,8}?)"
       r"(?=[，,。！？!?]|$)", F, "job", zh="用户{v}", importance=0.9, check=lambda v: len(v) <= 20),
    _r("zh.employer", r"我(?:现在|目前)?在(?P<v>[^，,。！？!?]{1,12}?)(?:工作|上班)", F,
       "employer", zh="用户在{v}工作", importance=0.85, check=_zh_ok),
    # "我（们）上个月搬到厦门了": a time may stand between the subject and the verb
    _r("zh.city", r"我(?:们)?(?:上个?月|上周|上星期|去年|今年|年初|前不久|前几天|最近|刚刚?)?"
       r"(?:现在|目前|已经)?(?:住在|定居在?|搬到了?|搬去了?)(?P<v>[^，,。！？!?了]{1,10})", F,
       "city", zh="用户住在{v}", importance=0.85, check=_zh_ok),
    _r("zh.hometown", r"我(?:来自|老家(?:在|是))(?P<v>[^，,。！？!?]{1,10})|我是(?P<v2>[^，,。！？!?一]"
       r"{1,6}?)人(?=[，,。！？!?]|$)", F, "hometown", zh="用户来自{v}", importance=0.8,
       check=lambda v: _zh_ok(v) and v not in ("好", "个", "本地", "外地", "什么")),
    _r("zh.main_lang", r"我的?(?:主力|常用|主要|日常)(?:的)?(?:编程|开发)?语言(?:是|用的是|为)"
       r"(?P<v>[A-Za-z0-9+#.-]+)",
       F, "language",
       zh="用户的主力语言是{v}", importance=0.85, check=is_programming_language),
    _r("zh.use", r"我(?:主要|平时|一般|现在|目前|日常|一直|还是)?(?:在)?(?:用|使用|写)"
       r"(?P<v>[A-Za-z][A-Za-z0-9+#.-]*)",
       F, "@tool", zh="用户使用{v}", importance=0.75),
    _r("zh.switch", r"(?:改用|换成|换到|转到|转向|切换到|在转|转)(?:了)?(?P<v>[A-Za-z][A-Za-z0-9+#.-]*)", F,
       "@tool", zh="用户使用{v}", change=True, importance=0.8),
    _r("zh.no_longer_like", r"我(?:已经|现在)?不再(?:喜欢|爱)(?P<v>[^，,。！？!?]+)|我现在不(?:喜欢|爱)"
       r"(?P<v2>[^，,。！？!?]+?)了", P, "likes", zh="用户不再喜欢{v}", polarity=False,
       change=True, importance=0.6, check=_zh_ok),
    _r("zh.no_eat", r"我(?:最近|现在|已经)?(?:不再|不|不能|戒了)(?:吃|喝)(?P<v>[^，,。！？!?]+)", P, "food",
       zh="用户不吃{v}", polarity=False, importance=0.7, check=_zh_ok),
    _r("zh.eat", r"我" + _ZADV + r"(?:爱|喜欢)(?:吃|喝)(?P<v>[^，,。！？!?]+)", P, "food",
       zh="用户爱吃{v}", importance=0.6, check=_zh_ok),
    _r("zh.dislike", r"我(?:很|非常|特别|最)?(?:讨厌|不喜欢|厌恶|受不了|不爱)(?P<v>[^，,。！？!?]+)", P,
       "likes", zh="用户不喜欢{v}", polarity=False, importance=0.6, check=_zh_ok),
    _r("zh.like", r"我" + _ZADV + r"(?:喜欢|爱|热爱|享受)(?:去)?(?P<v>[^，,。！？!?]+)", P,
       "likes", zh="用户喜欢{v}", importance=0.6, check=_zh_ok),
    _r("zh.vegetarian", r"我(?:吃素|是素食者?)", F, "diet", zh="用户吃素", fixed_value="vegetarian",
       importance=0.75, needs_value=False),
    _r("zh.allergy", r"我对(?P<v>[^，,。！？!?]{1,10})过敏", F, "allergies", zh="用户对{v}过敏",
       importance=0.85),
    _r("zh.family_name", r"我(?:的)?(?P<rel>老婆|妻子|老公|丈夫|儿子|女儿|孩子|妈妈|母亲|爸爸|父亲|哥哥|"
       r"姐姐|弟弟|妹妹|女朋友|男朋友|狗|猫)(?:[^，,。！？!?叫]{1,12}[，,])?(?:她|他|它)?(?:叫|名叫|的名字是)"
       r"(?P<v>[^，,。！？!?]{1,6})", F,
       "family:{rel}", zh="用户的{rel}叫{v}", importance=0.75),
    _r("zh.have_family", r"我有(?P<v>(?:一|两|三|四|\d)(?:个|只|条)(?:儿子|女儿|孩子|狗|猫|宠物|哥哥|姐姐|"
       r"弟弟|妹妹))", F, "family", zh="用户有{v}", importance=0.75),
    _r("zh.goal", r"我的(?:长期)?(?:目标|梦想)是(?P<v>[^，,。！？!?]+)|我想成为(?P<v2>[^，,。！？!?]+)", F,
       "goals", zh="用户的目标是{v}", importance=0.8),
    _r("zh.learning", r"我(?:最近|现在)?(?:在|正在)学(?:习)?(?P<v>[^，,。！？!?]+)", F, "learning",
       zh="用户在学习{v}", importance=0.6),
    _r("zh.remind", r"(?:提醒我|别让我忘了|记得提醒我)" + _ZV, T, "todo", zh="用户需要{v}",
       importance=0.8, free_text=True),
    _r("zh.need_by", r"我(?P<v>[^，,。！？!?]*?(?:前|之前|以前)(?:得|需要|必须|要)[^，,。！？!?]+)"
       r"|我(?P<v2>(?:今天|明天|后天|下周[一二三四五六日天]?|这周|月底|周[一二三四五六日末])(?:得|需要|必须)"
       r"[^，,。！？!?]+)", T, "todo", zh="用户{v}", importance=0.75, free_text=True),
    _r("zh.plan", r"我(?P<v>(?:打算|计划|准备)[^，,。！？!?]+)", E, "plans", zh="用户{v}",
       importance=0.55, free_text=True),
    _r("zh.habit", r"我(?P<v>(?:每天|每周|每晚|每天早上|通常|一般|经常|总是|习惯)[^，,。！？!?]+)", F,
       "habits", zh="用户{v}", importance=0.55, free_text=True),
    _r("zh.short", r"(?:别|不要|不用)(?:太)?(?:啰嗦|废话|长篇大论)|少(?:说)?(?:点)?废话|简短(?:一)?(?:点|些)|"
       r"简单(?:一)?点|简洁(?:一)?(?:点|些)|精简(?:一)?(?:点|些)|(?:直接)?说重点|"
       r"(?:简短|简洁)(?:地|些|点)?(?:回答|回复)|(?:回答|回复|答案)(?:得|要|尽量|请)*"
       r"(?:简短|简洁|短一?(?:点|些))|(?:不要|别|不用)(?:写|说|回答|回复)?(?:得)?(?:太长|太多|那么多|这么长)|"
       r"长话短说|言简意赅|一句话(?:说|回答|讲|总结)", INS,
       "answer_length", zh="用户希望回答简短", fixed_value="short", importance=0.85,
       needs_value=False),
    _r("zh.detail", r"详细(?:一)?点|详细(?:地)?(?:解释|说明|讲|回答)|说(?:得)?详细|讲(?:得)?详细"
       r"|展开(?:讲|说)"
       r"|具体(?:一)?点", INS, "answer_length", zh="用户希望回答详细",
       fixed_value="detailed", importance=0.8, needs_value=False),
    _r("zh.bullets", r"(?:用|以)?(?:列表|要点|分点|条目|项目符号)(?:的形式|形式)?(?:回答|列出|说|写)|"
       r"分(?:点|条)(?:回答|列出|说|写)?", INS, "answer_style", zh="用户希望回答分点列出",
       fixed_value="bullet points", importance=0.75, needs_value=False),
    _r("zh.answer_lang", r"(?:用|说|以)(?P<v>中文|汉语|英文|英语)(?:回答|回复|交流|说)?|"
       r"(?P<v2>中文|汉语|英文|英语)(?:回答|回复)", INS,
       "answer_language", zh="用户希望用{v}回答", importance=0.85),
    _r("zh.examples", r"(?:附带|附上|带上|给出)(?P<v>代码示例|示例代码|例子)", INS, "answer_style",
       zh="用户希望回答附带{v}", importance=0.75),
    _r("zh.no_emoji", r"(?:不要|别|不用)(?:用|加|带)?(?:表情|emoji)", INS, "answer_style",
       zh="用户不希望回答使用表情",
       fixed_value="no emojis", importance=0.7, needs_value=False),
]

RULES: dict[str, list[Rule]] = {"en": _EN, "zh": _ZH}
