"""What is indexed, written in one place: the index document of a turn and of an item.

:func:`turn_doc` and :func:`item_doc` are the only builders of
:class:`~memstrata.stores.base.IndexDoc` values, so "does this change need re-indexing?"
is answered by comparing documents (:meth:`IndexDoc.same_entry`), never by a list of
fields kept by hand. :class:`Indexer` writes them through the store's search-index seam,
embedding through the store's vector cache (:func:`embed_cached`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import Literal, Protocol

import numpy as np

from ..providers.embedders import Embedder, content_hash
from ..stores.base import IndexDoc, MessageLog, SearchIndex, VectorCache
from ..stores.knowledge import KnowledgeChunk
from ..types import Layer, MemoryItem, Message, Role, Scope
from .documents import (RESTATES_TAG, SOURCE_TAG, chunk_texts, item_texts, speaker_tags, turn_tags,
                        window_dense_text, window_texts)

__all__ = ["Indexer", "embed_cached", "embed_uncached", "cache_partition", "cache_key", "turn_doc",
           "item_doc", "chunk_doc", "turn_dense_texts"]

log = logging.getLogger("memstrata.index")


def cache_partition(scope: Scope) -> str:
    """The embedding-cache partition of a scope: its tenant (namespace) and user. A text
    is cached once per user; no user's write or search is sped up by another's."""
    return f"{scope.namespace}\x00{scope.user_id}"


def cache_key(scope: Scope, text: str, kind: Literal["query", "passage"] = "passage") -> str:
    """The store's embedding-cache key of ``text`` for ``scope``."""
    return content_hash(text, kind, cache_partition(scope))


def embed_cached(store: VectorCache, embedder: Embedder, scope: Scope, texts: Sequence[str],
                 kind: Literal["query", "passage"] = "passage") -> np.ndarray:
    """Embed ``texts``, reusing vectors cached in the store by ``scope``'s partition and
    content hash (:func:`cache_partition`)."""
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    hashes = [cache_key(scope, t, kind) for t in texts]
    cached = store.cached_vectors(embedder.name, sorted(set(hashes)))
    missing = sorted({h: t for h, t in zip(hashes, texts) if h not in cached}.items())
    if missing:
        vectors = embedder.embed([t for _, t in missing], kind=kind)
        fresh = {h: vectors[i] for i, (h, _) in enumerate(missing)}
        store.cache_vectors(embedder.name, fresh)
        cached.update(fresh)
    return np.stack([cached[h] for h in hashes]).astype(np.float32)


def embed_uncached(store: VectorCache, embedder: Embedder,
                   texts: Sequence[tuple[Scope, str]], *, batch: int,
                   kind: Literal["query", "passage"] = "passage",
                   keep: "Callable[[Scope, dict[str, np.ndarray]], None] | None" = None,
                   progress: Callable[[int], object] | None = None) -> int:
    """Put the vectors of ``(scope, text)`` pairs of any users into the store's cache,
    embedding the ones not cached yet — each distinct text once — ``batch`` texts per
    call, each batch's vectors written as it is done (by ``keep(scope, vectors)`` per
    scope when given, else straight into the cache); ``progress(n)`` hears of each
    text done (the cached ones first). Returns how many texts were embedded. The write
    path batches here across jobs, sessions and users; the :func:`embed_cached` of each
    job or session then finds its vectors cached."""
    keyed = {cache_key(scope, text, kind): (scope, text) for scope, text in texts}
    if not keyed:
        return 0
    cached = store.cached_vectors(embedder.name, sorted(keyed))
    missing = [(h, keyed[h]) for h in sorted(keyed) if h not in cached]
    if progress is not None:
        progress(len(texts) - len(missing))
    size = max(1, batch)
    for start in range(0, len(missing), size):
        chunk = missing[start:start + size]
        vectors = embedder.embed([text for _, (_, text) in chunk], kind=kind)
        if keep is None:
            store.cache_vectors(embedder.name, {h: vectors[i] for i, (h, _) in enumerate(chunk)})
        else:
            by_scope: dict[Scope, dict[str, np.ndarray]] = {}
            for i, (h, (scope, _)) in enumerate(chunk):
                by_scope.setdefault(scope, {})[h] = vectors[i]
            for scope, fresh in by_scope.items():
                keep(scope, fresh)
        if progress is not None:
            progress(len(chunk))
    return len(missing)


def turn_dense_texts(turns: Sequence[Message], ids: Collection[str]) -> list[str]:
    """The dense texts (what a vector is embedded from) of the turns of ``turns`` — one
    session's, in order, system turns included or not — whose id is in ``ids``."""
    kept = [m for m in turns if m.role is not Role.SYSTEM]
    return [window_dense_text(kept, i) for i, m in enumerate(kept) if m.id in ids]


def turn_doc(turn: Message, texts: tuple[str, str, str, str], session_id: str,
             vector: np.ndarray | None = None, tags: tuple[str, ...] | None = None) -> IndexDoc:
    """The index document of a raw turn from its :func:`window_texts` and
    :func:`turn_tags`; without a ``vector`` the store keeps the one it has."""
    display, body, context, _ = texts
    return IndexDoc(id=turn.id, layer=Layer.EPISODIC, text=display, body=body, context=context,
                    created_at=turn.created_at, session_id=session_id,
                    tags=speaker_tags(turn) if tags is None else tags, vector=vector)


def item_doc(item: MemoryItem, vector: np.ndarray | None = None) -> IndexDoc:
    """The index document of a memory item, dated when it was said (a fact extracted
    today from a conversation of last month is as old as that conversation)."""
    display, body, context, _ = item_texts(item)
    return IndexDoc(id=item.id, layer=Layer.SEMANTIC, text=display, body=body, context=context,
                    created_at=item.said_at, session_id=item.source_session_id,
                    kind=item.kind.value, status=item.status.value,
                    tags=(*item.tags, *(f"{SOURCE_TAG}{m}" for m in item.source_message_ids),
                          *((RESTATES_TAG,) if item.source_message_ids
                            and not item.metadata.get("edited") else ())),
                    importance=item.importance, vector=vector)


def chunk_doc(chunk: KnowledgeChunk, vector: np.ndarray | None = None) -> IndexDoc:
    """The index document of a knowledge-base chunk: its document is its "session" (so
    ``Filters(session_ids=...)`` narrows to documents), its tags the document's, its
    time the document's ``last_reviewed`` (else when the chunk was ingested)."""
    display, body, context, _ = chunk_texts(chunk.text, chunk.title, chunk.heading_path)
    return IndexDoc(id=chunk.id, layer=Layer.KNOWLEDGE, text=display, body=body, context=context,
                    created_at=chunk.last_reviewed or chunk.created_at, session_id=chunk.doc_id,
                    tags=chunk.tags, vector=vector)


class _IndexBackend(MessageLog, SearchIndex, VectorCache, Protocol):
    """What indexing needs of a store."""


class Indexer:
    """Writes index documents for turns and items through one store and one embedder."""

    def __init__(self, store: _IndexBackend, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder

    def index_item(self, scope: Scope, item: MemoryItem) -> None:
        """(Re)index an item: its text, slots, status and importance, and its vector."""
        vector = embed_cached(self.store, self.embedder, scope, [item_texts(item)[3]])[0]
        self.store.index(scope, [item_doc(item, vector)])

    def needs_reindex(self, old: MemoryItem | None, new: MemoryItem) -> bool:
        """Whether ``new`` changes what the index holds for the item (derived from the
        documents, so a new indexed field can never be forgotten here)."""
        return old is None or not item_doc(old).same_entry(item_doc(new))

    def index_turns(self, scope: Scope, session_id: str, stored: Sequence[Message], *,
                    vectors: bool = True) -> None:
        """Index new turns, and refresh the two turns before them: their context field
        holds the next two turns, which have just arrived (their vectors stay).

        ``vectors=False`` indexes the words only (what ``add()`` does when the turns'
        extraction job will embed them in the background)."""
        if not stored:
            return
        first = stored[0].seq
        back = min(first, 6)  # two turns for context, two more for the refreshed turns' context
        earlier = self.store.get_messages(scope, session_id, start=first - back, limit=back) if back else []
        turns = [m for m in earlier + list(stored) if m.role is not Role.SYSTEM]
        new_ids = {m.id for m in stored}
        fresh = [i for i, m in enumerate(turns) if m.id in new_ids]
        if not fresh:
            return
        texts = [window_texts(turns, i) for i in fresh]
        embedded = embed_cached(self.store, self.embedder, scope, [t[3] for t in texts]) if vectors else None
        out = [turn_doc(turns[i], t, session_id, embedded[j] if embedded is not None else None,
                        turn_tags(turns, i))
               for j, (i, t) in enumerate(zip(fresh, texts))]
        out += [turn_doc(turns[i], window_texts(turns, i), session_id, tags=turn_tags(turns, i))
                for i in range(max(0, fresh[0] - 2), fresh[0])]
        self.store.index(scope, out)
        log.debug("indexed %d turn(s) of %r/%s (vectors: %s)", len(fresh), scope.user_id,
                  session_id, vectors)

    def embed_turns(self, scope: Scope, session_id: str, stored: Sequence[Message]) -> None:
        """Give stored turns their vectors: a turn ``add()`` indexed by its words gets
        only its vector (its words are not analysed again — a 100,000-character message
        costs its tokenizer once); a turn not indexed yet is indexed in full."""
        if not stored:
            return
        indexed = self.store.doc_info(scope, [m.id for m in stored])
        if any(m.id not in indexed and m.role is not Role.SYSTEM for m in stored):
            self.index_turns(scope, session_id, stored)
            return
        first = stored[0].seq
        back = min(first, 6)  # the turns before, as index_turns reads them
        earlier = self.store.get_messages(scope, session_id, start=first - back, limit=back) if back else []
        turns = [m for m in earlier + list(stored) if m.role is not Role.SYSTEM]
        fresh = [i for i, m in enumerate(turns) if m.id in indexed]
        vectors = embed_cached(self.store, self.embedder, scope, [window_dense_text(turns, i) for i in fresh])
        self.store.set_vectors(scope, {turns[i].id: vectors[j] for j, i in enumerate(fresh)})

    def index_chunks(self, scope: Scope, chunks: Sequence[KnowledgeChunk], *,
                     vectors: bool = True) -> None:
        """(Re)index knowledge-base chunks in a knowledge base's scope; ``vectors=False``
        rewrites the words and fields only (the stored vectors stay)."""
        texts = [chunk_texts(c.text, c.title, c.heading_path)[3] for c in chunks]
        embedded = embed_cached(self.store, self.embedder, scope, texts) if vectors and chunks else None
        self.store.index(scope, [chunk_doc(c, embedded[i] if embedded is not None else None)
                                 for i, c in enumerate(chunks)])

    def refresh_session(self, scope: Scope, session_id: str,
                        messages: Sequence[Message] | None = None, *,
                        reembed: Collection[str] = ()) -> None:
        """Rebuild the words of every turn of a session (after turns were deleted: their
        neighbours carry the deleted words in their context field). Vectors stay, but
        those of the turns in ``reembed`` (whose dense text embedded a deleted turn) are
        embedded again. ``messages`` are the session's turns when they are not all in
        the main store's log (a Redis session holds the newest)."""
        every = self.store.get_messages(scope, session_id) if messages is None else messages
        kept = [m for m in every if m.role is not Role.SYSTEM]
        texts = [window_texts(kept, i) for i in range(len(kept))]
        again = [i for i, m in enumerate(kept) if m.id in reembed]
        vectors = embed_cached(self.store, self.embedder, scope, [texts[i][3] for i in again]) \
            if again else None
        fresh = {i: vectors[j] for j, i in enumerate(again)} if vectors is not None else {}
        self.store.index(scope, [turn_doc(m, texts[i], session_id, fresh.get(i), turn_tags(kept, i))
                                 for i, m in enumerate(kept)])
