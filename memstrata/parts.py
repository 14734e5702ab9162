"""The pieces a user's handle delegates to, built once by :class:`memstrata.Memory`.

A :class:`~memstrata.user.UserMemory` holds one :class:`Parts` and its scope; each of its
methods is one call on one of these pieces — the owner of that use case: the turn writer
(add, replay, import and the jobs they queue), the context builder, the item writer,
the retriever, the forgetter, the profiles, the knowledge base and the session manager.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from .assembly import ContextBuilder
from .knowledge import KnowledgeBase
from .layers.episodic import SessionManager
from .layers.episodic.turns import TurnWriter
from .layers.semantic.forget import Forgetter
from .layers.semantic.items import ItemWriter
from .layers.semantic.pipeline import MaintenanceReport
from .layers.semantic.profiles import Profiles
from .priority import Foreground
from .retrieval.search import Retriever
from .stores.base import Store
from .types import Scope

__all__ = ["Parts"]


@dataclass(frozen=True, slots=True)
class Parts:
    """What a handle delegates to: the pieces :class:`memstrata.Memory` builds once and
    every user's handle shares."""

    max_message_chars: int  # the ``max_message_chars`` setting: the longest text taken
    read_only: bool  # the ``read_only`` setting: a search records no access
    store: Store
    turns: TurnWriter
    contexts: ContextBuilder
    writer: ItemWriter
    retriever: Retriever
    forgetter: Forgetter
    profiles: Profiles
    knowledge_base: KnowledgeBase
    session_manager: SessionManager
    #: requests in flight, which background jobs wait for (:mod:`memstrata.priority`)
    foreground: Foreground
    #: ``maintain(scopes, now, background)``: decay, capacity and the profile snapshot
    maintain: Callable[[Sequence[Scope], "datetime | None", bool], MaintenanceReport]
