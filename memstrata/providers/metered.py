"""An LLM metered per user: every call recorded, a daily budget, passing failures
turned into None.

:class:`MeteredLLM` is the one way memstrata's write path calls its LLM. Each call is
recorded under the user it was made for (tokens, latency, the error class when it
failed) in a :class:`ScopedUsageSink` — in practice the main store's ``llm_usage``
table — and a per-user daily budget turns further calls into a recorded ``budget``
skip. When the endpoint is not available — a timeout, a refused connection, HTTP 429 or
5xx after the retries, an answer that is not JSON (any other
:class:`~memstrata.errors.ProviderError`) — or the budget is spent, the caller gets
``None`` and falls back to its offline rules: memory does not wait for the LLM. Each
such fallback is logged at WARNING and counted (``usage().calls[purpose].failures`` and
``errors`` by class; ``memstrata_llm_calls{outcome="error"}`` on the service).

A refused API key (HTTP 401/403, :class:`~memstrata.errors.ProviderAuthError`) is no
passing failure — every call fails until the key is fixed — so it is not hidden behind
the rules: it is recorded and counted like the others, logged at ERROR, and raised to
the caller ("<endpoint>: authentication failed …"): a job fails with it and
``flush()`` says so, a search with an LLM reranker answers with it.
The scope is always passed in; nothing is found through ambient state.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from datetime import time as dtime
from typing import Any, Protocol

from ..errors import ProviderAuthError, ProviderError
from ..types import Scope, UsageRecord
from .llm import LLM, Completion
from .structured import Schema

__all__ = ["MeteredLLM", "ScopedUsageSink", "BUDGET"]

log = logging.getLogger("memstrata.llm")

#: The ``error`` of a usage record for a call the daily budget skipped.
BUDGET = "budget"
#: A refused API key is logged at ERROR the first time and every this many refusals after.
AUTH_REPEAT = 100


class ScopedUsageSink(Protocol):
    """Where per-user usage records go (the store's usage seam has these two methods)."""

    def record_llm_usage(self, scope: Scope, record: UsageRecord) -> None: ...

    def llm_usage(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]: ...


class MeteredLLM:
    """An LLM, the sink its usage goes to, and the per-user daily call budget
    (``daily_budget`` calls per UTC day; 0 = unlimited)."""

    def __init__(self, llm: LLM, usage: ScopedUsageSink, *, daily_budget: int = 0,
                 max_tokens: int = 512) -> None:
        self.llm = llm
        self.usage = usage
        self.daily_budget = daily_budget
        self.max_tokens = max_tokens
        self.auth_failures = 0  # calls the endpoint refused for the key, since this process began

    @property
    def source(self) -> str:
        """The actor of writes this LLM produced: ``llm:<model>``."""
        return f"llm:{self.llm.model}"

    def calls_today(self, scope: Scope, now: datetime | None = None) -> int:
        """LLM calls made for ``scope`` since midnight UTC (failed ones count)."""
        now = now or datetime.now(UTC)
        midnight = datetime.combine(now.date(), dtime(0), tzinfo=UTC)
        return sum(1 for r in self.usage.llm_usage(scope, since=midnight) if r.error != BUDGET)

    def call(self, scope: Scope, purpose: str, messages: Sequence[Mapping[str, Any]],
             schema: Schema | None, *, max_tokens: int | None = None) -> Completion | None:
        """One recorded call, or None (recorded too) when the budget is spent or the
        endpoint is not available: the caller then falls back to its rules. Raises
        :class:`~memstrata.errors.ProviderAuthError` when the endpoint refused the key."""
        if self.daily_budget and self.calls_today(scope) >= self.daily_budget:
            log.info("LLM budget of %d calls/day spent for %r: rules only", self.daily_budget,
                     scope.user_id)
            self._record(scope, purpose, error=BUDGET)
            return None
        started = time.monotonic()
        try:
            done = self.llm.complete(messages, schema=schema, purpose=purpose,
                                     max_tokens=max_tokens or self.max_tokens)
        except ProviderAuthError as exc:
            # not a passing failure: every call will fail until the key is fixed, so the
            # caller sees it; logged (ERROR, the first time and every AUTH_REPEAT-th after)
            # and counted (UsageReport.errors, `memstrata usage`) as well
            self.auth_failures += 1
            if self.auth_failures % AUTH_REPEAT == 1 or AUTH_REPEAT == 1:
                log.error("LLM %s call for %r: %s (%d call(s) refused so far)", purpose,
                          scope.user_id, exc, self.auth_failures)
            self._record(scope, purpose, latency=time.monotonic() - started,
                         error=type(exc).__name__)
            raise
        except ProviderError as exc:
            log.warning("LLM %s call for %r failed, rules instead: %s", purpose, scope.user_id, exc)
            self._record(scope, purpose, latency=time.monotonic() - started,
                         error=type(exc).__name__)
            return None
        latency = done.latency_s or time.monotonic() - started
        log.info("LLM %s call for %r: %d+%d tokens in %.2fs", purpose, scope.user_id,
                 done.prompt_tokens, done.completion_tokens, latency)
        self._record(scope, purpose, done.prompt_tokens, done.completion_tokens, latency,
                     model=done.model)
        return done

    def _record(self, scope: Scope, purpose: str, tin: int = 0, tout: int = 0,
                latency: float = 0.0, *, error: str | None = None, model: str | None = None) -> None:
        self.usage.record_llm_usage(scope, UsageRecord(datetime.now(UTC),
                                                       model or self.llm.model, purpose, tin,
                                                       tout, latency, error))
