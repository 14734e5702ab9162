"""``memstrata bench extraction``: quality of the offline extractor, and add() latency."""

from __future__ import annotations

import click

from ..errors import with_article
from ..bench.common import write_json
from .main_helpers import handle_errors

__all__ = ["extraction"]


@click.command()
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False),
              help="locomo_dev.json (LoCoMo with its `observation` facts).")
@click.option("--memdaily", "memdaily_dir", default=None,
              type=click.Path(exists=True, file_okay=False),
              help="Also run the write path on this MemDaily directory.")
@click.option("--threshold", default=0.86, show_default=True,
              help="Cosine at which a candidate matches an observation (0.86: see "
                   "docs/benchmarks.md for why, and the chance level the run prints).")
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--limit", type=int, default=None,
              help="Only the first N conversations / N MemDaily trajectories.")
@click.option("--add-latency", "latency_calls", type=int, default=0,
              help="Also time this many add() calls with extraction in the background.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def extraction(data, memdaily_dir, threshold, embedder, limit, latency_calls, json_out) -> None:
    """Precision/recall of the offline extractor on LoCoMo observations; MemDaily answers
    found in the stored items; optionally add() p50/p95."""
    from ..bench.extraction import run_add_latency, run_locomo_extraction, run_memdaily_extraction

    report = {"locomo": run_locomo_extraction(data, embedder=embedder, threshold=threshold,
                                              limit=limit)}
    lo = report["locomo"]
    click.echo(f"LoCoMo: {lo['conversations']} conversations, {lo['turns']} turns, "
               f"{lo['observations']} observations, {lo['candidates']} candidates "
               f"({lo['extract_ms_per_turn']} ms/turn), embedder {lo['embedder']}")
    click.echo(f"chance level at {threshold:.2f} (candidates against another conversation's "
               f"observations): precision {lo['chance_precision']:.3f}")
    click.echo("| cosine ≥ | precision | recall | F1 | chance precision |\n|---|---|---|---|---|")
    for row in lo["sweep"]:
        mark = " (stated)" if abs(row["threshold"] - threshold) < 1e-9 else ""
        click.echo(f"| {row['threshold']:.2f}{mark} | {row['precision']:.3f} | "
                   f"{row['recall']:.3f} | {row['f1']:.3f} | {row['chance_precision']:.3f} |")
    if memdaily_dir:
        md = report["memdaily"] = run_memdaily_extraction(memdaily_dir, embedder=embedder,
                                                          limit=limit)
        click.echo(f"MemDaily: {md['questions']} questions over {md['trajectories']} "
                   f"trajectories, {md['items']} items stored; answer in items "
                   f"{md['answer_in_items']:.3f} (in the raw statements {md['answer_in_raw']:.3f})")
        for qtype, row in md["by_type"].items():
            click.echo(f"  {qtype}: {row['answer_in_items']:.3f} of {row['questions']}")
    if latency_calls:
        lat = report["add_latency"] = run_add_latency(n=latency_calls, embedder=embedder)
        click.echo(f"add(): p50 {lat['p50_ms']} ms, p95 {lat['p95_ms']} ms over {lat['calls']} "
                   f"calls ({lat['embedder']}); background drain {lat['drain_after_s']} s")
        click.echo(f"{with_article(format(lat['long_message_chars'], ','))}-character message: add() "
                   f"{lat['long_add_ms']} ms, its extraction job {lat['long_job_s']} s, "
                   f"{lat['long_items']} items")
    write_json(report, json_out)
