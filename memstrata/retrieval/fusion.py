"""Fusion of the dense and lexical candidate lists into one similarity in [0, 1].

Pure functions over ranked ``(id, raw_score)`` lists. Two methods:

* ``rrf`` — reciprocal-rank fusion, ``w / (k + rank)`` summed over lists and divided by
  the best possible sum, so a document ranked first in every list scores 1.0.
* ``weighted`` — a weighted mean of two parts in [0, 1]. Keeps score gaps that RRF
  throws away. The dense part is the cosine through the embedder's calibration
  (:mod:`.calibration`: unrelated pairs → 0.05 and under), the lexical part BM25 over
  the list's best plus ``K`` (``lexical_saturation``), ``s / (best + K)``: the best
  match scores ``best / (best + K)`` — near 1 for a strong match, 0.5 when even the best
  scores only ``K`` — and the others keep their ratio to it (LoCoMo dev: a plain
  ``s / (s + K)`` cost 0.01–0.02 recall@10, squeezing the strong matches together).
  So a score says how well the query matched, not only how it ranked, and ``min_score``
  can cut. A lexical list whose
  best score is under :data:`UNINFORMATIVE` (a collection so small that FTS5 floors
  every word's IDF) is left out of the mean, as an empty list is. Without a calibration
  (``dense_map=None``) cosines are min-max normalised within the list, and without a
  saturation BM25 is divided by the list's best — the pre-2026-12 behaviour, where the
  weakest candidate of every list scored 0 however close it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    order: float | None = None  # the relative fused value that orders hits (None: similarity)

    @property
    def order_key(self) -> float:
        return self.similarity if self.order is None else self.order


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


# FTS5 floors the IDF of a word found in half the documents or more at 1e-6: in a small
# collection every BM25 score is then ~1e-6 and says nothing; such a list is left out.
UNINFORMATIVE = 1e-3


def _saturated(candidates: Sequence[Candidate], k: float) -> dict[str, float]:
    best = max((s for _, s in candidates), default=0.0)
    return {d: (s / (best + k) if s > 0 else 0.0) for d, s in candidates}


def weighted(dense: Sequence[Candidate], lexical: Sequence[Candidate], *,
             dense_weight: float = 0.5, lexical_weight: float = 0.5,
             dense_map: Callable[[float], float] | None = None,
             lexical_saturation: float | None = None) -> list[Fused]:
    """Weighted mean of the two parts; a list that misses a doc gives it 0."""
    d_norm = ({d: dense_map(s) for d, s in dense} if dense_map is not None else _minmax(dense))
    l_norm = (_saturated(lexical, lexical_saturation) if lexical_saturation
              else _by_max(lexical))
    d_ranks, l_ranks = _ranks(dense), _ranks(lexical)
    counted = bool(lexical) and (not dense or lexical_saturation is None
                                 or max(s for _, s in lexical) >= UNINFORMATIVE)
    total_weight = (dense_weight if dense else 0.0) + (lexical_weight if counted else 0.0)
    if not dense and not counted:
        total_weight = 1.0
    # the order: the relative parts (min-max cosine, BM25 / best), as tuned on LoCoMo dev
    relative = dense_map is not None or lexical_saturation is not None
    d_rel, l_rel = (_minmax(dense), _by_max(lexical)) if relative else (d_norm, l_norm)
    rel_weight = (dense_weight if dense else 0.0) + (lexical_weight if lexical else 0.0)
    out = []
    for doc_id in d_norm.keys() | l_norm.keys():
        d, lx = d_norm.get(doc_id), l_norm.get(doc_id)
        value = dense_weight * (d or 0.0) + (lexical_weight * (lx or 0.0) if counted else 0.0)
        order = None
        if relative:
            rel = dense_weight * d_rel.get(doc_id, 0.0) + lexical_weight * l_rel.get(doc_id, 0.0)
            order = rel / rel_weight if rel_weight else 0.0
        out.append(Fused(doc_id, value / total_weight if total_weight else 0.0, d, lx,
                         d_ranks[doc_id][0] if doc_id in d_ranks else None,
                         l_ranks[doc_id][0] if doc_id in l_ranks else None, order))
    out.sort(key=lambda f: (-f.order_key, f.id))
    return out


def fuse(dense: Sequence[Candidate], lexical: Sequence[Candidate], *, method: str = "weighted",
         dense_weight: float = 0.5, lexical_weight: float = 0.5, rrf_k: int = 60,
         dense_map: Callable[[float], float] | None = None,
         lexical_saturation: float | None = None) -> list[Fused]:
    """Fuse two ranked candidate lists with ``method`` ('weighted' or 'rrf')."""
    if method == "rrf":
        return rrf(dense, lexical, dense_weight=dense_weight, lexical_weight=lexical_weight, k=rrf_k)
    if method == "weighted":
        return weighted(dense, lexical, dense_weight=dense_weight, lexical_weight=lexical_weight,
                        dense_map=dense_map, lexical_saturation=lexical_saturation)
    raise ConfigError(f"unknown fusion method {method!r}; use one of {', '.join(FUSION_METHODS)}")
