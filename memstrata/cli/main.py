"""The ``memstrata`` command line.

Every command takes ``--store`` and ``--embedder`` (or ``MEMSTRATA_STORE`` /
``MEMSTRATA_EMBEDDER``) and prints one line on error, exiting with status 1 (2 for bad
usage). ``--json`` prints machine-readable output where it makes sense.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..config import SCORING_PRESETS
from ..types import Kind
from .main_helpers import handle_errors

__all__ = ["main", "cli", "LAZY_COMMANDS"]

#: Commands whose modules load only when they run (or when ``--help`` lists them), so
#: ``memstrata add`` never imports the benchmarks: name -> "module:attribute".
LAZY_COMMANDS = {
    "bench": "memstrata.cli.bench:bench",
    "kb": "memstrata.cli.kb:kb",
    "llm": "memstrata.cli.llm:llm",
    "usage": "memstrata.cli.llm:usage",
    "worker": "memstrata.cli.maintain:worker",
    "maintain": "memstrata.cli.maintain:maintain",
    "export": "memstrata.cli.transfer:export",
    "restore": "memstrata.cli.transfer:restore",
    "serve": "memstrata.cli.serve:serve",
    "keys": "memstrata.cli.serve:keys",
    "mcp": "memstrata.cli.serve:mcp",
}


class _LazyGroup(click.Group):
    """A group whose heavier subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS and name not in self.commands:
            module, _, attribute = LAZY_COMMANDS[name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

STORE_HELP = "Storage URL (default: $MEMSTRATA_STORE or sqlite:///memstrata.db)."
EMBEDDER_HELP = "Embedding provider (default: $MEMSTRATA_EMBEDDER or local:e5-small)."


def store_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--embedder", default=None, help=EMBEDDER_HELP)(func)
    func = click.option("--store", default=None, help=STORE_HELP)(func)
    func = click.option("--agent", "agent_id", default=None,
                        help="Agent/app namespace (default: $MEMSTRATA_NAMESPACE or none).")(func)
    return func


def open_memory(store: str | None, embedder: str | None) -> Any:
    """A Memory on ``--store`` / ``--embedder`` (imported here: ``--help`` stays fast)."""
    from ..memory import Memory

    return Memory(store, embedder=embedder)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True,
              help="Log what memstrata does to stderr: -v what each job, search and write did; "
                   "-vv everything (debug).")
@click.version_option(package_name="memstrata")
def cli(verbose: int) -> None:
    """memstrata — layered long-term memory for LLM agents.

    Start with `memstrata demo`. Every command has --help.
    """
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if verbose:  # the libraries underneath stay quiet unless asked twice
        for noisy in ("httpx", "httpcore", "jieba", "urllib3"):
            logging.getLogger(noisy).setLevel(logging.DEBUG if verbose > 1 else logging.WARNING)


@cli.command()
@click.option("--keep", type=click.Path(dir_okay=False), default=None,
              help="Write the demo store to this SQLite file instead of a temporary one.")
@click.option("--embedder", default=None, help=EMBEDDER_HELP)
@handle_errors
def demo(keep: str | None, embedder: str | None) -> None:
    """Run a scripted bilingual multi-session conversation and show what is retrieved."""
    from .demo import run_demo

    run_demo(keep, embedder)


@cli.command()
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--session", "session_id", default="default", show_default=True, help="Session id.")
@click.option("--role", type=click.Choice(["user", "assistant", "system"]), default="user",
              show_default=True)
@click.option("--time", "created_at", default=None, help="Original time (ISO-8601), for imports.")
@click.argument("content")
@handle_errors
def add(store, embedder, agent_id, user_id, session_id, role, created_at, content) -> None:
    """Add one message to a session's log."""
    message: dict[str, Any] = {"role": role, "content": content}
    if created_at:
        message["created_at"] = created_at
    with open_memory(store, embedder) as memory:
        result = memory.add([message], user_id, session_id, agent_id=agent_id)
    click.echo(f"stored {result.message_ids[0]} in session {result.session_id}")


@cli.command()
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--kind", type=click.Choice([k.value for k in Kind]), default="fact", show_default=True)
@click.option("--importance", type=float, default=0.5, show_default=True)
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.argument("content")
@handle_errors
def remember(store, embedder, agent_id, user_id, kind, importance, tags, content) -> None:
    """Store a memory item directly."""
    with open_memory(store, embedder) as memory:
        item = memory.remember(content, user_id, kind=kind, importance=importance, tags=tags,
                               agent_id=agent_id)
    click.echo(f"remembered {item.id}")


@cli.command()
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("-k", default=10, show_default=True, help="Number of hits.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice([k.value for k in Kind]))
@click.option("--layer", type=click.Choice(["episodic", "semantic"]), default=None)
@click.option("--session", "session_id", default=None)
@click.option("--since", default=None, help="Only hits created at or after this ISO time.")
@click.option("--until", default=None, help="Only hits created at or before this ISO time.")
@click.option("--tag", "tags", multiple=True)
@click.option("--mode", type=click.Choice(["hybrid", "lexical", "dense"]), default="hybrid",
              show_default=True)
@click.option("--scoring", default=None,
              help=f"Scoring preset ({', '.join(SCORING_PRESETS)}; default: the scoring setting).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON with score parts.")
@click.argument("query")
@handle_errors
def search(store, embedder, agent_id, user_id, k, kinds, layer, session_id, since, until, tags,
           mode, scoring, as_json, query) -> None:
    """Search a user's turns and memories (hybrid: vector + BM25)."""
    filters: dict[str, Any] = {"kind": list(kinds), "tags": list(tags)}
    if layer:
        filters["layer"] = layer
    if session_id:
        filters["session_id"] = session_id
    if since:
        filters["since"] = since
    if until:
        filters["until"] = until
    with open_memory(store, embedder) as memory:
        hits = memory.search(query, user_id, k=k, filters=filters, agent_id=agent_id, mode=mode,
                             scoring=scoring)
    if as_json:
        echo_json([h.to_dict() for h in hits])
        return
    if not hits:
        click.echo("no hits")
    for rank, hit in enumerate(hits, 1):
        p = hit.parts
        click.echo(f"{rank:>2}. {hit.score:.3f}  [{hit.layer.value}"
                   f"{'/' + hit.kind.value if hit.kind else ''}] {hit.text[:120]}")
        click.echo(f"      sim={p.similarity:.3f} dense_rank={p.dense_rank} "
                   f"bm25_rank={p.lexical_rank} recency={p.recency:.3f} id={hit.id}")


@cli.command("list")
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice([k.value for k in Kind]))
@click.option("--all", "all_statuses", is_flag=True, help="Include superseded and inactive items.")
@click.option("--limit", default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def list_items(store, embedder, agent_id, user_id, kinds, all_statuses, limit, as_json) -> None:
    """List a user's memory items, newest first."""
    filters: dict[str, Any] = {"kind": list(kinds)}
    if all_statuses:
        filters["status"] = ["active", "superseded", "inactive", "done"]
    with open_memory(store, embedder) as memory:
        items = memory.list(user_id, filters=filters, limit=limit, agent_id=agent_id)
        sessions = memory.sessions(user_id, agent_id=agent_id)
    if as_json:
        echo_json([i.to_dict() for i in items])
        return
    click.echo(f"{len(sessions)} session(s), {sum(s.message_count for s in sessions)} message(s); "
               f"{len(items)} item(s)")
    for item in items:
        click.echo(f"{item.id}  {item.kind.value:<11} v{item.version} {item.status.value:<10} "
                   f"conf={item.confidence:.2f}  {item.content[:100]}")


@cli.command()
@store_options
@click.option("--user", "user_id", required=True)
@click.argument("item_id")
@handle_errors
def history(store, embedder, agent_id, user_id, item_id) -> None:
    """Show every version of a memory item."""
    with open_memory(store, embedder) as memory:
        for v in memory.history(item_id, user_id, agent_id=agent_id):
            after = (v.after or {}).get("content", "")
            click.echo(f"v{v.version} {v.at.isoformat(timespec='seconds')} {v.op:<9} by {v.actor}: "
                       f"{v.reason} — {after}")


@cli.command()
@store_options
@click.option("--user", "user_id", required=True)
@click.argument("item_id")
@handle_errors
def delete(store, embedder, agent_id, user_id, item_id) -> None:
    """Delete a memory item for real (item, history, index entry, vector)."""
    with open_memory(store, embedder) as memory:
        memory.delete(item_id, user_id, agent_id=agent_id)
    click.echo(f"deleted {item_id}")


@cli.command("import")
@store_options
@click.option("--user", "user_id", required=True, help="User the conversation belongs to.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@handle_errors
def import_(store, embedder, agent_id, user_id, path: Path) -> None:
    """Import a conversation: JSON list of sessions, {"sessions": [...]}, or JSON Lines of
    messages with a session_id field."""
    from .importing import read_sessions

    sessions = read_sessions(path)
    with open_memory(store, embedder) as memory:
        results = memory.import_conversation(sessions, user_id, agent_id=agent_id)
    click.echo(f"imported {sum(len(r.messages) for r in results)} messages in {len(results)} sessions")


@cli.command()
@store_options
@click.option("--user", "user_id", required=True)
@handle_errors
def reindex(store, embedder, agent_id, user_id) -> None:
    """Rebuild a user's retrieval index from the raw log and items."""
    with open_memory(store, embedder) as memory:
        count = memory.reindex(user_id, agent_id=agent_id)
    click.echo(f"reindexed {count} documents")


@cli.command()
@click.option("--store", default=None, help=STORE_HELP)
@handle_errors
def migrate(store) -> None:
    """Apply pending schema migrations."""
    from ..config import Settings
    from ..stores import open_store

    with open_store(store or Settings.load().store) as opened:
        click.echo(f"{opened.url}: schema up to date")


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
