"""The settings the retriever reads, and nothing else.

:class:`RetrieverSettings` is picked from the one settings table
(:class:`~memstrata.config.Settings`, where each is documented) by
:meth:`RetrieverSettings.from_settings`, the one place that knows which they are; a
variant of the retriever (the knowledge base's, a benchmark's) is a ``replace`` of it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..config import Settings

__all__ = ["RetrieverSettings"]


@dataclass(frozen=True, slots=True)
class RetrieverSettings:
    """Candidates, fusion and its weights, query building and expansion, the final
    passes, reranking and the query-vector cache (see docs/configuration.md)."""

    scoring: str
    candidates: int
    fusion: str
    dense_weight: float
    lexical_weight: float
    lexical_saturation: float
    calibration: str
    body_weight: float
    context_weight: float
    query_turns: int
    expansion_weight: float
    split_questions: bool
    max_query_parts: int
    max_query_chars: int
    speaker_boost: float
    assistant_weight: float
    question_weight: float
    latest_ratio: float
    rerank_k: int
    query_cache: int

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> "RetrieverSettings":
        """The retriever's settings out of ``settings`` (default: the defaults)."""
        s = settings or Settings()
        return cls(**{f.name: getattr(s, f.name) for f in fields(cls)})
