"""The search request: the query and how to run it (a value, checked by itself).

:meth:`memstrata.UserMemory.search` builds one from its keyword arguments, callers
with many queries (or the HTTP service) build them directly, and
:meth:`~memstrata.retrieval.search.Retriever.search` takes it. Each request validates
itself with :meth:`SearchRequest.checked`, so every surface refuses the same input with
the same words. Re-exported as :class:`memstrata.SearchRequest`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from ..errors import ValidationError, shown
from ..types import Filters, check_text, parse_time
from .scoring import ScoringPreset, get_preset
from .units import ROLES

__all__ = ["SearchRequest", "Mode", "MODES"]

Mode = Literal["hybrid", "lexical", "dense"]
MODES: tuple[str, ...] = ("hybrid", "lexical", "dense")


def _check_query(query: Any, limit: int) -> str:
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, not {type(query).__name__}")
    if not query.strip():
        raise ValidationError("query is empty")
    check_text(query, "query")
    if len(query) > limit:
        raise ValidationError(f"query is {len(query):,} characters, over the limit of {limit:,}; "
                              "shorten it or raise the max_message_chars setting")
    return query


def _check_min_score(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10:
        raise ValidationError(f"min_score must be a number from 0 to 10 (scores are mostly in "
                              f"[0, 1]; see docs/retrieval.md), got {shown(value)}")


def _check_roles(roles: Any) -> None:
    if not isinstance(roles, (list, tuple)) or not all(isinstance(r, str) and r in ROLES for r in roles):
        raise ValidationError(f"roles must be a list of {', '.join(ROLES)}, got {shown(roles)}")


def _check_k(k: Any) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
        raise ValidationError(f"k must be an integer between 1 and 1000, got {shown(k)}")
    return k


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One search: the query and how to run it.

    ``recent`` are the last few turns (their text), added to the query (a follow-up leans on them);
    ``scoring`` a preset name or :class:`~memstrata.retrieval.scoring.ScoringPreset`
    (None: the ``scoring`` setting); ``mode`` hybrid, lexical or dense; ``min_score``
    drops hits scoring under it; ``roles`` keeps only turns said by those roles
    (``user``, ``assistant``, ``tool``; memory items count as the user's).
    """

    query: str
    k: int = 10
    filters: Filters = field(default_factory=Filters)
    recent: tuple[str, ...] = ()
    scoring: "str | ScoringPreset | None" = None
    mode: Mode = "hybrid"
    now: datetime | None = None
    min_score: float = 0.0
    roles: tuple[str, ...] = ()

    @classmethod
    def build(cls, query: "str | SearchRequest", *, filters: "Filters | Mapping[str, Any] | None" = None,
              recent: Sequence[str] = (), **options: Any) -> "SearchRequest":
        """From a query string and keyword options, or a request (options override it)."""
        if isinstance(query, SearchRequest):
            changes = dict(options)
            if filters is not None:
                changes["filters"] = Filters.build(filters)
            if recent:
                changes["recent"] = tuple(recent)
            return replace(query, **changes) if changes else query
        if recent is None:
            recent = ()
        if isinstance(recent, str) or not isinstance(recent, Sequence):
            raise ValidationError("recent must be a list of strings (the last turns), "
                                  f"not {type(recent).__name__}")
        if isinstance(options.get("roles"), (list, tuple)):
            options["roles"] = tuple(options["roles"])
        try:
            return cls(query, filters=Filters.build(filters), recent=tuple(recent), **options)
        except TypeError as exc:  # an unknown option
            raise ValidationError(f"search: {exc}") from None

    def checked(self, max_chars: int) -> "SearchRequest":
        """This request if it is valid; ValidationError saying what to fix otherwise."""
        _check_query(self.query, max_chars)
        _check_k(self.k)
        if self.mode not in MODES:
            raise ValidationError(f"mode must be one of {', '.join(MODES)}, not {shown(self.mode)}")
        if self.scoring is not None:
            get_preset(self.scoring)
        if not all(isinstance(r, str) for r in self.recent):
            raise ValidationError("recent must be a list of strings (the last turns)")
        for turn in self.recent:
            check_text(turn, "recent turn")
        _check_min_score(self.min_score)
        _check_roles(self.roles)
        if self.now is not None and not isinstance(self.now, datetime):
            raise ValidationError(f"now must be a datetime, not {type(self.now).__name__}")
        if self.now is not None and self.now.tzinfo is None:  # naive: UTC, as parse_time reads it
            return replace(self, now=parse_time(self.now, what="now"))
        return self
