"""``memstrata kb``: the knowledge base — add documents, list, search, remove, review."""

from __future__ import annotations

import click

from .main import echo_json, open_memory, store_options
from .main_helpers import handle_errors

__all__ = ["kb"]


def _handle(memory, agent_id, user_id):
    """The shared knowledge base of the namespace, or (with --user) a user's view."""
    if user_id:
        return memory.user(user_id, agent=agent_id).kb
    return memory.knowledge(agent_id=agent_id)


def _where(private: bool, user_id: str | None) -> bool:
    if private and not user_id:
        raise click.UsageError("--private needs --user (a private knowledge base belongs to a user)")
    return private


_user = click.option("--user", "user_id", default=None,
                     help="A user: read their private knowledge base too (write it with --private).")
_private = click.option("--private", is_flag=True,
                        help="The user's private knowledge base instead of the shared one.")


@click.group()
def kb() -> None:
    """The knowledge base: documents the agent answers from (shared by the namespace's
    users, or private to one user)."""


@kb.command("add")
@store_options
@_user
@_private
@click.option("--tag", "tags", multiple=True, help="A tag for every document added (repeatable).")
@click.option("--reviewed", "last_reviewed", default=None,
              help="When the documents were last reviewed (ISO-8601).")
@click.option("--id", "doc_id", default=None, help="The document id (one file only; default: "
                                                      "its path relative to the folder, or its name).")
@click.option("--format", "fmt", type=click.Choice(["auto", "text", "markdown", "html", "pdf"]),
              default="auto", show_default=True)
@click.option("--chunk-chars", type=int, default=None, help="Longest chunk (default: kb_chunk_chars).")
@click.option("--keep-duplicates", is_flag=True, help="Ingest documents that duplicate stored ones.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON result per document.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@handle_errors
def kb_add(store, embedder, agent_id, user_id, private, tags, last_reviewed, doc_id, fmt,
           chunk_chars, keep_duplicates, as_json, paths) -> None:
    """Add (or update) documents: files, or every Markdown/text/HTML/PDF file under a
    folder. Only the chunks that changed are re-embedded."""
    if doc_id and len(paths) > 1:
        raise click.UsageError("--id names one document; give one file")
    with open_memory(store, embedder) as memory:
        handle = _handle(memory, agent_id, user_id)
        results = []
        for path in paths:
            results += handle.add(path, tags=tags, private=_where(private, user_id),
                                  last_reviewed=last_reviewed, doc_id=doc_id, format=fmt,
                                  duplicates="keep" if keep_duplicates else "skip",
                                  max_chars=chunk_chars, progress=not as_json)
    if as_json:
        echo_json([r.to_dict() for r in results])
        return
    for r in results:
        extra = f" of {r.duplicate_of} ({r.similarity:.2f})" if r.duplicate_of else ""
        click.echo(f"{r.status:<14} {r.doc_id}  {r.chunks} chunks ({r.added} new, {r.removed} "
                   f"removed, {r.kept} kept){extra}")
    total = {s: sum(1 for r in results if r.status == s) for s in ("added", "updated", "unchanged")}
    total |= {s: n for s in ("duplicate", "near_duplicate", "empty")
              if (n := sum(1 for r in results if r.status == s))}
    click.echo(f"{len(results)} document(s): " + ", ".join(f"{n} {s}" for s, n in total.items()))


@kb.command("list")
@store_options
@_user
@click.option("--tag", "tags", multiple=True, help="Only documents with this tag (repeatable: all of them).")
@click.option("--source", "sources", multiple=True, help="Only documents from this source (repeatable).")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def kb_list(store, embedder, agent_id, user_id, tags, sources, as_json) -> None:
    """List documents: id, chunks, title, tags, last reviewed."""
    with open_memory(store, embedder) as memory:
        docs = _handle(memory, agent_id, user_id).list(tags=tags, sources=sources)
    if as_json:
        echo_json([d.to_dict() for d in docs])
        return
    if not docs:
        click.echo("no documents")
    for d in docs:
        reviewed = d.last_reviewed.date().isoformat() if d.last_reviewed else "-"
        owner = " (private)" if d.owner else ""
        click.echo(f"{d.id}{owner}  {d.chunk_count} chunks  {d.title[:60]!r}  tags={','.join(d.tags) or '-'}"
                   f"  reviewed={reviewed}")


@kb.command("search")
@store_options
@_user
@click.option("-k", default=5, show_default=True, help="Number of chunks.")
@click.option("--tag", "tags", multiple=True, help="Only chunks with this tag (repeatable: all of them).")
@click.option("--source", "sources", multiple=True, help="Only chunks from this source (repeatable).")
@click.option("--doc", "documents", multiple=True, help="Only chunks of this document (repeatable).")
@click.option("--min-score", type=float, default=None, help="Leave out chunks scoring under this.")
@click.option("--mode", type=click.Choice(["hybrid", "lexical", "dense"]), default="hybrid",
              show_default=True)
@click.option("--documents", "by_document", is_flag=True, help="Rank documents instead of chunks.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON with score parts.")
@click.argument("query")
@handle_errors
def kb_search(store, embedder, agent_id, user_id, k, tags, sources, documents, min_score, mode,
              by_document, as_json, query) -> None:
    """Search the knowledge base (hybrid: vector + BM25); hits show their heading path."""
    with open_memory(store, embedder) as memory:
        handle = _handle(memory, agent_id, user_id)
        options = dict(tags=tags, sources=sources, documents=documents, min_score=min_score, mode=mode)
        if by_document:
            found = handle.search_documents(query, k=k, **options)
            if as_json:
                echo_json([d.to_dict() for d in found])
                return
            for rank, d in enumerate(found, 1):
                click.echo(f"{rank:>2}. {d.score:.3f}  {d.document.id}  {d.document.title[:70]!r}  "
                           f"({len(d.hits)} matching chunks)")
            if not found:
                click.echo("no hits")
            return
        hits = handle.search(query, k=k, **options)
    if as_json:
        echo_json([h.to_dict() for h in hits])
        return
    if not hits:
        click.echo("no hits")
    for rank, hit in enumerate(hits, 1):
        p = hit.parts
        click.echo(f"{rank:>2}. {hit.score:.3f}  [{hit.label}] {' '.join(hit.content.split())[:160]}")
        click.echo(f"      doc={hit.doc_id} chunk={hit.id} dense_rank={p.dense_rank} "
                   f"bm25_rank={p.lexical_rank}{' stale' if hit.stale else ''}"
                   f"{' +' + str(len(hit.expanded)) + ' neighbour(s)' if hit.expanded else ''}")


@kb.command("remove")
@store_options
@_user
@_private
@click.option("--all", "everything", is_flag=True, help="Remove every document.")
@click.argument("doc_ids", nargs=-1)
@handle_errors
def kb_remove(store, embedder, agent_id, user_id, private, everything, doc_ids) -> None:
    """Remove documents and every trace of them (chunks, index, vectors), then compact
    the store so their bytes leave the file."""
    if not doc_ids and not everything:
        raise click.UsageError("name the documents to remove, or pass --all")
    with open_memory(store, embedder) as memory:
        handle = _handle(memory, agent_id, user_id)
        where = _where(private, user_id)
        if everything:
            count = handle.clear(private=where)
            click.echo(f"removed {count} document(s)")
        for doc_id in doc_ids:
            click.echo(f"removed {doc_id} ({handle.remove(doc_id, private=where)} chunks)")
        memory.compact()


@kb.command("stale")
@store_options
@_user
@click.option("--min-recalls", type=int, default=None,
              help="Recalls without a use (default: the kb_stale_recalls setting).")
@click.option("--limit", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def kb_stale(store, embedder, agent_id, user_id, min_recalls, limit, as_json) -> None:
    """Chunks often put into contexts and never used by the reply: review, rewrite or
    remove them (search already ranks them lower)."""
    with open_memory(store, embedder) as memory:
        chunks = _handle(memory, agent_id, user_id).stale(min_recalls=min_recalls, limit=limit)
    if as_json:
        echo_json([c.to_dict() for c in chunks])
        return
    if not chunks:
        click.echo("no stale chunks")
    for c in chunks:
        path = " › ".join(c.heading_path) or "-"
        click.echo(f"recalled {c.recalled:>4}, used 0  {c.doc_id} [{path}] {' '.join(c.text.split())[:100]}")
