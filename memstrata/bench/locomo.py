"""LoCoMo retrieval benchmark (the paper's protocol, no LLM).

Each conversation is imported through the public API as one user, every turn a
message named by its speaker with its session's date. Each question is searched in its
own conversation; recall@k = evidence turns found in the top k / evidence turns.
memstrata (hybrid), BM25 alone and dense alone run over the same index in one run.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..requests import SearchRequest
from ..types import Filters, Layer, Scope
from ..providers.embedders import parse_embedder
from .common import SYSTEMS, search_as, RecallTable, bench_memory
from .embedding_cache import DiskCachedEmbedder

__all__ = ["run_locomo", "load_locomo", "parse_evidence", "CATEGORIES"]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"^D(\d+):(\d+)$")


def parse_evidence(raw: list[str]) -> tuple[list[str], int]:
    """Normalised dia_ids ("D30:05" -> "D30:5", "D8:6; D9:17" split) and the unparseable count."""
    ids, bad = [], 0
    for entry in raw:
        for part in re.split(r"[;,\s]+", str(entry).strip()):
            if not part:
                continue
            m = _EVIDENCE.match(part)
            if m:
                ids.append(f"D{int(m.group(1))}:{int(m.group(2))}")
            else:
                bad += 1
    return ids, bad


def _session_time(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load_locomo(path: str | Path) -> list[dict[str, Any]]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, list) or not data or "conversation" not in data[0]:
        raise ValueError(f"{path} does not look like LoCoMo data (a list of samples with 'conversation')")
    return data


def conversation_sessions(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """A LoCoMo sample as memstrata import sessions (messages keep their dia_id)."""
    conv = sample["conversation"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    sessions = []
    for n in numbers:
        start = _session_time(conv[f"session_{n}_date_time"])
        messages = []
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                text = f"{text} [image: {turn['blip_caption']}]"
            dia = parse_evidence([turn["dia_id"]])[0]
            messages.append({"role": "user", "name": turn["speaker"], "content": text,
                             "created_at": start + timedelta(seconds=i),
                             "metadata": {"dia_id": dia[0] if dia else turn["dia_id"]}})
        sessions.append({"session_id": f"session_{n}", "messages": messages})
    return sessions


def run_locomo(data: str | Path, *, ks: list[int], store: str | None = None,
               embedder: str | None = None, limit: int | None = None,
               embedding_cache: str | Path | None = None, progress: bool = True,
               **settings: Any) -> dict[str, Any]:
    samples = load_locomo(data)[: limit or None]
    table = RecallTable(ks)
    unparsed = questions = 0
    cached = DiskCachedEmbedder(parse_embedder(embedder), embedding_cache) if embedding_cache else None
    with bench_memory(store, cached or embedder, **settings) as memory:
        for sample in tqdm(samples, desc="import", unit="conv", disable=not progress):
            user = f"locomo-{sample['sample_id']}"
            results = memory.import_conversation(conversation_sessions(sample), user, progress=progress)
            sample["_dia"] = {m.id: m.metadata["dia_id"] for r in results for m in r.messages}
        filters = Filters(layers=(Layer.EPISODIC,))
        total = sum(len(s["qa"]) for s in samples)
        with tqdm(total=total, desc="questions", disable=not progress) as bar:
            for sample in samples:
                scope = Scope(f"locomo-{sample['sample_id']}", memory.settings.namespace)
                for qa in sample["qa"]:
                    bar.update(1)
                    gold, bad = parse_evidence(qa.get("evidence", []))
                    unparsed += bad
                    if not gold:
                        continue
                    questions += 1
                    category = CATEGORIES.get(qa["category"], str(qa["category"]))
                    qvec = memory.embedder.embed([qa["question"]], kind="query")[0]
                    request = SearchRequest(qa["question"], k=max(ks), filters=filters)
                    for system in SYSTEMS:
                        result = search_as(memory.retriever, system, scope, request,
                                           query_vector=qvec, touch=False)
                        ranked = [sample["_dia"].get(h.id) for h in result.hits]
                        table.add(system, category, ranked, gold, [h.score for h in result.hits])
        embedder_name = memory.embedder.name
    return {"benchmark": "locomo", "data": str(data), "embedder": embedder_name,
            "systems": table.summary(), "questions": questions, "unparsed_evidence": unparsed,
            "ks": ks}
