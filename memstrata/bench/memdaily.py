"""MemDaily retrieval benchmark (Chinese): recall@k of the target messages per question type.

Each trajectory is one user whose statements are imported with their original times;
each question searches that user's messages.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..requests import SearchRequest
from ..types import Filters, Layer, Scope
from ..providers.embedders import parse_embedder
from .common import SYSTEMS, search_as, RecallTable, bench_memory
from .embedding_cache import DiskCachedEmbedder

__all__ = ["run_memdaily", "load_memdaily"]

_TIME = re.compile(r"(\d{4})年(\d{2})月(\d{2})日\s*\S*\s*(\d{2}):(\d{2})")


def parse_time(text: str) -> datetime:
    m = _TIME.search(text)
    if not m:
        raise ValueError(f"unrecognised MemDaily time {text!r}")
    y, mo, d, h, mi = (int(x) for x in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=UTC)


def load_memdaily(directory: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """(question type, trajectory) pairs from every *.json file in ``directory``."""
    out = []
    files = sorted(Path(directory).glob("*.json"))
    if not files:
        raise ValueError(f"no MemDaily *.json files in {directory}")
    for path in files:
        qtype = re.sub(r"^\d+_", "", path.stem).rsplit("_", 1)[0]
        for trajectory in json.loads(path.read_text()):
            out.append((qtype, trajectory))
    return out


def run_memdaily(data: str | Path, *, ks: list[int], store: str | None = None,
                 embedder: str | None = None, limit: int | None = None,
               embedding_cache: str | Path | None = None, progress: bool = True,
                 **settings: Any) -> dict[str, Any]:
    trajectories = load_memdaily(data)
    if limit:
        trajectories = trajectories[::max(1, len(trajectories) // limit)][:limit]
    table = RecallTable(ks)
    questions = skipped = 0
    filters = Filters(layers=(Layer.EPISODIC,))
    cached = DiskCachedEmbedder(parse_embedder(embedder), embedding_cache) if embedding_cache else None
    with bench_memory(store, cached or embedder, **settings) as memory:
        for n, (qtype, traj) in enumerate(tqdm(trajectories, desc="trajectories", disable=not progress)):
            user = f"memdaily-{n}"
            messages = [{"role": "user", "content": m["message"], "created_at": parse_time(m["time"]),
                         "metadata": {"mid": m["mid"], "place": m.get("place", "")}}
                        for m in traj["message_list"]]
            result = memory.import_conversation([{"session_id": "s", "messages": messages}], user,
                                                progress=False)[0]
            mids = {m.id: m.metadata["mid"] for m in result.messages}
            scope = Scope(user, memory.settings.namespace)
            for qa in traj["question_list"]:
                if "[ERRORQ]" in qa["question"] or "[ERRORA]" in str(qa.get("answer", "")):
                    skipped += 1
                    continue
                questions += 1
                qvec = memory.embedder.embed([qa["question"]], kind="query")[0]
                request = SearchRequest(qa["question"], k=max(ks), filters=filters)
                for system in SYSTEMS:
                    hits = search_as(memory.retriever, system, scope, request,
                                     query_vector=qvec, touch=False).hits
                    table.add(system, qtype, [mids.get(h.id, "") for h in hits], qa["target_step_id"],
                              [h.score for h in hits])
        embedder_name = memory.embedder.name
    return {"benchmark": "memdaily", "data": str(data), "embedder": embedder_name,
            "systems": table.summary(), "questions": questions, "skipped_error_items": skipped,
            "unparsed_evidence": 0, "ks": ks}
