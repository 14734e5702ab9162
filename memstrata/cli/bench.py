"""``memstrata bench``: retrieval quality (LoCoMo, MemDaily) and latency."""

from __future__ import annotations

import json
from typing import Any

import click

from ..bench.common import markdown, write_json
from .main_helpers import handle_errors

__all__ = ["bench"]


def _ks(value: str) -> list[int]:
    try:
        ks = sorted({int(k) for k in value.split(",") if k.strip()})
    except ValueError:
        raise click.BadParameter("use a comma-separated list of integers, e.g. 5,10,25,50") from None
    if not ks or ks[0] < 1:
        raise click.BadParameter("k values must be positive")
    return ks


@click.group()
def bench() -> None:
    """Benchmarks: retrieval recall on LoCoMo and MemDaily, end-to-end answers (qa), the
    knowledge base, search latency, hostile inputs."""


def _inversions(report: dict) -> str:
    return "score inversions (a hit scoring above the one ranked before it): " + ", ".join(
        f"{name} {s.get('score_inversions', 0)}" for name, s in report["systems"].items())


def _common(func):
    func = click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False),
                        help="Also write the report as JSON to this file.")(func)
    func = click.option("--limit", type=int, default=None,
                        help="Only the first N conversations / trajectories (quick runs).")(func)
    func = click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")(func)
    func = click.option("--store", default=None,
                        help="Store URL to benchmark on (default: a fresh temporary SQLite file).")(func)
    return func


@bench.command()
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False),
              help="locomo_dev.json (or locomo10.json).")
@click.option("--k", "ks", default="5,10,25,50", show_default=True, help="Comma-separated k values.")
@click.option("--embedding-cache", default=None, type=click.Path(dir_okay=False),
              help="SQLite file of vectors kept across runs (same scores, no re-embedding).")
@_common
@handle_errors
def locomo(data, ks, embedding_cache, store, embedder, limit, json_out) -> None:
    """LoCoMo recall@k per category: memstrata vs BM25-only vs dense-only, one index."""
    from ..bench.locomo import run_locomo

    ks = _ks(ks)
    report = run_locomo(data, ks=ks, store=store, embedder=embedder, limit=limit,
                        embedding_cache=embedding_cache)
    click.echo(f"LoCoMo: {report['questions']} questions, {report['unparsed_evidence']} unparsed "
               f"evidence ids, embedder {report['embedder']}")
    click.echo(markdown(report, ks))
    click.echo(_inversions(report))
    write_json(report, json_out)


@bench.command()
@click.option("--data", required=True, type=click.Path(exists=True, file_okay=False),
              help="The memdaily/ directory.")
@click.option("--k", "ks", default="5", show_default=True, help="Comma-separated k values.")
@click.option("--embedding-cache", default=None, type=click.Path(dir_okay=False),
              help="SQLite file of vectors kept across runs (same scores, no re-embedding).")
@_common
@handle_errors
def memdaily(data, ks, embedding_cache, store, embedder, limit, json_out) -> None:
    """MemDaily recall@k per question type: memstrata vs BM25-only vs dense-only."""
    from ..bench.memdaily import run_memdaily

    ks = _ks(ks)
    report = run_memdaily(data, ks=ks, store=store, embedder=embedder, limit=limit,
                          embedding_cache=embedding_cache)
    click.echo(f"MemDaily: {report['questions']} questions ({report['skipped_error_items']} "
               f"[ERROR] items skipped), embedder {report['embedder']}")
    click.echo(markdown(report, ks))
    click.echo(_inversions(report))
    write_json(report, json_out)


@bench.command()
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False),
              help="locomo_dev.json (or locomo10.json).")
@click.option("--budget", default=2000, show_default=True, help="Token budget per question.")
@click.option("--k", default=25, show_default=True, help="Memories searched per question.")
@_common
@handle_errors
def context(data, budget, k, store, embedder, limit, json_out) -> None:
    """LoCoMo context assembly: evidence turns kept at a token budget, memory tokens per query."""
    from ..bench.context import render, run_context

    report = run_context(data, budget=budget, k=k, store=store, embedder=embedder, limit=limit)
    click.echo(f"Context assembly: {report['questions']} questions, budget {report['budget']}, "
               f"embedder {report['embedder']}")
    click.echo(render(report))
    write_json(report, json_out)


@bench.command()
@click.option("--sizes", default="10000,100000", show_default=True,
              help="Comma-separated numbers of items of one user (0: skip the one-user part).")
@click.option("--queries", default=200, show_default=True, help="Searches per size.")
@click.option("--store", "stores", multiple=True,
              help="Store URL (repeatable: stores side by side; default: a temporary SQLite file). "
                   "Use an empty database.")
@click.option("--compare-postgres", is_flag=True,
              help="Also run on a temporary PostgreSQL + pgvector (from the pgserver package), "
                   "next to the stores given (default: a temporary SQLite file).")
@click.option("--processes/--no-processes", default=True, show_default=True,
              help="At the largest size, also a fresh process's first search and the first "
                   "search after another process wrote 100 items.")
@click.option("--rounds", default=3, show_default=True,
              help="Rounds of another process writing 100 items.")
@click.option("--users", default=10000, show_default=True,
              help="Users in the many-users store (0: skip that part).")
@click.option("--user-items", default=100, show_default=True, help="Items per user there.")
@click.option("--user-queries", default=2000, show_default=True,
              help="Searches of random users there, after each user's first search.")
@click.option("--users-store", default=None, type=click.Path(dir_okay=False),
              help="The many-users SQLite file: built there when missing, reused when complete "
                   "(default: a temporary file).")
@click.option("--index-memory-mb", type=float, default=None,
              help="index_memory_mb of the many-users search process (default: the setting).")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def latency(sizes, queries, stores, compare_postgres, processes, rounds, users, user_items,
            user_queries, users_store, index_memory_mb, json_out) -> None:
    """Search p50/p95 of one user at several sizes (with and without the query embedding),
    a fresh process's first search, the first search after another process's writes,
    many users in one store under the index memory budget; add throughput, memory;
    several stores side by side in one run."""
    from contextlib import ExitStack

    from ..bench.latency import render, render_comparison, render_users, run_latency, run_many_users
    from ..bench.tempdb import temporary_postgres

    one_user = [] if sizes.strip() == "0" else _ks(sizes)  # --sizes 0: only the many users
    urls: list[str | None] = (list(stores) or [None]) if one_user else []
    with ExitStack() as stack:
        if compare_postgres and one_user:
            urls.append(stack.enter_context(temporary_postgres()))
        reports = [run_latency(one_user, queries=queries, store=url, processes=processes,
                               rounds=rounds) for url in urls]
    many = run_many_users(users, user_items, queries=user_queries, budget_mb=index_memory_mb,
                          path=users_store) if users > 0 else None
    for report in reports:
        click.echo(render(report))
    if len(reports) > 1:
        click.echo(render_comparison(reports))
    if many:
        click.echo(render_users(many))
    out: dict = reports[0] if len(reports) == 1 else {"benchmark": "latency", "runs": reports}
    if many:
        out = {**out, "many_users": many}
    write_json(out, json_out)


@bench.command()
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False),
              help="locomo_dev.json.")
@click.option("--memdaily", default=None, type=click.Path(exists=True, file_okay=False),
              help="The memdaily/ directory (Chinese quality and throughput).")
@click.option("--embedder", "specs", multiple=True, default=("local:e5-small", "local:minilm"),
              show_default=True, help="Embedders to compare (repeatable).")
@click.option("--limit", type=int, default=None, help="Only the first N LoCoMo conversations.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def embedders(data, memdaily, specs, limit, json_out) -> None:
    """Compare embedders: dense-only and hybrid recall, texts/second, same run."""
    from ..bench.embedders import render, run_embedders

    report = run_embedders(list(specs), locomo=data, memdaily=memdaily, limit=limit)
    click.echo(render(report))
    write_json(report, json_out)


@bench.command("kb")
@click.option("--data", "datas", required=True, multiple=True,
              type=click.Path(exists=True, file_okay=False),
              help="A kb data directory with corpus.jsonl and queries.jsonl (repeatable), e.g. "
                   "../shared/bench-data/kb/dragonball_dev_zh.")
@click.option("--strategy", "strategies", multiple=True, default=("500/300",), show_default=True,
              help="Chunking MAX/MIN[/CJK_WEIGHT] characters (repeatable: strategies side by side).")
@click.option("--docs", type=int, default=None,
              help="Only the first N documents of each corpus, and the questions they answer.")
@click.option("--embedding-cache", default=None, type=click.Path(dir_okay=False),
              help="SQLite file of vectors kept across runs (same scores; ingestion rates then "
                   "count cache hits).")
@_common
@handle_errors
def kb_bench(datas, strategies, docs, embedding_cache, store, embedder, limit, json_out) -> None:
    """Knowledge-base retrieval: chunk Hit@1/5/10, MRR@10, doc recall@5 (memstrata vs
    BM25-only vs dense-only over the same chunks), unanswerable questions under
    min_score, ingestion chunks/s."""
    from ..bench.kb import parse_strategy, render, run_kb

    for text in strategies:
        try:
            parse_strategy(text)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    report = run_kb(list(datas), strategies=list(strategies), store=store, embedder=embedder,
                    limit=limit, docs=docs, embedding_cache=embedding_cache)
    click.echo(render(report))
    write_json(report, json_out)


from .extraction import extraction  # noqa: E402  (its own module, registered here)

bench.add_command(extraction)

from .bench_qa import qa  # noqa: E402  (its own module, registered here)

bench.add_command(qa)


@bench.command()
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--dedup", default=0.92, show_default=True, help="dedup_threshold to evaluate.")
@click.option("--conflict-low", default=0.70, show_default=True, help="conflict_low to evaluate.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def calibration(embedder, dedup, conflict_low, json_out) -> None:
    """Cosine bands of duplicate, same-slot-conflict and unrelated statement pairs
    (English, Chinese, across) for the dedup/conflict thresholds."""
    from ..bench.calibration import run_calibration

    report = run_calibration(embedder, dedup=dedup, conflict_low=conflict_low)
    click.echo(f"embedder {report['embedder']}; dedup {dedup}, conflict_low {conflict_low}")
    click.echo("| pairs | group | n | min | p10 | median | p90 | max |\n|---|---|---|---|---|---|---|---|")
    for category, groups in report["bands"].items():
        for group, b in groups.items():
            click.echo(f"| {category} | {group} | {b['n']} | {b['min']:.3f} | {b['p10']:.3f} | "
                       f"{b['median']:.3f} | {b['p90']:.3f} | {b['max']:.3f} |")
    for category, cut in report["cuts"].items():
        click.echo(f"{category}: {cut['over_dedup']:.0%} over dedup, {cut['in_conflict_band']:.0%} "
                   f"in the conflict band, {cut['under_conflict_low']:.0%} under conflict_low")
    write_json(report, json_out)


def _counts(value: str) -> list[int]:
    try:
        counts = [int(c) for c in str(value).split(",") if c.strip()]
    except ValueError:
        raise click.BadParameter("use a number or a comma-separated list, e.g. 1,4,32") from None
    if not counts or min(counts) < 1:
        raise click.BadParameter("client counts must be positive")
    return counts


def _settings(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``SETTING=VALUE`` pairs; a value that reads as JSON (a number, true) is that."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{pair!r}: use SETTING=VALUE, e.g. background_wait_ms=0")
        try:
            out[name.strip()] = json.loads(value)
        except ValueError:
            out[name.strip()] = value.strip()
    return out


@bench.command()
@click.option("--clients", default="32", show_default=True,
              help="Concurrent clients; several (1,4,32) run one after another on the same "
                   "seeded store: service time beside queueing.")
@click.option("--requests", default=20, show_default=True, help="Calls per client.")
@click.option("--users", default=4, show_default=True, help="Users the calls spread over.")
@click.option("--items", default=10_000, show_default=True, help="Memory items seeded per user.")
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--compare-postgres", is_flag=True,
              help="Also run on a temporary PostgreSQL + pgvector (pgserver) with sessions in "
                   "Redis (127.0.0.1:6379, a private key prefix).")
@click.option("--redis", default="redis://127.0.0.1:6379/0", show_default=True,
              help="Redis for the sessions of the PostgreSQL run.")
@click.option("--in-process/--http-only", default=True, show_default=True,
              help="Also make the calls in process (threads calling UserMemory).")
@click.option("--set", "memory_settings", multiple=True, metavar="SETTING=VALUE",
              help="A memory setting for the service and the in-process calls "
                   "(e.g. background_wait_ms=0); repeatable.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def serve(clients, requests, users, items, embedder, compare_postgres, redis, in_process,
          memory_settings, json_out) -> None:
    """The HTTP service under concurrent load (mixed add/search/context): p50/p95/p99 and
    errors per operation, over HTTP and in process, on SQLite (and PostgreSQL + Redis)."""
    from contextlib import ExitStack

    from ..bench.serve import render, run_serve_bench
    from ..bench.tempdb import temporary_postgres

    with ExitStack() as stack:
        pg = stack.enter_context(temporary_postgres()) if compare_postgres else None
        report = run_serve_bench(clients=_counts(clients), requests=requests, users=users,
                                 items=items, embedder=embedder, postgres=pg, redis=redis,
                                 in_process=in_process, settings=_settings(memory_settings))
    click.echo(render(report))
    write_json(report, json_out)


@bench.command()
@click.option("--data", required=True, type=click.Path(exists=True, file_okay=False),
              help="The bench-data directory (locomo/, madial/, longmemeval/).")
@click.option("--messages", default=200, show_default=True, help="Messages per set.")
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--batch", "batches", default=None,
              help="embed_batch values to compare (e.g. 8,16,32,64); default: the setting.")
@click.option("--paths", default=",".join(("import", "import+extract", "chat", "chat+extract")),
              show_default=True, help="Write paths to time.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def ingest(data, messages, embedder, batches, paths, json_out) -> None:
    """Messages/s through import and chat adds (with and without extraction) for short en
    and zh turns and long answers, beside the embedder's own texts/s on the same texts."""
    from ..bench.ingest import PATHS, render, run_ingest

    chosen = tuple(p.strip() for p in paths.split(",") if p.strip())
    if not chosen or set(chosen) - set(PATHS):
        raise click.BadParameter(f"paths are some of {', '.join(PATHS)}", param_hint="--paths")
    reports = [run_ingest(data, messages=messages, embedder=embedder, paths=chosen, batch=b)
               for b in (_counts(batches) if batches else [None])]
    for report in reports:
        click.echo(render(report))
    write_json(reports[0] if len(reports) == 1 else {"benchmark": "ingest", "runs": reports}, json_out)



@bench.command("forget-isolation")
@click.option("--clients", default=4, show_default=True, help="Tenant A's concurrent clients.")
@click.option("--seconds", default=15.0, show_default=True,
              help="Length of each phase (A alone, A beside B's forget loop).")
@click.option("--users", default=4, show_default=True, help="Tenant A's users.")
@click.option("--items", default=5000, show_default=True, help="Memory items seeded per user of A.")
@click.option("--erase-within", default=20.0, show_default=True,
              help="The server's erase_within_s: the forgotten bytes must leave the files by then "
                   "(+ 5 s + the compaction's time).")
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def forget_isolation(clients, seconds, users, items, erase_within, embedder, json_out) -> None:
    """One tenant's p50/p95 alone and beside another tenant's key forgetting a user in a
    loop (a `memstrata serve` subprocess on SQLite), and the forgotten bytes gone from the
    .db/-wal/-shm files by the stated deadline."""
    import shlex
    import sys

    from ..bench.forget_isolation import render, run_forget_isolation

    report = run_forget_isolation(clients=clients, seconds=seconds, users=users, items=items,
                                  erase_within=erase_within, embedder=embedder)
    command = "memstrata bench " + shlex.join(sys.argv[sys.argv.index("forget-isolation"):]) \
        if "forget-isolation" in sys.argv else "memstrata bench forget-isolation"
    click.echo(render(report, command))
    write_json(report, json_out)
    if not report["gone_by_deadline"]:
        raise click.exceptions.Exit(1)


@bench.command()
@click.option("--clients", default=32, show_default=True, help="Concurrent clients.")
@click.option("--duration", default=120.0, show_default=True, help="Seconds of load.")
@click.option("--users", default=8, show_default=True, help="Users the calls spread over.")
@click.option("--embedder", default="hash:384", show_default=True, help="Embedding provider.")
@click.option("--redis-down", default=3.0, show_default=True,
              help="Seconds Redis stays stopped before it starts again (empty).")
@click.option("--store", default=None,
              help="URL of an empty PostgreSQL database with pgvector (default: a temporary "
                   "one from the pgserver package).")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def chaos(clients, duration, users, embedder, redis_down, store, json_out) -> None:
    """The service on PostgreSQL + Redis under mixed load (add/search/context/forget) while
    Redis restarts empty and the service is SIGKILLed and restarted: every acknowledged add
    read back, no forgotten text back, failures counted by kind and phase. Needs
    redis-server (a private one is started on a free port, without persistence)."""
    from contextlib import ExitStack

    from ..bench.chaos import render, run_chaos
    from ..bench.tempdb import temporary_postgres

    with ExitStack() as stack:
        pg = store or stack.enter_context(temporary_postgres())
        report = run_chaos(pg, clients=clients, duration=duration, users=users, embedder=embedder,
                           redis_down_s=redis_down)
    click.echo(render(report))
    write_json(report, json_out)
    checks = report["checks"]
    if (checks["read_back"] != checks["acknowledged_adds"]
            or checks["in_export"] != checks["acknowledged_adds"]
            or checks["back_in_export"] or checks["back_in_search"] or checks["back_in_session_log"]):
        raise click.ClickException("acknowledged adds lost or forgotten text back (see above)")


@bench.command()
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--chars", default=100_000, show_default=True, help="Length of the hostile query "
              "and of the Chinese message.")
@click.option("--tool-bytes", default=1_000_000, show_default=True,
              help="Size of the hostile tool result.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False),
              help="Also write the report as JSON to this file.")
@handle_errors
def hostile(embedder, chars, tool_bytes, json_out) -> None:
    """CPU of hostile inputs (a 100k-character compound query, a 100k-character Chinese
    message, a 1 MB tool result) beside ordinary ones, caller and worker apart."""
    from ..bench.hostile import run_hostile

    report = run_hostile(embedder=embedder, chars=chars, tool_bytes=tool_bytes)
    click.echo(f"hostile inputs ({report['chars']:,} chars, {report['tool_bytes']:,} byte tool "
               f"result; embedder {report['embedder']}; jobs inline):")
    click.echo("| step | baseline CPU s | hostile CPU s | hostile wall s |")
    click.echo("|---|---|---|---|")
    for step, row in report["cases"].items():
        click.echo(f"| {step} | {row['baseline']['cpu_s']:.3f} | {row['hostile']['cpu_s']:.3f} | "
                   f"{row['hostile']['wall_s']:.3f} |")
    click.echo(f"worst hostile step: {report['worst_hostile_cpu_s']:.3f} s CPU")
    write_json(report, json_out)


@bench.command()
@click.option("--memdaily", default=None, type=click.Path(exists=True, file_okay=False),
              help="The memdaily/ directory: MemDaily dev trajectories as user/assistant chats.")
@click.option("--madial", default=None, type=click.Path(exists=True, file_okay=False),
              help="The madial/ directory: recall with the dialogue as the query.")
@click.option("--limit", type=int, default=100, show_default=True,
              help="MemDaily trajectories (evenly spaced over the files); 0 = all 1,500.")
@click.option("--budget", default=2000, show_default=True, help="context() token budget per question.")
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--embedding-cache", default=None, type=click.Path(dir_okay=False),
              help="SQLite file of vectors kept across runs (same scores, no re-embedding).")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def chat(memdaily, madial, limit, budget, embedder, embedding_cache, json_out) -> None:
    """Agent-style recall: MemDaily-chat (evidence in the top 5, in the context() block,
    share of assistant/filler lines, memory tokens) and MADial (dialogue as the query),
    memstrata vs BM25-only vs dense-only."""
    if not memdaily and not madial:
        raise click.UsageError("give --memdaily and/or --madial")
    report: dict = {"benchmark": "chat"}
    if memdaily:
        from ..bench.chat import run_chat

        r = run_chat(memdaily, limit=limit or None, budget=budget, embedder=embedder)
        report["memdaily_chat"] = r
        click.echo(f"MemDaily-chat: {r['questions']} questions of {r['trajectories']} trajectories, "
                   f"embedder {r['embedder']}")
        click.echo("| system | search R@5 |\n|---|---|")
        for name, s in r["systems"].items():
            click.echo(f"| {name} | {s['overall']['recall@5']:.3f} |")
        click.echo(f"context() at {budget} tokens: evidence in the block {r['context_hit']:.3f}; "
                   f"assistant/filler lines {r['weak_share']:.1%}; "
                   f"{r['memory_lines_per_query']} lines and {r['memory_tokens_per_query']} memory "
                   "tokens per query")
    if madial:
        from ..bench.madial import run_madial

        r = run_madial(madial, ks=[5, 10], embedder=embedder, embedding_cache=embedding_cache)
        report["madial"] = r
        click.echo(f"MADial: {r['questions']} dialogues, embedder {r['embedder']}")
        click.echo(markdown(r, [5, 10]))
        click.echo(_inversions(r))
    write_json(report, json_out)


@bench.command()
@click.option("--half", default="held", show_default=True,
              type=click.Choice(["held", "dev", "all", "unseen", "unseen2", "unseen3", "unseen4"]),
              help="Which cases: the held-back half of the change templates (the report), the "
                   "development half, both, or a hand-written set (unseen … unseen3: read while "
                   "developing; unseen4: the unseen measure).")
@click.option("--k", default=10, show_default=True, help="Hits per question.")
@click.option("--limit", type=int, default=None, help="Only the first N cases.")
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--store", default=None, help="Store URL (default: a temporary SQLite file).")
@click.option("--longmemeval", default=None, type=click.Path(exists=True, dir_okay=False),
              help="longmemeval_s_dev60.json: also its knowledge-update questions (with extraction).")
@click.option("--lme-limit", type=int, default=None,
              help="Only the first N knowledge-update questions (~480 turns each to embed).")
@click.option("--embedding-cache", default=None, type=click.Path(dir_okay=False),
              help="SQLite file of vectors kept across runs (LongMemEval part).")
@click.option("--skip-suite", is_flag=True, help="Only the LongMemEval part.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def updates(half, k, limit, embedder, store, longmemeval, lme_limit, embedding_cache, skip_suite,
            json_out) -> None:
    """Knowledge updates: the generated bilingual suite (current value at top 1, stale
    above current, current in context(), ill-formed items) beside BM25-only and dense-only;
    with --longmemeval, LongMemEval_S dev knowledge-update (latest evidence above stale)."""
    from ..bench.updates import markdown as updates_markdown
    from ..bench.updates import run_longmemeval_updates, run_updates

    report: dict = {}
    if not skip_suite:
        report = run_updates(half=half, store=store, embedder=embedder, limit=limit, k=k)
        click.echo(f"updates ({report['half']} half): {report['cases']} cases, embedder "
                   f"{report['embedder']}")
        click.echo(updates_markdown(report))
    if longmemeval:
        lme = run_longmemeval_updates(longmemeval, limit=lme_limit, embedder=embedder,
                                      embedding_cache=embedding_cache)
        click.echo(f"LongMemEval_S dev knowledge-update: {lme['questions']} questions, the asked-"
                   f"about state's evidence above the other one (latest for a question about now, "
                   f"k={lme['k']}): "
                   + ", ".join(f"{s} {v:.3f}" for s, v in lme["asked_above_other"].items()))
        report["longmemeval"] = lme
    write_json(report, json_out)


@bench.command()
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False),
              help="longmemeval_s_dev60.json.")
@click.option("--k", "ks", default="5,10", show_default=True, help="Comma-separated k values.")
@click.option("--limit", type=int, default=None,
              help="Only N questions, evenly spaced (each has ~500 turns to embed).")
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--embedding-cache", default=None, type=click.Path(dir_okay=False),
              help="SQLite file of vectors kept across runs (same scores, no re-embedding).")
@click.option("--store", default=None,
              help="Store URL to import into and keep (default: a temporary SQLite file); a "
                   "later run on it only searches the haystacks already imported.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def longmemeval(data, ks, limit, embedder, embedding_cache, store, json_out) -> None:
    """LongMemEval_S: turn recall@k over has_answer turns and session recall_any/all@k,
    per question type, memstrata vs BM25-only vs dense-only."""
    from ..bench.longmemeval import run_longmemeval

    ks = _ks(ks)
    report = run_longmemeval(data, ks=ks, limit=limit, embedder=embedder,
                             embedding_cache=embedding_cache, store=store)
    cache = report["embedding_cache"]
    click.echo(f"LongMemEval_S: {report['questions']} questions, embedder {report['embedder']}"
               + (f" (embedding cache {cache['path']}: {cache['hits']} hits, {cache['misses']} "
                  "embedded)" if cache else ""))
    keys = [f"{m}@{k}" for m in ("turn_recall", "session_any", "session_all") for k in ks]
    click.echo("| system | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys))
    for name, s in report["systems"].items():
        click.echo(f"| {name} | " + " | ".join(f"{s['overall'].get(k, 0):.3f}" for k in keys) + " |")
    write_json(report, json_out)


@bench.command("train-ranker")
@click.option("--data", required=True, type=click.Path(exists=True, file_okay=False),
              help="The bench-data/ directory (locomo/, madial/, memdaily/ under it).")
@click.option("--workdir", required=True, type=click.Path(file_okay=False),
              help="Where the imported stores and the collected features are kept between runs.")
@click.option("--datasets", default=",".join(("locomo", "madial", "memdaily")), show_default=True)
@click.option("--memdaily-limit", default=100, show_default=True,
              help="MemDaily trajectories (evenly spaced over the files).")
@click.option("--l2", default=1.0, show_default=True, help="L2 penalty of the logistic regression.")
@click.option("--seed", default=0, show_default=True, help="Recorded; the fit itself has no randomness.")
@click.option("--embedder", default=None, help="Embedding provider (default local:e5-small).")
@click.option("--embedding-cache", default=None, type=click.Path(dir_okay=False),
              help="SQLite file of vectors kept across runs.")
@click.option("--write/--no-write", default=True, show_default=True,
              help="Write the weights fitted on every row to memstrata/retrieval/ranker.json.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False))
@handle_errors
def train_ranker(data, workdir, datasets, memdaily_limit, l2, seed, embedder, embedding_cache,
                 write, json_out) -> None:
    """Learn the relevance score on the dev splits: the leave-one-dataset-out table
    (ranker vs BM25-only vs dense-only), LoCoMo trained without conversations 3-4 and
    scored on them, and the shipped weights."""
    from ..bench.ranker import collect, train
    from ..retrieval.rank import RANKER_FILE

    names = tuple(n.strip() for n in datasets.split(",") if n.strip())
    rows = collect(data, workdir, datasets=names, memdaily_limit=memdaily_limit,
                   embedder=embedder, embedding_cache=embedding_cache)
    report = train(rows, l2=l2, seed=seed, write=RANKER_FILE if write else None)
    click.echo("| left out | questions | ranker R@5 | bm25 R@5 | dense R@5 | ranker R@10 | "
               "bm25 R@10 | dense R@10 | ECE |\n|---|---|---|---|---|---|---|---|---|")
    rows_out = dict(report["leave_one_dataset_out"])
    if "locomo_conv3_4" in report:
        rows_out["locomo conv 3-4"] = report["locomo_conv3_4"]
    for name, r in rows_out.items():
        click.echo(f"| {name} | {r['questions']} | {r['ranker_r5']:.3f} | {r['bm25_r5']:.3f} | "
                   f"{r['dense_r5']:.3f} | {r['ranker_r10']:.3f} | {r['bm25_r10']:.3f} | "
                   f"{r['dense_r10']:.3f} | {r['ece']:.3f} |")
    click.echo("weights: " + json.dumps(report["weights"]))
    write_json(report, json_out)


@bench.command()
@click.option("--results", default="docs/results", show_default=True,
              type=click.Path(file_okay=False),
              help="The folder of JSON reports the benches wrote (--json), and published.json "
                   "with the figures other retrievers published.")
@click.option("--out", default="docs/images", show_default=True, type=click.Path(file_okay=False),
              help="Where the charts are written (bench-*.svg; existing ones are replaced).")
@handle_errors
def plot(results, out) -> None:
    """The benchmark charts of the docs (SVG): memstrata beside BM25-only, dense-only and the
    published figures on each dataset, knowledge-base Hit@5, search latency and knowledge
    updates, each drawn from its results files. A chart whose files are missing is skipped
    and named; run from the repository root to refresh docs/images/."""
    from ..bench.plot import plot as draw

    written = draw(results, out, progress=click.echo)
    click.echo(f"{len(written)} charts written to {out}")
