"""Extraction quality of the offline rules, and the cost of ``add()``.

* **LoCoMo observations** — each speaker's turns are user turns (LoCoMo speakers talk
  about themselves in the first person), the other speaker's previous turn is the
  assistant context. Candidates from :func:`extract` that pass the credibility screen
  (long-term and session-only) are compared with the human-written ``observation``
  facts of the same speaker and session: "User" becomes the speaker's name, both sides
  are embedded as passages, and a pair matches at cosine ≥ ``threshold``. Precision =
  share of candidates with a matching observation; recall = share of observations
  with a matching candidate. The same method as ``scratch/extract_eval.py``.
  ``chance_precision`` matches each candidate against the observations of another
  conversation (same session number and speaker slot, that speaker's name replaced by
  this one's): the share that "matches" there is what the threshold accepts by chance.
* **MemDaily** — every trajectory's statements go through the real write path
  (``Memory.add`` → background job → stored items); a question counts when its answer
  string appears in the user's active items (content or value), next to the share
  whose answer appears in the raw statements at all (the ceiling).
* **add() latency** — p50/p95 of ``add()`` with extraction queued for the background.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..layers.semantic.credibility import screen
from ..layers.semantic.extract import CORRECTION, extract
from ..memory import Memory
from ..providers.embedders import parse_embedder
from ..types import Message, Role, utcnow
from .memdaily import load_memdaily, parse_time

__all__ = ["run_locomo_extraction", "run_memdaily_extraction", "run_add_latency"]


def _third(text: str, name: str) -> str:
    return re.sub(r"\bUser\b", name, re.sub(r"\bUser's\b", f"{name}'s", text))


def _locomo_statements(samples: list[dict]) -> tuple[list[tuple[int, str, str, str]],
                                                    list[tuple[int, str, str, str]], int]:
    """Extract candidates turn by turn, beside the human-written observations.

    Returns ``(candidates, observations, turns)``; both lists hold
    ``(sample, session, speaker, text)`` with "User" already replaced by the speaker's name.
    """
    cands: list[tuple[int, str, str, str]] = []
    obs: list[tuple[int, str, str, str]] = []
    turns = 0
    for si, sample in enumerate(samples):
        conv = sample["conversation"]
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)),
                          key=lambda k: int(k.split("_")[1])):
            for ti, turn in enumerate(conv[key]):
                turns += 1
                window = []
                if ti > 0:
                    prev = conv[key][ti - 1]
                    window.append(Message(Role.ASSISTANT, prev["text"], utcnow(), id=prev["dia_id"]))
                window.append(Message(Role.USER, turn["text"], utcnow(), id=turn["dia_id"]))
                found = screen(extract(window, min_messages=1 if ti == 0 else 2))
                for c in found.long_term + found.session_only:
                    if c.attribute == CORRECTION:
                        continue  # an edit of an earlier slot, stored only when one matches
                    cands.append((si, key, turn["speaker"], _third(c.content, turn["speaker"])))
            for speaker, facts in sample.get("observation", {}).get(key + "_observation", {}).items():
                for fact, _ in facts:
                    obs.append((si, key, speaker, fact))
    return cands, obs, turns


def _best_matches(groups: dict[tuple, tuple[list, list]],
                  vectors: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate's best cosine to an observation of its group, and each observation's
    best cosine to a candidate (0 where the other side of the group is empty)."""
    best_c: list[float] = []
    best_o: list[float] = []
    for cs, os_ in groups.values():
        if not cs or not os_:
            best_c += [0.0] * len(cs)
            best_o += [0.0] * len(os_)
            continue
        sims = np.stack([vectors[t] for t in cs]) @ np.stack([vectors[t] for t in os_]).T
        best_c += sims.max(1).tolist()
        best_o += sims.max(0).tolist()
    return np.array(best_c), np.array(best_o)


def _chance_matches(groups: dict[tuple, tuple[list, list]], samples: list[dict],
                    vectors: dict[str, np.ndarray], model: Any) -> np.ndarray:
    """Best cosines of each group's candidates against the observations of the same
    session number and speaker slot in the *next* conversation (other people, other
    events) — what a threshold accepts between unrelated statements of this form.
    Embeds the renamed observations into ``vectors``."""
    speakers = [[s["conversation"]["speaker_a"], s["conversation"]["speaker_b"]] for s in samples]
    chance: list[float] = []
    for (si, key, speaker), (cs, _) in groups.items():
        if not cs or len(samples) < 2:
            continue
        sj = (si + 1) % len(samples)
        slot = speakers[si].index(speaker) if speaker in speakers[si] else 0
        them = speakers[sj][slot]
        # the other person's observations told about this speaker: names must not differ
        other = [o.replace(them, speaker) for o in groups.get((sj, key, them), ([], []))[1]]
        if not other:
            continue
        renamed = [o for o in other if o not in vectors]
        for start in range(0, len(renamed), 64):
            chunk = renamed[start:start + 64]
            vectors.update(zip(chunk, model.embed(chunk, kind="passage")))
        sims = np.stack([vectors[t] for t in cs]) @ np.stack([vectors[t] for t in other]).T
        chance += sims.max(1).tolist()
    return np.array(chance)


def run_locomo_extraction(data: str | Path, *, embedder: str | None = None,
                          threshold: float = 0.86, limit: int | None = None,
                          progress: bool = True) -> dict[str, Any]:
    """Precision/recall of the offline extractor against LoCoMo ``observation`` facts."""
    import json

    samples = json.loads(Path(data).read_text())[:limit]
    started = time.perf_counter()
    cands, obs, turns = _locomo_statements(samples)
    extract_s = time.perf_counter() - started
    model = parse_embedder(embedder or "local:e5-small")
    texts = sorted({c[3] for c in cands} | {o[3] for o in obs})
    vectors: dict[str, np.ndarray] = {}
    for start in tqdm(range(0, len(texts), 64), desc="embedding", disable=not progress):
        chunk = texts[start:start + 64]
        vectors.update(zip(chunk, model.embed(chunk, kind="passage")))
    groups: dict[tuple, tuple[list, list]] = defaultdict(lambda: ([], []))
    for cand in cands:
        groups[cand[:3]][0].append(cand[3])
    for o in obs:
        groups[o[:3]][1].append(o[3])
    bc, bo = _best_matches(groups, vectors)
    ch = _chance_matches(groups, samples, vectors, model)

    def pr(t: float) -> dict[str, float]:
        p = float((bc >= t).mean()) if len(bc) else 0.0
        r = float((bo >= t).mean()) if len(bo) else 0.0
        return {"threshold": t, "precision": round(p, 3), "recall": round(r, 3),
                "f1": round(2 * p * r / (p + r), 3) if p + r else 0.0,
                "chance_precision": round(float((ch >= t).mean()), 3) if len(ch) else 0.0}

    return {"benchmark": "locomo-extraction", "data": str(data), "embedder": model.name,
            "conversations": len(samples), "turns": turns, "observations": len(obs),
            "candidates": len(cands), "extract_ms_per_turn": round(1000 * extract_s / max(1, turns), 3),
            "stated": pr(threshold),
            "chance_precision": round(float((ch >= threshold).mean()), 3) if len(ch) else 0.0,
            "sweep": [pr(t) for t in (0.84, 0.86, 0.88, 0.90, 0.92)]}


def run_memdaily_extraction(directory: str | Path, *, embedder: str | None = None,
                            limit: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Share of MemDaily questions whose answer appears in the items the write path stored."""
    trajectories = load_memdaily(directory)
    if limit:
        trajectories = trajectories[::max(1, len(trajectories) // limit)][:limit]
    per_type: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    items_total = 0
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as tmp, \
            Memory(f"sqlite:///{Path(tmp) / 'm.db'}", embedder=embedder or "local:e5-small",
                   worker="off") as memory:
        for n, (qtype, traj) in enumerate(tqdm(trajectories, desc="trajectories",
                                              disable=not progress)):
            user = f"memdaily-{n}"
            for m in traj["message_list"]:
                memory.add([{"role": "user", "content": m["message"],
                             "created_at": parse_time(m["time"])}], user, "s", index=False)
            memory.flush()
            items = memory.list(user, limit=10_000)
            items_total += len(items)
            stored = " ".join(f"{i.content} {i.value or ''}" for i in items).casefold()
            raw = " ".join(m["message"] for m in traj["message_list"]).casefold()
            for qa in traj["question_list"]:
                answer = str(qa.get("answer", "")).strip().casefold()
                if not answer or "[error" in answer or "[ERRORQ]" in qa["question"]:
                    continue
                per_type[qtype].append((answer in stored, answer in raw))
        name = memory.embedder.name
    every = [x for rows in per_type.values() for x in rows]

    def share(rows: list[tuple[bool, bool]], i: int) -> float:
        return round(sum(r[i] for r in rows) / len(rows), 3) if rows else 0.0

    return {"benchmark": "memdaily-extraction", "data": str(directory), "embedder": name,
            "trajectories": len(trajectories), "questions": len(every), "items": items_total,
            "answer_in_items": share(every, 0), "answer_in_raw": share(every, 1),
            "by_type": {t: {"questions": len(r), "answer_in_items": share(r, 0),
                            "answer_in_raw": share(r, 1)} for t, r in sorted(per_type.items())}}


def run_add_latency(*, n: int = 200, embedder: str | None = None,
                    long_chars: int = 100_000) -> dict[str, Any]:
    """p50/p95 of ``add()`` (a user turn and a reply) with extraction in the background,
    then one ``long_chars`` message: the time ``add()`` takes and its extraction job's."""
    lines = ["I like hiking.", "I switched from Java to Go.", "Remind me to call mom tomorrow.",
             "我喜欢爬山", "我现在住在上海", "Please keep it short.", "What's the weather?"]
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as tmp, \
            Memory(f"sqlite:///{Path(tmp) / 'm.db'}", embedder=embedder or "local:e5-small") as memory:
        for i in range(n):
            turn = [{"role": "user", "content": f"{lines[i % len(lines)]} ({i})"},
                    {"role": "assistant", "content": "OK."}]
            started = time.perf_counter()
            memory.add(turn, user_id=f"u{i % 5}", session_id="s")
            times.append(1000 * (time.perf_counter() - started))
        started = time.perf_counter()
        memory.flush()
        drain = time.perf_counter() - started
        # one pasted 100k-character message: add() still returns at once, and its
        # extraction job reads a bounded prefix (clauses and candidates are capped)
        unit = "I like tea and my boss Anna lives in Oslo. 我周末喜欢爬山，我的上司在深圳上班。"
        long_text = (unit * (long_chars // len(unit) + 1))[:long_chars]
        started = time.perf_counter()
        memory.add([{"role": "user", "content": long_text}], user_id="u-long", session_id="s")
        long_add = time.perf_counter() - started
        started = time.perf_counter()
        memory.flush()
        long_job = time.perf_counter() - started
        long_items = len(memory.list("u-long", limit=10_000))
        name = memory.embedder.name
    times.sort()
    return {"benchmark": "add-latency", "embedder": name, "calls": n,
            "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
            "drain_after_s": round(drain, 2),
            "long_message_chars": len(long_text), "long_add_ms": round(1000 * long_add, 1),
            "long_job_s": round(long_job, 2), "long_items": long_items}
