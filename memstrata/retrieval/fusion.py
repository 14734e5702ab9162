"""Fusion of the dense and lexical candidate lists into one similarity in [0, 1].

Pure functions over ranked ``(id, raw_score)`` lists. Two methods:

* ``rrf`` — reciprocal-rank fusion, ``w / (k + rank)`` summed over lists and divided by
  the best possible sum, so a document ranked first in every list scores 1.0.
* ``weighted`` — a weighted mean of normalised scores. BM25 scores are divided by the
  best score of the list (a weak match among strong ones stays weak but is not
  zeroed); cosines are min-max normalised within the list, because dense models put
  related and unrelated texts in a narrow band (e5: 0.7–0.9). Keeps score gaps that RRF
  throws away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["Candidate", "Fused", "fuse", "rrf", "weighted", "FUSION_METHODS"]

FUSION_METHODS = ("weighted", "rrf")

Candidate = tuple[str, float]  # (doc id, raw score: higher is better)


@dataclass(frozen=True, slots=True)
class Fused:
    id: str
    similarity: float
    dense: float | None  # normalised part from the dense list, None if absent
    lexical: float | None
    dense_rank: int | None  # 1-based
    lexical_rank: int | None


def _ranks(candidates: Sequence[Candidate]) -> dict[str, tuple[int, float]]:
    out: dict[str, tuple[int, float]] = {}
    for rank, (doc_id, score) in enumerate(candidates, start=1):
        out.setdefault(doc_id, (rank, score))
    return out


def _minmax(candidates: Sequence[Candidate]) -> dict[str, float]:
    if not candidates:
        return {}
    scores = [s for _, s in candidates]
    lo, hi = min(scores), max(scores)
    if hi - lo < 1e-12:
        return {d: 1.0 for d, _ in candidates}
    return {d: (s - lo) / (hi - lo) for d, s in candidates}


def rrf(dense: Sequence[Candidate], lexical: Sequence[Candidate], *,
        dense_weight: float = 1.0, lexical_weight: float = 1.0, k: int = 60) -> list[Fused]:
    """Reciprocal-rank fusion, normalised to [0, 1]."""
    d_ranks, l_ranks = _ranks(dense), _ranks(lexical)
    best = (dense_weight if dense else 0.0) / (k + 1) + (lexical_weight if lexical else 0.0) / (k + 1)
    out = []
    for doc_id in d_ranks.keys() | l_ranks.keys():
        d, lx = d_ranks.get(doc_id), l_ranks.get(doc_id)
        total = (dense_weight / (k + d[0]) if d else 0.0) + (lexical_weight / (k + lx[0]) if lx else 0.0)
        out.append(Fused(doc_id, total / best if best else 0.0,
                         1.0 / d[0] if d else None, 1.0 / lx[0] if lx else None,
                         d[0] if d else None, lx[0] if lx else None))
    out.sort(key=lambda f: (-f.similarity, f.id))
    return out


def _by_max(candidates: Sequence[Candidate]) -> dict[str, float]:
    best = max((s for _, s in candidates), default=0.0)
    return {d: (s / best if best > 0 else 0.0) for d, s in candidates}


def weighted(dense: Sequence[Candidate], lexical: Sequence[Candidate], *,
             dense_weight: float = 0.5, lexical_weight: float = 0.5) -> list[Fused]:
    """Weighted mean of normalised scores; a list that misses a doc gives it 0."""
    d_norm, l_norm = _minmax(dense), _by_max(lexical)
    d_ranks, l_ranks = _ranks(dense), _ranks(lexical)
    total_weight = (dense_weight if dense else 0.0) + (lexical_weight if lexical else 0.0)
    out = []
    for doc_id in d_norm.keys() | l_norm.keys():
        d, lx = d_norm.get(doc_id), l_norm.get(doc_id)
        value = dense_weight * (d or 0.0) + lexical_weight * (lx or 0.0)
        out.append(Fused(doc_id, value / total_weight if total_weight else 0.0, d, lx,
                         d_ranks[doc_id][0] if doc_id in d_ranks else None,
                         l_ranks[doc_id][0] if doc_id in l_ranks else None))
    out.sort(key=lambda f: (-f.similarity, f.id))
    return out


def fuse(dense: Sequence[Candidate], lexical: Sequence[Candidate], *, method: str = "weighted",
         dense_weight: float = 0.5, lexical_weight: float = 0.5, rrf_k: int = 60) -> list[Fused]:
    """Fuse two ranked candidate lists with ``method`` ('weighted' or 'rrf')."""
    if method == "rrf":
        return rrf(dense, lexical, dense_weight=dense_weight, lexical_weight=lexical_weight, k=rrf_k)
    if method == "weighted":
        return weighted(dense, lexical, dense_weight=dense_weight, lexical_weight=lexical_weight)
    raise ConfigError(f"unknown fusion method {method!r}; use one of {', '.join(FUSION_METHODS)}")
