"""``memstrata bench chat``: recall the way an agent loop sees it.

**MemDaily-chat.** Each MemDaily dev trajectory becomes a user/assistant chat: every user
statement (with its original time) is followed by an assistant reply drawn, by a fixed
seed, from a bilingual pool of realistic replies — acknowledgements ("好的，记下了。"),
follow-up questions ("后来呢？"), a restatement of what the user said, and now and then a
wrong guess (the assistant restating a *different* statement of the same user). Each
chat is one session per day; the extraction rules run on it, as after ``add()``. The
question is asked in a later session. Reported:

* (a) ``search_r@5`` — the evidence statement, or an item extracted from it, in the top 5
  hits of ``search(question)`` over every layer (memstrata beside BM25-only and
  dense-only, the same index);
* (b) ``context_hit`` — the evidence in the memory block of ``context()`` at a 2,000-token
  budget with default settings;
* (c) ``weak_share`` — the share of memory lines in that block that are assistant turns or
  low-information turns;
* (d) ``memory_tokens`` — tokens of the memory layers (profile, memories) per query.

**MADial** (:mod:`.madial`) — the dialogue as the query.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..retrieval.documents import is_low_information
from ..requests import SearchRequest
from .common import SYSTEMS, search_as, bench_memory
from .memdaily import load_memdaily, parse_time

__all__ = ["run_chat", "chat_sessions", "statements_behind", "REPLIES"]

#: The assistant's replies: acknowledgements, follow-up questions, a restatement
#: ("{said}" is the user's statement) and a wrong guess ("{other}" is another statement).
REPLIES: dict[str, dict[str, list[str]]] = {
    "zh": {
        "ack": ["好的，记下了。", "明白了！", "嗯嗯。", "收到。", "好的", "太好了！", "原来如此。"],
        "follow": ["后来呢？", "你觉得怎么样？", "为什么呢？", "然后发生了什么？", "需要我帮你做点什么吗？"],
        "restate": ["你是说：{said}", "我记住了：{said}"],
        "wrong": ["我记得你之前说过：{other}", "是不是和上次一样：{other}"],
    },
    "en": {
        "ack": ["OK.", "Got it!", "Nice!", "Sweet!", "Thanks for telling me.", "Sounds good."],
        "follow": ["What happened next?", "How did that feel?", "Why?", "Anything I can help with?"],
        "restate": ["So you're saying: {said}", "Noted: {said}"],
        "wrong": ["I think you told me before: {other}", "Same as last time: {other}?"],
    },
}
_WEIGHTS = {"ack": 0.45, "follow": 0.3, "restate": 0.15, "wrong": 0.1}


def _reply(rng: random.Random, lang: str, said: str, others: list[str]) -> str:
    kind = rng.choices(list(_WEIGHTS), weights=list(_WEIGHTS.values()))[0]
    if kind == "wrong" and not others:
        kind = "ack"
    template = rng.choice(REPLIES[lang][kind])
    return template.format(said=said, other=rng.choice(others) if others else "")


def chat_sessions(trajectory: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """The trajectory as import sessions (one per day), each statement followed by an
    assistant reply; the statements keep their ``mid`` in metadata."""
    rng = random.Random(seed)
    statements = trajectory["message_list"]
    texts = [m["message"] for m in statements]
    by_day: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i, m in enumerate(statements):
        when = parse_time(m["time"])
        others = texts[:i] + texts[i + 1:]
        lang = "en" if m["message"].isascii() else "zh"
        day = when.date().isoformat()
        by_day[day].append({"role": "user", "content": m["message"], "created_at": when,
                            "metadata": {"mid": m["mid"]}})
        by_day[day].append({"role": "assistant", "content": _reply(rng, lang, m["message"], others),
                            "created_at": when})
    return [{"session_id": f"day-{day}", "messages": msgs} for day, msgs in sorted(by_day.items())]


def statements_behind(ids: "list[str]", mid_of: "dict[str, Any]",
                      sources: "dict[str, set[str]]") -> set[str]:
    """The MemDaily statement ids (``mid``) behind hit or memory-line ids: a turn's own,
    and those of the turns an item was extracted from. ``mid`` 0 — the first statement
    of a trajectory — counts like any other (until 2026-12-01 15:50 a truthiness test
    dropped it, and with it a third of the evidence)."""
    return {str(mid_of[j]) for i in ids for j in {i} | sources.get(i, set())
            if mid_of.get(j) is not None}


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _summary(recall: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    return {system: {"overall": {"recall@5": _mean([v for rows in cats.values() for v in rows])},
                     "by_category": {c: {"recall@5": _mean(rows), "n": len(rows)}
                                     for c, rows in sorted(cats.items())}}
            for system, cats in recall.items()}


def run_chat(data: str | Path, *, limit: int | None = 100, budget: int = 2000,
             embedder: str | None = None, progress: bool = True, **settings: Any) -> dict[str, Any]:
    """MemDaily-chat over ``limit`` trajectories evenly spaced over the files."""
    trajectories = load_memdaily(data)
    if limit:
        trajectories = trajectories[::max(1, len(trajectories) // limit)][:limit]
    recall: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    context_hits: dict[str, list[float]] = defaultdict(list)
    weak_lines = lines = questions = 0
    memory_tokens: list[int] = []
    with bench_memory(None, embedder, embed_on_add="inline", **settings) as memory:
        for n, (qtype, traj) in enumerate(tqdm(trajectories, desc="chats", disable=not progress)):
            user = memory.user(f"chat-{n}")
            results = user.import_conversation(chat_sessions(traj, seed=n), progress=False,
                                               extract=True)
            memory.flush()
            mid_of = {m.id: m.metadata.get("mid") for r in results for m in r.messages}
            turns = {m.id: m for r in results for m in r.messages}
            sources = {i.id: set(i.source_message_ids)
                       for i in user.list(filters={"statuses": ["active", "superseded"]}, limit=1000)}

            def covered(ids: list[str], sources: dict[str, set[str]] = sources,
                        mid_of: dict[str, Any] = mid_of) -> set[str]:
                return statements_behind(ids, mid_of, sources)

            for qa in traj["question_list"]:
                if "[ERRORQ]" in qa["question"] or "[ERRORA]" in str(qa.get("answer", "")):
                    continue
                questions += 1
                gold = {str(g) for g in qa["target_step_id"]}
                for system in SYSTEMS:
                    hits = search_as(memory.retriever, system, user.scope,
                                     SearchRequest(qa["question"], k=5), touch=False).hits
                    # a hit covers its merged turns and the turns its item came from
                    found = covered([i for h in hits for i in h.ids])
                    recall[system][qtype].append(len(gold & found) / len(gold))
                result = user.context("question", [{"role": "user", "content": qa["question"]}],
                                      budget=budget)
                kept = list(result.report.kept_ids)
                context_hits[qtype].append(len(gold & covered(kept)) / len(gold))
                for i in kept:
                    lines += 1
                    turn = turns.get(i)
                    if turn is not None and (turn.role.value == "assistant"
                                             or is_low_information(turn.content)):
                        weak_lines += 1
                memory_tokens.append(result.report.layers["profile"] + result.report.layers["memories"])
        name = memory.embedder.name
    every = [v for rows in context_hits.values() for v in rows]
    return {"benchmark": "chat", "data": str(data), "embedder": name, "trajectories": len(trajectories),
            "questions": questions, "budget": budget, "systems": _summary(recall),
            "context_hit": round(sum(every) / max(1, len(every)), 4),
            "context_hit_by_type": {k: round(sum(v) / len(v), 4) for k, v in sorted(context_hits.items())},
            "weak_share": round(weak_lines / max(1, lines), 4),
            "memory_lines_per_query": round(lines / max(1, questions), 2),
            "memory_tokens_per_query": round(sum(memory_tokens) / max(1, len(memory_tokens)), 1)}
