"""MADial-Bench (Chinese and English): recall of memories with the dialogue as the query.

The user's remembered events (user 1 of the benchmark) are stored as memory items
(``remember(..., kind="event")``, each with its date). For each dialogue, the query is
the dialogue before the assistant turn that should bring a memory up — not a question:
the user talks about the New Year's Eve party, and the memory of dancing at last year's
Christmas party should come up. The query is built as :meth:`UserMemory.context`
builds it (:func:`~memstrata.retrieval.documents.dialogue_query`): the last user turn
first, the earlier user turns, the assistant's last turn (``recent``). recall@k of
``relevant-id``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..retrieval.documents import dialogue_query
from ..requests import SearchRequest
from ..types import Filters, Layer, Scope
from ..providers.embedders import parse_embedder
from .common import SYSTEMS, search_as, RecallTable, bench_memory
from .embedding_cache import DiskCachedEmbedder

__all__ = ["run_madial", "load_madial", "parse_dialogue"]

_TURN = re.compile(r'^<(?P<who>[^>]+)>\s*:\s*"?(?P<text>.*?)"?\s*$', re.DOTALL)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def parse_dialogue(lines: list[str]) -> list[tuple[str, str]]:
    """``[(role, text)]`` of a MADial dialogue (``<BOD>``/``<EOD>`` markers dropped);
    the index in the benchmark's list is the position here plus one."""
    out = []
    for raw in lines:
        match = _TURN.match(raw.strip())
        if match:
            role = "assistant" if match["who"] == "Assistant" else "user"
            out.append((role, match["text"].strip()))
        elif raw.strip() not in ("<BOD>", "<EOD>"):
            out.append(("user", raw.strip()))
    return out


def load_madial(directory: str | Path, lang: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """``(memories by id, dialogues)`` of one language."""
    root = Path(directory)
    memories: dict[str, dict[str, Any]] = {}
    for row in _lines(root / f"MADial-Bench-{lang}-memory.dev.json"):
        for key, value in row.items():
            memories[str(value.get("id", key))] = value
    return memories, _lines(root / f"MADial-Bench-{lang}-dialogue.dev.json")


def run_madial(data: str | Path, *, ks: list[int], langs: tuple[str, ...] = ("zh", "en"),
               embedder: str | None = None, limit: int | None = None,
               embedding_cache: str | Path | None = None,
               **settings: Any) -> dict[str, Any]:
    """recall@k per language for memstrata, BM25-only and dense-only."""
    table = RecallTable(ks)
    questions = 0
    filters = Filters(layers=(Layer.SEMANTIC,))
    cached = DiskCachedEmbedder(parse_embedder(embedder), embedding_cache) if embedding_cache else None
    with bench_memory(None, cached or embedder, **settings) as memory:
        for lang in langs:
            memories, dialogues = load_madial(data, lang)
            user = f"madial-{lang}"
            ids = {}
            for mid, event in memories.items():
                when = datetime.fromisoformat(event["time"]).replace(tzinfo=UTC)
                item = memory.user(user).remember(event["event"], kind="event",
                                                  metadata={"madial_id": mid,
                                                            "created": when.isoformat()})
                ids[item.id] = mid
            scope = Scope(user, memory.settings.namespace)
            for dialogue in dialogues[: limit or None]:
                turns = parse_dialogue(dialogue["dialogue"])
                cut = dialogue["test-turn"][0] - 1  # dialogue[t] is turns[t - 1]
                query, recent = dialogue_query(turns[:cut])
                gold = {str(r) for r in dialogue["relevant-id"]}
                if not query or not gold:
                    continue
                questions += 1
                request = SearchRequest(query, k=max(ks), filters=filters, recent=tuple(recent),
                                        scoring="relevance")
                for system in SYSTEMS:
                    hits = search_as(memory.retriever, system, scope, request, touch=False).hits
                    table.add(system, lang, [ids.get(h.id, "") for h in hits], gold,
                              [h.score for h in hits])
        name = memory.embedder.name
    return {"benchmark": "madial", "data": str(data), "embedder": name, "systems": table.summary(),
            "questions": questions, "ks": ks}
