"""``memstrata bench qa``: end-to-end answer accuracy with any OpenAI-compatible reader and judge."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..bench.common import write_json
from .main_helpers import handle_errors

__all__ = ["qa"]

_LOCAL = "http://127.0.0.1:8080/v1"


def _limits(text: str | None) -> int | dict[str, int] | None:
    """``--limit``: ``N`` or ``dataset=N,...``."""
    if text is None:
        return None
    limits: int | dict[str, int]
    try:
        if "=" not in text:
            limits = int(text)
            values = [limits]
        else:
            pairs = [part.split("=", 1) for part in text.split(",") if part.strip()]
            per = {name.strip(): int(n) for name, n in pairs}
            limits, values = per, list(per.values())
    except ValueError:
        raise click.BadParameter("use N or dataset=N,... (e.g. locomo=10,memdaily=10)",
                                 param_hint="--limit") from None
    if not values or min(values) < 1:
        raise click.BadParameter("must be at least 1", param_hint="--limit")
    return limits


@click.command()
@click.option("--data", required=True, type=click.Path(exists=True, file_okay=False),
              help="The bench-data directory (locomo/, longmemeval/, memdaily/ under it).")
@click.option("--workdir", required=True, type=click.Path(file_okay=False),
              help="Where the imported store, answers.jsonl (results, appended: a rerun skips "
                   "what is done) and llm-cache.db (answers by request hash) are kept.")
@click.option("--datasets", default="locomo,longmemeval,memdaily", show_default=True,
              help="Comma-separated: locomo, longmemeval, memdaily.")
@click.option("--limit", default=None,
              help="Questions per dataset, evenly spaced: N for each, or per dataset, e.g. "
                   "locomo=10,longmemeval=3,memdaily=10 (default: all of the dev half).")
@click.option("--reader-url", default=_LOCAL, show_default=True,
              help="OpenAI-compatible base URL of the model that answers (default: the local "
                   "model of `memstrata llm serve`).")
@click.option("--reader-model", default="smollm2", show_default=True, help="Its model name.")
@click.option("--reader-key-env", default="MEMSTRATA_LLM_API_KEY", show_default=True,
              help="Environment variable holding its API key (unset: no key, as locally).")
@click.option("--judge-url", default=None,
              help="OpenAI-compatible base URL of the judge (default: the reader's).")
@click.option("--judge-model", default=None, help="The judge's model name (default: the reader's).")
@click.option("--judge-key-env", default=None,
              help="Environment variable holding the judge's API key (default: the reader's).")
@click.option("--reader-window", type=int, default=2048, show_default=True,
              help="The reader's context window in tokens (2048: `memstrata llm serve`'s; "
                   "e.g. 128000 for gpt-4o-mini). The full-context row is cut to it.")
@click.option("--budget", type=int, default=1500, show_default=True,
              help="context() token budget per question (the memstrata row).")
@click.option("--answer-tokens", type=int, default=64, show_default=True,
              help="max_tokens of each answer.")
@click.option("--price-in", type=float, default=0.0, show_default=True,
              help="Price per million prompt tokens, for the cost column.")
@click.option("--price-out", type=float, default=0.0, show_default=True,
              help="Price per million completion tokens.")
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--embedding-cache", default=None, type=click.Path(dir_okay=False),
              help="SQLite file of vectors kept across runs (same scores, no re-embedding).")
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True,
              help="Seconds to wait for one answer.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False),
              help="Also write the report as JSON to this file.")
@handle_errors
def qa(data, workdir, datasets, limit, reader_url, reader_model, reader_key_env, judge_url,
       judge_model, judge_key_env, reader_window, budget, answer_tokens, price_in, price_out,
       embedder, embedding_cache, timeout_s, json_out) -> None:
    """End-to-end answer accuracy on the LoCoMo, LongMemEval_S and MemDaily dev halves: the
    reader answers with memstrata's context() block, with the whole conversation (cut to its
    window) and with no memory; MemDaily's four choices are graded by exact match, LoCoMo and
    LongMemEval by the judge with their published judge prompts. Tokens per question from the
    API's usage; resumable and cached under --workdir."""
    from ..bench.qa import render, run_qa
    from ..bench.qa_llm import CachedChat

    names = [n.strip() for n in datasets.split(",") if n.strip()]
    limits = _limits(limit)
    for value, hint in ((reader_window, "--reader-window"), (budget, "--budget"),
                        (answer_tokens, "--answer-tokens")):
        if value < 1:
            raise click.BadParameter("must be positive", param_hint=hint)
    if price_in < 0 or price_out < 0:
        raise click.BadParameter("prices cannot be negative", param_hint="--price-in/--price-out")
    cache = Path(workdir) / "llm-cache.db"
    reader = CachedChat(reader_url, reader_model, api_key=os.environ.get(reader_key_env) or None,
                        cache=cache, api_key_env=reader_key_env, timeout_s=timeout_s)
    judge_key_env = judge_key_env or reader_key_env
    same = (judge_url or reader_url) == reader_url and (judge_model or reader_model) == reader_model \
        and judge_key_env == reader_key_env
    judge = reader if same else CachedChat(
        judge_url or reader_url, judge_model or reader_model,
        api_key=os.environ.get(judge_key_env) or None, cache=cache, api_key_env=judge_key_env,
        timeout_s=timeout_s)
    try:
        report = run_qa(data, workdir, reader=reader, judge=judge, datasets=names, limit=limits,
                        embedder=embedder, budget=budget, window=reader_window,
                        answer_tokens=answer_tokens, price_in=price_in, price_out=price_out,
                        embedding_cache=embedding_cache)
    finally:
        reader.close()
        if judge is not reader:
            judge.close()
    click.echo(f"bench qa: reader {reader_model} at {reader.base_url}, judge {judge.model} at "
               f"{judge.base_url}; {report['llm_calls']} LLM calls, {report['cache_hits']} from "
               f"the cache; {report['wall_s']:.0f} s")
    click.echo(render(report))
    write_json(report, json_out)
