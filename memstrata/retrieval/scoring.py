"""Final scores from similarity, recency, importance and layer.

The seeds give three formulas; each is a preset, and every weight is configurable:

* ``balanced`` (the default): ``0.6·similarity + 0.3·recency + 0.1·importance``,
  recency an exponential half-life (30 days).
* ``fresh``: ``0.4·similarity + 0.3·recency + 0.3·importance``, recency linear
  over 30 days (1 today, 0 at 30 days and older).
* ``decay``: ``similarity × 0.5^(age/half_life) × layer_weight``, half-life
  30 days (7 for support bots), layer weights working 1.0, semantic 0.8, episodic 0.5.
* ``relevance``: similarity alone — for archives and benchmarks where age says nothing.

The weighted-sum presets are *gated* by default: the recency and importance terms are
multiplied by the similarity, ``sim·(0.6 + 0.3·recency + 0.1·importance)``. Ungated, a
brand-new memory that has nothing to do with the query outranks an old one that
answers it (recency alone is worth 0.3); gated, freshness and importance only reorder
candidates that are relevant. ``gated=False`` gives the seeds' formula verbatim.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..errors import ValidationError, shown

__all__ = ["ScoringPreset", "PRESETS", "get_preset", "recency", "final_score"]

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class ScoringPreset:
    """How similarity, recency, importance and layer combine into one score."""

    name: str
    formula: str  # "sum" (weighted sum) or "product" (similarity × decay × layer)
    similarity_weight: float = 0.6
    recency_weight: float = 0.3
    importance_weight: float = 0.1
    recency_curve: str = "half_life"  # "half_life" or "linear"
    half_life_days: float = 30.0
    window_days: float = 30.0  # for the linear curve
    gated: bool = True
    layer_weights: Mapping[str, float] = field(
        default_factory=lambda: {"working": 1.0, "semantic": 0.8, "episodic": 0.5})

    def with_overrides(self, **changes: Any) -> "ScoringPreset":
        return replace(self, **changes)


PRESETS: dict[str, ScoringPreset] = {
    "balanced": ScoringPreset("balanced", "sum", 0.6, 0.3, 0.1, "half_life", 30.0),
    "fresh": ScoringPreset("fresh", "sum", 0.4, 0.3, 0.3, "linear", window_days=30.0),
    "decay": ScoringPreset("decay", "product", recency_curve="half_life", half_life_days=30.0),
    "support": ScoringPreset("support", "product", recency_curve="half_life", half_life_days=7.0),
    "relevance": ScoringPreset("relevance", "sum", 1.0, 0.0, 0.0),
}


def get_preset(name: "str | ScoringPreset") -> ScoringPreset:
    """A preset by name (or the preset itself); ValidationError for an unknown name."""
    if isinstance(name, ScoringPreset):
        return name
    try:
        return PRESETS[name]
    except (KeyError, TypeError):  # an unknown name, or not a name at all
        raise ValidationError(f"unknown scoring preset {shown(name)}; choose one of "
                              f"{', '.join(PRESETS)}") from None


def recency(created_at: datetime, now: datetime, preset: ScoringPreset) -> float:
    """Freshness in [0, 1]: 1 for now, falling with age by the preset's curve."""
    age_days = max(0.0, (now - created_at).total_seconds() / DAY)
    if preset.recency_curve == "linear":
        return max(0.0, 1.0 - age_days / preset.window_days)
    return math.pow(0.5, age_days / preset.half_life_days)


def final_score(similarity: float, created_at: datetime, importance: float, layer: str,
                now: datetime, preset: ScoringPreset) -> tuple[float, float, float]:
    """Return ``(score, recency, layer_weight)`` for one candidate."""
    fresh = recency(created_at, now, preset)
    layer_weight = preset.layer_weights.get(layer, 1.0)
    if preset.formula == "product":
        return similarity * fresh * layer_weight, fresh, layer_weight
    bonus = preset.recency_weight * fresh + preset.importance_weight * importance
    if preset.gated:
        bonus *= similarity
    return preset.similarity_weight * similarity + bonus, fresh, layer_weight
