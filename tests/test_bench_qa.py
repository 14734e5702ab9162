"""``memstrata bench qa``: answer parsing and grading (pure), endpoint errors as one line, and
one end-to-end run on a slice of the real dev data against the real local model (SmolLM2 in
llama.cpp's server) — then again, resumed (no LLM call), and again without its results
file (every answer from the on-disk cache)."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata.bench.qa import evenly, load_questions
from memstrata.bench.qa_grading import (LOCOMO_JUDGE_PROMPT, LONGMEMEVAL_JUDGE_PROMPTS,
                                        fit_conversation, locomo_judge_messages,
                                        longmemeval_judge_messages, parse_choice,
                                        parse_locomo_label, parse_longmemeval_label)
from memstrata.bench.qa_llm import overflow_ratio
from memstrata.cli.main import cli

from bench_data import DATA
needs_data = pytest.mark.skipif(not (DATA / "memdaily").is_dir(), reason="bench data not here")
CHOICES = {"A": "本科", "B": "专科", "C": "硕士", "D": "高中"}


@pytest.mark.parametrize("text, letter", [
    ("D", "D"), ("D. 高中", "D"), ("(C)", "C"), ("答案：B", "B"), ("我觉得答案是 C。", "C"),
    ("The answer is b.", "B"), ("Option C, because she said so", "C"),
    ("A good choice is C", "C"),            # the article "A" is not a choice
    ("A is right", "A"), ("高中", "D"),      # no letter: the one choice whose text it holds
    ("本科以上", "A"),
    ("A and B", None), ("A或B", None), ("B, C", None),  # two letters: no choice
    ("He went to 本科 or 专科", None), ("I don't know.", None), ("", None),
])
def test_parse_choice(text, letter):
    assert parse_choice(text, CHOICES) == letter


def test_locomo_label():
    assert parse_locomo_label('{"label": "CORRECT"}') is True
    assert parse_locomo_label('Close, but a different year. {"label": "WRONG"}') is False
    # the JSON label wins over a word of the explanation
    assert parse_locomo_label('It is not CORRECT. ```json\n{"label": "WRONG"}\n```') is False
    assert parse_locomo_label("Same date, so: CORRECT") is True
    assert parse_locomo_label("CORRECT or WRONG, hard to say") is None
    assert parse_locomo_label("The answer is 7 May 2023.") is None


def test_longmemeval_label_is_the_papers_rule():
    assert parse_longmemeval_label("Yes.") is True
    assert parse_longmemeval_label("no") is False
    assert parse_longmemeval_label("No, the model response is incorrect.") is False


def test_judge_prompts_are_the_published_ones():
    # pinned: an edit to the published prompts must be deliberate
    digest = hashlib.sha256(LOCOMO_JUDGE_PROMPT.encode()).hexdigest()
    assert digest[:16] == _LOCOMO_PROMPT_SHA, digest
    [msg] = locomo_judge_messages("When did Caroline go?", "7 May 2023", "In May")
    assert msg["role"] == "user" and "Gold answer: 7 May 2023\nGenerated answer: In May" in msg["content"]
    temporal = longmemeval_judge_messages("temporal-reasoning", "How many days?", "18", "19 days")
    assert "off-by-one" in temporal[0]["content"] and "Correct Answer: 18" in temporal[0]["content"]
    pref = longmemeval_judge_messages("single-session-preference", "Any tips?", "likes tea", "Tea")
    assert "Rubric: likes tea" in pref[0]["content"]
    abst = longmemeval_judge_messages("multi-session", "Q?", "not mentioned", "I don't know",
                                      abstention=True)
    assert "unanswerable" in abst[0]["content"]
    assert set(LONGMEMEVAL_JUDGE_PROMPTS) >= {"single-session-user", "single-session-assistant",
                                              "multi-session", "knowledge-update",
                                              "temporal-reasoning", "single-session-preference"}
    with pytest.raises(ValueError, match="no LongMemEval judge prompt"):
        longmemeval_judge_messages("open-domain", "Q?", "a", "b")


_LOCOMO_PROMPT_SHA = "62395dd312a631df"


def test_full_context_keeps_the_newest_lines_that_fit():
    lines = [f"line {i} " + "word " * 8 for i in range(10)]  # 10 tokens + 1 for the break each
    kept, cut = fit_conversation(lines, 35, lambda t: len(t.split()))
    assert kept == lines[-3:] and cut == 7
    assert fit_conversation(lines, 10_000, lambda t: len(t.split())) == (lines, 0)
    assert fit_conversation(lines, 5, lambda t: len(t.split())) == ([], 10)


def test_overflow_ratio():
    llama = ("This model's maximum context length is 2048 tokens. However, you requested "
             "2560 tokens (2500 in the messages, 60 in the completion).")
    assert overflow_ratio(llama) == pytest.approx(0.9 * 2048 / 2560)
    assert overflow_ratio("Requested tokens (4096) exceed context window of 2048") == \
        pytest.approx(0.45)
    assert overflow_ratio("context_length_exceeded") == 0.8
    assert overflow_ratio("HTTP 400: invalid model") is None


@needs_data
def test_questions_from_the_dev_halves():
    assert evenly(list(range(10)), 3) == [0, 3, 6] and evenly([1, 2], 5) == [1, 2]
    qs = load_questions(DATA, ["locomo", "longmemeval", "memdaily"], 3)
    by = {d: [q for q in qs if q.dataset == d] for d in ("locomo", "longmemeval", "memdaily")}
    assert [len(v) for v in by.values()] == [3, 3, 3]
    assert all(q.category != "adversarial" and q.gold for q in by["locomo"])
    assert all(q.when and q.lines[0].startswith("[") for q in by["longmemeval"])
    assert all(set(q.choices or {}) == set("ABCD") and q.gold in "ABCD" for q in by["memdaily"])


# -- errors from the endpoint: one line, no traceback -----------------------------------------


class _Refuses(BaseHTTPRequestHandler):
    def _deny(self) -> None:
        body = b'{"error": {"message": "Invalid API key"}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _deny

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _qa(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, ["bench", "qa", "--data", str(DATA), *args], env=env)


@needs_data
def test_auth_failure_names_the_key_variable(tmp_path, refusing_endpoint):
    result = _qa("--workdir", str(tmp_path), "--limit", "1", "--reader-url", refusing_endpoint,
                 "--reader-key-env", "MY_READER_KEY", env={"MY_READER_KEY": "wrong"})
    assert result.exit_code == 1
    assert "refused the API key" in result.output and "MY_READER_KEY" in result.output
    assert "Traceback" not in result.output and "wrong" not in result.output


@needs_data
def test_unreachable_endpoint_is_one_line(tmp_path):
    result = _qa("--workdir", str(tmp_path), "--limit", "1", "--reader-url",
                 "http://127.0.0.1:9/v1")
    assert result.exit_code == 1 and "cannot reach http://127.0.0.1:9/v1" in result.output
    assert "Traceback" not in result.output
    for args, message in ((["--reader-url", "localhost:8080"], "not an http(s) base URL"),
                          (["--datasets", "squad"], "unknown dataset 'squad'"),
                          (["--budget", "4000"], "do not fit in --reader-window 2048"),
                          (["--limit", "0"], "must be at least 1"),
                          (["--limit", "locomo=ten"], "use N or dataset=N")):
        result = _qa("--workdir", str(tmp_path), *args)
        assert result.exit_code != 0 and message in result.output, result.output


# -- end to end against the local model --------------------------------------------------------


def _slice(root: Path) -> Path:
    """A bench-data folder with one LoCoMo conversation, one LongMemEval haystack and one
    MemDaily file: the real data, fewer of it."""
    (root / "locomo").mkdir(parents=True)
    (root / "longmemeval").mkdir()
    (root / "memdaily").mkdir()
    locomo = json.loads((DATA / "locomo" / "locomo_dev.json").read_text())
    (root / "locomo" / "locomo_dev.json").write_text(json.dumps(locomo[:1]))
    lme = json.loads((DATA / "longmemeval" / "longmemeval_s_dev60.json").read_text())
    (root / "longmemeval" / "longmemeval_s_dev60.json").write_text(json.dumps(lme[:1]))
    daily = json.loads((DATA / "memdaily" / "01_simple_roles.json").read_text())
    (root / "memdaily" / "01_simple_roles.json").write_text(json.dumps(daily[:1], ensure_ascii=False))
    return root


@needs_data
def test_bench_qa_end_to_end_resumes_and_caches(tmp_path, local_llm):
    data, work = _slice(tmp_path / "data"), tmp_path / "work"
    args = ["bench", "qa", "--data", str(data), "--workdir", str(work), "--limit", "1",
            "--reader-url", local_llm.base_url, "--reader-model", local_llm.model,
            "--embedder", "hash:256", "--reader-window", "640", "--budget", "320",
            "--answer-tokens", "12", "--price-in", "0.15", "--price-out", "0.6"]
    runner = CliRunner()
    first = runner.invoke(cli, [*args, "--json", str(tmp_path / "one.json")])
    assert first.exit_code == 0, first.output
    report = json.loads((tmp_path / "one.json").read_text())
    assert report["questions"] == {"locomo": 1, "longmemeval": 1, "memdaily": 1}
    calls = report["llm_calls"]
    assert calls == 3 * 3 + 2 * 3  # three readers per question, a judge for LoCoMo and LongMemEval
    rows = [json.loads(line) for line in (work / "answers.jsonl").read_text().splitlines()]
    assert len(rows) == 9
    for row in rows:
        assert row["reader"]["prompt_tokens"] > 0  # the API's own usage
        assert (row["judge"] is None) == (row["dataset"] == "memdaily")
    for systems in report["datasets"].values():
        for s in systems.values():
            assert s["n"] == 1
            cost = (s["reader_prompt_tokens"] * 0.15 + s["reader_completion_tokens"] * 0.6) / 1e6
            assert s["reader_cost"] == pytest.approx(cost, abs=1e-6)
    # the full-context row: the newest lines, cut to the window, and said so
    full = next(r for r in rows if r["dataset"] == "locomo" and r["system"] == "full-context")
    assert 0 < full["lines_kept"] < full["lines"] and full["reader"]["prompt_tokens"] <= 640
    assert "cut to the 640-token window" in first.output
    # MemDaily: graded by the choice the reader's text names, against ground_truth
    [daily] = [r for r in rows if r["dataset"] == "memdaily" and r["system"] == "memstrata"]
    choices = json.loads((data / "memdaily" / "01_simple_roles.json").read_text())[0][
        "question_list"][0]["choices"]
    assert daily["choice"] == parse_choice(daily["answer"], choices)
    assert daily["correct"] == (daily["choice"] == daily["gold"]) and daily["gold"] in "ABCD"

    # resumed: every question is done, nothing is sent
    again = runner.invoke(cli, [*args, "--json", str(tmp_path / "two.json")])
    assert again.exit_code == 0, again.output
    two = json.loads((tmp_path / "two.json").read_text())
    assert two["llm_calls"] == 0 and two["cache_hits"] == 0
    assert two["datasets"] == report["datasets"]
    # without the results file, every answer comes from the cache
    (work / "answers.jsonl").unlink()
    cached = runner.invoke(cli, [*args, "--json", str(tmp_path / "three.json")])
    assert cached.exit_code == 0, cached.output
    three = json.loads((tmp_path / "three.json").read_text())
    assert three["llm_calls"] == 0 and three["cache_hits"] == calls
    assert three["datasets"] == report["datasets"]
