"""``memstrata bench qa``: end-to-end answer accuracy — what peers publish, rerunnable.

For each question of the LoCoMo, LongMemEval_S and MemDaily development halves, a reader
(any OpenAI-compatible chat model) answers three times:

* ``memstrata`` — with the messages :meth:`memstrata.Memory.context` assembles for the
  question (its memory block, deep recall, at ``budget`` tokens) over the conversation
  imported as one user's turns;
* ``full-context`` — with the whole conversation as text, **cut to the reader's window**:
  the newest lines that fit in ``window - answer_tokens`` (the report says how much of it
  that was);
* ``no-memory`` — with the question alone.

MemDaily's answers are one of four choices and are graded without a judge (the letter
against ``ground_truth``); LoCoMo's and LongMemEval's by a judge model with the published
judge prompts (:mod:`.qa_grading`). Tokens per question are the API's own usage counts.

Everything lives under ``workdir``: the store the conversations are imported into (once,
one store per embedder), ``answers.jsonl`` (one row per question and system, appended as
it is graded: a rerun skips what is done, and a run stopped halfway resumes) and
``llm-cache.db`` (answers by request hash: the same request is never sent twice). Rows of a
different configuration (reader, judge, budget, window, embedder) are kept but not counted.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..errors import ConfigError, ProviderError
from ..tokens import count_messages, estimate_tokens
from ..providers.embedders import parse_embedder
from .common import bench_memory
from .embedding_cache import DiskCachedEmbedder
from .locomo import CATEGORIES, conversation_sessions, load_locomo
from .longmemeval import haystack_sessions
from .memdaily import load_memdaily, parse_time
from .qa_grading import (JUDGE_MAX_TOKENS, as_text, choice_prompt, fit_conversation,
                         locomo_judge_messages, longmemeval_judge_messages, parse_choice,
                         parse_locomo_label, parse_longmemeval_label, reader_system)
from .qa_llm import Answer, CachedChat, ContextOverflow

__all__ = ["Question", "QA_SYSTEMS", "DATASETS", "QAConfig", "load_questions", "run_qa",
           "render", "evenly"]

QA_SYSTEMS = ("memstrata", "full-context", "no-memory")
#: dataset -> its file or folder under the bench-data directory
DATASETS = {"locomo": "locomo/locomo_dev.json",
            "longmemeval": "longmemeval/longmemeval_s_dev60.json",
            "memdaily": "memdaily"}


@dataclass(frozen=True)
class Question:
    """One question, the user whose memory holds its conversation, and that conversation."""

    dataset: str
    qid: str
    category: str
    question: str
    gold: str
    user: str
    sessions: list[dict[str, Any]] = field(repr=False)
    lines: list[str] = field(repr=False)  # the conversation as text, oldest first
    when: str | None = None  # the question's date, told to the reader
    choices: dict[str, str] | None = None
    abstention: bool = False


@dataclass(frozen=True)
class QAConfig:
    """What a result depends on; rows of another configuration are not counted."""

    reader_model: str
    judge_model: str
    embedder: str
    budget: int = 1500
    window: int = 2048
    answer_tokens: int = 64
    k: int = 25

    @property
    def id(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def evenly(items: list[Any], limit: int | None) -> list[Any]:
    """``limit`` items evenly spaced over ``items`` (all of them without a limit)."""
    if not limit or limit >= len(items):
        return list(items)
    return [items[i * len(items) // limit] for i in range(limit)]


def _locomo(path: Path, limit: int | None) -> list[Question]:
    out = []
    for sample in load_locomo(path):
        sessions = conversation_sessions(sample)
        conv = sample["conversation"]
        lines = []
        for s in sessions:
            lines.append(f"[{conv[s['session_id'] + '_date_time']}]")
            lines += [f"{m['name']}: {m['content']}" for m in s["messages"]]
        for n, qa in enumerate(sample["qa"]):
            if qa["category"] == 5 or "answer" not in qa:  # adversarial: no gold answer
                continue
            out.append(Question("locomo", f"{sample['sample_id']}#{n}",
                                CATEGORIES.get(qa["category"], str(qa["category"])),
                                qa["question"], as_text(qa["answer"]),
                                f"locomo-{sample['sample_id']}", sessions, lines))
    return evenly(out, limit)


def _longmemeval(path: Path, limit: int | None) -> list[Question]:
    out = []
    for q in evenly(json.loads(path.read_text()), limit):
        sessions = haystack_sessions(q)
        lines = []
        for date, s in zip(q["haystack_dates"], sessions):
            lines.append(f"[{date}]")
            lines += [f"{m['role']}: {m['content']}" for m in s["messages"]]
        out.append(Question("longmemeval", q["question_id"], q["question_type"], q["question"],
                            as_text(q["answer"]), f"lme-{q['question_id']}", sessions, lines,
                            when=q["question_date"], abstention=q["question_id"].endswith("_abs")))
    return out


def _memdaily(path: Path, limit: int | None) -> list[Question]:
    out = []
    for n, (qtype, traj) in enumerate(load_memdaily(path)):
        messages = [{"role": "user", "content": m["message"], "created_at": parse_time(m["time"]),
                     "metadata": {"mid": m["mid"]}} for m in traj["message_list"]]
        lines = [f"[{m['time']}] {m['message']}" for m in traj["message_list"]]
        for qa in traj["question_list"]:
            if "[ERRORQ]" in qa["question"] or "[ERRORA]" in str(qa.get("answer", "")):
                continue
            out.append(Question("memdaily", f"{n}#{qa['qid']}", qtype, qa["question"],
                                qa["ground_truth"], f"memdaily-{n}",
                                [{"session_id": "s", "messages": messages}], lines,
                                when=qa.get("time"), choices=dict(qa["choices"])))
    return evenly(out, limit)


_LOADERS: dict[str, Callable[[Path, int | None], list[Question]]] = {
    "locomo": _locomo, "longmemeval": _longmemeval, "memdaily": _memdaily}


def load_questions(data: str | Path, datasets: list[str],
                   limit: int | dict[str, int] | None) -> list[Question]:
    """The questions of ``datasets`` (``limit`` per dataset, or ``{dataset: limit}``; evenly
    spaced) from the bench-data directory ``data``."""
    out = []
    for name in datasets:
        cap = limit.get(name) if isinstance(limit, dict) else limit
        if name not in _LOADERS:
            raise ConfigError(f"unknown dataset {name!r}: use {', '.join(_LOADERS)}")
        path = Path(data) / DATASETS[name]
        if not path.exists():
            raise ConfigError(f"{path} is missing: --data is the bench-data directory "
                              f"(with {', '.join(DATASETS.values())})")
        try:
            out += _LOADERS[name](path, cap)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path} does not look like {name} data ({exc})") from exc
    return out


# ---------------------------------------------------------------- one question


def _reader_messages(system: str, q: Question, cfg: QAConfig, scale: float, memory: Any,
                     ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    head = {"role": "system", "content": reader_system(q.dataset, q.when)}
    ask = {"role": "user",
           "content": choice_prompt(q.question, q.choices) if q.choices else q.question}
    if system == "memstrata":
        result = memory.context(q.user, "bench-qa", [head, ask], budget=int(cfg.budget * scale),
                                recall="deep", k=cfg.k)
        return result.messages, {"memory_tokens": result.report.memory_tokens}
    if system == "no-memory":
        return [head, ask], {}
    # 15 % under the window: the token estimate is cl100k's, and a reader's own tokenizer
    # (SmolLM2's) counts up to ~15 % more English tokens; a server that still refuses the
    # prompt makes _answer shrink it further
    room = int((cfg.window - cfg.answer_tokens) * 0.85 * scale) - count_messages([head, ask]) - 40
    kept, cut = fit_conversation(q.lines, max(0, room), estimate_tokens)
    note = (f"The conversation so far, oldest first (its {cut} oldest lines were cut to fit "
            "the window):" if cut else "The conversation so far, oldest first:")
    history = {"role": "system", "content": note + "\n" + "\n".join(kept)}
    return [head, history, ask], {"lines": len(q.lines), "lines_kept": len(kept),
                                  "conversation_tokens": sum(estimate_tokens(x) + 1 for x in q.lines)}


def _answer(system: str, q: Question, cfg: QAConfig, reader: CachedChat,
            memory: Any) -> tuple[Answer, dict[str, Any]]:
    scale = 1.0
    for _ in range(4):
        messages, info = _reader_messages(system, q, cfg, scale, memory)
        try:
            return reader.complete(messages, max_tokens=cfg.answer_tokens), info | {"scale": scale}
        except ContextOverflow as exc:
            scale *= exc.ratio
    raise ProviderError(f"{reader.base_url}: the {system} prompt of {q.dataset} {q.qid} is still "
                        "over the model's window after shrinking it 4 times: lower --budget or "
                        "--reader-window")


def _grade(q: Question, answer: str, judge: CachedChat) -> dict[str, Any]:
    if q.choices is not None:
        choice = parse_choice(answer, q.choices)
        return {"correct": choice == q.gold, "choice": choice, "unparsed": choice is None,
                "judge": None}
    if q.dataset == "locomo":
        messages = locomo_judge_messages(q.question, q.gold, answer)
    else:
        messages = longmemeval_judge_messages(q.category, q.question, q.gold, answer,
                                              abstention=q.abstention)
    verdict = judge.complete(messages, max_tokens=JUDGE_MAX_TOKENS[q.dataset])
    label = (parse_locomo_label(verdict.text) if q.dataset == "locomo"
             else parse_longmemeval_label(verdict.text))
    return {"correct": bool(label), "unparsed": label is None, "judge_text": verdict.text,
            "judge": {"prompt_tokens": verdict.prompt_tokens,
                      "completion_tokens": verdict.completion_tokens, "cached": verdict.cached}}


# ---------------------------------------------------------------- the run


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a stopped run: its question is redone
    return rows


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "default"


def _row(system: str, q: Question, cfg: QAConfig, reader: CachedChat, judge: CachedChat,
         memory: Any) -> dict[str, Any]:
    """One system's answer to one question, graded: a line of ``answers.jsonl``."""
    said, info = _answer(system, q, cfg, reader, memory)
    return {"config": cfg.id, "dataset": q.dataset, "qid": q.qid,
            "system": system, "category": q.category, "question": q.question,
            "gold": q.gold, "answer": said.text,
            "reader": {"prompt_tokens": said.prompt_tokens,
                       "completion_tokens": said.completion_tokens,
                       "cached": said.cached}, **info,
            **_grade(q, said.text, judge)}


def _answer_pending(pending: list[Question], datasets: list[str], rows: dict[tuple, dict[str, Any]],
                    work: Path, cfg: QAConfig, reader: CachedChat, judge: CachedChat,
                    embedder: str | None, embedding_cache: str | Path | None,
                    progress: bool) -> None:
    """Answer what ``rows`` lacks, each row appended to ``answers.jsonl`` as it is graded
    (a stopped run resumes there); a conversation is imported once per embedder's store."""
    for endpoint in {(c.base_url, c.model): c for c in (reader, judge)}.values():
        endpoint.check()
    name = _slug(cfg.embedder)  # a store per embedder, and the users imported into it
    imported_path = work / f"imported-{name}.json"
    imported = set(json.loads(imported_path.read_text())) if imported_path.exists() else set()
    store = f"sqlite:///{work / f'store-{name}.db'}"
    cached = DiskCachedEmbedder(parse_embedder(embedder), embedding_cache) \
        if embedding_cache else None
    with bench_memory(store, cached or embedder) as memory, (work / "answers.jsonl").open("a") as out:
        for dataset in datasets:
            todo = [q for q in pending if q.dataset == dataset]
            for q in tqdm(todo, desc=f"qa {dataset}", unit="q", disable=not progress):
                if q.user not in imported and (q.dataset, q.qid, "memstrata") not in rows:
                    memory.forget_user(q.user)  # an import cut short by a stopped run
                    memory.import_conversation(q.sessions, q.user, progress=False)
                    imported.add(q.user)
                    imported_path.write_text(json.dumps(sorted(imported)))
                for system in QA_SYSTEMS:
                    if (q.dataset, q.qid, system) in rows:
                        continue
                    row = _row(system, q, cfg, reader, judge, memory)
                    rows[(q.dataset, q.qid, system)] = row
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    out.flush()
    if cached is not None:
        cached.close()


def run_qa(data: str | Path, workdir: str | Path, *, reader: CachedChat, judge: CachedChat,
           datasets: list[str], limit: int | dict[str, int] | None = None,
           embedder: str | None = None,
           budget: int = 1500, window: int = 2048, answer_tokens: int = 64, k: int = 25,
           price_in: float = 0.0, price_out: float = 0.0, embedding_cache: str | Path | None = None,
           progress: bool = True) -> dict[str, Any]:
    """Answer, grade and summarise; see the module docstring. ``embedding_cache`` (an SQLite
    file, :class:`~.embedding_cache.DiskCachedEmbedder`) keeps the import's vectors across
    workdirs."""
    if budget + answer_tokens > window:
        raise ConfigError(f"--budget {budget} plus --answer-tokens {answer_tokens} do not fit in "
                          f"--reader-window {window}: lower the budget or give the model's real window")
    started = time.monotonic()
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    questions = load_questions(data, datasets, limit)
    embedder_name = embedder or "local:e5-small"
    cfg = QAConfig(reader.model, judge.model, embedder_name, budget, window, answer_tokens, k)
    rows = {(r["dataset"], r["qid"], r["system"]): r for r in _read_rows(work / "answers.jsonl")
            if r.get("config") == cfg.id}
    pending = [q for q in questions if any((q.dataset, q.qid, s) not in rows for s in QA_SYSTEMS)]
    if pending:
        _answer_pending(pending, datasets, rows, work, cfg, reader, judge, embedder, embedding_cache,
                        progress)
    done = [rows[(q.dataset, q.qid, s)] for q in questions for s in QA_SYSTEMS]
    return {"benchmark": "qa", "data": str(data), "workdir": str(work), "config": asdict(cfg),
            "config_id": cfg.id, "reader_url": reader.base_url, "judge_url": judge.base_url,
            "price_in_per_m": price_in, "price_out_per_m": price_out,
            "questions": {d: sum(q.dataset == d for q in questions) for d in datasets},
            "llm_calls": reader.calls + (judge.calls if judge is not reader else 0),
            "cache_hits": reader.hits + (judge.hits if judge is not reader else 0),
            "wall_s": round(time.monotonic() - started, 1),
            "datasets": {d: _summary([r for r in done if r["dataset"] == d], price_in, price_out)
                         for d in datasets}}


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _cost(usage: dict[str, Any] | None, price_in: float, price_out: float) -> float:
    if not usage:
        return 0.0
    return (usage["prompt_tokens"] * price_in + usage["completion_tokens"] * price_out) / 1e6


def _summary(rows: list[dict[str, Any]], price_in: float, price_out: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for system in QA_SYSTEMS:
        mine = [r for r in rows if r["system"] == system]
        by_cat: dict[str, list[float]] = defaultdict(list)
        for r in mine:
            by_cat[r["category"]].append(float(r["correct"]))
        s: dict[str, Any] = {
            "n": len(mine), "accuracy": _mean([float(r["correct"]) for r in mine]),
            "by_category": {c: {"accuracy": _mean(v), "n": len(v)} for c, v in sorted(by_cat.items())},
            "unparsed": sum(bool(r.get("unparsed")) for r in mine),
            "reader_prompt_tokens": _mean([r["reader"]["prompt_tokens"] for r in mine]),
            "reader_completion_tokens": _mean([r["reader"]["completion_tokens"] for r in mine]),
            "judge_tokens": _mean([r["judge"]["prompt_tokens"] + r["judge"]["completion_tokens"]
                                   for r in mine if r.get("judge")]),
            "reader_cost": round(sum(_cost(r["reader"], price_in, price_out) for r in mine), 6),
            "judge_cost": round(sum(_cost(r.get("judge"), price_in, price_out) for r in mine), 6),
            "shrunk": sum(r.get("scale", 1.0) < 1.0 for r in mine)}
        if system == "memstrata":
            s["memory_tokens"] = _mean([r.get("memory_tokens", 0) for r in mine])
        if system == "full-context":
            s["lines_kept_share"] = _mean([r["lines_kept"] / max(1, r["lines"]) for r in mine])
            s["conversation_tokens"] = _mean([r["conversation_tokens"] for r in mine])
        out[system] = s
    return out


_NAMES = {"locomo": "LoCoMo", "longmemeval": "LongMemEval_S", "memdaily": "MemDaily"}


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table, one row per dataset and system."""
    cfg = report["config"]
    lines = ["| dataset | system | questions | accuracy | reader prompt tokens / q | "
             "reader completion tokens / q | judge tokens / q | cost (reader + judge) "
             "| what the reader saw |",
             "|---|---|---|---|---|---|---|---|---|"]
    for dataset, systems in report["datasets"].items():
        for name, s in systems.items():
            if name == "memstrata":
                saw = f"context() at {cfg['budget']:,} tokens: {s['memory_tokens']:,.0f} memory tokens / q"
            elif name == "full-context" and s["lines_kept_share"] >= 1.0:
                saw = (f"the whole conversation (~{s['conversation_tokens']:,.0f} tokens), within "
                       f"the {cfg['window']:,}-token window")
            elif name == "full-context":
                saw = (f"the newest {s['lines_kept_share']:.0%} of the conversation's lines "
                       f"(~{s['conversation_tokens']:,.0f} tokens), cut to the "
                       f"{cfg['window']:,}-token window")
            else:
                saw = "the question only"
            if s["shrunk"]:
                saw += f"; {s['shrunk']} prompts shrunk after the endpoint refused them as too long"
            if s["unparsed"]:
                saw += f"; {s['unparsed']} answers/verdicts unparseable (graded wrong)"
            grader = "choice match" if dataset == "memdaily" else "judge"
            lines.append(f"| {_NAMES.get(dataset, dataset)} ({grader}) | {name} | {s['n']} | "
                         f"{s['accuracy']:.3f} | {s['reader_prompt_tokens']:,.0f} | "
                         f"{s['reader_completion_tokens']:,.1f} | "
                         f"{s['judge_tokens']:,.0f} | ${s['reader_cost'] + s['judge_cost']:.4f} | {saw} |")
    return "\n".join(lines)


def iter_rows(workdir: str | Path) -> Iterator[dict[str, Any]]:
    """The rows of ``answers.jsonl`` in ``workdir`` (every configuration)."""
    yield from _read_rows(Path(workdir) / "answers.jsonl")
