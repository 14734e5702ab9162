"""Hybrid retrieval: dense ∥ lexical → fusion → scoring preset → top k (SPEC R5.1–R5.7).

The :class:`Retriever` holds no state of its own; it asks the store for two candidate
lists, fuses them with :mod:`~memstrata.retrieval.fusion`, scores them with a
:mod:`~memstrata.retrieval.scoring` preset and returns :class:`~memstrata.types.SearchHit`
values whose ``parts`` say how each score was made. ``explain`` keeps every candidate
of both lists (R5.6).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import numpy as np

from ..providers.embedders import Embedder, content_hash
from ..stores.base import DocInfo, Store
from ..types import Filters, Kind, Layer, Scope, ScoreParts, SearchHit, utcnow
from .documents import build_query
from .fusion import fuse
from .scoring import ScoringPreset, final_score, get_preset

__all__ = ["Retriever", "SearchResult", "Mode", "embed_cached"]

Mode = Literal["hybrid", "lexical", "dense"]


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Hits best first, and (when asked) the candidate lists they came from."""

    hits: list[SearchHit]
    lexical_candidates: list[tuple[str, float]] = field(default_factory=list)
    dense_candidates: list[tuple[str, float]] = field(default_factory=list)
    query_tokens: str = ""

    def to_dict(self) -> dict:
        return {"hits": [h.to_dict() for h in self.hits], "query_tokens": self.query_tokens,
                "lexical_candidates": self.lexical_candidates,
                "dense_candidates": self.dense_candidates}


def embed_cached(store: Store, embedder: Embedder, texts: Sequence[str],
                 kind: Literal["query", "passage"] = "passage") -> np.ndarray:
    """Embed ``texts``, reusing vectors cached by content hash in the store."""
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    hashes = [content_hash(t, kind) for t in texts]
    cached = store.cached_vectors(embedder.name, sorted(set(hashes)))
    missing = sorted({h: t for h, t in zip(hashes, texts) if h not in cached}.items())
    if missing:
        vectors = embedder.embed([t for _, t in missing], kind=kind)
        fresh = {h: vectors[i] for i, (h, _) in enumerate(missing)}
        store.cache_vectors(embedder.name, fresh)
        cached.update(fresh)
    return np.stack([cached[h] for h in hashes]).astype(np.float32)


class Retriever:
    """Hybrid search over one store with one embedder."""

    def __init__(self, store: Store, embedder: Embedder, *, candidates: int = 50,
                 fusion: str = "weighted", dense_weight: float = 0.43,
                 lexical_weight: float = 0.57, context_weight: float = 0.5,
                 body_weight: float = 3.0, speaker_boost: float = 0.1,
                 query_turns: int = 3) -> None:
        self.store = store
        self.embedder = embedder
        self.candidates = candidates
        self.fusion = fusion
        self.dense_weight = dense_weight
        self.lexical_weight = lexical_weight
        self.context_weight = context_weight
        self.body_weight = body_weight
        self.speaker_boost = speaker_boost
        self.query_turns = query_turns

    def _named_speaker(self, query: str, infos: "Iterable[DocInfo]") -> str | None:
        """The speaker tag to boost when the query names exactly one of the speakers
        among the candidates ("What did Caroline say…" → Caroline's turns)."""
        if not self.speaker_boost:
            return None
        speakers = {t for info in infos for t in info.tags if t.startswith("speaker:")}
        lowered = query.lower()
        named = [t for t in speakers
                 if re.search(rf"(?<!\w){re.escape(t[8:].lower())}(?!\w)", lowered)]
        return named[0] if len(named) == 1 else None

    def search(self, scope: Scope, query: str, *, k: int = 10, filters: Filters | None = None,
               recent: Sequence[str] = (), preset: "str | ScoringPreset" = "balanced",
               mode: Mode = "hybrid", now: datetime | None = None, explain: bool = False,
               query_vector: np.ndarray | None = None, touch: bool = True) -> SearchResult:
        filters = filters or Filters()
        scoring = get_preset(preset)
        now = now or utcnow()
        lexical_query, dense_text = build_query(query, recent, self.query_turns)
        limit = max(self.candidates, k)
        lexical = (self.store.lexical_search(scope, lexical_query, filters, limit,
                                             context_weight=self.context_weight,
                                             body_weight=self.body_weight)
                   if mode != "dense" else [])
        dense: list[tuple[str, float]] = []
        if mode != "lexical":
            if query_vector is None:
                query_vector = self.embedder.embed([dense_text], kind="query")[0]
            dense = self.store.vector_search(scope, query_vector, filters, limit)
        fused = fuse(dense, lexical, method=self.fusion, dense_weight=self.dense_weight,
                     lexical_weight=self.lexical_weight)
        infos = self.store.doc_info(scope, [f.id for f in fused])
        boosted = self._named_speaker(query, infos.values())
        scored = []
        for f in fused:
            info = infos.get(f.id)
            if info is None:  # deleted between the two reads
                continue
            score, fresh, layer_weight = final_score(f.similarity, info.created_at, info.importance,
                                                     info.layer.value, now, scoring)
            boost = 1.0 + self.speaker_boost if boosted and boosted in info.tags else 1.0
            score *= boost
            parts = ScoreParts(similarity=f.similarity, dense=f.dense, lexical=f.lexical,
                               recency=fresh, importance=info.importance, layer_weight=layer_weight,
                               dense_rank=f.dense_rank, lexical_rank=f.lexical_rank,
                               preset=scoring.name, boost=boost)
            scored.append(SearchHit(id=info.id, layer=info.layer, text=info.text, score=score,
                                    parts=parts, created_at=info.created_at,
                                    session_id=info.session_id,
                                    kind=Kind(info.kind) if info.kind else None))
        scored.sort(key=lambda h: (-h.score, h.id))
        hits = scored[:k]
        if touch:
            items = [h.id for h in hits if h.layer is Layer.SEMANTIC]
            if items:
                self.store.touch_items(scope, items, now)
        return SearchResult(hits, lexical if explain else [], dense if explain else [],
                            lexical_query)
