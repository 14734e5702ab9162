"""What the LLM cost and which path wrote memory: :class:`UsageReport`, summed over users."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .providers.metered import BUDGET
from .stores.base import UsageStore
from .types import Scope, UsageSummary

__all__ = ["UsageReport", "usage_report"]


@dataclass(frozen=True, slots=True)
class UsageReport:
    """LLM calls per purpose (``extract``, ``conflict``, ``summary``), the calls the budget
    skipped per purpose, failed calls by error class (``ProviderAuthError`` for a refused
    key: the write path then ran on its offline rules), and version rows written per path
    (``rule``, ``llm``, ``api``…; ``actors`` has them by full actor, e.g. ``llm:gpt-4o-mini``)."""

    calls: dict[str, UsageSummary] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    writes: dict[str, int] = field(default_factory=dict)
    actors: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)

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
                "actors": dict(sorted(self.actors.items())),
                "errors": dict(sorted(self.errors.items()))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "UsageReport":
        """The inverse of :meth:`to_dict` (totals are recomputed from the calls)."""
        def one(row: Mapping[str, Any]) -> UsageSummary:
            return UsageSummary(row["calls"], row["failures"], row["prompt_tokens"],
                                row["completion_tokens"], row["latency_s"])
        return cls({k: one(v) for k, v in data["calls"].items()}, dict(data["skipped"]),
                   dict(data["writes"]), dict(data["actors"]), dict(data.get("errors") or {}))


def usage_report(store: UsageStore, scopes: Sequence[Scope]) -> UsageReport:
    """LLM usage and write paths summed over ``scopes``."""
    calls: dict[str, UsageSummary] = {}
    skipped: dict[str, int] = {}
    writes: dict[str, int] = {}
    actors: dict[str, int] = {}
    errors: dict[str, int] = {}
    for scope in scopes:
        for r in store.llm_usage(scope):
            if r.error == BUDGET:
                skipped[r.purpose] = skipped.get(r.purpose, 0) + 1
            else:
                calls[r.purpose] = calls.get(r.purpose, UsageSummary()).add(r)
                if r.error:
                    errors[r.error] = errors.get(r.error, 0) + 1
        for actor, n in store.version_actors(scope).items():
            actors[actor] = actors.get(actor, 0) + n
            path = actor.split(":", 1)[0]
            writes[path] = writes.get(path, 0) + n
    return UsageReport(calls, skipped, writes, actors, errors)
