"""The relevance ranker's pure functions (memstrata.retrieval.rank)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memstrata.errors import ConfigError
from memstrata.retrieval.fusion import Fused
from memstrata.retrieval.rank import (FEATURES, Ranker, Signals, default_ranker, feature_matrix,
                                      expected_calibration_error, features, fit, reliability,
                                      signal_rows)
from memstrata.stores.base import DocInfo
from memstrata.types import Layer

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _info(doc_id: str, text: str, *, layer: Layer = Layer.EPISODIC, tags: tuple[str, ...] = (),
          days: int = 0) -> DocInfo:
    return DocInfo(doc_id, layer, text, T0 + timedelta(days=days), "s", None, None, 0.5, tags)


def test_features_follow_the_names_and_mark_a_context_only_match():
    row = features(Signals(dense=0.6, dense_rank=1, lexical=0.4, lexical_rank=3, body_match=0.0))
    named = dict(zip(FEATURES, row))
    assert len(row) == len(FEATURES)
    assert named["in_dense"] == named["in_lexical"] == 1.0
    assert named["context_only"] == 1.0  # a lexical match with none of the words in its text
    assert named["dense_rank"] == 1.0 and named["lexical_rank"] == pytest.approx(0.5)
    absent = dict(zip(FEATURES, features(Signals())))
    assert absent["in_dense"] == absent["in_lexical"] == absent["context_only"] == 0.0


def test_fit_is_deterministic_and_learns_the_direction_of_each_signal():
    rng = np.random.default_rng(7)
    x = rng.random((2000, len(FEATURES)))
    logit = 6 * x[:, 0] - 4 * x[:, 12] - 3
    y = (rng.random(2000) < 1 / (1 + np.exp(-logit))).astype(float)
    first, second = fit(x, y), fit(x, y)
    assert first == second  # same rows, same weights to the last digit
    w = dict(zip(FEATURES, first.weights))
    assert w["dense"] > 3 and w["assistant"] < -2
    assert max(abs(v) for k, v in w.items() if k not in ("dense", "assistant")) < 1.0
    p = first.probabilities(x)
    assert ((p > 0) & (p < 1)).all()
    assert expected_calibration_error(p, y) < 0.05  # fitted on these rows: calibrated


def test_expected_calibration_error_and_reliability_bins():
    p = np.array([0.1] * 10 + [0.9] * 10)
    y = np.array([0] * 9 + [1] + [1] * 9 + [0])
    assert expected_calibration_error(p, y) == pytest.approx(0.0)
    assert reliability(p, y) == [(pytest.approx(0.1), pytest.approx(0.1), 10),
                                 (pytest.approx(0.9), pytest.approx(0.9), 10)]
    assert expected_calibration_error(np.full(4, 0.8), np.zeros(4)) == pytest.approx(0.8)


def test_a_ranker_of_other_features_is_refused_and_the_shipped_one_loads():
    ranker = default_ranker()
    assert ranker.names == FEATURES and len(ranker.weights) == len(FEATURES)
    assert Ranker.from_dict(ranker.to_dict()) == Ranker.from_dict(ranker.to_dict())
    with pytest.raises(ConfigError, match="retrain"):
        Ranker.from_dict({"features": ["dense"], "weights": [1.0], "bias": 0.0})
    with pytest.raises(ConfigError, match="weights"):
        Ranker((1.0,), 0.0)
    contributions = ranker.contributions(features(Signals(dense=0.5, dense_rank=1)))
    assert set(contributions) <= set(FEATURES) and "dense" in contributions


def test_signal_rows_read_the_documents_own_words_role_and_age():
    infos = {"a": _info("a", "我女儿对花生过敏", days=1),
             "b": _info("b", "I mostly write Java at work.", days=2),
             "c": _info("c", "Sure, I can help.", tags=("role:assistant",), days=3),
             "i": _info("i", "User is allergic to peanuts", layer=Layer.SEMANTIC, days=0)}
    fused = [Fused("a", 0.8, 0.8, 0.5, 1, 1), Fused("b", 0.6, 0.7, 0.4, 2, 2),
             Fused("c", 0.3, 0.3, None, 3, None), Fused("gone", 0.2, 0.2, None, 4, None)]
    per_question = [("女儿 过敏", fused, [("a", 3.0), ("b", 2.0)],
                     [("a", 0.9), ("b", 0.85), ("c", 0.8), ("gone", 0.7)], {"b"})]
    rows, owners = signal_rows(per_question, infos, "朵朵对什么过敏？", None)
    by_id = {doc_id: row for (doc_id, _), row in zip(owners, rows)}
    assert set(by_id) == {"a", "b", "c"}  # a candidate deleted since is left out
    assert by_id["a"].body_match == 1.0 and by_id["b"].body_match == 0.0
    assert dict(zip(FEATURES, features(by_id["b"])))["context_only"] == 1.0
    assert by_id["b"].expansion_only and not by_id["a"].expansion_only
    assert by_id["c"].assistant and not by_id["a"].assistant
    assert by_id["a"].newer < by_id["b"].newer < by_id["c"].newer == 1.0
    assert by_id["a"].dense_rel == 1.0 and by_id["b"].lexical_rel == pytest.approx(2 / 3)


def test_the_feature_matrix_is_the_features_of_each_candidate():
    infos = {"a": _info("a", "我女儿对花生过敏", days=1),
             "b": _info("b", "What did I say about peanuts?", tags=("speaker:Lin",), days=2),
             "c": _info("c", "OK.", tags=("role:assistant",), days=2),
             "i": _info("i", "User is allergic to peanuts", layer=Layer.SEMANTIC)}
    first = [Fused("a", 0.8, 0.8, 0.5, 1, 1), Fused("b", 0.6, None, 0.4, None, 2),
             Fused("c", 0.3, 0.3, None, 3, None), Fused("i", 0.5, 0.5, 0.2, 2, 3)]
    second = [Fused("i", 0.7, 0.9, None, 1, None), Fused("gone", 0.1, 0.1, None, 2, None)]
    per_question = [("过敏 peanut", first, [("a", 3.0), ("b", 2.0), ("i", 1.0)],
                     [("a", 0.9), ("c", 0.8), ("i", 0.85)], {"b"}),
                    ("allerg", second, [], [("i", 0.9), ("gone", 0.5)], set())]
    for query in ("What am I allergic to?", "你之前说我对什么过敏？"):
        rows, owners = signal_rows(per_question, infos, query, "speaker:Lin")
        matrix, same = feature_matrix(per_question, infos, query, "speaker:Lin")
        assert [o[0] for o in owners] == [o[0] for o in same] == ["a", "b", "c", "i", "i"]
        assert matrix.shape == (5, len(FEATURES))
        assert np.allclose(matrix, np.array([features(r) for r in rows]))
