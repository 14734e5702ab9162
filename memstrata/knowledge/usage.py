"""Did the reply use the chunk? (Pure.)

A chunk recalled into a context is *used* when the assistant's reply that follows draws
on it: enough of the reply's own words — its index tokens (jieba words, Snowball stems)
that the question did not already contain — occur in the chunk. Words the question
brought are left out on both sides, or every chunk that matched the question would
count as used by any reply that repeats it.
"""

from __future__ import annotations

from ..text import analyze

__all__ = ["overlap", "draws_on"]


def overlap(reply: str, chunk: str, query: str = "") -> tuple[int, float]:
    """``(shared, share)``: how many of the reply's own distinct tokens occur in the
    chunk, and what share of them that is."""
    asked = set(analyze(query))
    own = set(analyze(reply)) - asked
    if not own:
        return 0, 0.0
    shared = len(own & set(analyze(chunk)))
    return shared, shared / len(own)


def draws_on(reply: str, chunk: str, query: str = "", *, min_share: float = 0.3) -> bool:
    """Whether ``reply`` draws on ``chunk``: at least ``min_share`` of its own tokens,
    and at least two of them (one shared word is chance), come from the chunk."""
    shared, share = overlap(reply, chunk, query)
    return shared >= 2 and share >= min_share
