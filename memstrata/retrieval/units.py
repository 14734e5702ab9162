"""Retrieval units: who said a hit, what it stands for, and what it may not crowd out (pure).

A search scores index documents; the prompt needs *units*:

* **Roles.** The assistant's turns are the agent's own words — including its wrong
  guesses — so they weigh ``assistant_weight`` (default 0.5) unless the query asks what
  the assistant said ("what did you recommend…"). A turn that only asks a question
  weighs ``question_weight`` (0.6) when the query is a question too: "which language do I
  use now?" asked last week is not evidence of the answer.
* **Weak units last.** An assistant turn (unless asked about) and an earlier copy of the
  question (a question turn with no word the query lacks) never outrank a user
  statement, exchange or memory item that matches (similarity ≥ :data:`MATCHING`):
  they come after all of those, whatever their score, and among themselves by score.
* **Exchanges.** A low-information turn ("OK.", "Nice!", "好的", "为什么？") is not a unit
  of its own. Its vector and its context field carry the turn it answers, so it is often
  *found*; it is then shown with that turn, as one hit whose id is the answered turn's
  and whose ``merged_ids`` hold the acknowledgement, scored as the answered turn
  (its role, its question weight) at the better of the two scores.
* **Items first.** When a memory item and the turn it was extracted from both match
  (the item's own similarity ≥ :data:`MATCHING`), they are one unit: the item keeps the
  better of the two scores and the turn's slot goes (its id is in the item's
  ``merged_ids``). An item that restates only part of its sentence ("User got a raise"
  of "I got a raise, it's 12000 yuan a month now.") is shown as that sentence, in the
  speaker's words (:func:`own_words`): the unit must not say less than the turn it
  stands for.
* **Roles filter.** ``roles=("user",)`` keeps the user's turns and the exchanges they
  lead, and memory items (they are the user's statements); ``("assistant",)`` only the
  assistant's turns.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..stores.base import DocInfo
from ..text import analyze
from ..types import Layer
from .documents import REPLY_TAG, RESTATES_TAG, ROLE_TAG, SOURCE_TAG, is_question

__all__ = ["Unit", "role_of", "reply_to", "sources_of", "role_weight", "is_weak", "merge_units",
           "own_words", "item_text", "ROLES", "MATCHING", "COVERS"]

ROLES = ("user", "assistant", "tool")

#: The similarity from which a user statement or item "matches" a query and so ranks
#: above every weak unit: the calibrated start of the band above unrelated pairs
#: (:data:`~memstrata.retrieval.calibration.TAIL`).
MATCHING = 0.05

#: The share of the words of its sentence that an item must keep to speak for it. Set on
#: the development half of ``bench updates``; a restatement that keeps the sentence
#: ("User works as a nurse at Ruijin Hospital") keeps all of its words, one that drops a
#: clause ("User no longer eats or drinks coffee" of "I quit coffee; it's green tea every
#: morning.") keeps a third or less.
COVERS = 0.6

# sentence ends in either language; not ";" or commas: "I quit coffee; it's green tea
# every morning" is one thought; nor the dot of a title ("the new dentist, Dr. Sato, …")
_SENTENCE_END = re.compile(r"(?<=[。！？!?\n])|(?<=[.…])(?<!\b[A-Z][a-z]\.)(?<!\bMrs\.)\s+")


@dataclass(frozen=True, slots=True)
class Unit:
    """One scored candidate on its way to becoming a hit."""

    id: str
    info: DocInfo
    score: float
    weight: float  # the role/question weight already in ``score``
    text: str
    role: str | None
    merged: tuple[str, ...] = ()
    similarity: float = 0.0
    weak: bool = False
    scored_by: str = ""  # the candidate whose score parts made ``score`` (default: ``id``)
    rank: float | None = None  # what orders units (the relative fusion); None: ``score``

    @property
    def order(self) -> float:
        return self.score if self.rank is None else self.rank

    @property
    def parts_id(self) -> str:
        return self.scored_by or self.id


def _tag(info: DocInfo, prefix: str) -> list[str]:
    return [t[len(prefix):] for t in info.tags if t.startswith(prefix)]


def role_of(info: DocInfo) -> str | None:
    """``user``/``assistant``/``tool`` for a turn (``user`` when indexed before roles were
    tagged), None for items and chunks."""
    if info.layer is not Layer.EPISODIC:
        return None
    found = _tag(info, ROLE_TAG)
    return found[0] if found else "user"


def reply_to(info: DocInfo) -> str | None:
    """The id of the turn a low-information turn answers, or None."""
    found = _tag(info, REPLY_TAG)
    return found[0] if found else None


def sources_of(info: DocInfo) -> set[str]:
    """The ids of the turns an item was extracted from."""
    return set(_tag(info, SOURCE_TAG))


def role_weight(info: DocInfo, *, query_is_question: bool, about_assistant: bool,
                assistant_weight: float, question_weight: float) -> float:
    """The weight of a turn for this query (1.0 for items and chunks)."""
    role = role_of(info)
    if role is None:
        return 1.0
    weight = 1.0
    if role == "assistant" and not about_assistant:
        weight *= assistant_weight
    if query_is_question and is_question(info.text):
        weight *= question_weight
    return weight


def is_weak(info: DocInfo, query: str, *, about_assistant: bool) -> bool:
    """An assistant turn (unless the query asks what the assistant said), or a question
    turn that asks nothing the query does not ask."""
    role = role_of(info)
    if role is None:
        return False
    if role == "assistant":
        return not about_assistant
    if is_question(info.text):
        words = set(analyze(info.text))
        return bool(words) and words <= set(analyze(query))
    return False


def _label(info: DocInfo) -> str:
    names = [t[8:] for t in info.tags if t.startswith("speaker:")]
    return names[0] if names else (role_of(info) or "user")


def own_words(item_text: str, turn: DocInfo) -> str | None:
    """The sentence of ``turn`` that ``item_text`` restates, as the speaker said it
    ("[user] I got a raise, it's 12000 yuan a month now."), when the item keeps less than
    :data:`COVERS` of its words; None when the item says it all (or restates nothing)."""
    said = set(analyze(item_text))
    best, best_words, best_shared = "", set[str](), 0
    for sentence in _SENTENCE_END.split(turn.text):
        words = set(analyze(sentence))
        shared = len(words & said)
        if shared > best_shared:
            best, best_words, best_shared = sentence.strip(), words, shared
    if not best_shared or best_shared / len(best_words) >= COVERS:
        return None
    return f"[{_label(turn)}] {best}"


def item_text(info: DocInfo, turns: Mapping[str, DocInfo]) -> str:
    """What an item's hit shows: its text, or the sentence of one of its source turns
    (``turns``: those at hand, by id) in the speaker's words when it is an extractor's
    restatement (:data:`~.documents.RESTATES_TAG`) that leaves part of it out."""
    if info.layer is not Layer.SEMANTIC or RESTATES_TAG not in info.tags:
        return info.text
    return next((w for s in sorted(sources_of(info))
                 if s in turns and (w := own_words(info.text, turns[s]))), info.text)


def _in_own_words(by_id: dict[str, Unit], sources: Mapping[str, DocInfo]) -> None:
    """Each restating item that leaves out part of its sentence shown as that sentence."""
    turns = {**sources, **{u.id: u.info for u in by_id.values() if u.info.layer is Layer.EPISODIC}}
    for uid, unit in list(by_id.items()):
        if unit.info.layer is Layer.SEMANTIC and (shown := item_text(unit.info, turns)) != unit.text:
            by_id[uid] = replace(unit, text=shown)


def _said_as_spoken(unit: Unit) -> bool:
    """An item shown in its speaker's words (:func:`own_words`)."""
    return unit.info.layer is Layer.SEMANTIC and unit.text != unit.info.text


def _one_per_text(units: Iterable[Unit]) -> list[Unit]:
    """One unit per thing said: an item shown in its speaker's words (:func:`own_words`)
    whose text another unit holds too — two items of one sentence ("User changed careers",
    "User is a teacher"), or the exchange of that sentence's turn — is one hit with it, in
    the better place, at the better score, with the longer text."""
    kept: list[Unit] = []
    for unit in sorted(units, key=lambda u: (-u.order, u.id)):
        home = next((n for n, k in enumerate(kept)
                     if (_said_as_spoken(unit) or _said_as_spoken(k))
                     and (unit.text in k.text or k.text in unit.text)), None)
        if home is None:
            kept.append(unit)
            continue
        first = kept[home]
        kept[home] = replace(first, score=max(first.score, unit.score),
                             text=max(first.text, unit.text, key=len),
                             merged=tuple(dict.fromkeys(first.merged + (unit.id, *unit.merged))))
    return kept


def exchange_text(first: DocInfo, second: DocInfo) -> str:
    """What an exchange hit shows: both turns, each with who said it."""
    return f"[{_label(first)}] {first.text} [{_label(second)}] {second.text}"


def _exchanges(units: Sequence[Unit], answered: Mapping[str, DocInfo],
               weight_of: "Mapping[str, float]", weak_of: "Mapping[str, bool]") -> dict[str, Unit]:
    """The units by id, a low-information one joined to the turn it answers (the
    exchange takes that turn's id, weight and weakness); two units of one id keep the
    better-ordered one, with both one's merged ids."""
    by_id: dict[str, Unit] = {}
    for unit in units:
        target = reply_to(unit.info)
        first = answered.get(target) if target else None
        if first is not None:
            w = weight_of.get(first.id, 1.0)
            scale = w / unit.weight if unit.weight else w
            unit = Unit(first.id, first, unit.score * scale, w, exchange_text(first, unit.info),
                        role_of(first), (unit.id,), unit.similarity, weak_of.get(first.id, False),
                        unit.parts_id, unit.order * scale)
        old = by_id.get(unit.id)
        if old is None:
            by_id[unit.id] = unit
            continue
        best, other = (unit, old) if unit.order > old.order else (old, unit)
        text = best.text if best.merged or not other.merged else other.text
        merged = tuple(dict.fromkeys(best.merged + other.merged))
        by_id[unit.id] = replace(best, text=text, merged=merged)
    return by_id


def merge_units(units: Sequence[Unit], answered: Mapping[str, DocInfo],
                weight_of: "Mapping[str, float]", weak_of: "Mapping[str, bool]",
                roles: Collection[str] = (), sources: Mapping[str, DocInfo] | None = None,
                ) -> list[Unit]:
    """Exchanges, items over their source turns and the roles filter; best first, weak
    units after the matching strong ones.

    ``answered`` holds the DocInfo of every turn a low-information unit answers;
    ``weight_of`` and ``weak_of`` the role weight and weakness of each of those turns
    (the exchange takes them). ``sources`` holds the source turns of restating items
    that are not candidates themselves (:func:`own_words`).
    """
    by_id = _exchanges(units, answered, weight_of, weak_of)
    _in_own_words(by_id, sources or {})
    # items over the turns they were extracted from
    owner: dict[str, str] = {}
    for unit in by_id.values():
        if unit.info.layer is Layer.SEMANTIC and unit.similarity >= MATCHING:
            for source in sources_of(unit.info):
                owner.setdefault(source, unit.id)
    for unit in list(by_id.values()):
        if unit.info.layer is not Layer.EPISODIC:
            continue
        item_id = next((owner[i] for i in (unit.id, *unit.merged) if i in owner), None)
        if item_id is None:
            continue
        item = by_id[item_id]
        merged = tuple(dict.fromkeys(item.merged + (unit.id, *unit.merged)))
        if unit.order > item.order:
            item = replace(item, score=max(item.score, unit.score), weight=unit.weight,
                           similarity=max(item.similarity, unit.similarity),
                           scored_by=unit.parts_id, rank=unit.order)
        by_id[item_id] = replace(item, merged=merged)
        del by_id[unit.id]
    out = _one_per_text(by_id.values())
    if roles:
        allowed = set(roles)
        out = [u for u in out if (u.role if u.role is not None else "user") in allowed
               or (u.role is None and u.info.layer is Layer.KNOWLEDGE)]
    out.sort(key=lambda u: (-u.order, u.id))
    strong = [u for u in out if not u.weak and u.similarity >= MATCHING]
    if not strong:
        return out
    placed = {u.id for u in strong}
    return strong + [u for u in out if u.id not in placed]
