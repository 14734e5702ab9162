"""L2 progressive session summaries: the seam and an offline summariser (the value,
:class:`~memstrata.types.StructuredSummary`, is in :mod:`memstrata.types`).

A session's summary grows v1 -> v2 -> v3: every N messages (default 10) the summariser
gets the previous summary and only the messages after ``message_range_end``, and the
caller persists the new ``message_range_end``, so no message is summarised twice. :func:`plan_incremental`
says which messages are due; :func:`update_summary` runs one step. Each message is
therefore summarised exactly once and the cost of a step does not grow with the session.

The summary has five parts, each at most 200 characters by default: the user's
core goal, decisions, completed items, open questions, constraints and preferences.

:class:`ExtractiveSummariser` works offline in Chinese and English: it splits messages
into sentences, files each under the part whose cue words it carries ("decided/决定",
"done/完成了", "?/吗/？", "must/不要/必须", "I want/我想"), and packs the newest items
of each part, with the previous summary's items, into the part's size limit. An
LLM-backed summariser implements the same :class:`Summariser` protocol.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ...errors import ValidationError, shown
from ...text import clip, detect_language
from ...types import DEFAULT_PART_CHARS, PARTS, Message, Role, Scope, StructuredSummary

DEFAULT_EVERY_N = 10
_SEPARATOR = {"en": "; ", "zh": "；"}

__all__ = [
    "PARTS",
    "DEFAULT_PART_CHARS",
    "DEFAULT_EVERY_N",
    "StructuredSummary",
    "Summariser",
    "ExtractiveSummariser",
    "IncrementalPlan",
    "plan_incremental",
    "update_summary",
]

@runtime_checkable
class Summariser(Protocol):
    """Folds new messages into the previous summary. Offline or LLM-backed."""

    def summarise(self, previous: StructuredSummary | None,
                  new_messages: Sequence[Message | Mapping[str, Any]], *,
                  scope: Scope | None = None) -> StructuredSummary:
        """Return the next summary; ``new_messages`` are only those not yet summarised.
        ``scope`` is whose session it is (an LLM summariser meters its call to it)."""
        ...


# --- the extractive summariser ---------------------------------------------------

# Checked in this order; a sentence goes to the first part whose cues it carries.
# English cues are whole-word, Chinese ones substrings (no word boundaries in Chinese).
_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("open_questions", re.compile(
        r"[?？]\s*$|[吗呢么][。！]?\s*$|\b(?:not sure|unclear|still need to|to be decided|tbd|"
        r"open question|wonder(?:ing)?)\b|不确定|待定|还没想好|是否|要不要|怎么办", re.I)),
    ("constraints", re.compile(
        r"\b(?:must|mustn't|never|always|do not|don't|avoid|prefer|preferably|only|at most|"
        r"at least|no more than|allergic|budget|can't stand|hate|dislike|please)\b|"
        r"不要|必须|务必|别|不能|禁止|只能|只要|偏好|喜欢|讨厌|过敏|至少|最多|以内|预算", re.I)),
    ("decisions", re.compile(
        r"\b(?:decided|decide|decision|we'll go with|go with|let's|agreed|agree|chose|choose|"
        r"settled on|will use|conclusion|in the end)\b|决定|确定|选定|就用|就选|结论|定了|采用|同意", re.I)),
    ("done", re.compile(
        r"\b(?:done|finished|completed|complete|fixed|booked|sent|created|submitted|paid|"
        r"resolved|deployed|merged|already)\b|完成|做完|做好了|搞定|订好|已经|已|好了", re.I)),
    ("goal", re.compile(
        r"\b(?:i want|i'd like|i would like|i need|help me|my goal|i'm trying|i am trying|"
        r"i plan|i'm planning|looking for)\b|(?<!让)我想(?!想)|我要|帮我|希望|目标|打算|计划|需要", re.I)),
)
_SPLIT = re.compile(r"(?<=[。！？!?；;\n])|(?<=\.)\s+")
_SUBSTANTIVE = re.compile(r"[A-Za-z]{3,}(?:\W+[A-Za-z]+){2,}|[\u4e00-\u9fff]{4,}")
_CHATTER = re.compile(r"^\s*(?:hi|hello|hey|thanks|thank you|ok(?:ay)?|bye|good (?:morning|night)|"
                      r"你好|您好|谢谢|好的|再见|晚安)\b", re.I)


def _sentences(text: str) -> list[str]:
    parts = (p.strip() for p in _SPLIT.split(text))
    return [p for p in parts if len(p) >= 2]


def _items(part_text: str) -> list[str]:
    return [x.strip() for x in re.split(r"[；;]\s*", part_text) if x.strip()]


def _pack(items: list[str], limit: int, sep: str) -> str:
    """Keep the newest items that fit in ``limit`` characters, in their original order."""
    chosen: list[str] = []
    used = 0
    for item in reversed(items):
        cost = len(item) + (len(sep) if chosen else 0)
        if used + cost > limit:
            if not chosen:  # a single item longer than the limit: keep its head
                chosen.append(clip(item, limit))
            break
        chosen.append(item)
        used += cost
    return sep.join(reversed(chosen))


@dataclass(frozen=True, slots=True)
class ExtractiveSummariser:
    """Offline, bilingual, deterministic summariser (sentence extraction by cue words).

    The goal is taken from the user's messages only; other parts from user and
    assistant messages; tool and system messages are skipped. Each sentence is cut to
    ``sentence_chars`` so one long sentence cannot fill a part.
    """

    max_chars: int = DEFAULT_PART_CHARS
    sentence_chars: int = 80

    def summarise(self, previous: StructuredSummary | None,
                  new_messages: Sequence[Message | Mapping[str, Any]], *,
                  scope: Scope | None = None) -> StructuredSummary:
        """Fold ``new_messages`` into ``previous`` (None for the first summary)."""
        msgs = [Message.from_dict(m, index=i) for i, m in enumerate(new_messages)]
        found: dict[str, list[str]] = {p: [] for p in PARTS}
        unfiled: list[str] = []  # user sentences no cue claimed: the topic, as a last resort
        for msg in msgs:
            if msg.role not in (Role.USER, Role.ASSISTANT) or not msg.content:
                continue
            for sentence in _sentences(msg.content):
                for part, pattern in _CUES:
                    if part == "goal" and msg.role is not Role.USER:
                        continue
                    if pattern.search(sentence):
                        item = clip(sentence.rstrip("。.；;"), self.sentence_chars)
                        found[part].append(item)
                        break
                else:
                    if msg.role is Role.USER and _SUBSTANTIVE.search(sentence) \
                            and not _CHATTER.match(sentence):
                        unfiled.append(clip(sentence.rstrip("。.；;"), self.sentence_chars))
        if not any(found.values()) and unfiled and (previous is None or previous.is_empty):
            # a short session with no cue word ("Remind me to renew my passport") still
            # leaves a summary: what the user talked about
            found["goal"] = unfiled[:1]
        text = " ".join(" ".join(v) for v in found.values())
        if previous is not None:
            text += " " + " ".join(getattr(previous, p) for p in PARTS)
        sep = _SEPARATOR[detect_language(text)]
        out: dict[str, str] = {}
        for part in PARTS:
            old = _items(getattr(previous, part)) if previous is not None else []
            new: list[str] = []
            for item in found[part]:
                # skip repeats, including "ok, X" when X is already listed
                if not any(item in known or known in item for known in old + new):
                    new.append(item)
            if part == "goal" and not new:
                # the goal rarely changes: keep the old one unless a new one is stated
                out[part] = getattr(previous, part) if previous is not None else ""
                continue
            out[part] = _pack(old + new, self.max_chars, sep)
        version = previous.version + 1 if previous is not None else 1
        return StructuredSummary.clipped(max_chars=self.max_chars, version=version, **out)


# --- incremental planning --------------------------------------------------------

@dataclass(frozen=True, slots=True)
class IncrementalPlan:
    """What one incremental step should summarise.

    ``messages`` is ``messages[start:end]`` (empty when not ``due``); persist ``end`` as
    the new ``message_range_end`` once the summary is saved.
    """

    due: bool
    start: int
    end: int
    messages: tuple[Any, ...]


def plan_incremental(messages: Sequence[Any], range_end: int, every_n: int = DEFAULT_EVERY_N,
                     *, force: bool = False) -> IncrementalPlan:
    """Which messages to summarise now, given the persisted ``message_range_end``.

    Due when at least ``every_n`` messages arrived after ``range_end`` (or, with
    ``force``, when any did: e.g. when the session closes). The step covers all of
    them, so nothing is summarised twice and nothing is skipped.
    """
    if isinstance(every_n, bool) or not isinstance(every_n, int) or every_n < 1:
        raise ValidationError(f"every_n must be a positive integer, not {shown(every_n)}")
    if (isinstance(range_end, bool) or not isinstance(range_end, int)
            or not 0 <= range_end <= len(messages)):
        raise ValidationError(
            f"message_range_end {shown(range_end)} is outside the session's {len(messages)} "
            "messages; it must be between 0 and the number of messages (was the log truncated?)")
    pending = len(messages) - range_end
    if pending >= every_n or (force and pending > 0):
        return IncrementalPlan(True, range_end, len(messages), tuple(messages[range_end:]))
    return IncrementalPlan(False, range_end, range_end, ())


def update_summary(summariser: Summariser, previous: StructuredSummary | None,
                   messages: Sequence[Any], range_end: int, every_n: int = DEFAULT_EVERY_N,
                   *, force: bool = False) -> tuple[StructuredSummary | None, int]:
    """One incremental step: returns ``(summary, new message_range_end)``.

    When nothing is due the previous summary and ``range_end`` come back unchanged.
    """
    plan = plan_incremental(messages, range_end, every_n, force=force)
    if not plan.due:
        return previous, range_end
    return summariser.summarise(previous, plan.messages), plan.end
