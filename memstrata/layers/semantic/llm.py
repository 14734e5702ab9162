"""The LLM on the L3 write path: what its extraction answer may add to memory (pure
functions), and :class:`LLMExtractor`, which makes the metered calls.

The LLM path never writes on its own authority. Items that passed schema validation
(:data:`memstrata.prompts.EXTRACTION_SCHEMA`: kinds from the enum, numbers clamped) must
also be *grounded*: most of their words — or their value — appear in one of the user's
own turns of this job. That turn becomes the item's source and its sentence the
evidence the credibility screen reads, so "I'm from Mars, haha" is screened out whatever
the model made of it, a copy of the prompt's example is rejected, and an item read from
an earlier turn (already applied by an earlier job) is left alone.

:func:`merge_candidates` then lets the rules fill in what the LLM cannot be trusted
with: when a rule read the same statement, the LLM item keeps its wording and scores
but takes the rule's kind and slots (attribute, value, polarity, change markers), the
vocabulary the conflict rules in :mod:`.decide` compare. Rule candidates no LLM item
covers are added as they are.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from memstrata.prompts import CONFLICT_SCHEMA, EXTRACTION_SCHEMA, conflict_prompt, extraction_prompt
from memstrata.providers.metered import MeteredLLM
from memstrata.providers.structured import Rejection
from memstrata.text import detect_language
from memstrata.types import Kind, MemoryItem, Message, Role, Scope

from .decide import Judge
from .extract import Candidate, normalise_value

__all__ = ["RELATIONS", "llm_candidates", "merge_candidates", "grounding", "LLMExtractor"]

log = logging.getLogger("memstrata.extract")

#: CONFLICT_SCHEMA relations → the verdicts :func:`.decide.decide`'s judge speaks.
RELATIONS = {"contradiction": "contradiction", "same": "duplicate",
             "scenario_differs": "scenario", "unrelated": "unrelated"}

_STOP = frozenset({"user", "the", "a", "an", "is", "are", "to", "of", "and", "i", "my", "me",
                   "in", "on", "at", "for", "with", "that", "this", "it", "be", "has", "have",
                   "用", "户", "的", "是", "了", "我", "在"})
_SELF = frozenset({"user", "the user", "i", "me", "用户", "我", ""})
_SENTENCES = re.compile(r"(?<=[.!?。！？；;\n])\s*")
_MIN_GROUNDING = 0.5
_MIN_GROUNDING_WITH_VALUE = 0.34


def _words(text: str) -> set[str]:
    out = set()
    for w in re.findall(r"[a-z0-9+#]+|[\u4e00-\u9fff]", (text or "").casefold()):
        out.add(w[:-1] if len(w) > 3 and w.endswith("s") else w)
    return out - _STOP


def _share(item: Mapping[str, Any], text: str) -> float:
    words = _words(str(item.get("content") or ""))
    return len(words & _words(text)) / len(words) if words else 0.0


def grounding(item: Mapping[str, Any], text: str) -> float:
    """How well ``text`` supports an extracted item, in [0, 1]: the share of the item's
    content words found in it, with a lower bar when the item's value is quoted."""
    share = _share(item, text)
    if not share:
        return 0.0
    value = str(item.get("value") or "").strip().casefold()
    quoted = len(value) >= 2 and value in (text or "").casefold()
    return share if share >= (_MIN_GROUNDING_WITH_VALUE if quoted else _MIN_GROUNDING) else 0.0


def _best_sentence(item: Mapping[str, Any], text: str) -> str:
    sentences = [s for s in _SENTENCES.split(text) if s.strip()] or [text]
    words = _words(str(item.get("content") or ""))
    return max(sentences, key=lambda s: len(words & _words(s))).strip()


def llm_candidates(items: Iterable[Mapping[str, Any]], messages: Sequence[Message], *,
                   own_ids: Iterable[str], source: str) -> tuple[list[Candidate], list[Rejection]]:
    """Candidates from validated extraction items, and the items rejected (with why).

    ``messages`` are the turns the model saw; ``own_ids`` those of the job's own turns.
    ``source`` (``"llm:<model>"``) becomes each candidate's ``rule``.
    """
    own = set(own_ids)
    users = [m for m in messages if m.role is Role.USER and m.content]
    assistants = [m.content or "" for m in messages if m.role is Role.ASSISTANT and m.content]
    out: list[Candidate] = []
    rejected: list[Rejection] = []
    for item in items:
        scored = [(grounding(item, m.content or ""), m) for m in users]
        score, best = max(scored, key=lambda p: p[0], default=(0.0, None))
        if best is None or score <= 0.0:
            rejected.append(Rejection(dict(item), "ungrounded: no user turn says this"))
            continue
        if best.id not in own:
            rejected.append(Rejection(dict(item), "from an earlier turn (an earlier job's)"))
            continue
        said = _share(item, best.content or "")
        if any(_share(item, text) >= said for text in assistants):
            # "Hi! My name is Lin… what brings you to my office?" is the assistant's
            # self-introduction, not a fact about the user, whatever a user turn shares
            rejected.append(Rejection(dict(item), "grounded in the assistant's turn, not the user's"))
            continue
        subject = str(item.get("subject") or "").strip().casefold()
        if best.name and subject in _SELF:
            subject = best.name.casefold()  # a named speaker's statement about themselves
        content = str(item["content"]).strip()
        out.append(Candidate(
            kind=Kind(item["kind"]), content=content,
            subject="user" if subject in _SELF else subject,
            attribute=(str(item.get("attribute") or "").strip().casefold() or None),
            value=(str(item.get("value") or "").strip() or None),
            confidence=float(item.get("confidence", 0.8)),
            importance=float(item.get("importance", 0.5)),
            source_message_ids=(best.id,), rule=source, lang=detect_language(content),
            evidence=_best_sentence(item, best.content or ""), context=best.content or ""))
    return out, rejected


def _covers(llm: Candidate, rule: Candidate) -> bool:
    if not set(llm.source_message_ids) & set(rule.source_message_ids):
        return False
    value = normalise_value(rule.value)
    if value and (normalise_value(llm.value) == value or value in llm.content.casefold()):
        return True
    words = _words(rule.content)
    return bool(words) and len(words & _words(llm.content)) / len(words) >= 0.5


def merge_candidates(llm: Sequence[Candidate], rules: Sequence[Candidate]) -> list[Candidate]:
    """LLM candidates first, with the slots of the rule candidate that read the same
    statement; then the rule candidates no LLM candidate covers. An LLM candidate that
    repeats one already taken (small models repeat themselves) is dropped."""
    out: list[Candidate] = []
    used: set[int] = set()
    seen: set[str] = set()
    for cand in llm:
        key = cand.content.casefold()
        match = next((i for i, r in enumerate(rules) if _covers(cand, r)), None)
        if key in seen or (match is not None and match in used):
            continue
        seen.add(key)
        if match is not None:
            used.add(match)
            r = rules[match]
            cand = replace(cand, kind=r.kind, subject=r.subject, attribute=r.attribute,
                           value=r.value, polarity=r.polarity, time=r.time, change=r.change,
                           replaces=r.replaces, scenario=r.scenario, evidence=r.evidence,
                           context=r.context)
        out.append(cand)
    return out + [r for i, r in enumerate(rules) if i not in used]


class LLMExtractor:
    """The LLM on the L3 write path: one extraction call per job, and conflict verdicts
    for the candidates in the similarity band — each call metered to the job's user.
    Whatever the call gives nothing usable for, the rules decide."""

    def __init__(self, llm: MeteredLLM) -> None:
        self.llm = llm

    @property
    def source(self) -> str:
        """The actor of writes this LLM produced: ``llm:<model>``."""
        return self.llm.source

    def extract(self, scope: Scope, window: Sequence[Message], own: Sequence[Message],
                rules: Sequence[Candidate]) -> list[Candidate]:
        """Candidates for one job: one call over ``window`` (the job's turns with their
        context), its grounded items merged with the ``rules`` candidates; the rule
        candidates alone when the call is skipped or fails."""
        if not any(m.content for m in own if m.role is Role.USER):
            return list(rules)  # nothing of the user's to read: no call
        done = self.llm.call(scope, "extract", extraction_prompt(window), EXTRACTION_SCHEMA)
        if done is None:
            return list(rules)
        parsed = done.parsed
        cands, rejected = llm_candidates(parsed.items, window, own_ids=[m.id for m in own],
                                         source=self.source)
        if parsed.rejected or rejected:
            log.info("LLM extraction for %r: %d items kept, %d invalid, %d ungrounded",
                     scope.user_id, len(cands), len(parsed.rejected), len(rejected))
        return merge_candidates(cands, rules)

    def judge(self, scope: Scope) -> Judge:
        """A judge for :func:`.decide.decide`: one call per (candidate, band neighbour)
        it is asked about; None — the rules decide — when the call is skipped, fails or
        says nothing valid."""
        def verdict(cand: Candidate, item: MemoryItem) -> str | None:
            done = self.llm.call(scope, "conflict", conflict_prompt(item.content, cand.content,
                                                                    kind=cand.kind.value),
                                 CONFLICT_SCHEMA, max_tokens=96)
            first = done.parsed.first if done is not None else None
            return RELATIONS.get(first["relation"]) if first else None

        return verdict
