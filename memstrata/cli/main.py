"""The ``memstrata`` command line.

Every command takes ``--store`` and ``--embedder`` (or ``MEMSTRATA_STORE`` /
``MEMSTRATA_EMBEDDER``) and prints one line on error, exiting with status 1 (2 for bad
usage). ``--json`` prints machine-readable output where it makes sense.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..config import SCORING_PRESETS
from ..errors import ValidationError
from ..types import Kind, Status, check_id
from .main_helpers import SafeFormatter, echo, handle_errors

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
    # JSON escapes C0 controls itself, not C1 ones (\x9b is a terminal's CSI) nor DEL:
    # outside strings there are none, inside \u escapes keep the value the same
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    click.echo(re.sub("[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text))


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
    handler = logging.StreamHandler()
    handler.setFormatter(SafeFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
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
    echo(f"stored {result.message_ids[0]} in session {result.session_id}")


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
    echo(f"remembered {item.id}")


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
        echo("no hits")
    for rank, hit in enumerate(hits, 1):
        p = hit.parts
        echo(f"{rank:>2}. {hit.score:.3f}  [{hit.layer.value}"
                   f"{'/' + hit.kind.value if hit.kind else ''}] {hit.text[:120]}")
        echo(f"      sim={p.similarity:.3f} dense_rank={p.dense_rank} "
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
    echo(f"{len(sessions)} session(s), {sum(s.message_count for s in sessions)} message(s); "
               f"{len(items)} item(s)")
    for item in items:
        echo(f"{item.id}  {item.kind.value:<11} v{item.version} {item.status.value:<10} "
                   f"conf={item.confidence:.2f}  {item.content[:100]}")


@cli.command()
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--json", "as_json", is_flag=True, help="Print the versions as JSON.")
@click.argument("item_id")
@handle_errors
def history(store, embedder, agent_id, user_id, as_json, item_id) -> None:
    """Show every version of a memory item: who changed what, when and why."""
    with open_memory(store, embedder) as memory:
        versions = memory.user(user_id, agent=agent_id).history(item_id)
    if as_json:
        echo_json([v.to_dict() for v in versions])
        return
    for v in versions:
        after = (v.after or {}).get("content", "")
        echo(f"v{v.version} {v.at.isoformat(timespec='seconds')} {v.op:<9} by {v.actor}: "
             f"{v.reason} — {after}")


@cli.command()
@store_options
@click.option("--user", "user_id", required=True)
@click.argument("item_id")
@handle_errors
def delete(store, embedder, agent_id, user_id, item_id) -> None:
    """Delete a memory item for real (item, history, index entry, vector); the same as
    `memstrata forget`."""
    with open_memory(store, embedder) as memory:
        memory.delete(item_id, user_id, agent_id=agent_id)
    echo(f"deleted {item_id}")


def _show_item(item: Any) -> None:
    echo(f"{item.id}  {item.kind.value} v{item.version} {item.status.value}  "
         f"confidence {item.confidence:.2f}  importance {item.importance:.2f}")
    echo(f"  {item.content}")
    if item.attribute:
        echo(f"  {item.subject or 'user'} · {item.attribute} = {item.value}")
    echo(f"  created {item.created_at.isoformat(timespec='seconds')}, "
         f"updated {item.updated_at.isoformat(timespec='seconds')}"
         + (f", from session {item.source_session_id}" if item.source_session_id else ""))
    if item.tags:
        echo(f"  tags: {', '.join(item.tags)}")


def _show_report(report: Any) -> None:
    store = report.per_store()["store"]
    echo(f"forgot {store['items']} item(s) and {store['turns']} raw turn(s) of {report.user_id!r}; "
         f"{store['cached_vectors']} cached vector(s), {store['summaries']} summary(ies) removed")


@cli.command()
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--json", "as_json", is_flag=True, help="Print the item as JSON.")
@click.argument("item_id")
@handle_errors
def get(store, embedder, agent_id, user_id, as_json, item_id) -> None:
    """Show one memory item: its text, kind, version, slot and where it came from."""
    with open_memory(store, embedder) as memory:
        item = memory.user(user_id, agent=agent_id).get(item_id)
    if as_json:
        echo_json(item.to_dict())
        return
    _show_item(item)


@cli.command()
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--content", default=None, help="The new text.")
@click.option("--kind", type=click.Choice([k.value for k in Kind]), default=None)
@click.option("--value", default=None, help="The slot's new value (e.g. the new city).")
@click.option("--importance", type=click.FloatRange(0, 1), default=None)
@click.option("--confidence", type=click.FloatRange(0, 1), default=None)
@click.option("--status", type=click.Choice([s.value for s in Status]), default=None)
@click.option("--tag", "tags", multiple=True, help="Replace the tags with these (repeatable).")
@click.option("--reason", default="edited with the memstrata CLI", show_default=True,
              help="Why (kept in the item's history).")
@click.option("--expected-version", type=int, default=None,
              help="Refuse the edit if the item is no longer at this version.")
@click.option("--json", "as_json", is_flag=True, help="Print the new version as JSON.")
@click.argument("item_id")
@handle_errors
def update(store, embedder, agent_id, user_id, content, kind, value, importance, confidence,
           status, tags, reason, expected_version, as_json, item_id) -> None:
    """Edit a memory item: a new version, the old one kept in its history."""
    changes = {k: v for k, v in (("content", content), ("kind", kind), ("value", value),
                                 ("importance", importance), ("confidence", confidence),
                                 ("status", status)) if v is not None}
    if tags:
        changes["tags"] = list(tags)
    if not changes:
        raise ValidationError("nothing to change: give at least one of --content, --kind, --value, "
                              "--importance, --confidence, --status, --tag")
    with open_memory(store, embedder) as memory:
        item = memory.user(user_id, agent=agent_id).update(
            item_id, actor="cli", reason=reason, expected_version=expected_version, **changes)
    if as_json:
        echo_json(item.to_dict())
        return
    echo(f"updated {item.id} to v{item.version}")
    _show_item(item)


@cli.command()
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--messages", is_flag=True,
              help="Also forget the raw turns the item was learned from.")
@click.option("--json", "as_json", is_flag=True, help="Print what was removed, per store, as JSON.")
@click.argument("item_id")
@handle_errors
def forget(store, embedder, agent_id, user_id, messages, as_json, item_id) -> None:
    """Forget a memory item for real: every version, its index entry and vector (and,
    with --messages, the turns it came from)."""
    with open_memory(store, embedder) as memory:
        report = memory.user(user_id, agent=agent_id).forget(item_id, messages=messages)
    if as_json:
        echo_json(report.to_dict())
        return
    _show_report(report)


@cli.command("forget-user")
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--keep-messages", is_flag=True,
              help="Keep the raw conversation; forget only what was learned from it.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print what was removed, per store, as JSON.")
@handle_errors
def forget_user(store, embedder, agent_id, user_id, keep_messages, yes, as_json) -> None:
    """Forget everything of one user: memories, versions, profile, index, vectors and
    (unless --keep-messages) sessions and raw turns; then compact the store."""
    check_id(user_id, "user_id")
    if not yes:
        click.confirm(f"Forget everything memstrata holds about {user_id!r}? This cannot be undone",
                      abort=True)
    with open_memory(store, embedder) as memory:
        report = memory.user(user_id, agent=agent_id).forget_all(messages=not keep_messages)
        # the operator's own command, not a request others wait behind: erase the freed
        # pages now rather than leave it to a worker that may not be running
        memory.forgetter.erase_if_due(float("inf"))
    if as_json:
        echo_json(report.to_dict())
        return
    _show_report(report)


@cli.command()
@store_options
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--name", default=None, help="Set the name (a manual edit beats what was learned).")
@click.option("--role", default=None, help="Set the role or job.")
@click.option("--language", default=None, help="Set the preferred language (e.g. zh, en).")
@click.option("--goal", "goals", multiple=True, help="Set the goals (repeatable; replaces them).")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
@handle_errors
def profile(store, embedder, agent_id, user_id, name, role, language, goals, as_json) -> None:
    """Show a user's core profile (name, role, goals, current matters, preferences,
    people); with --name/--role/--language/--goal, edit it first."""
    fields: dict[str, Any] = {k: v for k, v in (("name", name), ("role", role),
                                                ("language", language)) if v is not None}
    if goals:
        fields["goals"] = list(goals)
    with open_memory(store, embedder) as memory:
        handle = memory.user(user_id, agent=agent_id)
        shown = handle.update_profile(actor="cli", **fields) if fields else handle.profile()
    if as_json:
        echo_json(shown.to_dict())
        return
    if shown.is_empty:
        echo(f"nothing is known about {user_id!r} yet")
        return
    for label, value in (("name", shown.name), ("role", shown.role), ("language", shown.language)):
        if value:
            echo(f"{label}: {value}")
    for label, values in (("goals", shown.goals), ("current", shown.current),
                          ("preferences", shown.preferences), ("people", shown.people)):
        for value in values:
            echo(f"{label}: {value}")


@cli.command("import")
@store_options
@click.option("--user", "user_id", required=True, help="User the conversation belongs to.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@handle_errors
def import_(store, embedder, agent_id, user_id, path: Path) -> None:
    """Import a conversation: JSON list of sessions, {"sessions": [...]}, or JSON Lines of
    messages with a session_id field. Run it again after an interruption: sessions already
    stored are not stored again, and only what is not indexed yet is embedded."""
    from .importing import read_sessions

    sessions = read_sessions(path)
    with open_memory(store, embedder) as memory:
        results = memory.import_conversation(sessions, user_id, agent_id=agent_id)
    again = sum(r.replayed for r in results)
    echo(f"imported {sum(len(r.messages) for r in results)} messages in {len(results)} sessions"
         + (f" ({again} of them stored by an earlier run)" if again else ""))


@cli.command()
@store_options
@click.option("--user", "user_id", required=True)
@handle_errors
def reindex(store, embedder, agent_id, user_id) -> None:
    """Rebuild a user's retrieval index from the raw log and items."""
    with open_memory(store, embedder) as memory:
        count = memory.reindex(user_id, agent_id=agent_id)
    echo(f"reindexed {count} documents")


@cli.command()
@click.option("--store", default=None, help=STORE_HELP)
@handle_errors
def migrate(store) -> None:
    """Apply pending schema migrations."""
    from ..config import Settings
    from ..stores import open_store

    with open_store(store or Settings.load().store) as opened:
        echo(f"{opened.url}: schema up to date")


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
