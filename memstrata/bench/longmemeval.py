"""``memstrata bench longmemeval``: LongMemEval_S dev (60 questions), the paper's retrieval
protocol.

Each question has its own haystack of ~50 user/assistant sessions (the assistant's long
answers included). Every turn is imported through the public API as one user, with its
session's date; the question searches that user's turns (episodic layer, no extraction).
Reported per question type: turn recall@k over the ``has_answer`` turns, and session
recall_any@k / recall_all@k over ``answer_session_ids`` (a session counts as retrieved
when one of its turns is in the top k). ``_abs`` (abstention) questions are skipped.

A haystack is ~500 turns, half of them the assistant's long answers: embedding one takes
minutes on two cores, so ``embedding_cache`` (an SQLite file,
:class:`~.embedding_cache.DiskCachedEmbedder`) keeps the vectors for the next run —
same scores, no embedding. ``misses`` in the report counts what this run embedded.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..providers.embedders import parse_embedder
from ..requests import SearchRequest
from ..types import Filters, Layer, Scope
from .common import SYSTEMS, search_as, bench_memory
from .embedding_cache import DiskCachedEmbedder

__all__ = ["run_longmemeval", "parse_date", "haystack_sessions"]

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


def haystack_sessions(q: dict[str, Any]) -> list[dict[str, Any]]:
    """One question's haystack as import sessions, each turn with its session's date."""
    sessions = []
    for sid, date, turns in zip(q["haystack_session_ids"], q["haystack_dates"],
                                q["haystack_sessions"]):
        start = parse_date(date)
        sessions.append({"session_id": sid, "messages": [
            {"role": t["role"], "content": t["content"] or "",
             "created_at": start + timedelta(seconds=i),
             "metadata": {"has_answer": bool(t.get("has_answer"))}}
            for i, t in enumerate(turns) if t["role"] in ("user", "assistant")]})
    return sessions


def _import(memory: Any, user: str, q: dict[str, Any], *, extract: bool = False,
            ) -> tuple[dict[str, str], set[str]]:
    """Import one question's haystack as ``user``: ``(session of each turn id, the ids of
    the has_answer turns)``; ``extract`` queues an extraction job per session."""
    results = memory.import_conversation(haystack_sessions(q), user, progress=False, extract=extract)
    return ({m.id: r.session_id for r in results for m in r.messages},
            {m.id for r in results for m in r.messages if m.metadata.get("has_answer")})


def _haystack(memory: Any, user: str, scope: Scope, q: dict[str, Any],
              store: str | None) -> tuple[dict[str, str], set[str]]:
    """The question's haystack as stored for ``user``: imported now, or found complete
    in ``store`` from an earlier run (an import cut short is started again)."""
    stored = memory.store.list_sessions(scope) if store else []
    turns = {s.session_id: memory.user(user).messages(s.session_id) for s in stored}
    expected = sum(t["role"] in ("user", "assistant") for s in q["haystack_sessions"] for t in s)
    if stored and sum(map(len, turns.values())) == expected:
        # imported by an earlier run into this store: search it as it is
        session_of = {m.id: sid for sid, ms in turns.items() for m in ms}
        answers = {m.id for ms in turns.values() for m in ms if m.metadata.get("has_answer")}
        return session_of, answers
    if stored:  # an import cut short (the run was stopped): start it again
        memory.forget_user(user)
    return _import(memory, user, q)


def _miss(memory: Any, scope: Scope, q: dict[str, Any], hits: list[Any],
          answers: set[str]) -> dict[str, Any] | None:
    """The ``has_answer`` turns left out of ``hits``, with the top hits beside them."""
    lost = answers - {i for h in hits for i in h.ids}
    if not lost:
        return None
    texts = memory.store.doc_info(scope, sorted(lost))
    return {"question_id": q["question_id"], "type": q["question_type"],
            "question": q["question"],
            "missed": [t.text[:200] for t in texts.values()],
            "top": [h.text[:120] for h in hits[:3]]}


def _score(row: dict[str, list[float]], per_question: dict[str, dict[str, Any]], system: str,
           q: dict[str, Any], hits: list[Any], ks: list[int], answers: set[str],
           session_of: dict[str, str]) -> None:
    """Turn recall and session recall any/all at each k, into ``row`` and ``per_question``."""
    gold_sessions = set(q["answer_session_ids"])
    for k in ks:
        top = hits[:k]
        ids = {i for h in top for i in h.ids}
        found = {session_of.get(i) for i in ids}
        if answers:
            row[f"turn_recall@{k}"].append(len(answers & ids) / len(answers))
        row[f"session_any@{k}"].append(float(bool(gold_sessions & found)))
        row[f"session_all@{k}"].append(float(gold_sessions <= found))
        if answers:
            per_question.setdefault(q["question_id"], {"type": q["question_type"]})[
                f"{system} turn_recall@{k}"] = round(len(answers & ids) / len(answers), 4)


def _systems(rows: dict[str, dict[str, dict[str, list[float]]]]) -> dict[str, Any]:
    """Each system's means overall and per question type."""
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
    return systems


def run_longmemeval(data: str | Path, *, ks: list[int], limit: int | None = None,
                    embedder: str | None = None, progress: bool = True,
                    embedding_cache: str | Path | None = None, store: str | None = None,
                    **settings: Any) -> dict[str, Any]:
    """Turn and session recall@k per question type for memstrata, BM25-only, dense-only;
    ``misses`` lists, per question, the ``has_answer`` turns memstrata left out of its
    top ``max(ks)``. With ``store`` (a store URL) the haystacks are imported there once,
    one user per question; a later run on the same store only searches (retrieval
    settings can be compared without importing again)."""
    questions = [q for q in json.loads(Path(data).read_text()) if not q["question_id"].endswith("_abs")]
    if limit and limit < len(questions):  # evenly spaced over the file (it is sorted by type)
        questions = [questions[i * len(questions) // limit] for i in range(limit)]
    rows: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    misses: list[dict[str, Any]] = []
    per_question: dict[str, dict[str, Any]] = {}
    cached = DiskCachedEmbedder(parse_embedder(embedder), embedding_cache) if embedding_cache else None
    with bench_memory(store, cached or embedder, **settings) as memory:
        for q in tqdm(questions, desc="questions", disable=not progress):
            user = f"lme-{q['question_id']}"
            scope = Scope(user, memory.settings.namespace)
            session_of, answers = _haystack(memory, user, scope, q, store)
            vector = memory.embedder.embed([q["question"]], kind="query")[0]
            request = SearchRequest(q["question"], k=max(ks),
                                    filters=Filters(layers=(Layer.EPISODIC,)),
                                    scoring="relevance", now=parse_date(q["question_date"]))
            for system in SYSTEMS:
                hits = search_as(memory.retriever, system, scope, request, query_vector=vector,
                                 touch=False).hits
                if system == "memstrata" and (miss := _miss(memory, scope, q, hits, answers)):
                    misses.append(miss)
                _score(rows[system][q["question_type"]], per_question, system, q, hits, ks, answers,
                       session_of)
        name = memory.embedder.name
    cache = None
    if cached is not None:
        cache = {"path": str(cached.path), "hits": cached.hits, "misses": cached.misses}
        cached.close()
    return {"benchmark": "longmemeval", "data": str(data), "embedder": name,
            "questions": len(questions), "ks": ks, "systems": _systems(rows),
            "embedding_cache": cache, "per_question": per_question, "misses": misses}
