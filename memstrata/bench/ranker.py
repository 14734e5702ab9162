"""``memstrata bench train-ranker``: learn the relevance score on the development splits and
check it leave-one-dataset-out.

Each dataset is imported once into an SQLite store under ``workdir`` (with its id map,
so a later run only searches) over an embedding cache (every text embedded once across
runs). Every question is then searched once with ``collect``: each candidate's
:data:`~memstrata.retrieval.rank.FEATURES` and whether it is gold evidence. The same
run searches BM25-only and dense-only (the baselines, as the other benches run them).

* **Leave one dataset out**: for each dataset, the ranker fitted on all the others
  re-orders that dataset's candidates; recall@5 / @10 beside the baselines, and the
  expected calibration error of its probabilities.
* **LoCoMo held out inside**: fitted on everything but conversations 3–4 of the LoCoMo
  dev file, scored on those two.
* The weights written to ``retrieval/ranker.json`` are fitted on every row.

The ranker's recall here is the candidates re-sorted by its probability, document by
document — what ``search`` does before it joins an acknowledgement to the turn it
answers; the benches (``bench locomo`` …) measure the whole search with the shipped
weights — once the search uses them; today it does not (:mod:`~memstrata.retrieval.rank`).
Deterministic: the fit has no random state, and the MemDaily subsets are evenly spaced
over the files (``seed`` is recorded; nothing is drawn at random). Note for a re-run: a
dataset's users are numbered in the order of its subset, so keep ``memdaily_limit`` the
same for a ``workdir`` (or start a new one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..memory import Memory
from ..providers.embedders import parse_embedder
from ..requests import SearchRequest
from ..retrieval.documents import dialogue_query
from ..retrieval.rank import (FEATURES, RANKER_FILE, Ranker, expected_calibration_error, fit,
                              reliability)
from ..types import Filters, Layer, Scope
from .chat import chat_sessions
from .common import search_as
from .embedding_cache import DiskCachedEmbedder
from .locomo import CATEGORIES, conversation_sessions, load_locomo, parse_evidence
from .madial import load_madial, parse_dialogue
from .memdaily import load_memdaily, parse_time

__all__ = ["Query", "collect", "train", "DATASETS"]

DATASETS = ("locomo", "madial", "memdaily", "memdaily_chat")
#: LoCoMo dev conversations held out from the fit inside the LoCoMo check (0-based: 3–4).
LOCOMO_HELD_OUT = (2, 3)


@dataclass
class Query:
    dataset: str
    group: str
    user: str
    request: SearchRequest
    gold: set[str]
    labels: dict[str, Any] = field(default_factory=dict)  # doc id -> gold key (or keys)

    def keys(self, doc_id: str) -> list[str]:
        found = self.labels.get(doc_id, [])
        return [found] if isinstance(found, str) else list(found)


def _locomo(memory: Memory, root: Path, ids: dict[str, Any]) -> Iterator[Query]:
    samples = load_locomo(root / "locomo" / "locomo_dev.json")
    for n, sample in enumerate(samples):
        user = f"locomo-{sample['sample_id']}"
        key = f"locomo:{user}"
        if key not in ids:
            results = memory.import_conversation(conversation_sessions(sample), user, progress=False)
            ids[key] = {m.id: m.metadata["dia_id"] for r in results for m in r.messages}
        for qa in sample["qa"]:
            gold, _ = parse_evidence(qa.get("evidence", []))
            if gold:
                yield Query("locomo", f"conv{n + 1}:{CATEGORIES.get(qa['category'])}", user,
                            SearchRequest(qa["question"], k=10,
                                          filters=Filters(layers=(Layer.EPISODIC,))),
                            set(gold), ids[key])


def _madial(memory: Memory, root: Path, ids: dict[str, Any]) -> Iterator[Query]:
    for lang in ("zh", "en"):
        memories, dialogues = load_madial(root / "madial", lang)
        user = f"madial-{lang}"
        key = f"madial:{user}"
        if key not in ids:
            ids[key] = {}
            for mid, event in memories.items():
                item = memory.user(user).remember(
                    event["event"], kind="event",
                    metadata={"madial_id": mid,
                              "created": datetime.fromisoformat(event["time"])
                              .replace(tzinfo=UTC).isoformat()})
                ids[key][item.id] = mid
        for dialogue in dialogues:
            turns = parse_dialogue(dialogue["dialogue"])
            query, recent = dialogue_query(turns[:dialogue["test-turn"][0] - 1])
            gold = {str(r) for r in dialogue["relevant-id"]}
            if query and gold:
                yield Query("madial", lang, user,
                            SearchRequest(query, k=10, recent=tuple(recent), scoring="relevance",
                                          filters=Filters(layers=(Layer.SEMANTIC,))),
                            gold, ids[key])


def _trajectories(root: Path, limit: int) -> list[Any]:
    """``limit`` MemDaily dev trajectories, evenly spaced over the file (it is sorted by type)."""
    trajectories = load_memdaily(root / "memdaily")
    return trajectories[::max(1, len(trajectories) // limit)][:limit]


def _memdaily(memory: Memory, root: Path, ids: dict[str, Any], limit: int) -> Iterator[Query]:
    trajectories = _trajectories(root, limit)
    for n, (qtype, traj) in enumerate(trajectories):
        user = f"memdaily-{n}"
        key = f"memdaily:{user}"
        if key not in ids:
            messages = [{"role": "user", "content": m["message"], "created_at": parse_time(m["time"]),
                         "metadata": {"mid": m["mid"]}} for m in traj["message_list"]]
            result = memory.import_conversation([{"session_id": "s", "messages": messages}], user,
                                                progress=False)[0]
            ids[key] = {m.id: str(m.metadata["mid"]) for m in result.messages}
        for qa in traj["question_list"]:
            if "[ERRORQ]" in qa["question"] or "[ERRORA]" in str(qa.get("answer", "")):
                continue
            yield Query("memdaily", qtype, user,
                        SearchRequest(qa["question"], k=10,
                                      filters=Filters(layers=(Layer.EPISODIC,))),
                        {str(g) for g in qa["target_step_id"]}, ids[key])


def _memdaily_chat(memory: Memory, root: Path, ids: dict[str, Any], limit: int) -> Iterator[Query]:
    """MemDaily dev as user/assistant chats (:mod:`.chat`): the assistant's replies, the
    acknowledgements and the items extracted from the statements are candidates too; an
    item is gold when a statement it was extracted from is."""
    trajectories = _trajectories(root, limit)
    for n, (qtype, traj) in enumerate(trajectories):
        user = f"chat-{n}"
        key = f"memdaily_chat:{user}"
        if key not in ids:
            handle = memory.user(user)
            results = handle.import_conversation(chat_sessions(traj, seed=n), progress=False,
                                                 extract=True)
            memory.flush()
            labels: dict[str, Any] = {m.id: str(m.metadata["mid"]) for r in results
                                      for m in r.messages if m.metadata.get("mid") is not None}
            for item in handle.list(filters={"statuses": ["active", "superseded"]}, limit=1000):
                labels[item.id] = sorted({labels[s] for s in item.source_message_ids
                                          if isinstance(labels.get(s), str)})
            ids[key] = labels
        for qa in traj["question_list"]:
            if "[ERRORQ]" in qa["question"] or "[ERRORA]" in str(qa.get("answer", "")):
                continue
            yield Query("memdaily_chat", qtype, user, SearchRequest(qa["question"], k=10),
                        {str(g) for g in qa["target_step_id"]}, ids[key])


def _recall(ranked: list[str], gold: set[str], k: int) -> float:
    return len(gold & set(ranked[:k])) / len(gold)


def _source(name: str, memory: Memory, root: Path, ids: dict[str, Any],
            memdaily_limit: int) -> Iterator[Query]:
    """The questions of dataset ``name``, importing each user's memory when ``ids`` does
    not hold it yet."""
    if name == "locomo":
        return _locomo(memory, root, ids)
    if name == "madial":
        return _madial(memory, root, ids)
    if name == "memdaily_chat":
        return _memdaily_chat(memory, root, ids, memdaily_limit)
    return _memdaily(memory, root, ids, memdaily_limit)


class _Rows:
    """What :func:`collect` saves of one dataset: a feature row per candidate with its
    label and the gold keys it stands for; per question its group, the baselines'
    recall and the size of its gold set."""

    def __init__(self) -> None:
        self.x: list[list[float]] = []
        self.y: list[int] = []
        self.hit_keys: list[str] = []  # the gold keys a row stands for ("|"-joined; an item may hold two)
        self.qid: list[int] = []
        self.groups: list[str] = []
        self.base: list[list[float]] = []
        self.gold_n: list[int] = []

    def add(self, memory: Memory, q: Query) -> None:
        scope = Scope(q.user, memory.settings.namespace)
        vector = memory.embedder.embed([q.request.query], kind="query")[0] \
            if not q.request.recent else None
        rows: list[tuple[str, list[float]]] = []
        search_as(memory.retriever, "memstrata", scope, q.request, query_vector=vector,
                  touch=False, collect=rows)
        best: dict[str, list[float]] = {}
        for doc_id, feats in rows:  # a compound query: the doc's first question
            best.setdefault(doc_id, feats)
        for doc_id, feats in best.items():
            self.x.append(feats)
            found = sorted(k for k in q.keys(doc_id) if k in q.gold)
            self.y.append(int(bool(found)))
            self.hit_keys.append("|".join(found))
            self.qid.append(len(self.groups))
        recalls = []
        for system in ("bm25", "dense"):
            hits = search_as(memory.retriever, system, scope, q.request,
                             query_vector=vector, touch=False).hits
            ranked = [k for h in hits for i in h.ids for k in q.keys(i)]
            recalls += [_recall(ranked, q.gold, 5), _recall(ranked, q.gold, 10)]
        self.base.append(recalls)
        self.groups.append(q.group)
        self.gold_n.append(len(q.gold))

    def arrays(self) -> dict[str, np.ndarray]:
        return {"x": np.asarray(self.x, dtype=np.float64).reshape(-1, len(FEATURES)),
                "y": np.asarray(self.y, dtype=np.int8), "qid": np.asarray(self.qid, dtype=np.int32),
                "keys": np.asarray(self.hit_keys, dtype=str),
                "groups": np.asarray(self.groups), "base": np.asarray(self.base, dtype=np.float64),
                "gold_n": np.asarray(self.gold_n, dtype=np.int32)}


def collect(data: str | Path, workdir: str | Path, *, datasets: tuple[str, ...] = DATASETS,
            memdaily_limit: int = 100, embedder: str | None = None,
            embedding_cache: str | Path | None = None, progress: bool = True) -> dict[str, Any]:
    """Feature rows of every candidate of every question, with labels and the baselines'
    recall; cached as ``workdir/<dataset>.npz`` (delete it to collect again)."""
    root, work = Path(data), Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    for name in datasets:
        saved = work / f"{name}.npz"
        if saved.exists():
            with np.load(saved, allow_pickle=False) as z:
                out[name] = {k: z[k] for k in z.files}
            continue
        inner = parse_embedder(embedder)
        cached = DiskCachedEmbedder(inner, embedding_cache) if embedding_cache else inner
        id_file = work / f"{name}.ids.json"
        ids: dict[str, Any] = json.loads(id_file.read_text()) if id_file.exists() else {}
        rows = _Rows()
        with Memory(f"sqlite:///{work / f'{name}.db'}", embedder=cached,
                    embed_on_add="inline") as memory:
            known = len(ids)
            for q in _source(name, memory, root, ids, memdaily_limit):
                if len(ids) != known:  # a user imported: its ids kept for the next run
                    id_file.write_text(json.dumps(ids))
                    known = len(ids)
                rows.add(memory, q)
                if progress and len(rows.groups) % 100 == 0:
                    print(f"  {name}: {len(rows.groups)} questions", flush=True)
            id_file.write_text(json.dumps(ids))
        arrays = rows.arrays()
        np.savez(saved, **arrays)  # type: ignore[arg-type]  # numpy stubs: allow_pickle
        out[name] = arrays
    return out


def _ranked_recall(p: np.ndarray, d: dict[str, Any], mask: np.ndarray, k: int) -> float:
    """Mean recall@k over the questions in ``mask`` with candidates re-sorted by ``p``
    (a question's gold not among its candidates counts as missed; a statement found
    both as itself and as an item extracted from it counts once)."""
    qid, y, gold_n = d["qid"], d["y"], d["gold_n"]
    keys = d.get("keys")  # absent in rows collected before 2026-12-02 04:00 (one doc per key)
    found = np.zeros(len(gold_n))
    order = np.lexsort((-p, qid))
    q_sorted = qid[order]
    starts = np.searchsorted(q_sorted, np.arange(len(gold_n)))
    ends = np.searchsorted(q_sorted, np.arange(len(gold_n)), side="right")
    for q in np.flatnonzero(mask):
        top = order[starts[q]:min(ends[q], starts[q] + k)]
        if keys is None:
            found[q] = y[top].sum() / gold_n[q]
        else:
            found[q] = len({key for row in top[y[top] > 0] for key in str(keys[row]).split("|")}) \
                / gold_n[q]
    return float(found[mask].mean()) if mask.any() else 0.0


def _rows(d: dict[str, Any], questions: np.ndarray) -> np.ndarray:
    return np.isin(d["qid"], np.flatnonzero(questions))


def _score(ranker: Ranker, d: dict[str, Any], questions: np.ndarray) -> dict[str, Any]:
    p = ranker.probabilities(d["x"])
    rows = _rows(d, questions)
    base = d["base"][questions]
    return {"questions": int(questions.sum()),
            "ranker_r5": round(_ranked_recall(p, d, questions, 5), 4),
            "ranker_r10": round(_ranked_recall(p, d, questions, 10), 4),
            "bm25_r5": round(float(base[:, 0].mean()), 4), "bm25_r10": round(float(base[:, 1].mean()), 4),
            "dense_r5": round(float(base[:, 2].mean()), 4), "dense_r10": round(float(base[:, 3].mean()), 4),
            "ece": round(expected_calibration_error(p[rows], d["y"][rows]), 4),
            "reliability": [(round(a, 3), round(b, 3), n)
                            for a, b, n in reliability(p[rows], d["y"][rows])]}


def _fit(parts: list[tuple[dict[str, Any], np.ndarray]], l2: float) -> Ranker:
    xs = [d["x"][_rows(d, m)] for d, m in parts]
    ys = [d["y"][_rows(d, m)] for d, m in parts]
    return fit(np.vstack(xs), np.concatenate(ys), l2=l2)


def train(data: dict[str, Any], *, l2: float = 1.0, seed: int = 0,
          write: str | Path | None = RANKER_FILE) -> dict[str, Any]:
    """The leave-one-dataset-out table, the LoCoMo 3–4 check, and the shipped weights."""
    every = {n: np.ones(len(d["gold_n"]), dtype=bool) for n, d in data.items()}
    table = {}
    for left in data:
        ranker = _fit([(data[n], every[n]) for n in data if n != left], l2)
        table[left] = _score(ranker, data[left], every[left])
    report: dict[str, Any] = {"seed": seed, "l2": l2, "features": list(FEATURES),
                              "leave_one_dataset_out": table}
    if "locomo" in data:
        conv = np.char.partition(data["locomo"]["groups"].astype(str), ":")[:, 0]
        held = np.isin(conv, [f"conv{i + 1}" for i in LOCOMO_HELD_OUT])
        parts = [(data[n], every[n]) for n in data if n != "locomo"] + [(data["locomo"], ~held)]
        report["locomo_conv3_4"] = _score(_fit(parts, l2), data["locomo"], held)
    final = _fit([(data[n], every[n]) for n in data], l2)
    report["weights"] = final.to_dict()
    report["in_sample"] = {n: _score(final, data[n], every[n]) for n in data}
    if write:
        Path(write).write_text(json.dumps(final.to_dict(), indent=1) + "\n", encoding="utf-8")
    return report
