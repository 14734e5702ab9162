"""Dedup and conflict calibration for an embedder: how far apart do stored
statements sit when they are the same fact, a same-slot conflict, or unrelated?

Pairs are written the way the write path stores and embeds them (the normalised
third-person ``content`` of an item, embedded as a passage), in English, in Chinese and
across the two. ``decide`` boosts above ``dedup_threshold`` and looks for a conflict above
``conflict_low``; the bands below show where those cut-offs fall for a given embedder.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..providers.embedders import parse_embedder

__all__ = ["PAIRS", "run_calibration"]

_DUPLICATE = {
    "en": [("User uses Python", "User's main programming language is Python"),
           ("User likes hiking", "User enjoys hiking"),
           ("User lives in Berlin", "User is based in Berlin"),
           ("User is a software engineer", "User works as a software engineer"),
           ("User is allergic to peanuts", "User has a peanut allergy"),
           ("User wants short, concise answers", "User prefers brief answers"),
           ("User has two kids", "User has two children"),
           ("User needs to renew their passport next week", "User must renew their passport next week")],
    "zh": [("用户使用Python", "用户的主力语言是Python"),
           ("用户喜欢爬山", "用户爱爬山"),
           ("用户住在北京", "用户定居在北京"),
           ("用户是后端工程师", "用户从事后端开发"),
           ("用户对花生过敏", "用户花生过敏"),
           ("用户希望回答简短", "用户希望回答简洁"),
           ("用户有两个孩子", "用户有两个小孩"),
           ("用户需要下周续签护照", "用户下周要续签护照")],
    "cross": [("User uses Python", "用户使用Python"),
              ("User likes hiking", "用户喜欢爬山"),
              ("User lives in Beijing", "用户住在北京"),
              ("User is a teacher", "用户是老师"),
              ("User is allergic to peanuts", "用户对花生过敏"),
              ("User wants short, concise answers", "用户希望回答简短"),
              ("User has a dog", "用户有一只狗"),
              ("User is vegetarian", "用户吃素")],
}
_CONFLICT = {
    "en": [("User uses Java", "User uses Go"),
           ("User lives in Berlin", "User lives in Paris"),
           ("User is a software engineer", "User is a product manager"),
           ("User works at Google", "User works at Stripe"),
           ("User's name is Anna", "User's name is Maria"),
           ("User likes jazz", "User no longer likes jazz"),
           ("User wants short, concise answers", "User wants detailed answers"),
           ("User wants answers in English", "User wants answers in Chinese")],
    "zh": [("用户使用Java", "用户使用Go"),
           ("用户住在北京", "用户住在上海"),
           ("用户是老师", "用户是医生"),
           ("用户在腾讯工作", "用户在阿里巴巴工作"),
           ("用户名叫小王", "用户名叫小李"),
           ("用户喜欢咖啡", "用户不再喜欢咖啡"),
           ("用户希望回答简短", "用户希望回答详细"),
           ("用户希望用中文回答", "用户希望用英文回答")],
    "cross": [("User uses Java", "用户使用Go"),
              ("User lives in Beijing", "用户住在上海"),
              ("User is a teacher", "用户是医生"),
              ("User works at Google", "用户在腾讯工作"),
              ("User's name is Anna", "用户名叫小李"),
              ("User likes coffee", "用户不再喜欢咖啡"),
              ("User wants short, concise answers", "用户希望回答详细"),
              ("User wants answers in English", "用户希望用中文回答")],
}
_UNRELATED = {
    "en": [("User uses Java", "User likes hiking"),
           ("User lives in Berlin", "User is allergic to peanuts"),
           ("User is a software engineer", "User has two kids"),
           ("User's name is Anna", "User wants short, concise answers"),
           ("User likes jazz", "User needs to renew their passport next week"),
           ("User works at Google", "User is vegetarian"),
           ("User plays tennis every weekend", "User's goal is to run a marathon"),
           ("User has a cat named Luna", "User is learning Spanish")],
    "zh": [("用户使用Java", "用户喜欢爬山"),
           ("用户住在北京", "用户对花生过敏"),
           ("用户是老师", "用户有两个孩子"),
           ("用户名叫小王", "用户希望回答简短"),
           ("用户喜欢咖啡", "用户需要下周续签护照"),
           ("用户在腾讯工作", "用户吃素"),
           ("用户每周末打网球", "用户的目标是跑马拉松"),
           ("用户有一只猫", "用户在学习西班牙语")],
    "cross": [("User uses Java", "用户喜欢爬山"),
              ("User lives in Berlin", "用户对花生过敏"),
              ("User is a teacher", "用户有两个孩子"),
              ("User's name is Anna", "用户希望回答简短"),
              ("User likes coffee", "用户需要下周续签护照"),
              ("User works at Google", "用户吃素"),
              ("User plays tennis every weekend", "用户的目标是跑马拉松"),
              ("User has a cat", "用户在学习西班牙语")],
}
#: category → language group → (a, b) pairs
PAIRS = {"duplicate": _DUPLICATE, "conflict": _CONFLICT, "unrelated": _UNRELATED}


def _band(values: list[float]) -> dict[str, float]:
    a = np.array(values)
    return {"n": len(a), "min": round(float(a.min()), 3), "p10": round(float(np.percentile(a, 10)), 3),
            "median": round(float(np.median(a)), 3), "p90": round(float(np.percentile(a, 90)), 3),
            "max": round(float(a.max()), 3)}


def run_calibration(embedder: str | None = None, *, dedup: float = 0.92,
                    conflict_low: float = 0.70) -> dict[str, Any]:
    """Cosine bands per category and language group, and where the thresholds cut."""
    model = parse_embedder(embedder or "local:e5-small")
    texts = sorted({t for groups in PAIRS.values() for pairs in groups.values()
                    for pair in pairs for t in pair})
    vectors = dict(zip(texts, model.embed(texts, kind="passage")))
    cos: dict[str, dict[str, list[float]]] = {}
    rows: list[dict[str, Any]] = []
    for category, groups in PAIRS.items():
        cos[category] = {}
        for group, pairs in groups.items():
            cos[category][group] = [float(vectors[a] @ vectors[b]) for a, b in pairs]
            rows += [{"category": category, "group": group, "a": a, "b": b, "cos": round(c, 3)}
                     for (a, b), c in zip(pairs, cos[category][group])]
    every = {c: [x for v in groups.values() for x in v] for c, groups in cos.items()}
    bands = {c: {**{g: _band(v) for g, v in groups.items()}, "all": _band(every[c])}
             for c, groups in cos.items()}
    above = {c: {"over_dedup": round(float(np.mean([x > dedup for x in v])), 3),
                 "in_conflict_band": round(float(np.mean([conflict_low < x <= dedup for x in v])), 3),
                 "under_conflict_low": round(float(np.mean([x <= conflict_low for x in v])), 3)}
             for c, v in every.items()}
    return {"benchmark": "calibration", "embedder": model.name, "dedup_threshold": dedup,
            "conflict_low": conflict_low, "bands": bands, "cuts": above, "pairs": rows}
