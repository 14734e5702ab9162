"""Calibrated similarity: one embedder's cosines mapped to a scale that means the same
for every query.

Dense models put related and unrelated texts in a narrow band whose place depends on the
model and, for multilingual models, on the language (multilingual-e5-small on
:data:`PAIRS`: English unrelated pairs 0.765 ± 0.022, a question and its answer 0.83;
Chinese unrelated 0.833 ± 0.017, related 0.91; the hash embedder: unrelated around 0,
related 0.3). A cosine of 0.8
says nothing until the band is known, and normalising each candidate list to [0, 1]
(min-max) turns a near-tie into 0 against 1 and makes any absolute threshold useless.

:func:`fit` measures the band once per embedder and store (:func:`calibration_for` keeps
it in the store's ``meta``, so a fresh process reads it instead of loading the model and
embedding 48 texts before its first search), on a fixed bilingual set
of question/answer pairs on unrelated topics (:data:`PAIRS`), per language of the query
(Chinese or not): the cosines of every question with the answers of the *other* pairs of
its language are the unrelated distribution, the cosines with its own answer the related
one. :class:`Calibration` maps a cosine linearly, ``low`` → 0.05 and ``high`` → 0.95,
with exponential tails beyond (order is never lost): ``low`` is the unrelated mean plus
one standard deviation (five in six unrelated pairs score under 0.05), ``high`` the mean
plus six (far above any unrelated pair: e5 puts a question and
its answer at about 0.4–0.7 on this scale). Linear, so near-ties stay near-ties; fixed,
so ``min_score`` works.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import MemstrataError
from ..providers.embedders import Embedder
from ..stores.base import MetaStore
from ..text import is_cjk_text

__all__ = ["Band", "Calibration", "fit", "calibration_for", "PAIRS"]

#: (question, answer) pairs, each on its own topic, in both languages. The unrelated
#: pairs are every question against every other pair's answer.
PAIRS: tuple[tuple[str, str], ...] = (
    ("Where do I live?", "I live in Hangzhou, near the West Lake."),
    ("Which programming language do I use at work?", "I switched our routing service from Java to Go."),
    ("What is my dog's name?", "My dog is a golden retriever called Biscuit."),
    ("When is my sister's wedding?", "My sister is getting married on 12 June in Lisbon."),
    ("What am I allergic to?", "I'm allergic to peanuts, so no satay for me."),
    ("What instrument am I learning?", "I started cello lessons last month."),
    ("Where did I go on holiday?", "We spent two weeks hiking in Patagonia."),
    ("What car do I drive?", "I drive an old blue Volvo estate."),
    ("How do I get to work?", "I cycle to the office every morning, about 20 minutes."),
    ("What did I study?", "I have a master's degree in marine biology."),
    ("What do I usually eat for breakfast?", "Most mornings I have oatmeal with blueberries."),
    ("Which team do I support?", "I've supported Liverpool since I was a kid."),
    ("我住在哪里？", "我住在成都，离春熙路不远。"),
    ("我的猫叫什么名字？", "我家的猫是一只橘猫，叫团子。"),
    ("我在学什么乐器？", "我最近在学古筝，每周上两次课。"),
    ("我对什么过敏？", "我对海鲜过敏，吃虾会起疹子。"),
    ("我上司的电话是多少？", "我上司的电话是13812345678。"),
    ("我周末一般做什么？", "周末我通常去爬山或者去图书馆看书。"),
    ("我开什么车？", "我开的是一辆白色的比亚迪。"),
    ("我在哪家公司工作？", "我在一家做新能源电池的公司上班。"),
    ("我女儿几岁了？", "我女儿今年五岁，刚上幼儿园大班。"),
    ("我喜欢喝什么茶？", "我最喜欢喝龙井，每天早上泡一杯。"),
    ("我打算去哪里旅游？", "我计划明年春天去云南大理玩一周。"),
    ("我大学学的是什么专业？", "我大学读的是土木工程。"),
)


#: What the band's ends map to; below ``low`` a cosine scores under TAIL.
TAIL = 0.05
_STEEP = (1.0 - 2 * TAIL) / TAIL  # the tails' slope at the band's ends equals the band's


@dataclass(frozen=True, slots=True)
class Band:
    """Cosine → calibrated similarity in (0, 1): linear from ``low`` (→ :data:`TAIL`) to
    ``high`` (→ 1 − :data:`TAIL`), with exponential tails beyond, so that the order of
    two cosines is never lost (no clipping to ties at 0 or 1)."""

    low: float
    high: float

    def __call__(self, cosine: float) -> float:
        z = (cosine - self.low) / max(self.high - self.low, 1e-9)
        if z < 0:  # exponential tails keep the order of what is below or above the band
            return TAIL * math.exp(z * _STEEP)
        if z > 1:
            return 1.0 - TAIL * math.exp((1.0 - z) * _STEEP)
        return TAIL + (1.0 - 2 * TAIL) * z


@dataclass(frozen=True, slots=True)
class Calibration:
    """One embedder's bands: for Chinese queries and for the others."""

    latin: Band
    cjk: Band

    def band(self, query: str) -> Band:
        """The band for a query in its language."""
        return self.cjk if is_cjk_text(query) else self.latin

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {name: {"low": round(b.low, 4), "high": round(b.high, 4)}
                for name, b in (("latin", self.latin), ("cjk", self.cjk))}


#: Where the band starts and ends, in standard deviations of the unrelated cosines above
#: their mean.
LOW_Z, HIGH_Z = 1.0, 6.0


def _band(cos: np.ndarray) -> Band:
    unrelated = cos[~np.eye(len(cos), dtype=bool)]
    mean, std = float(unrelated.mean()), max(float(unrelated.std()), 1e-3)
    return Band(mean + LOW_Z * std, mean + HIGH_Z * std)


def fit(embedder: Embedder) -> Calibration:
    """Measure ``embedder``'s bands on :data:`PAIRS` (2 × 24 texts, one batch each)."""
    questions = embedder.embed([q for q, _ in PAIRS], kind="query")
    answers = embedder.embed([a for _, a in PAIRS], kind="passage")
    cos = np.asarray(questions @ answers.T, dtype=np.float64)
    cjk = np.array([is_cjk_text(q) for q, _ in PAIRS])
    return Calibration(_band(cos[~cjk][:, ~cjk]), _band(cos[cjk][:, cjk]))


_fitted: dict[str, Calibration] = {}
_lock = threading.Lock()
log = logging.getLogger("memstrata")


def _meta_key(embedder: Embedder) -> str:
    """The store ``meta`` key of an embedder's bands; it names the pairs and the band
    rule too, so changing either refits instead of reading stale bands."""
    recipe = json.dumps([PAIRS, LOW_Z, HIGH_Z], ensure_ascii=False).encode("utf-8")
    return f"calibration:{embedder.name}:{hashlib.sha256(recipe).hexdigest()[:12]}"


def _from_meta(text: str) -> Calibration | None:
    try:
        data = json.loads(text)
        return Calibration(Band(float(data["latin"][0]), float(data["latin"][1])),
                           Band(float(data["cjk"][0]), float(data["cjk"][1])))
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def calibration_for(embedder: Embedder, meta: MetaStore | None = None) -> Calibration:
    """The calibration of ``embedder`` (by name): as stored in ``meta`` when it is there,
    else fitted on first use in this process and stored in ``meta`` (best effort: a
    read-only store just does not keep it). Stored exactly (floats round-trip through
    JSON), so every process scores alike."""
    key = _meta_key(embedder) if meta is not None else ""
    if meta is not None:
        try:
            stored = meta.get_meta(key)
        except MemstrataError as exc:
            log.info("calibration not read from the store (%s); fitting it", exc)
            stored = None
        found = _from_meta(stored) if stored else None
        if found is not None:
            _fitted.setdefault(embedder.name, found)
            return found
    found = _fitted.get(embedder.name)
    if found is None:
        with _lock:
            found = _fitted.get(embedder.name)
            if found is None:
                found = _fitted[embedder.name] = fit(embedder)
    if meta is not None:
        value = json.dumps({"latin": [found.latin.low, found.latin.high],
                            "cjk": [found.cjk.low, found.cjk.high]})
        try:
            meta.set_meta(key, value)
        except MemstrataError as exc:
            log.info("calibration not stored (%s); the next process fits it again", exc)
    return found
