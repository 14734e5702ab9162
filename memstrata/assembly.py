"""The context of the next LLM call for one user: its inputs gathered, then assembled.

:class:`ContextBuilder` is the I/O around :mod:`memstrata.layers.context`'s pure rules:
it reads the session (its state and recent turns), reads the turn being answered
(:func:`~memstrata.layers.context.read_turn`), recalls memories through the search it is
given (:func:`~memstrata.layers.context.recall`), takes the core profile, the open
session's summary and the best knowledge-base chunks, every piece quoted as data, and
calls :func:`~memstrata.layers.context.assemble`. The chunks that make it into the
context are counted as recalled; the reply passed to ``add()`` says whether they were
used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .config import Settings
from .knowledge import Knowledge, KnowledgeBase, KnowledgeHit
from .quoting import quote_data
from .requests import ContextRequest
from .tokens import get_tokenizer
from .types import PARTS, Message, Role, Scope, SearchHit, StructuredSummary
from .layers.context import (ContextResult, MemoryLine, Quotas, RecallPolicy, assemble, quoted_block,
                             read_turn, recall, turn_search)
from .layers.episodic import SessionManager
from .layers.semantic.profile import Profile, render
from .layers.semantic.profiles import Profiles

__all__ = ["ContextBuilder", "ContextSettings"]


@dataclass(frozen=True, slots=True)
class ContextSettings:
    """The settings a context reads (:meth:`from_settings` picks them)."""

    query_turns: int
    triggers: tuple[str, ...]
    recall_k: int
    deep_below: float
    recall_min_score: float
    kb_k: int
    read_only: bool

    @classmethod
    def from_settings(cls, s: Settings) -> "ContextSettings":
        return cls(query_turns=s.query_turns,
                   triggers=tuple(w.strip() for w in s.trigger_words.split(",") if w.strip()),
                   recall_k=s.recall_k, deep_below=s.deep_below, recall_min_score=s.recall_min_score,
                   kb_k=s.kb_k, read_only=s.read_only)


def _replayed(message: Message) -> dict[str, Any]:
    """A stored turn as context() sends it again: a system turn stored in the session
    is quoted data in a block of its own, never a system message with its authority."""
    if message.role is Role.SYSTEM:
        return {"role": "system", "content": quoted_block(
            "a system message stored in this session's log, replayed", message.content or "")}
    return message.to_openai()


def _quoted_profile(profile: Profile) -> Profile:
    """The profile with every field through :func:`~memstrata.quoting.quote_data` (one
    line each: a line break in a field must not start a line of the prompt)."""
    def each(values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(q for v in values if (q := quote_data(v)))

    return replace(profile, name=quote_data(profile.name) if profile.name else profile.name,
                   role=quote_data(profile.role) if profile.role else profile.role,
                   goals=each(profile.goals), current=each(profile.current),
                   preferences=each(profile.preferences), people=each(profile.people),
                   facts=each(profile.facts),
                   language=quote_data(profile.language) if profile.language else profile.language)


def _quoted_summary(summary: StructuredSummary) -> StructuredSummary:
    """The session summary with every part through :func:`~memstrata.quoting.quote_data`."""
    return StructuredSummary.clipped(max_chars=summary.max_chars, version=summary.version,
                                     **{p: quote_data(getattr(summary, p)) for p in PARTS})


class ContextBuilder:
    """Builds :meth:`memstrata.UserMemory.context` for any user of one memory."""

    def __init__(self, sessions: SessionManager, profiles: Profiles, knowledge_base: KnowledgeBase,
                 settings: ContextSettings | None = None) -> None:
        self.sessions = sessions
        self.profiles = profiles
        self.knowledge_base = knowledge_base
        self.settings = settings or ContextSettings.from_settings(Settings())

    def build(self, scope: Scope, request: ContextRequest,
              search: Callable[..., Sequence[SearchHit]]) -> ContextResult:
        """The context for ``request`` (checked), recalling through ``search`` (the
        user's :meth:`~memstrata.UserMemory.search`)."""
        s = self.settings
        state = self.sessions.sessions.load(scope, request.session_id)
        sent = list(request.messages) if request.messages is not None \
            else [_replayed(msg) for msg in state.recent]
        turn = read_turn(sent, request.query, query_turns=s.query_turns, roles=request.roles,
                         triggers=list(s.triggers))
        text, trigger = turn.text, turn.trigger
        policy = RecallPolicy(k=s.recall_k, deep_k=request.k, deep_below=s.deep_below,
                              min_score=s.recall_min_score if request.min_score is None
                              else request.min_score, asked_min_score=request.min_score or 0.0)
        lines, recalled_by = recall(turn_search(search, turn, request.filters), text,
                                    mode=request.recall, trigger=trigger, policy=policy,
                                    session_id=request.session_id)
        summary = _quoted_summary(state.summary).render() \
            if state.summary is not None and state.status == "open" else None
        knowledge = self._knowledge(scope, text, request.quotas)
        result = assemble(sent, budget=request.budget, profile=self._profile_text(scope),
                          summary=summary, memories=lines, quotas=request.quotas,
                          knowledge=[MemoryLine(h.id, h.content, h.score, h.label,
                                                f"knowledge base, score {h.score:.2f}")
                                     for h in knowledge],
                          recall=recalled_by, trigger=trigger,
                          tokenizer=get_tokenizer(request.tokenizer),
                          policy=request.policy)  # type: ignore[arg-type]
        kept = set(result.report.kept_ids)
        recalled = [(h.kb, h.id) for h in knowledge if h.id in kept]
        if recalled and not s.read_only:  # settled by the reply passed to add()
            self.knowledge_base.recalled(scope, request.session_id, recalled, text)
        return result

    def _knowledge(self, scope: Scope, text: str, quotas: Any) -> list[KnowledgeHit]:
        """The knowledge-base chunks for this turn (none when the knowledge quota is 0,
        ``kb_k`` is 0 or neither knowledge base has a document)."""
        k = self.settings.kb_k
        if not k or not text.strip() or Quotas.build(quotas).knowledge <= 0:
            return []
        kb = Knowledge(self.knowledge_base, scope.namespace, scope.user_id)
        return [] if kb.is_empty() else kb.search(text, k=k)

    def _profile_text(self, scope: Scope) -> str | None:
        profile = self.profiles.profile(scope)
        if profile.is_empty:
            return None
        return render(_quoted_profile(profile), "zh" if profile.language == "zh" else "en")
