"""The settings the knowledge base reads, and nothing else.

:class:`KnowledgeSettings` is picked from the one settings table
(:class:`~memstrata.config.Settings`, where each is documented) by
:meth:`KnowledgeSettings.from_settings`; its retriever is the memory's, tuned for
documents by :class:`~memstrata.knowledge.base.KnowledgeBase`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..config import Settings
from ..retrieval.settings import RetrieverSettings

__all__ = ["KnowledgeSettings"]


@dataclass(frozen=True, slots=True)
class KnowledgeSettings:
    """Chunking, embedding batches, retrieval floors and weights, and usage tracking."""

    kb_chunk_chars: int
    kb_min_chunk_chars: int
    kb_cjk_weight: float
    embed_batch: int
    kb_min_score: float
    kb_context_weight: float
    kb_neighbour_weight: float
    kb_stale_recalls: int
    kb_stale_weight: float
    kb_used_overlap: float
    retriever: RetrieverSettings

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> "KnowledgeSettings":
        """The knowledge base's settings out of ``settings`` (default: the defaults)."""
        s = settings or Settings()
        own = {f.name: getattr(s, f.name) for f in fields(cls) if f.name != "retriever"}
        return cls(**own, retriever=RetrieverSettings.from_settings(s))
