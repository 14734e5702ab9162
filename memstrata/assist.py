"""The LLM on the write path: extraction, conflict judgment and summaries, within a budget.

:class:`Assist` is the one place :class:`~memstrata.Memory` calls its LLM from. Each
call is recorded in the store's ``llm_usage`` table under the user it was made for
(tokens, latency, the error class when it failed), and a per-user daily budget
(``llm_daily_budget``) turns further calls into a recorded ``budget`` skip. Whatever
goes wrong — a :class:`~memstrata.errors.ProviderError`, the budget, an answer with no
valid item — the caller gets ``None`` and the offline rules do the work: memory never
depends on the LLM.

* extraction: ONE call per job (:meth:`Assist.extract`), items validated, grounded and
  merged with the rule candidates (:mod:`memstrata.layers.semantic.llm`);
* conflict judgment: a call only for a candidate whose nearest comparable neighbour is
  in the similarity band (:meth:`Assist.judge`, through ``decide``'s judge hook);
* summaries: :class:`LLMSummariser`, the same seam as the extractive one, called every
  N messages by the session manager (run as a background job).
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, time as dtime, timezone
from typing import Any

from .errors import ProviderError
from .layers.semantic.decide import Judge
from .layers.semantic.extract import Candidate
from .layers.semantic.llm import RELATIONS, llm_candidates, merge_candidates
from .layers.summary import PARTS, ExtractiveSummariser, StructuredSummary
from .prompts import (CONFLICT_SCHEMA, EXTRACTION_SCHEMA, SUMMARY_SCHEMA, conflict_prompt,
                      extraction_prompt, first_summary_prompt, merged_summary_prompt)
from .providers.llm import LLM, Completion, UsageRecord, UsageSummary
from .providers.structured import Schema
from .stores.base import Store
from .types import MemoryItem, Message, Scope

__all__ = ["Assist", "LLMSummariser", "UsageReport", "usage_report", "BUDGET"]

log = logging.getLogger("memstrata.assist")

#: The ``error`` of a usage record for a call the daily budget skipped.
BUDGET = "budget"
_SCOPE: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("memstrata_scope",
                                                                      default=None)


class Assist:
    """An LLM, the store its usage goes to, and the per-user daily call budget
    (``daily_budget`` calls per UTC day; 0 = unlimited)."""

    def __init__(self, llm: LLM, store: Store, *, daily_budget: int = 0,
                 max_tokens: int = 512) -> None:
        self.llm = llm
        self.store = store
        self.daily_budget = daily_budget
        self.max_tokens = max_tokens

    @property
    def source(self) -> str:
        """The actor of writes this LLM produced: ``llm:<model>``."""
        return f"llm:{self.llm.model}"

    # -- calls ----------------------------------------------------------------------
    def calls_today(self, scope: Scope, now: datetime | None = None) -> int:
        """LLM calls made for ``scope`` since midnight UTC (failed ones count)."""
        now = now or datetime.now(timezone.utc)
        midnight = datetime.combine(now.date(), dtime(0), tzinfo=timezone.utc)
        return sum(1 for r in self.store.llm_usage(scope, since=midnight) if r.error != BUDGET)

    def call(self, scope: Scope, purpose: str, messages: Sequence[Mapping[str, Any]],
             schema: Schema, *, max_tokens: int | None = None) -> Completion | None:
        """One recorded call, or None (recorded too) when the budget is spent or the
        provider failed: the caller then falls back to its rules."""
        if self.daily_budget and self.calls_today(scope) >= self.daily_budget:
            log.info("LLM budget of %d calls/day spent for %r: rules only", self.daily_budget,
                     scope.user_id)
            self._record(scope, purpose, error=BUDGET)
            return None
        started = time.monotonic()
        try:
            done = self.llm.complete(messages, schema=schema, purpose=purpose,
                                     max_tokens=max_tokens or self.max_tokens)
        except ProviderError as exc:
            log.warning("LLM %s call for %r failed, rules instead: %s", purpose, scope.user_id, exc)
            self._record(scope, purpose, latency=time.monotonic() - started,
                         error=type(exc).__name__)
            return None
        self._record(scope, purpose, done.prompt_tokens, done.completion_tokens,
                     done.latency_s or time.monotonic() - started, model=done.model)
        return done

    def _record(self, scope: Scope, purpose: str, tin: int = 0, tout: int = 0,
                latency: float = 0.0, *, error: str | None = None, model: str | None = None) -> None:
        self.store.record_llm_usage(scope, UsageRecord(datetime.now(timezone.utc),
                                                       model or self.llm.model, purpose, tin,
                                                       tout, latency, error))

    # -- the write path -----------------------------------------------------------------
    def extract(self, scope: Scope, window: Sequence[Message], own: Sequence[Message],
                rules: Sequence[Candidate]) -> list[Candidate]:
        """Candidates for one job: one LLM call over ``window`` (the job's turns with their
        context), its grounded items merged with the ``rules`` candidates; the rule
        candidates alone when the call is skipped or fails."""
        if not any(m.content for m in own if m.role.value == "user"):
            return list(rules)  # nothing of the user's to read: no call
        done = self.call(scope, "extract", extraction_prompt(window), EXTRACTION_SCHEMA)
        if done is None:
            return list(rules)
        parsed = done.parsed
        cands, rejected = llm_candidates(parsed.items, window, own_ids=[m.id for m in own],
                                         source=self.source)
        if parsed.rejected or rejected:
            log.debug("LLM extraction for %r: %d items kept, %d invalid, %d ungrounded",
                      scope.user_id, len(cands), len(parsed.rejected), len(rejected))
        return merge_candidates(cands, rules)

    def judge(self, scope: Scope) -> Judge:
        """A judge for ``decide``: one call per (candidate, band neighbour) it is asked
        about; None — the rules decide — when the call is skipped, fails or says nothing
        valid."""
        def verdict(cand: Candidate, item: MemoryItem) -> str | None:
            done = self.call(scope, "conflict", conflict_prompt(item.content, cand.content,
                                                                kind=cand.kind.value),
                             CONFLICT_SCHEMA, max_tokens=96)
            first = done.parsed.first if done is not None else None
            return RELATIONS.get(first["relation"]) if first else None

        return verdict

    @contextmanager
    def scoped(self, scope: Scope) -> Iterator[None]:
        """Calls made inside (by :class:`LLMSummariser`) are made for ``scope``."""
        token = _SCOPE.set(scope)
        try:
            yield
        finally:
            _SCOPE.reset(token)


@dataclass(frozen=True, slots=True)
class LLMSummariser:
    """The :class:`~memstrata.layers.summary.Summariser` seam with an LLM behind it:
    the first and merged summary prompts, each part clipped to ``max_chars``. Parts the
    LLM leaves empty (or the whole summary, when it fails or no user scope is set, see
    :meth:`Assist.scoped`) come from the extractive summariser."""

    assist: Assist
    max_chars: int = 200
    fallback: ExtractiveSummariser = field(default_factory=ExtractiveSummariser)

    def summarise(self, previous: StructuredSummary | None,
                  new_messages: Sequence[Message | Mapping[str, Any]]) -> StructuredSummary:
        base = self.fallback.summarise(previous, new_messages)
        scope = _SCOPE.get()
        if scope is None:
            return base
        msgs = [m if isinstance(m, Message) else Message.from_dict(m, index=i)
                for i, m in enumerate(new_messages)]
        prompt = (first_summary_prompt(msgs, max_chars=self.max_chars)
                  if previous is None or previous.is_empty
                  else merged_summary_prompt(previous, msgs, max_chars=self.max_chars))
        done = self.assist.call(scope, "summary", prompt, SUMMARY_SCHEMA)
        got = done.parsed.first if done is not None else None
        if not got:
            return base
        parts = {p: str(got.get(p) or "").strip() or getattr(base, p) for p in PARTS}
        return StructuredSummary.clipped(max_chars=self.max_chars, version=base.version, **parts)


# ---------------------------------------------------------------- usage report


@dataclass(frozen=True, slots=True)
class UsageReport:
    """LLM calls per purpose (``extract``, ``conflict``, ``summary``), the calls the budget
    skipped per purpose, and version rows written per path (``rule``, ``llm``, ``api``…;
    ``actors`` has them by full actor, e.g. ``llm:gpt-4o-mini``)."""

    calls: dict[str, UsageSummary] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    writes: dict[str, int] = field(default_factory=dict)
    actors: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> UsageSummary:
        """All calls together."""
        return sum(self.calls.values(), UsageSummary())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``memstrata usage --json`` prints)."""
        def one(s: UsageSummary) -> dict[str, Any]:
            return {"calls": s.calls, "failures": s.failures, "prompt_tokens": s.prompt_tokens,
                    "completion_tokens": s.completion_tokens, "total_tokens": s.total_tokens,
                    "latency_s": round(s.latency_s, 3), "mean_latency_s": round(s.mean_latency_s, 3)}
        return {"calls": {k: one(v) for k, v in sorted(self.calls.items())},
                "total": one(self.total), "skipped": dict(sorted(self.skipped.items())),
                "writes": dict(sorted(self.writes.items())),
                "actors": dict(sorted(self.actors.items()))}


def usage_report(store: Store, scopes: Sequence[Scope]) -> UsageReport:
    """LLM usage and write paths summed over ``scopes``."""
    calls: dict[str, UsageSummary] = {}
    skipped: dict[str, int] = {}
    writes: dict[str, int] = {}
    actors: dict[str, int] = {}
    for scope in scopes:
        for r in store.llm_usage(scope):
            if r.error == BUDGET:
                skipped[r.purpose] = skipped.get(r.purpose, 0) + 1
            else:
                calls[r.purpose] = calls.get(r.purpose, UsageSummary()).add(r)
        for actor, n in store.version_actors(scope).items():
            actors[actor] = actors.get(actor, 0) + n
            path = actor.split(":", 1)[0]
            writes[path] = writes.get(path, 0) + n
    return UsageReport(calls, skipped, writes, actors)
