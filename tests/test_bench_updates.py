"""``memstrata bench updates``: the generated suite has the size and the split
the issue asks for, runs end to end (hash embedder: fast), and its ill-formed-text check
catches what people would not write."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memstrata.bench.updates import (CHANGE_EN, CHANGE_ZH, COMPLETIONS, SLOTS, cases, ill_formed,
                                     run_longmemeval_updates, run_updates)
from memstrata.cli.main import cli

from bench_data import DATA


def test_the_suite_is_large_bilingual_and_split_by_template():
    every = cases()
    assert len(every) >= 300 and len(SLOTS) >= 25
    assert len(CHANGE_EN) >= 6 and len(CHANGE_ZH) >= 6
    held = [c for c in every if c.half == "held"]
    dev = [c for c in every if c.half == "dev"]
    assert len(held) >= 125 and len(dev) >= 125
    # no way of saying a change is in both halves
    assert {c.template for c in held}.isdisjoint({c.template for c in dev})
    kinds = {c.kind for c in every}
    assert {"change", "cross-language", "other-person"} <= kinds
    assert {c.lang for c in held} == {"en", "zh"}
    for case in every:  # every case states the old value first and the new one in the change
        assert case.new.casefold() in case.change.casefold() or case.kind == "cross-language"
        assert "{" not in case.first + case.change + case.ask
    assert {h for _, _, h in COMPLETIONS} == {"dev", "held"}


@pytest.mark.parametrize("text", ["User barelies write Java anymore", "User solds the Corolla",
                                  "User User lives in Paris", "用户从上个月开始用户当老师", "用户我是9岁",
                                  "User have a cat", ", lives in Paris"])
def test_ill_formed_text_is_caught(text):
    assert ill_formed(text)


@pytest.mark.parametrize("text", ["User barely writes Java anymore", "User sold the Corolla and bought a Tesla",
                                  "User lives in Shanghai", "用户的女儿9岁", "User needs to book the dentist",
                                  "User goes to the gym in the evenings", "User flies to Tokyo"])
def test_well_formed_text_passes(text):
    assert not ill_formed(text)


def test_a_run_reports_every_metric_beside_the_baselines():
    report = run_updates(half="held", embedder="hash:256", limit=6, progress=False)
    table = report["table"]
    for system in ("memstrata", "bm25", "dense"):
        assert 0.0 <= table[f"{system}/all"]["top1"] <= 1.0
        assert 0.0 <= table[f"{system}/all"]["stale_above"] <= 1.0
        assert table[f"{system}/all"]["cases"] == 6
    assert 0.0 <= table["memstrata/all"]["in_context"] <= 1.0
    assert report["ill_formed_items"] >= 0 and 0.0 < report["memory_share"] < 1.0
    assert report["completion_cases"] == sum(h == "held" for _, _, h in COMPLETIONS)
    for metric in ("preference_hit_rate", "task_resumption"):  # the seeds' measures
        assert report[metric]["cases"] == 6 and 0.0 <= report[metric]["all"] <= 1.0


def test_the_command_prints_the_table_and_writes_json(tmp_path):
    out = tmp_path / "u.json"
    result = CliRunner().invoke(cli, ["bench", "updates", "--embedder", "hash:256", "--limit", "2",
                                      "--half", "dev", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "current at top 1" in result.output and "memstrata/all" in result.output
    assert json.loads(out.read_text())["half"] == "dev"


@pytest.mark.skipif(not (DATA / "longmemeval").is_dir(), reason="bench data not here")
def test_longmemeval_knowledge_update_runs_on_one_question():
    report = run_longmemeval_updates(str(DATA / "longmemeval" / "longmemeval_s_dev60.json"),
                                     limit=1, embedder="hash:256", progress=False)
    assert report["questions"] == 1
    assert {"memstrata", "bm25", "dense"} <= set(report["asked_above_other"])
    row = report["per_question"][0]
    assert row["asks_about_before"]  # "What was my previous goal …"
    assert row["memstrata"]["latest_rank"] is None or row["memstrata"]["latest_rank"] >= 0
