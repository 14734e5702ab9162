"""``memstrata export`` and ``memstrata restore``: move memory between stores.

``memstrata import`` reads conversations (sessions of messages) and indexes them as new;
``restore`` reads what ``export`` wrote and keeps everything as it was — ids, sequence
numbers, times, statuses, version histories. Format: :mod:`memstrata.stores.transfer`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import NotFoundError
from ..types import Scope
from .main_helpers import handle_errors

__all__ = ["export", "restore"]


@click.command()
@click.option("--store", default=None, help="Store to export (default: $MEMSTRATA_STORE or "
                                            "sqlite:///memstrata.db).")
@click.option("--user", "user_ids", multiple=True,
              help="Only this user (repeatable; default: every user).")
@click.option("--agent", "agent_id", default=None,
              help="Namespace of the --user (default: $MEMSTRATA_NAMESPACE or none).")
@click.argument("out", type=click.Path(dir_okay=False, allow_dash=True))
@handle_errors
def export(store, user_ids, agent_id, out) -> None:
    """Write users' memory to OUT as JSON Lines (`-` for stdout): sessions, messages,
    items of every status with their version history, jobs, profile versions. Restore
    with `memstrata restore`."""
    from ..config import Settings
    from ..stores import open_store
    from ..stores.transfer import export_jsonl

    settings = Settings.load(store=store)
    namespace = settings.namespace if agent_id is None else agent_id
    scopes = [Scope(u, namespace) for u in user_ids] or None
    with open_store(settings.store) as opened:
        unknown = sorted(set(scopes or ()) - set(opened.list_users()), key=lambda s: s.user_id)
        if unknown:
            raise NotFoundError(f"no memory for user(s) {', '.join(s.user_id for s in unknown)}"
                                + (f" in namespace {namespace!r}" if namespace else "")
                                + f" in {opened.url.split('@')[-1]}; nothing exported")
        if out == "-":
            counts = export_jsonl(opened, sys.stdout, scopes=scopes)
        else:
            with open(out, "w", encoding="utf-8", newline="\n") as fh:
                counts = export_jsonl(opened, fh, scopes=scopes)
    click.echo(f"exported {counts['session']} sessions, {counts['message']} messages, "
               f"{counts['item']} items ({counts['version']} versions), {counts['job']} jobs, "
               f"{counts['profile_version']} profile versions", err=out == "-")


@click.command()
@click.option("--store", default=None, help="Store to restore into (default: $MEMSTRATA_STORE "
                                            "or sqlite:///memstrata.db).")
@click.option("--embedder", default=None,
              help="Embedder to rebuild the index with (default: the one named in the export).")
@click.option("--no-reindex", is_flag=True,
              help="Only write the rows; run `memstrata reindex` per user later.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@handle_errors
def restore(store, embedder, no_reindex, path: Path) -> None:
    """Restore a `memstrata export` file into a store that does not hold its users yet,
    then rebuild their retrieval index."""
    from ..memory import Memory
    from ..stores.transfer import read_header, restore_jsonl

    with path.open(encoding="utf-8") as fh:
        header = read_header(fh, str(path))
    with Memory(store, embedder=embedder or header.get("embedder")) as memory, \
            path.open(encoding="utf-8") as fh:
        result = restore_jsonl(memory.store, fh, source=str(path))
        documents = 0
        if not no_reindex:
            for scope in result.scopes:
                documents += memory.reindex(scope.user_id, agent_id=scope.namespace)
    c = result.counts
    click.echo(f"restored {len(result.scopes)} users: {c['session']} sessions, {c['message']} "
               f"messages, {c['item']} items ({c['version']} versions), {c['job']} jobs, "
               f"{c['profile_version']} profile versions"
               + ("" if no_reindex else f"; indexed {documents} documents with {memory.embedder.name}"))
