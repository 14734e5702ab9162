"""What gets indexed for a turn or a memory item, and how a query is built (pure).

A raw turn is indexed with two lexical fields: its own text (speaker name included) and
its context — the two previous and two next turns of the same session said within 30
minutes of it, and the day it was said — weighted lower at search time. Context is what
lets "when did Caroline go to the support group?" find the turn that only says "I went
yesterday": the date and the
neighbouring turns carry the words the turn itself lacks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from ..text import is_cjk_text, tokenize
from ..types import MemoryItem, Message, Role

__all__ = ["date_words", "message_texts", "window_texts", "speaker_tags", "item_texts", "chunk_texts",
           "build_query", "split_question"]

_MONTHS = ("January February March April May June July August September October "
           "November December").split()


def date_words(when: datetime, chinese: bool = False) -> str:
    """The day a turn was said, in words a question uses: '8 May 2023' or '2023年5月8日'."""
    if chinese:
        return f"{when.year}年{when.month}月{when.day}日"
    return f"{when.day} {_MONTHS[when.month - 1]} {when.year}"


# FTS5-style field weights for a turn (LoCoMo dev, leave-one-conversation-out stable):
# own text 3, previous turn 1.5, the one before 1, next two turns 0.5 each, date 2.
# The store scores two fields, body and context (settings ``body_weight`` 3 and
# ``context_weight`` 0.5); the context field holds each neighbour repeated so that
# REPEAT × context_weight gives its weight.
REPEAT = {"prev1": 3, "prev2": 2, "next1": 1, "next2": 1, "date": 4}


# Turns further apart than this are not each other's context: a statement made hours
# later is a new conversation, not the answer to this one (MemDaily's day-apart notes
# lost 0.02–0.06 recall@5 per question type when their neighbours were counted).
CONTEXT_GAP = timedelta(minutes=30)


def _turns(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role is not Role.SYSTEM]


def _near(message: Message, others: Sequence[Message], gap: timedelta) -> list[Message]:
    return [m for m in _turns(others) if abs(m.created_at - message.created_at) <= gap]


def message_texts(message: Message, before: Sequence[Message] = (),
                  after: Sequence[Message] = (), *,
                  gap: timedelta = CONTEXT_GAP) -> tuple[str, str, str, str]:
    """``(display, body_tokens, context_tokens, dense_text)`` for one raw turn.

    ``before``/``after`` are the turns around it in its session (oldest first); up to
    two on each side are used, if said within ``gap`` of it. The dense text is the
    previous turn and this one: it only looks back, so a turn's vector is final when
    the turn is stored.
    """
    display = message.text
    extra = " ".join(str(v) for v in message.metadata.get("index_extra", ()))
    body = tokenize(f"{display} {extra}")
    prior, later = _near(message, before, gap)[-2:], _near(message, after, gap)[:2]
    fields = {"prev1": prior[-1] if prior else None, "prev2": prior[-2] if len(prior) > 1 else None,
              "next1": later[0] if later else None, "next2": later[1] if len(later) > 1 else None}
    parts = []
    for name, turn in fields.items():
        if turn is not None:
            parts += [tokenize(turn.text)] * REPEAT[name]
    parts += [tokenize(date_words(message.created_at, is_cjk_text(display)))] * REPEAT["date"]
    context = " ".join(p for p in parts if p)
    dense = f"{prior[-1].text}\n{display}" if prior else display
    return display, body, context, dense


def speaker_tags(message: Message) -> tuple[str, ...]:
    """Tags of a turn's index document: ``speaker:<name>`` when the message has a name
    (filterable with ``tags=["speaker:Caroline"]``, and used by the speaker boost)."""
    return (f"speaker:{message.name}",) if message.name else ()


def window_texts(turns: Sequence[Message], index: int) -> tuple[str, str, str, str]:
    """:func:`message_texts` for ``turns[index]`` with its neighbours in ``turns``."""
    return message_texts(turns[index], turns[max(0, index - 2):index], turns[index + 1:index + 3])


def item_texts(item: MemoryItem) -> tuple[str, str, str, str]:
    """``(display, body_tokens, context_tokens, dense_text)`` for one memory item."""
    slots = " ".join(v for v in (item.subject, item.attribute, item.value) if v)
    return item.content, tokenize(item.content), tokenize(slots + " " + " ".join(item.tags)), item.content


def chunk_texts(text: str, title: str, heading_path: Sequence[str]) -> tuple[str, str, str, str]:
    """``(display, body_tokens, context_tokens, dense_text)`` for a knowledge-base chunk.

    The context field is the document's title and the chunk's heading path: a chunk in
    the middle of a report says "the company", its title names it. The dense text puts
    the same header before the chunk.
    """
    header = " › ".join(h for h in (*([title] if title not in heading_path[:1] else []),
                                     *heading_path) if h)
    return text, tokenize(text), tokenize(header), f"{header}\n{text}" if header else text


def build_query(query: str, recent: Sequence[str] = (), turns: int = 3) -> tuple[str, str]:
    """``(lexical_tokens, dense_text)`` from the current message and the last ``turns`` turns.

    The lexical query is the union of their tokens (R5.4: not only the last message);
    the dense text puts the current message last, nearest the end of the embedding input.
    """
    recent = [r for r in recent if r and r.strip()][-turns:] if turns > 0 else []
    lexical = " ".join([tokenize(query), *(tokenize(r) for r in recent)]).strip()
    dense = " ".join([*recent, query]).strip() if recent else query
    return lexical, dense


# A new question starts where a sentence ends and the next one opens with "also":
# "我上司的电话是多少？另外，我住的小区叫什么？" / "Where does she work? Also, when…".
# Only this marked case is split; a question that is long, or wrapped in small talk,
# stays whole.
_NEXT_QUESTION = re.compile(
    r"(?<=[？?！!。.；;])[\s\"'”’」』]*"
    r"(?:另外|此外|还有|再者|顺便问(?:一?下)?|also|additionally|and also|one more thing)"
    r"\s*[，,、:：]\s*", re.IGNORECASE)


def split_question(query: str) -> list[str]:
    """The questions a compound query asks, in order ("X? Also, Y?" → ["X?", "Y?"]).

    A query is split only where a sentence ends and the next begins with a connective
    such as 另外 / 此外 / also; a part without a single index token (a bare "Also,")
    joins the part before it. A query with one question comes back as ``[query]``.
    """
    parts: list[str] = []
    for piece in _NEXT_QUESTION.split(query):
        piece = piece.strip()
        if parts and not tokenize(piece):
            parts[-1] = f"{parts[-1]} {piece}".rstrip()
        elif piece:
            parts.append(piece)
    return parts or [query]
