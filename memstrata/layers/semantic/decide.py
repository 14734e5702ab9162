"""What to do with a new candidate given what is already remembered, and how memories
age: dedup, conflicts, decay, the per-user cap, feedback.

Pure functions over values: the caller finds the nearest active items of the user and
their cosine similarities, :func:`decide` returns a :class:`Decision`, and
:func:`apply_decision` turns it into the item rows to write, which the store applies in
one transaction with its version rows.

Slots decide first, similarity second. The default embedder (multilingual-e5-small)
squeezes cosines into a narrow band: "User uses Java" / "User uses Go" score 0.93 and
"用户喜欢爬山" / "用户的名字是小王" 0.93, above the 0.92 dedup threshold of the seeds. So
two items whose slots name different attributes or different values are never merged
on similarity alone, and a similarity merge also needs some shared wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING

from memstrata.errors import ValidationError, shown
from memstrata.types import Kind, MemoryItem, Message, Status

from .extract import FREE_TEXT_ATTRIBUTES, Candidate, cardinality, normalise_value

if TYPE_CHECKING:
    from .state import Updates

__all__ = ["Action", "Decision", "Neighbor", "DecideConfig", "Judge", "SameValue", "decide", "to_item",
           "apply_decision", "forget_request", "DecayConfig", "decay", "memory_value",
           "evict", "FeedbackConfig", "apply_feedback", "FREE_TEXT_ATTRIBUTES"]


class Action(str, Enum):
    ADD = "add"
    BOOST = "boost"
    SUPERSEDE = "supersede"
    KEEP_BOTH = "keep_both"
    IGNORE = "ignore"


@dataclass(frozen=True, slots=True)
class Neighbor:
    """An existing item near the candidate, with the cosine similarity of their embeddings."""

    item: MemoryItem
    similarity: float


@dataclass(frozen=True, slots=True)
class DecideConfig:
    """Dedup and conflict thresholds. ``min_overlap`` is the share of
    words a similarity-only merge must also share (calibration for compressed cosines)."""

    dedup_threshold: float = 0.92
    conflict_low: float = 0.70
    boost_step: float = 0.05
    min_overlap: float = 0.5


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict for one candidate. ``reason`` names the rule (``slot.single``,
    ``sim.dedup``…) or ``llm`` — the store records it as the version's *why*."""

    action: Action
    target_id: str | None = None
    reason: str = ""
    similarity: float | None = None
    content: str | None = None
    confidence: float | None = None
    version: int | None = None
    tags: tuple[str, ...] = ()


#: An optional LLM judge for band cases: (candidate, existing) → "contradiction",
#: "scenario", "duplicate" or "unrelated"; None when it cannot tell (the LLM failed or
#: the budget is spent), and the rules decide.
Judge = Callable[[Candidate, MemoryItem], "str | None"]

_TASTES = frozenset({"likes", "food", "diet", "preferences"})


def _polarity(item: MemoryItem) -> bool:
    return bool(item.metadata.get("polarity", True))


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9+#]+|[\u4e00-\u9fff]", text.casefold())) - {"user", "用", "户"}


def _overlap(a: str, b: str) -> float:
    wa, wb = _words(a), _words(b)
    return len(wa & wb) / max(1, min(len(wa), len(wb)))


def _boost(cand: Candidate, n: Neighbor, reason: str, config: DecideConfig) -> Decision:
    longer = cand.content if len(cand.content) > len(n.item.content) else n.item.content
    return Decision(Action.BOOST, n.item.id, reason, n.similarity, content=longer,
                    confidence=round(min(1.0, n.item.confidence + config.boost_step), 4))


def _supersede(n: Neighbor, reason: str) -> Decision:
    return Decision(Action.SUPERSEDE, n.item.id, reason, n.similarity, version=n.item.version + 1)


def _scenario_differs(cand: Candidate, item: MemoryItem) -> bool:
    old = item.metadata.get("scenario")
    return (cand.scenario or old) is not None and cand.scenario != old and not cand.change


#: Whether two slot values name the same thing across languages ("lactose intolerant" /
#: "乳糖不耐受"); :class:`.values.ValueMatcher` decides it with the embedder.
SameValue = Callable[[str, str], bool]


def decide(candidate: Candidate, neighbors: Sequence[Neighbor],
           config: DecideConfig = DecideConfig(), judge: Judge | None = None,
           same_value: SameValue | None = None, covers: SameValue | None = None,
           updates: "Updates | None" = None) -> Decision:
    """Decide ADD, BOOST, SUPERSEDE, KEEP_BOTH or IGNORE for one candidate.

    Slots first: same attribute and value → BOOST; same value, opposite polarity
    ("I no longer like X") → SUPERSEDE; a single-valued attribute with a new value →
    SUPERSEDE, or KEEP_BOTH tagged past/recent when the scenario differs;
    a multi-valued attribute supersedes only the value the user said it replaces.
    Then similarity: above ``dedup_threshold`` → BOOST; in the conflict band, same kind
    → ``judge`` if given, and when it has no verdict a change marker → SUPERSEDE.
    ``same_value`` makes a value said in another language the same value. A negated
    statement ("no longer uses TypeScript") supersedes only the value it names; with no
    active item holding that value it is IGNOREd on a single-valued slot (the slot has
    already moved on: "switched to Rust, rarely write TypeScript now"). A stated
    cessation ("no more red meat for me") also ends a liking or food item whose value it
    ``covers`` ("User loves steak"). ``updates`` (:class:`.state.SlotMatcher`) finds the
    fact a statement no slot rule settled changes, by meaning ("I sold the Corolla" ends
    "User drives a Toyota Corolla").
    """
    active = sorted((n for n in neighbors if n.item.status is Status.ACTIVE),
                    key=lambda n: -n.similarity)
    for n in active:  # re-extraction of the same messages must not apply twice
        if (candidate.source_message_ids and n.item.content == candidate.content
                and set(candidate.source_message_ids) <= set(n.item.source_message_ids)):
            return Decision(Action.IGNORE, n.item.id, "same_source", n.similarity)
    if candidate.attribute:
        by_slot = _by_slot(candidate, active, config, same_value, covers)
        if by_slot is not None:
            return by_slot
    if updates is not None:  # the state model: a change of a fact no slot rule named
        slotted = updates(candidate, [n.item for n in active])
        if slotted is not None:
            return Decision(Action.SUPERSEDE, slotted.item.id, slotted.reason,
                            round(slotted.similarity, 4), version=slotted.item.version + 1)
    return _by_similarity(candidate, active, config, judge)


def _same_value(candidate: Candidate, same: list[Neighbor], config: DecideConfig,
                same_value: SameValue | None) -> Decision | None:
    """The first item of the candidate's slot that holds its value: BOOST when the
    polarity agrees, SUPERSEDE when it flips ("I no longer like X")."""
    value = normalise_value(candidate.value)
    for n in same:
        other = normalise_value(n.item.value)
        if value is None and other is None and candidate.attribute in FREE_TEXT_ATTRIBUTES:
            continue  # two free statements ("notes") with no value are not one value
        equal = other == value or (
            same_value is not None and candidate.value is not None and n.item.value is not None
            and other is not None and value is not None and same_value(candidate.value, n.item.value))
        if equal:
            reason = "slot.same" if other == value else "slot.same_value"
            if _polarity(n.item) == candidate.polarity:
                return _boost(candidate, n, reason, config)
            return _supersede(n, "slot.polarity")
    return None


def _by_slot(candidate: Candidate, active: list[Neighbor], config: DecideConfig,
             same_value: SameValue | None, covers: SameValue | None) -> Decision | None:
    """The slot rules of :func:`decide` for a candidate with an attribute; ``None`` when
    none of them settles it."""
    same = [n for n in active if n.item.attribute == candidate.attribute
            and (n.item.subject or "user") == candidate.subject]
    found = _same_value(candidate, same, config, same_value)
    if found is not None:
        return found
    if candidate.replaces:
        old = normalise_value(candidate.replaces)
        for n in same:
            if normalise_value(n.item.value) == old:
                return _supersede(n, "slot.replaces")
    if not candidate.polarity and candidate.change and covers is not None and candidate.value:
        for n in active:
            if (n.item.attribute in _TASTES and candidate.attribute in _TASTES and _polarity(n.item)
                    and (n.item.subject or "user") == candidate.subject and n.item.value
                    and covers(candidate.value, n.item.value)):
                return _supersede(n, "slot.cessation")
    if not candidate.polarity and cardinality(candidate.attribute) == "single":
        return Decision(Action.IGNORE, reason="slot.negated_inactive")
    if cardinality(candidate.attribute) == "single":
        for n in same:
            if _scenario_differs(candidate, n.item):
                return Decision(Action.KEEP_BOTH, n.item.id, "slot.scenario", n.similarity,
                                tags=("past", "recent"))
            return _supersede(n, "slot.single")
    return None


def _by_similarity(candidate: Candidate, active: list[Neighbor], config: DecideConfig,
                   judge: Judge | None) -> Decision:
    """The similarity rules of :func:`decide`, against the most similar comparable item."""
    comparable = [n for n in active if n.item.kind is candidate.kind
                  and not _slot_distinct(candidate, n.item)]
    if not comparable:
        return Decision(Action.ADD, reason="new")
    best = comparable[0]
    if best.similarity > config.dedup_threshold:
        if _overlap(candidate.content, best.item.content) >= config.min_overlap:
            return _boost(candidate, best, "sim.dedup", config)
    if config.conflict_low < best.similarity <= config.dedup_threshold or (
            best.similarity > config.dedup_threshold):
        verdict = judge(candidate, best.item) if judge is not None else None
        if verdict:
            return _judged(candidate, best, verdict, config)
        if candidate.change and _overlap(candidate.content, best.item.content) >= config.min_overlap:
            return _supersede(best, "sim.change")
    return Decision(Action.ADD, reason="new")


def _slot_distinct(cand: Candidate, item: MemoryItem) -> bool:
    """Both carry structured slots that say different things: never the same memory."""
    if not (cand.attribute and item.attribute):
        return False
    if cand.attribute != item.attribute:
        return True
    return cand.attribute not in FREE_TEXT_ATTRIBUTES


def _judged(cand: Candidate, n: Neighbor, verdict: str, config: DecideConfig) -> Decision:
    verdict = (verdict or "").strip().lower()
    if verdict == "contradiction":
        return _supersede(n, "llm")
    if verdict == "scenario":
        return Decision(Action.KEEP_BOTH, n.item.id, "llm", n.similarity, tags=("past", "recent"))
    if verdict == "duplicate":
        return _boost(cand, n, "llm", config)
    return Decision(Action.ADD, reason="llm")


def to_item(candidate: Candidate, *, id: str, user_id: str, now: datetime,
            namespace: str = "", session_id: str | None = None) -> MemoryItem:
    """The memory item a candidate becomes; slots the item has no column for go in
    metadata (polarity, scenario, time, rule, lang)."""
    meta = {"polarity": candidate.polarity, "rule": candidate.rule, "lang": candidate.lang}
    for key in ("scenario", "time", "replaces", "date"):
        if getattr(candidate, key):
            meta[key] = getattr(candidate, key)
    return MemoryItem(
        id=id, user_id=user_id, namespace=namespace, kind=candidate.kind,
        content=candidate.content, subject=candidate.subject, attribute=candidate.attribute,
        value=candidate.value, confidence=candidate.confidence, importance=candidate.importance,
        created_at=now, updated_at=now, source_session_id=session_id,
        source_message_ids=candidate.source_message_ids, metadata=meta)


def apply_decision(decision: Decision, candidate: Candidate, existing: MemoryItem | None, *,
                   id: str, user_id: str, now: datetime, namespace: str = "",
                   session_id: str | None = None,
                   said_at: datetime | None = None) -> tuple[MemoryItem, ...]:
    """The item rows to write for a decision: changed old item first, then the new one.

    A superseded item keeps what replaced it and since when (``replaced_by``, ``until``:
    ``said_at``, the time of the statement, else ``now``); every new item holds its
    value ``since`` the time it was said, when that is known. Retrieval reads them
    (:mod:`memstrata.retrieval.currency`)."""
    new = to_item(candidate, id=id, user_id=user_id, now=now, namespace=namespace,
                  session_id=session_id)
    if decision.action is Action.IGNORE:
        return ()
    if said_at is not None:  # every fact holds from the time it was said
        new = new.evolve(metadata={**new.metadata, "since": said_at.isoformat()})
    if decision.action is Action.ADD or existing is None:
        return (new,)
    if decision.action is Action.BOOST:
        sources = tuple(dict.fromkeys(existing.source_message_ids + candidate.source_message_ids))
        return (existing.evolve(content=decision.content or existing.content,
                                confidence=decision.confidence or existing.confidence,
                                importance=max(existing.importance, candidate.importance),
                                updated_at=now, last_accessed=now,
                                source_message_ids=sources),)
    if decision.action is Action.SUPERSEDE:
        when = (said_at or now).isoformat()
        return (existing.evolve(status=Status.SUPERSEDED, updated_at=now,
                                metadata={**existing.metadata, "replaced_by": new.id, "until": when}),
                new.evolve(version=decision.version or existing.version + 1,
                           supersedes=existing.id, metadata={**new.metadata, "since": when}))
    old_tag, new_tag = decision.tags or ("past", "recent")
    return (existing.evolve(tags=tuple(dict.fromkeys(existing.tags + (old_tag,))), updated_at=now),
            new.evolve(tags=(new_tag,)))


_POLITE_EN = re.compile(
    r"^\s*(?:(?:hey|ok(?:ay)?|so|actually|oh|um|and|also|hmm|sorry|wait|on second thought)[,!]?\s+)*"
    r"(?:(?:please|pls|kindly|could you|can you|would you|will you|would you mind|do you mind|"
    r"i'd like you to|i would like you to|i want you to|i need you to|i'd prefer (?:it )?if you|"
    r"i'd rather you|maybe|just|perhaps you could|if you could|if possible,?)\s+)*", re.I)
_TAIL_EN = re.compile(r"(?:,?\s+(?:please|pls|thanks|thank you|if you can|if you don't mind|for me|"
                      r"from (?:your )?memory|from your records|too|as well|for good|entirely|"
                      r"completely|ok|okay))+\s*[.!?]*\s*$", re.I)
_FORGET_EN = re.compile(
    r"^(?:forget(?:ting)?|delete|erase|remove|wipe|drop|scratch|unlearn|"
    r"(?:don't|do not|not|didn't|stop) (?:remember(?:ing)?|keep(?:ing)?|stor(?:e|ing)|sav(?:e|ing)|"
    r"record(?:ing)?|hold(?:ing)? on to)|get rid of)"
    r"(?: about| that| what i (?:just )?said about| everything about| all about| anything about)?"
    r"(?: (?P<q>.+?))?[.!?]*$", re.I)
_POLITE_ZH = re.compile(r"^\s*(?:(?:哦|嗯|那个|对了|还有|算了|其实|不好意思|抱歉)[，,]?\s*)*"
                        r"(?:(?:请你?|麻烦你?|帮我|能不能|可不可以|可以|你能|你可以|劳驾|拜托)\s*)*")
_TAIL_ZH = re.compile(r"(?:吧|好吗|好不好|可以吗|行吗|哈|谢谢|啦|了)+[。！？!?]*\s*$")
_FORGET_ZH = re.compile(
    r"^(?:把|将)(?P<q1>[^。！？!?]*?)(?:给我)?(?:忘掉|忘记|忘了|忘|删掉|删了|删除|删|抹掉|清除)$"
    r"|^(?:忘掉|忘记|忘了|别记住|不要记住|别记|不要记|删掉|删除|不用记)(?:关于)?(?P<q>[^。！？!?]*?)"
    r"(?:的记忆|这件事|这个|的信息)?$"
    r"|^(?P<q2>[^。！？!?]*?)(?:就)?(?:别|不要|不用)(?:再)?(?:记|存|保存|记住|记着)(?:了|下来)?$")
_THAT = {"that", "this", "it", "what i just said", "what i said", "that i said", "i said that",
         "the last thing", "the last thing i said", "my last message", "that last bit", "",
         "这个", "这件事", "刚才说的", "我刚才说的", "那个", "刚才那句", "刚才那句话", "这句话", "这句",
         "那句话", "那句", "我刚才说的话", "刚说的", "我刚说的", "上一句", "刚才的"}
_MY = re.compile(r"^(?:my|our|about my|that my|that i|the)\s+", re.I)
_ZH_JUST = re.compile(r"^(?:我)?(?:刚才|刚刚|刚)(?:说的|提到的|告诉你的)?(?:那个|的)?")


def forget_request(message: Message | str) -> str | None:
    """The query of an explicit request to forget, or None.

    "forget my address" → "address", "忘掉我的住址" → "住址"; "forget that", "could you
    please not remember what I just said", "刚才那句别记了", "把它忘了吧" → "" (the caller
    forgets what the previous turn stated). Polite and hedged wrappers ("please", "would
    you mind", "if you can", "麻烦", "吧") are read through. "Don't forget…", "I forgot my
    keys" and "forget it" (never mind) are not requests to forget.
    """
    text = message.content or "" if isinstance(message, Message) else message
    text = (text or "").strip()
    if len(text) > 300 or re.search(r"\b(?:don't|do not|never) forget\b|别忘|不要忘|忘不了|"
                                    r"\bi forgot\b|我忘了[^吧]|我忘记了", text, re.I):
        return None
    if re.fullmatch(r"\s*(?:oh,? |ok,? |never ?mind,? )?(?:just )?forget(?: it| about it)?[.!]*\s*",
                    text, re.I):
        return None  # "forget it" means "never mind", not "delete what you know"
    en = _TAIL_EN.sub("", _POLITE_EN.sub("", text)).strip(" .!?")
    found = _FORGET_EN.match(en)
    if found:
        query = (found.group("q") or "").strip()
        verb = en.split(" ", 1)[0].lower()
        if verb in ("delete", "erase", "remove", "drop", "wipe", "scratch") and not (
                re.search(r"\bmy\b|memor|that|this|what i", query, re.I) or query in ("", "it")):
            return None  # "remove the header" is a task, not a memory request
        query = re.sub(r"^(?:that|what)\s+i\s+(?:just\s+)?(?:said|told you|mentioned)(?:\s+about)?\s*",
                       "", query, flags=re.I)
        query = _MY.sub("", query).strip()
        return "" if query.lower() in _THAT else query
    zh = _TAIL_ZH.sub("", _POLITE_ZH.sub("", text)).strip(" 。！？!?")
    found = _FORGET_ZH.match(zh)
    if found:
        query = next((g for g in (found.group("q1"), found.group("q"), found.group("q2")) if g), "")
        query = _ZH_JUST.sub("", query.strip())
        query = re.sub(r"^我的|^我|^关于|^它|^这些|^那些", "", query).strip("的 ")
        return "" if query in _THAT or query in ("它", "这", "那") else query
    return None


@dataclass(frozen=True, slots=True)
class DecayConfig:
    """Decay rules: inactive when older than ``max_age_days`` and
    recalled at most ``max_access`` times, or when confidence < ``min_confidence``;
    items never recalled after ``unused_after_days`` lose weight linearly down to
    ``min_weight`` at ``max_age_days``."""

    max_age_days: float = 90.0
    max_access: int = 2
    min_confidence: float = 0.3
    unused_after_days: float = 30.0
    min_weight: float = 0.3


def _age_days(item: MemoryItem, now: datetime) -> float:
    return max(0.0, (now - item.created_at).total_seconds() / 86400.0)


def _weight(item: MemoryItem, now: datetime, config: DecayConfig) -> float:
    if item.access_count > 0 or item.last_accessed is not None:
        return 1.0
    age = _age_days(item, now)
    if age <= config.unused_after_days:
        return 1.0
    span = max(1e-9, config.max_age_days - config.unused_after_days)
    return round(max(config.min_weight, 1.0 - (1.0 - config.min_weight) *
                     (age - config.unused_after_days) / span), 3)


def decay(items: Sequence[MemoryItem], now: datetime,
          config: DecayConfig = DecayConfig()) -> tuple[MemoryItem, ...]:
    """The items that change: deactivated ones, and never-recalled ones whose weight
    (``metadata["weight"]``, used by retrieval and eviction) dropped.

    Open todos never decay: they stay until marked done. The result depends only on
    the items and ``now``, so running the job twice changes nothing the second time.
    """
    out: list[MemoryItem] = []
    for item in items:
        if item.status is not Status.ACTIVE or item.kind is Kind.TODO:
            continue
        stale = _age_days(item, now) > config.max_age_days and item.access_count <= config.max_access
        if stale or item.confidence < config.min_confidence:
            reason = "low_confidence" if item.confidence < config.min_confidence else "stale"
            out.append(item.evolve(status=Status.INACTIVE, updated_at=now,
                                   metadata={**item.metadata, "decay": reason}))
            continue
        weight = _weight(item, now, config)
        if abs(weight - float(item.metadata.get("weight", 1.0))) > 1e-3:
            out.append(item.evolve(metadata={**item.metadata, "weight": weight}))
    return tuple(out)


def memory_value(item: MemoryItem) -> float:
    """How much an item is worth keeping: confidence × importance × decay weight,
    raised by how often it was recalled."""
    recall = 1.0 + 0.1 * min(item.access_count, 10)
    return item.confidence * item.importance * float(item.metadata.get("weight", 1.0)) * recall


def evict(items: Sequence[MemoryItem], cap: int) -> tuple[str, ...]:
    """Ids of the lowest-value active items to evict so that at most ``cap`` remain;
    open todos go last: forgetting a promise is worse than forgetting a taste."""
    active = [i for i in items if i.status is Status.ACTIVE]
    excess = len(active) - max(0, cap)
    if excess <= 0:
        return ()
    ranked = sorted(active, key=lambda i: (i.kind is Kind.TODO, memory_value(i),
                                           i.updated_at, i.id))
    return tuple(i.id for i in ranked[:excess])


@dataclass(frozen=True, slots=True)
class FeedbackConfig:
    """Confidence steps of a thumbs-up and a thumbs-down. One thumbs-down takes a
    fresh 0.8 item under the decay threshold (0.3); a confirmed 1.0 item survives one."""

    up: float = 0.1
    down: float = 0.6


def apply_feedback(item: MemoryItem, signal: str, now: datetime | None = None,
                   config: FeedbackConfig = FeedbackConfig()) -> MemoryItem:
    """The item after a thumbs-up (``"up"``) or thumbs-down (``"down"``)."""
    if signal not in ("up", "down"):
        raise ValidationError(f"feedback must be 'up' or 'down', not {shown(signal)}")
    step = config.up if signal == "up" else -config.down
    confidence = round(min(1.0, max(0.0, item.confidence + step)), 4)
    return item.evolve(confidence=confidence, updated_at=now or item.updated_at)
