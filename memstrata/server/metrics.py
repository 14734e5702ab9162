"""The service's Prometheus metrics (:class:`Metrics`) and the usage sink that counts
the write path's LLM calls in them (:class:`MeteredSink`).

Below everything else of the service: the :class:`~memstrata.server.service.Service`
holds one :class:`Metrics`, the request middleware (:mod:`.observe`) counts into it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..stores.base import JobQueue
from ..stores.policy import UNFINISHED
from ..types import Scope, UsageRecord

__all__ = ["Metrics", "MeteredSink"]

log = logging.getLogger("memstrata.server")


class _JobDepth(Collector):
    """``memstrata_jobs{status}``: the queue depth, read from the store at scrape time."""

    def __init__(self, jobs: JobQueue) -> None:
        self.jobs = jobs

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("memstrata_jobs", "Background jobs by status (pending, running)",
                                   labels=["status"])
        try:
            unfinished = self.jobs.list_jobs(statuses=UNFINISHED, limit=100_000)
        except Exception:  # a scrape must not fail because the store is down; readyz says so
            log.warning("metrics: could not read the job queue", exc_info=True)
            return [family]
        for status in UNFINISHED:
            family.add_metric([status], sum(1 for j in unfinished if j.status == status))
        return [family]

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return [GaugeMetricFamily("memstrata_jobs", "Background jobs by status", labels=["status"])]


class Metrics:
    """The service's Prometheus metrics, in a registry of its own (two apps in one
    process do not collide)."""

    def __init__(self, jobs: JobQueue) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("memstrata_http_requests", "HTTP requests",
                                ["method", "route", "status"], registry=r)
        self.latency = Histogram("memstrata_http_request_duration_seconds",
                                 "HTTP request latency (until the last byte is sent)",
                                 ["method", "route"], registry=r,
                                 buckets=(.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self.in_flight = Gauge("memstrata_http_requests_in_flight", "Requests being served",
                               registry=r)
        self.llm_calls = Counter("memstrata_llm_calls", "LLM calls of the write path",
                                 ["purpose", "outcome"], registry=r)
        self.llm_tokens = Counter("memstrata_llm_tokens", "LLM tokens of the write path",
                                  ["purpose", "kind"], registry=r)
        self.upstream = Counter("memstrata_proxy_upstream_requests", "Calls the memory proxy forwarded",
                                ["status", "stream"], registry=r)
        self.upstream_tokens = Counter("memstrata_proxy_upstream_tokens",
                                       "Tokens the upstream reported for proxied calls", ["kind"],
                                       registry=r)
        self.proxy_warnings = Counter(
            "memstrata_proxy_warnings", "Proxied answers passed through although memstrata could "
            "not read or store all of them, by kind", ["kind"], registry=r)
        r.register(_JobDepth(jobs))

    def count_llm(self, record: UsageRecord) -> None:
        outcome = "ok" if record.error is None else ("budget" if record.error == "budget" else "error")
        self.llm_calls.labels(record.purpose, outcome).inc()
        if record.prompt_tokens:
            self.llm_tokens.labels(record.purpose, "prompt").inc(record.prompt_tokens)
        if record.completion_tokens:
            self.llm_tokens.labels(record.purpose, "completion").inc(record.completion_tokens)


class MeteredSink:
    """A usage sink that stores each LLM usage record and counts it in the metrics
    (installed as :attr:`memstrata.providers.metered.MeteredLLM.usage`)."""

    def __init__(self, inner: Any, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    def record_llm_usage(self, scope: Scope, record: UsageRecord) -> None:
        self.inner.record_llm_usage(scope, record)
        self.metrics.count_llm(record)

    def llm_usage(self, scope: Scope, *, since: Any = None) -> list[UsageRecord]:
        result: list[UsageRecord] = self.inner.llm_usage(scope, since=since)
        return result
