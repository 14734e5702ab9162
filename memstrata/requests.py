"""Small request values for the calls with many options: search and context.

The keyword arguments of :meth:`memstrata.UserMemory.search` and
:meth:`~memstrata.UserMemory.context` build one of these; callers with many queries (or
the HTTP service) may build them directly and pass them instead of a query string. Each
validates itself with :meth:`checked`, so every surface refuses the same input with the
same words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ValidationError, shown
from .layers.context import Quotas
from .layers.working import POLICIES
from .retrieval.request import SearchRequest, _check_k, _check_min_score, _check_roles
from .types import Filters, check_id, check_text

__all__ = ["SearchRequest", "ContextRequest", "RECALL_MODES"]

#: How much :meth:`~memstrata.UserMemory.context` recalls: ``auto`` (deep on a trigger
#: word), ``light`` (profile only), ``deep``.
RECALL_MODES = ("auto", "light", "deep")


@dataclass(frozen=True, slots=True)
class ContextRequest:
    """One context build: what the caller would send, and the budget it must fit.

    ``messages`` None means the session's recent messages; ``quotas`` are the
    (short-term, long-term, knowledge) shares (default 0.4/0.2/0.4); ``query`` the text
    to recall for (default: the last user message); ``recall`` one of
    :data:`RECALL_MODES`; ``policy`` what to do with a malformed tool-call sequence
    (``repair`` or ``strict``); ``tokenizer`` a tokenizer spec or object; ``filters``,
    ``min_score`` (None: the ``recall_min_score`` setting) and ``roles`` narrow the
    memories recalled, as in :class:`SearchRequest`.
    """

    session_id: str = "default"
    messages: tuple[Any, ...] | None = None
    budget: int = 4000
    quotas: Any = None
    query: str | None = None
    recall: str = "auto"
    k: int = 10
    policy: str = "repair"
    tokenizer: Any = None
    filters: Filters = field(default_factory=Filters)
    min_score: float | None = None
    roles: tuple[str, ...] = ()

    @classmethod
    def build(cls, session_id: str = "default", messages: Any = None,
              **options: Any) -> "ContextRequest":
        if messages is not None and (isinstance(messages, (str, bytes, Mapping))
                                     or not isinstance(messages, Iterable)):
            raise ValidationError("messages must be a list of OpenAI-format dicts, not "
                                  f"{type(messages).__name__}")
        if "filters" in options:
            options["filters"] = Filters.build(options["filters"])
        if isinstance(options.get("roles"), (list, tuple)):
            options["roles"] = tuple(options["roles"])
        return cls(session_id, tuple(messages) if messages is not None else None, **options)

    def checked(self) -> "ContextRequest":
        """This request if it is valid; ValidationError saying what to fix otherwise."""
        check_id(self.session_id, "session_id")
        if self.recall not in RECALL_MODES:
            raise ValidationError(f"recall must be one of {', '.join(RECALL_MODES)}, "
                                  f"not {shown(self.recall)}")
        if self.policy not in POLICIES:
            raise ValidationError(f"policy must be one of {', '.join(POLICIES)}, not {shown(self.policy)}")
        if not isinstance(self.budget, int) or isinstance(self.budget, bool) or self.budget < 1:
            raise ValidationError(f"budget must be a positive number of tokens, got {shown(self.budget)}")
        _check_k(self.k)
        if self.query is not None and not isinstance(self.query, str):
            raise ValidationError(f"query must be a string, not {type(self.query).__name__}")
        if self.query is not None:
            check_text(self.query, "query")
        if self.min_score is not None:
            _check_min_score(self.min_score)
        _check_roles(self.roles)
        Quotas.build(self.quotas)
        return self
