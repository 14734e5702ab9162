"""``memstrata bench longmemeval``: LongMemEval_S dev (60 questions), the paper's retrieval
protocol.

Each question has its own haystack of ~50 user/assistant sessions (the assistant's long
answers included). Every turn is imported through the public API as one user, with its
session's date; the question searches that user's turns (episodic layer, no extraction).
Reported per question type: turn recall@k over the ``has_answer`` turns, and session
recall_any@k / recall_all@k over ``answer_session_ids`` (a session counts as retrieved
when one of its turns is in the top k). ``_abs`` (abstention) questions are skipped.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..types import Filters, Layer, Scope
from .common import SYSTEMS, bench_memory

__all__ = ["run_longmemeval", "parse_date"]

_DATE = re.compile(r"(\d{4})/(\d{2})/(\d{2})\D+(\d{2}):(\d{2})")


def parse_date(text: str) -> datetime:
    """'2023/05/17 (Wed) 23:40' → a UTC datetime."""
    m = _DATE.search(text)
    if not m:
        raise ValueError(f"unrecognised LongMemEval date {text!r}")
    y, mo, d, h, mi = (int(x) for x in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=UTC)


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def run_longmemeval(data: str | Path, *, ks: list[int], limit: int | None = None,
                    embedder: str | None = None, progress: bool = True,
                    **settings: Any) -> dict[str, Any]:
    """Turn and session recall@k per question type for memstrata, BM25-only, dense-only."""
    questions = [q for q in json.loads(Path(data).read_text()) if not q["question_id"].endswith("_abs")]
    if limit:
        questions = questions[::max(1, len(questions) // limit)][:limit]
    rows: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    with bench_memory(None, embedder, **settings) as memory:
        for n, q in enumerate(tqdm(questions, desc="questions", disable=not progress)):
            user = f"lme-{n}"
            sessions = []
            for sid, date, turns in zip(q["haystack_session_ids"], q["haystack_dates"],
                                        q["haystack_sessions"]):
                start = parse_date(date)
                sessions.append({"session_id": sid, "messages": [
                    {"role": t["role"], "content": t["content"] or "",
                     "created_at": start + timedelta(seconds=i),
                     "metadata": {"has_answer": bool(t.get("has_answer"))}}
                    for i, t in enumerate(turns) if t["role"] in ("user", "assistant")]})
            results = memory.import_conversation(sessions, user, progress=False)
            session_of = {m.id: r.session_id for r in results for m in r.messages}
            answers = {m.id for r in results for m in r.messages if m.metadata.get("has_answer")}
            gold_sessions = set(q["answer_session_ids"])
            scope = Scope(user, memory.settings.namespace)
            vector = memory.embedder.embed([q["question"]], kind="query")[0]
            for system, options in SYSTEMS.items():
                hits = memory.retriever.search(scope, q["question"], k=max(ks), touch=False,
                                               filters=Filters(layers=(Layer.EPISODIC,)),
                                               query_vector=vector, preset="relevance",
                                               now=parse_date(q["question_date"]), **options).hits
                for k in ks:
                    top = hits[:k]
                    ids = {i for h in top for i in h.ids}
                    found = {session_of.get(i) for i in ids}
                    row = rows[system][q["question_type"]]
                    if answers:
                        row[f"turn_recall@{k}"].append(len(answers & ids) / len(answers))
                    row[f"session_any@{k}"].append(float(bool(gold_sessions & found)))
                    row[f"session_all@{k}"].append(float(gold_sessions <= found))
        name = memory.embedder.name
    systems: dict[str, Any] = {}
    for system, types in rows.items():
        every: dict[str, list[float]] = defaultdict(list)
        for metrics in types.values():
            for key, values in metrics.items():
                every[key] += values
        systems[system] = {"overall": {k: _mean(v) for k, v in sorted(every.items())},
                           "by_type": {t: {k: _mean(v) for k, v in sorted(m.items())}
                                       | {"n": len(next(iter(m.values())))}
                                       for t, m in sorted(types.items())}}
    return {"benchmark": "longmemeval", "data": str(data), "embedder": name,
            "questions": len(questions), "ks": ks, "systems": systems}
