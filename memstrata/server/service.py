"""What every request of the service shares: :class:`Service`.

It sits below every router, the inspector, the MCP endpoint and the proxy, which all
reach it through :func:`memstrata.server.auth.service`; :mod:`.app` builds one and
hangs it on ``app.state.service``.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from ..memory import Memory
from .keys import Keys
from .metrics import MeteredSink, Metrics
from .settings import ServerSettings

__all__ = ["Service"]

log = logging.getLogger("memstrata.server")


class Service:
    """What every request shares: memory, keys, settings, metrics and the drain flag."""

    def __init__(self, memory: Memory, settings: ServerSettings, *, owns_memory: bool) -> None:
        self.memory = memory
        self.settings = settings
        self.owns_memory = owns_memory
        self.keys = Keys(memory.store)
        self.metrics = Metrics(memory.store)
        self.draining = False
        self._upstream: httpx.AsyncClient | None = None
        if memory.llm is not None:  # LLM calls of the write path show up in /metrics
            memory.llm.usage = MeteredSink(memory.llm.usage, self.metrics)

    def upstream_client(self) -> httpx.AsyncClient:
        """The memory proxy's connection pool to the upstream (made on first use)."""
        if self._upstream is None:
            self._upstream = httpx.AsyncClient(timeout=self.settings.upstream_timeout_s)
        return self._upstream

    def count_upstream_usage(self, usage: Any) -> None:
        """Tokens the upstream reported for a proxied call, into the metrics."""
        if isinstance(usage, dict):
            for kind in ("prompt_tokens", "completion_tokens"):
                count = usage.get(kind)
                if isinstance(count, int) and not isinstance(count, bool) and 0 <= count < 10**12:
                    self.metrics.upstream_tokens.labels(kind.removesuffix("_tokens")).inc(count)

    async def aclose(self) -> None:
        if self._upstream is not None:
            await self._upstream.aclose()

    def shutdown(self) -> None:
        """Stop taking work, let the job in hand finish (``drain_s``), hand the rest back
        (pending jobs stay in the store for the next worker), close what we own."""
        self.draining = True
        memory = self.memory
        pending = memory.store.list_jobs(statuses=("pending",), limit=100_000)
        memory.worker.stop(timeout=self.settings.drain_s)
        still = memory.store.list_jobs(statuses=("running",), limit=100_000)
        mine = [j for j in still if j.worker == memory.worker.name]
        log.info("shutdown: %d pending job(s) handed back to the store%s", len(pending),
                 f"; {len(mine)} still running past drain_s (their lease lets another worker "
                 "take them)" if mine else "")
        if self.owns_memory:
            memory.close()
