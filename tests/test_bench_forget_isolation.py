"""``memstrata bench forget-isolation`` on a tiny load: a real server subprocess, tenant A
measured alone and beside tenant B's forget loop, the planted strings looked for in the
store files (no timing is asserted: on a shared machine the figures mean nothing)."""

from __future__ import annotations

from memstrata.bench.forget_isolation import render, run_forget_isolation


def test_the_bench_measures_both_phases_and_finds_the_forgotten_bytes_gone():
    report = run_forget_isolation(clients=2, seconds=1.0, users=1, items=30, erase_within=1.0,
                                  embedder="hash:256", progress=False)
    for phase in ("alone", "beside"):
        assert report[phase]["requests"] > 0 and report[phase]["all"]["errors"] == 0
        assert report[phase]["requests"] == sum(report[phase]["ops"][op]["n"] for op in ("search", "remember"))
    assert report["forgets"] >= 1 and report["planted"] == 2 * report["forgets"]
    assert set(report["found_after_loop"]) >= {"store.db"}  # scanned when the loop ended...
    assert report["left_at_end"] and not any(report["left_at_end"].values())  # ...and clean at the end
    assert report["gone_after_last_forget_s"] is not None and report["compactions"]
    text = render(report, "memstrata bench forget-isolation --seconds 1")
    assert "| beside B's forget loop |" in text and "p95 beside / alone" in text
    assert "planted strings in the files when the loop ended" in text and "none " in text
