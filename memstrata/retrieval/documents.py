"""What gets indexed for a turn or a memory item, and how a query is built (pure).

A raw turn is indexed with two lexical fields: its own text (speaker name included) and
its context — the previous and next turns of the same session and the session's date —
weighted lower at search time. Context is what lets "when did Caroline go to the
support group?" find the turn that only says "I went yesterday": the date and the
neighbouring turns carry the words the turn itself lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..types import MemoryItem, Message, Role
from .text import tokenize

__all__ = ["date_words", "message_texts", "item_texts", "build_query"]

_MONTHS = ("January February March April May June July August September October "
           "November December").split()


def date_words(when: datetime) -> str:
    """A date in words both languages match: '8 May 2023 2023年5月8日'."""
    return f"{when.day} {_MONTHS[when.month - 1]} {when.year} {when.year}年{when.month}月{when.day}日"


def message_texts(message: Message, previous: Message | None,
                  following: Message | None) -> tuple[str, str, str, str]:
    """``(display, body_tokens, context_tokens, dense_text)`` for one raw turn."""
    display = message.text
    body = tokenize(display + " " + " ".join(str(v) for v in message.metadata.get("index_extra", ())))
    around = [m.text for m in (previous, following) if m is not None and m.role is not Role.SYSTEM]
    context = tokenize(" ".join(around) + " " + date_words(message.created_at))
    return display, body, context, display


def item_texts(item: MemoryItem) -> tuple[str, str, str, str]:
    """``(display, body_tokens, context_tokens, dense_text)`` for one memory item."""
    slots = " ".join(v for v in (item.subject, item.attribute, item.value) if v)
    return item.content, tokenize(item.content), tokenize(slots + " " + " ".join(item.tags)), item.content


def build_query(query: str, recent: Sequence[str] = (), turns: int = 3) -> tuple[str, str]:
    """``(lexical_tokens, dense_text)`` from the current message and the last ``turns`` turns.

    The lexical query is the union of their tokens (R5.4: not only the last message);
    the dense text puts the current message last, nearest the end of the embedding input.
    """
    recent = [r for r in recent if r and r.strip()][-turns:] if turns > 0 else []
    lexical = " ".join([tokenize(query), *(tokenize(r) for r in recent)]).strip()
    dense = " ".join([*recent, query]).strip() if recent else query
    return lexical, dense

