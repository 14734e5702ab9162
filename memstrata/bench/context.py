"""Context assembly on LoCoMo: what a 2,000-token context keeps of the evidence.

Each conversation is imported as in the LoCoMo retrieval benchmark. For each question,
``Memory.context`` assembles the prompt (a system message plus the question, deep recall)
at the budget; we report the share of the question's evidence turns whose text made it
into the assembled context, the memory tokens spent (profile, summary, memories), and,
next to them, what sending the whole conversation would cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..tokens import count_messages
from .common import bench_memory
from .locomo import conversation_sessions, load_locomo, parse_evidence

__all__ = ["run_context", "render", "QUOTA_SETS"]

SYSTEM = "You answer questions about the user's past conversations. Be brief."
# name -> (short-term, long-term, knowledge); knowledge is empty in this benchmark
QUOTA_SETS = {"default 40/20/40": (0.4, 0.2, 0.4), "memory-heavy 20/80/0": (0.2, 0.8, 0.0)}


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def run_context(data: str | Path, *, budget: int = 2000, k: int = 25, store: str | None = None,
                embedder: str | None = None, limit: int | None = None,
                progress: bool = True) -> dict[str, Any]:
    samples = load_locomo(data)[: limit or None]
    rows: dict[str, dict[str, list[float]]] = {n: {"evidence": [], "memory": [], "total": [],
                                                   "full": []} for n in QUOTA_SETS}
    questions = 0
    with bench_memory(store, embedder) as memory:
        for sample in tqdm(samples, desc="import", unit="conv", disable=not progress):
            user = f"locomo-{sample['sample_id']}"
            sessions = conversation_sessions(sample)
            results = memory.import_conversation(sessions, user, progress=progress)
            sample["_dia"] = {m.id: m.metadata["dia_id"] for r in results for m in r.messages}
            turns = [{"role": "user", "name": m["name"], "content": m["content"]}
                     for s in sessions for m in s["messages"]]
            sample["_full"] = count_messages([{"role": "system", "content": SYSTEM}, *turns])
        total = sum(len(s["qa"]) for s in samples)
        with tqdm(total=total, desc="questions", disable=not progress) as bar:
            for sample in samples:
                user = f"locomo-{sample['sample_id']}"
                for qa in sample["qa"]:
                    bar.update(1)
                    gold, _ = parse_evidence(qa.get("evidence", []))
                    if not gold:
                        continue
                    questions += 1
                    msgs = [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": str(qa["question"])}]
                    for name, quotas in QUOTA_SETS.items():
                        result = memory.context(user, "bench-question", msgs, budget=budget,
                                                quotas=quotas, recall="deep", k=k)
                        kept = {sample["_dia"].get(i) for i in result.report.kept_ids}
                        row = rows[name]
                        row["evidence"].append(len(set(gold) & kept) / len(set(gold)))
                        row["memory"].append(result.report.memory_tokens)
                        row["total"].append(result.report.tokens)
                        row["full"].append(sample["_full"] + count_messages(msgs[1:]) - 3)
        embedder_name = memory.embedder.name
    systems = {}
    for name, row in rows.items():
        memory_tokens, full = _mean(row["memory"]), _mean(row["full"])
        systems[name] = {"evidence_share": _mean(row["evidence"]),
                         "memory_tokens": memory_tokens, "context_tokens": _mean(row["total"]),
                         "full_context_tokens": full,
                         "memory_share_of_context": round(memory_tokens / _mean(row["total"]), 4)
                         if row["total"] else 0.0,
                         "memory_vs_full": round(memory_tokens / full, 4) if full else 0.0}
    return {"benchmark": "context", "data": str(data), "embedder": embedder_name,
            "budget": budget, "k": k, "questions": questions, "systems": systems}


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table."""
    lines = ["| quotas (short/long/knowledge) | evidence turns in context | memory tokens / query "
             "| context tokens / query | full-context tokens / query | memory / context "
             "| memory / full context |", "|---|---|---|---|---|---|---|"]
    for name, s in report["systems"].items():
        lines.append(f"| {name} | {s['evidence_share']:.3f} | {s['memory_tokens']:.0f} | "
                     f"{s['context_tokens']:.0f} | {s['full_context_tokens']:.0f} | "
                     f"{s['memory_share_of_context']:.1%} | {s['memory_vs_full']:.1%} |")
    return "\n".join(lines)
