"""A learned relevance score: one probability that a candidate answers the query (pure).

Every candidate of a search is described by :data:`FEATURES`, signals the engine already
has when it ranks — the calibrated cosine and the BM25 score, each as a value, relative
to the list's best and as a rank; how much of the query the document's *own* words
cover (its context field — the neighbouring turns, an item's slots — counts only through
the lexical score, so a turn that matched through the turn before it is told apart
from one that says it); whether only query expansion found it; who said it (the
assistant's words, a question turn, a copy of the question, a low-information reply);
what it is (a memory item, a knowledge chunk); whether the query names its speaker;
how new it is among the candidates; its importance. A logistic regression
(:class:`Ranker`) turns them into ``P(relevant)``.

**Not the search order yet.** ``memstrata bench train-ranker`` learns the weights on the
development splits and checks them leave-one-dataset-out (docs/benchmarks.md, "A
learned ranker"): fitted on the other datasets it does not beat BM25 alone on LoCoMo,
and its probabilities are over-confident in tiny stores (the best of three candidates
always has rank 1), so :class:`~memstrata.retrieval.search.Retriever` still orders by
the fused similarity; it only hands these features to the benchmark (``collect``).
The weights ``ranker.json`` beside this module are the last fit, for
:func:`default_ranker`. :func:`fit` is plain L2-regularised logistic regression by
Newton's method — deterministic, no random state — in numpy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..stores.base import DocInfo
from ..types import Layer
from .documents import asks_about_assistant, is_low_information, is_question
from .fusion import Candidate, Fused
from .units import is_weak, role_of

__all__ = ["FEATURES", "Signals", "Ranker", "features", "signal_rows", "feature_matrix", "fit",
           "default_ranker",
           "expected_calibration_error", "reliability", "RANKER_FILE"]

#: The features, in the order of a feature vector and of the weights in ``ranker.json``.
FEATURES: tuple[str, ...] = (
    "dense",            # calibrated cosine (0 when the dense list does not have it)
    "dense_rel",        # min-max cosine within the dense list
    "dense_rank",       # 1 / log2(1 + rank) in the dense list, 0 when absent
    "in_dense",         # in the dense list at all
    "lexical",          # BM25 over the list's best plus the saturation constant
    "lexical_rel",      # BM25 / the list's best
    "lexical_rank",     # 1 / log2(1 + rank) in the lexical list
    "in_lexical",
    "body_match",       # share of the query's words in the document's own words
    "context_only",     # a lexical match with none of the query's words in its own text
    "expansion_only",   # found only by query expansion's second list
    "newer",            # share of the other candidates created before it
    "assistant",        # the assistant's words, when the query does not ask for them
    "question_turn",    # a turn that asks, for a query that asks too
    "echo",             # a question turn asking nothing the query does not ask
    "low_information",  # "OK.", "Nice!", "好的"
    "item",             # a memory item (semantic layer)
    "knowledge",        # a knowledge-base chunk
    "speaker",          # the query names the turn's speaker
    "importance",
    # a memory item is a statement rewritten, not a turn: its matches get weights of their own
    "item_dense", "item_dense_rel", "item_dense_rank", "item_lexical", "item_lexical_rel",
    "item_lexical_rank", "item_body_match",
)

RANKER_FILE = Path(__file__).with_name("ranker.json")


@dataclass(frozen=True, slots=True)
class Signals:
    """What the engine knows of one candidate for one query (the inputs of :func:`features`)."""

    dense: float | None = None          # calibrated cosine; None: not in the dense list
    dense_rel: float = 0.0
    dense_rank: int | None = None       # 1-based
    lexical: float | None = None        # saturated BM25; None: not in the lexical list
    lexical_rel: float = 0.0
    lexical_rank: int | None = None
    body_match: float = 0.0
    expansion_only: bool = False
    newer: float = 0.0
    assistant: bool = False
    question_turn: bool = False
    echo: bool = False
    low_information: bool = False
    item: bool = False
    knowledge: bool = False
    speaker: bool = False
    importance: float = 0.0


def _by_rank(rank: int | None) -> float:
    return 0.0 if rank is None else 1.0 / math.log2(1.0 + rank)


def features(s: Signals) -> list[float]:
    """The feature vector of one candidate, in :data:`FEATURES` order."""
    in_lexical = s.lexical is not None
    matches = [s.dense or 0.0, s.dense_rel, _by_rank(s.dense_rank), s.lexical or 0.0,
               s.lexical_rel, _by_rank(s.lexical_rank), s.body_match]
    return [
        *matches[:3], float(s.dense is not None), *matches[3:6], float(in_lexical),
        s.body_match, float(in_lexical and s.body_match == 0.0), float(s.expansion_only),
        s.newer, float(s.assistant), float(s.question_turn), float(s.echo),
        float(s.low_information), float(s.item), float(s.knowledge), float(s.speaker),
        s.importance, *(m if s.item else 0.0 for m in matches),
    ]


def _minmax(found: Sequence[Candidate]) -> dict[str, float]:
    if not found:
        return {}
    lo, hi = min(s for _, s in found), max(s for _, s in found)
    return {d: (s - lo) / (hi - lo) if hi - lo > 1e-12 else 1.0 for d, s in found}


def _by_best(found: Sequence[Candidate]) -> dict[str, float]:
    best = max((s for _, s in found), default=0.0)
    return {d: s / best if best > 0 else 0.0 for d, s in found}


def signal_rows(per_question: "Sequence[tuple[str, Sequence[Fused], Sequence[Candidate], "
                "Sequence[Candidate], set[str]]]", infos: "dict[str, DocInfo]", query: str,
                speaker: str | None) -> tuple[list[Signals], list[tuple[str, Fused]]]:
    """The :class:`Signals` of every candidate of every question of a search, and whose
    they are (``(doc id, fused row)``, in the same order).

    ``per_question`` holds, per question, ``(lexical query tokens, fused, lexical list,
    dense list, ids only query expansion found)``; ``infos`` the documents (a candidate
    deleted since is left out); ``speaker`` the ``speaker:`` tag the query names."""
    about_assistant = asks_about_assistant(query)
    asks = is_question(query)
    created = sorted(i.created_at.timestamp() for i in infos.values())
    older = {t: n for n, t in reversed(list(enumerate(created)))}
    span = max(len(created) - 1, 1)
    lowered = {i: info.text.lower() for i, info in infos.items()}
    rows: list[Signals] = []
    owners: list[tuple[str, Fused]] = []
    for tokens, fused, lexical, dense, expanded in per_question:
        words = list(dict.fromkeys(tokens.split()))
        d_rel, l_rel = _minmax(dense), _by_best(lexical)
        for f in fused:
            info = infos.get(f.id)
            if info is None:
                continue
            role = role_of(info)
            text = lowered[f.id]
            body = sum(w in text for w in words) / len(words) if words else 0.0
            rows.append(Signals(
                dense=f.dense, dense_rel=d_rel.get(f.id, 0.0), dense_rank=f.dense_rank,
                lexical=f.lexical, lexical_rel=l_rel.get(f.id, 0.0), lexical_rank=f.lexical_rank,
                body_match=body, expansion_only=f.id in expanded,
                newer=older[info.created_at.timestamp()] / span,
                assistant=role == "assistant" and not about_assistant,
                question_turn=role is not None and asks and is_question(info.text),
                echo=role == "user" and is_weak(info, query, about_assistant=about_assistant),
                low_information=role is not None and is_low_information(info.text),
                item=info.layer is Layer.SEMANTIC, knowledge=info.layer is Layer.KNOWLEDGE,
                speaker=bool(speaker) and speaker in info.tags,
                importance=info.importance if info.layer is Layer.SEMANTIC else 0.0))
            owners.append((f.id, f))
    return rows, owners


def _document_columns(infos: "dict[str, DocInfo]", ids: list[str], query: str,
                      speaker: str | None) -> tuple[np.ndarray, list[str]]:
    """The features that depend on the document alone, one row per id (assistant,
    question_turn, echo, low_information, item, knowledge, speaker, importance), and
    each document's lowered text."""
    about_assistant = asks_about_assistant(query)
    asks = is_question(query)
    static = np.zeros((len(ids), 8))
    lowered = []
    for n, doc_id in enumerate(ids):
        info = infos[doc_id]
        lowered.append(info.text.lower())
        role = role_of(info)
        if role is not None:
            static[n, 0] = role == "assistant" and not about_assistant
            static[n, 1] = asks and is_question(info.text)
            static[n, 2] = role == "user" and is_weak(info, query, about_assistant=about_assistant)
            static[n, 3] = is_low_information(info.text)
        elif info.layer is Layer.SEMANTIC:
            static[n, 4], static[n, 7] = 1.0, info.importance
        elif info.layer is Layer.KNOWLEDGE:
            static[n, 5] = 1.0
        if speaker and speaker in info.tags:
            static[n, 6] = 1.0
    return static, lowered


def feature_matrix(per_question: "Sequence[tuple[str, Sequence[Fused], Sequence[Candidate], "
                   "Sequence[Candidate], set[str]]]", infos: "dict[str, DocInfo]", query: str,
                   speaker: str | None) -> tuple[np.ndarray, list[tuple[str, Fused]]]:
    """:func:`features` of :func:`signal_rows`, as one matrix built column by column (what
    a search runs: a hundred candidates cost about a tenth of a millisecond, not one
    object each)."""
    ids = list(infos)
    index = {d: n for n, d in enumerate(ids)}
    stamps = np.array([infos[d].created_at.timestamp() for d in ids], dtype=np.float64)
    newer = np.searchsorted(np.sort(stamps), stamps, side="left") / max(len(ids) - 1, 1)
    static, lowered = _document_columns(infos, ids, query, speaker)
    blocks: list[np.ndarray] = []
    owners: list[tuple[str, Fused]] = []
    for tokens, fused, lexical, dense, expanded in per_question:
        live = [f for f in fused if f.id in index]
        if not live:
            continue
        words = list(dict.fromkeys(tokens.split()))
        d_rel, l_rel = _minmax(dense), _by_best(lexical)
        rows = np.array([index[f.id] for f in live])
        cols = np.array([[f.dense if f.dense is not None else np.nan,
                          d_rel.get(f.id, 0.0), f.dense_rank or 0,
                          f.lexical if f.lexical is not None else np.nan,
                          l_rel.get(f.id, 0.0), f.lexical_rank or 0,
                          sum(w in lowered[index[f.id]] for w in words) / len(words) if words else 0.0,
                          float(f.id in expanded)] for f in live], dtype=np.float64)
        in_dense, in_lexical = ~np.isnan(cols[:, 0]), ~np.isnan(cols[:, 3])
        with np.errstate(divide="ignore"):
            d_rank = np.where(cols[:, 2] > 0, 1.0 / np.log2(1.0 + cols[:, 2]), 0.0)
            l_rank = np.where(cols[:, 5] > 0, 1.0 / np.log2(1.0 + cols[:, 5]), 0.0)
        matches = np.column_stack([np.nan_to_num(cols[:, 0]), cols[:, 1], d_rank,
                                   np.nan_to_num(cols[:, 3]), cols[:, 4], l_rank, cols[:, 6]])
        item = static[rows, 4:5]
        blocks.append(np.column_stack([
            matches[:, :3], in_dense, matches[:, 3:6], in_lexical, cols[:, 6],
            in_lexical & (cols[:, 6] == 0.0), cols[:, 7], newer[rows], static[rows],
            matches * item]))
        owners.extend((f.id, f) for f in live)
    if not blocks:
        return np.zeros((0, len(FEATURES))), owners
    return np.vstack(blocks), owners


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))


@dataclass(frozen=True, slots=True)
class Ranker:
    """A logistic regression over :data:`FEATURES`: ``P = σ(bias + weights · x)``."""

    weights: tuple[float, ...]
    bias: float
    names: tuple[str, ...] = FEATURES

    def __post_init__(self) -> None:
        if len(self.weights) != len(self.names):
            raise ConfigError(f"ranker: {len(self.weights)} weights for {len(self.names)} features")

    def probabilities(self, rows: "Sequence[Sequence[float]] | np.ndarray") -> np.ndarray:
        x = np.asarray(rows, dtype=np.float64).reshape(-1, len(self.weights))
        return _sigmoid(x @ np.asarray(self.weights, dtype=np.float64) + self.bias)

    def probability(self, row: Sequence[float]) -> float:
        return float(self.probabilities([row])[0])

    def contributions(self, row: Sequence[float]) -> dict[str, float]:
        """Each feature's share of the log-odds (weight × value), for ``parts``."""
        return {n: round(w * v, 4) for n, w, v in zip(self.names, self.weights, row) if w * v}

    def to_dict(self) -> dict[str, object]:
        return {"features": list(self.names), "weights": [round(w, 6) for w in self.weights],
                "bias": round(self.bias, 6)}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> "Ranker":
        names = tuple(str(n) for n in data["features"])  # type: ignore[attr-defined]
        if names != FEATURES:
            raise ConfigError("ranker weights were trained on other features "
                              f"({', '.join(names)}); retrain with `memstrata bench train-ranker`")
        return cls(tuple(float(w) for w in data["weights"]),  # type: ignore[attr-defined]
                   float(data["bias"]), names)  # type: ignore[arg-type]


def fit(x: np.ndarray, y: np.ndarray, *, l2: float = 1.0, iterations: int = 50) -> Ranker:
    """L2-regularised logistic regression (the bias unpenalised) by Newton's method.

    Deterministic: the same rows give the same weights to the last digit."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    penalty = np.full(d + 1, l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = _sigmoid(xb @ w)
        grad = xb.T @ (p - y) + penalty * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(penalty) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return Ranker(tuple(float(v) for v in w[:-1]), float(w[-1]))


def reliability(p: np.ndarray, y: np.ndarray, bins: int = 10) -> list[tuple[float, float, int]]:
    """``(mean predicted, observed rate, count)`` per probability bin of equal width."""
    p, y = np.asarray(p, dtype=np.float64), np.asarray(y, dtype=np.float64)
    edges = np.minimum((p * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        mask = edges == b
        if mask.any():
            out.append((float(p[mask].mean()), float(y[mask].mean()), int(mask.sum())))
    return out


def expected_calibration_error(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Σ over bins of (share of rows) × |mean predicted − observed rate|."""
    total = len(np.asarray(p))
    if not total:
        return 0.0
    return sum(n / total * abs(mean - rate) for mean, rate, n in reliability(p, y, bins))


@lru_cache(maxsize=1)
def default_ranker() -> Ranker:
    """The weights shipped in the package (``ranker.json``)."""
    try:
        return Ranker.from_dict(json.loads(RANKER_FILE.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the ranker weights {RANKER_FILE}: {exc}") from None
