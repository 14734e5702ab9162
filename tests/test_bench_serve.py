"""``memstrata bench serve`` on a tiny load: a real server subprocess and in-process
threads, every call counted, none failing."""

from __future__ import annotations

from memstrata.bench.serve import MIX, _plan, render, run_serve_bench


def test_the_plan_is_the_mix_and_deterministic():
    plans = _plan(32, 20, 4)
    ops = [op for plan in plans for op, _, _ in plan]
    assert len(plans) == 32 and len(ops) == 640 and plans == _plan(32, 20, 4)
    shares = {op: ops.count(op) / len(ops) for op, _ in MIX}
    assert abs(shares["search"] - 0.5) < 0.06 and abs(shares["context"] - 0.2) < 0.06
    assert {user for plan in plans for _, user, _ in plan} == {f"user-{u}" for u in range(4)}


def test_bench_serve_runs_over_http_and_in_process():
    report = run_serve_bench(clients=4, requests=3, users=2, items=30, embedder="hash:256", progress=False)
    (run,) = report["runs"]
    for mode in ("in_process", "http"):
        result = run[mode]
        assert result["all"]["errors"] == 0 and result["all"]["n"] == 12
        assert sum(result["ops"][op]["n"] for op, _ in MIX) == 12
        assert result["all"]["p50_ms"] <= result["all"]["p95_ms"] <= result["all"]["p99_ms"]
    assert "| sqlite | 4 | http | search |" in render(report)
