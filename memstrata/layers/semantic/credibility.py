"""Should a candidate be remembered, and how far can it be believed?

Two pure checks run between extraction and dedup:

* the **write filter** scores importance × structure × timeliness and
  drops small talk and one-off remarks under a threshold — "少记比多记好";
* **credibility** lowers the confidence of jokes, sarcasm and hedges,
  and drops hypotheticals, questions, quotes of other people and impossible claims
  ("I'm from Mars"). A candidate whose confidence ends below ``session_only_below``
  stays in the session only; an optional repetition rule keeps a fact
  out of long-term memory until it has been said twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from memstrata.types import Kind

from .extract import Candidate

__all__ = ["CredibilityConfig", "Assessment", "Screened", "write_score", "is_small_talk",
           "assess", "screen", "count_mentions"]


@dataclass(frozen=True, slots=True)
class CredibilityConfig:
    """Thresholds of the write filter and the credibility check (all configurable)."""

    write_threshold: float = 0.2
    drop_below: float = 0.2
    session_only_below: float = 0.5
    joke_factor: float = 0.35
    sarcasm_factor: float = 0.35
    hedge_factor: float = 0.65
    impossible_confidence: float = 0.1
    require_repetition: bool = False
    min_mentions: int = 2


@dataclass(frozen=True, slots=True)
class Assessment:
    """A candidate after the checks: its adjusted confidence, where it goes, and why."""

    candidate: Candidate
    score: float
    verdict: str  # "long_term" | "session" | "drop"
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Screened:
    """Candidates split by verdict."""

    long_term: tuple[Candidate, ...] = ()
    session_only: tuple[Candidate, ...] = ()
    dropped: tuple[Assessment, ...] = ()


_SMALL_TALK = re.compile(
    r"^\s*(?:hi|hello|hey|thanks?|thank you|ok(?:ay)?|cool|nice|great|bye|good (?:morning|night)|"
    r"lol|haha+|yes|no|sure|got it|sounds good|你好|您好|谢谢|好的|嗯+|哈+|拜拜|再见|早上好|晚安|收到|"
    r"没问题|可以)[\s!.。！~～]*$", re.I)
_WEATHER = re.compile(r"\bweather\b|天气(?:不错|真好|好热|好冷)", re.I)
_TRANSIENT = re.compile(
    r"\b(?:right now|at the moment|today|tonight|this morning|currently feeling|i'?m (?:so )?"
    r"(?:tired|hungry|bored|sleepy|busy))\b|现在好|今天好|有点累|好累|好饿|好困", re.I)

_JOKE = re.compile(r"\b(?:ha(?:ha)+|lol|lmao|rofl|jk|just kidding|kidding|j/k)\b|"
                   r"[😂🤣😜😆😝😛🙃]|哈哈|开玩笑|逗你|嘿嘿|hhh+|233+", re.I)
_SARCASM = re.compile(r"\b(?:yeah right|oh sure|sure,? because|as if|/s)\b|呵呵|才怪|真是太好了呢",
                      re.I)
_HYPOTHETICAL = re.compile(
    r"\b(?:if i (?:were|was|had|could)|imagine|suppose|supposing|what if|pretend|hypothetically|"
    r"in another life|in my dreams?|i wish i)\b|假如|如果我是|假设|要是我是|想象一下|假装", re.I)
_QUESTION = re.compile(r"[?？]\s*$|^(?:do|does|did|am|is|are|can|could|should|would|will|have)\s+i\b|"
                       r"[吗嘛]\s*[?？]?\s*$|是不是|对吗", re.I)
_QUOTE = re.compile(
    r"\b(?:my (?:friend|mom|dad|mother|father|wife|husband|boss|colleague|brother|sister|son|"
    r"daughter|partner)s? (?:says?|said|thinks?|told me)|(?:he|she|they) (?:says?|said|think)|"
    r"people say|someone said|according to)\b|听说|我朋友说|他说|她说|他们说|别人说|据说", re.I)
_IMPOSSIBLE = re.compile(
    r"\bfrom (?:mars|venus|jupiter|saturn|the moon|outer space|another planet|space|narnia|"
    r"hogwarts|middle[- ]earth)\b|\b(?:i'?m|i am) (?:an? )?(?:alien|unicorn|dragon|vampire|"
    r"wizard|god|robot|immortal|superhero|cat|dog)\b|\b(?:i'?m|i am) (?:[2-9]\d{2}|\d{4,}) years old\b|"
    r"火星|外星人|月球来的|我是神仙|我是超人|我是一只|长生不老", re.I)
_HEDGE = re.compile(r"\b(?:i think|i guess|maybe|probably|perhaps|kind of|sort of|not sure|"
                    r"i suppose)\b|好像|可能|大概|也许|应该是|说不定", re.I)

_DURABLE = {Kind.FACT: 1.0, Kind.PREFERENCE: 1.0, Kind.INSTRUCTION: 1.0, Kind.TODO: 0.9,
            Kind.EVENT: 0.6}


def is_small_talk(text: str) -> bool:
    """Greetings, thanks, acknowledgements and weather chat: never worth remembering."""
    return bool(_SMALL_TALK.match(text or "")) or bool(_WEATHER.search(text or ""))


def write_score(candidate: Candidate) -> float:
    """Importance × structure × timeliness in [0, 1].

    Structure is high when the rule filled slots (attribute and value: it can be
    compared and superseded later), timeliness is low for a one-off state of the
    moment ("I'm tired today") and for dated events, high for durable facts.
    """
    if is_small_talk(candidate.evidence):
        return 0.0
    structure = 1.0 if candidate.attribute and candidate.value else 0.8
    if candidate.attribute in ("habits", "plans", "events", "todo"):
        structure = 0.8
    timeliness = _DURABLE.get(candidate.kind, 0.8)
    if candidate.kind is not Kind.TODO and _TRANSIENT.search(candidate.evidence):
        timeliness *= 0.4
    return round(candidate.importance * structure * timeliness, 4)


def assess(candidate: Candidate, config: CredibilityConfig = CredibilityConfig()) -> Assessment:
    """The credibility verdict for one candidate.

    Questions, hypotheticals and quotes of someone else are dropped: they state nothing
    about the user. Jokes, sarcasm and hedges lower the confidence; impossible claims
    fall to ``impossible_confidence``. Joke markers are read in the whole message ("I'm
    from Mars. Haha"), the rest in the sentence the rule read.
    """
    sentence, message = candidate.evidence or candidate.content, candidate.context or candidate.evidence
    reasons: list[str] = []
    conf = candidate.confidence
    score = write_score(candidate)
    if score < config.write_threshold:
        return Assessment(candidate, score, "drop", ("write_filter",))
    # instructions are imperatives: a question mark ("keep it short?") still asks for it
    if candidate.kind is not Kind.INSTRUCTION and _QUESTION.search(sentence):
        return Assessment(candidate, score, "drop", ("question",))
    if _HYPOTHETICAL.search(sentence):
        return Assessment(candidate, score, "drop", ("hypothetical",))
    if _QUOTE.search(sentence):
        return Assessment(candidate, score, "drop", ("quote",))
    if _IMPOSSIBLE.search(sentence):
        conf = min(conf, config.impossible_confidence)
        reasons.append("impossible")
    if _JOKE.search(message):
        conf *= config.joke_factor
        reasons.append("joke")
    if _SARCASM.search(message):
        conf *= config.sarcasm_factor
        reasons.append("sarcasm")
    if _HEDGE.search(sentence):
        conf *= config.hedge_factor
        reasons.append("hedge")
    conf = round(conf, 4)
    adjusted = replace(candidate, confidence=conf)
    if conf < config.drop_below:
        return Assessment(adjusted, score, "drop", tuple(reasons))
    if conf < config.session_only_below:
        return Assessment(adjusted, score, "session", tuple(reasons))
    return Assessment(adjusted, score, "long_term", tuple(reasons))


def count_mentions(candidate: Candidate, earlier: Iterable[Candidate]) -> int:
    """How many times the same statement was made, this one included (same slots, or
    the same content when the rule filled no slots)."""
    def key(c: Candidate) -> tuple:
        return c.slot_key if c.attribute and c.value else (c.kind, c.content.casefold())
    own = key(candidate)
    return 1 + sum(1 for c in earlier if key(c) == own)


def screen(candidates: Sequence[Candidate], config: CredibilityConfig = CredibilityConfig(),
           *, earlier: Sequence[Candidate] = ()) -> Screened:
    """Split candidates into long-term, session-only and dropped.

    With ``config.require_repetition``, a fact or preference said fewer than
    ``min_mentions`` times (counting ``earlier`` candidates of this user, e.g. from the
    session buffer) stays session-only; instructions and todos are taken at once,
    because the user asked for them explicitly.
    """
    long_term: list[Candidate] = []
    session: list[Candidate] = []
    dropped: list[Assessment] = []
    for cand in candidates:
        verdict = assess(cand, config)
        if verdict.verdict == "drop":
            dropped.append(verdict)
            continue
        if (verdict.verdict == "long_term" and config.require_repetition
                and cand.kind in (Kind.FACT, Kind.PREFERENCE)
                and count_mentions(cand, earlier) < config.min_mentions):
            session.append(verdict.candidate)
        elif verdict.verdict == "session":
            session.append(verdict.candidate)
        else:
            long_term.append(verdict.candidate)
    return Screened(tuple(long_term), tuple(session), tuple(dropped))
