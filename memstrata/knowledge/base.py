"""The knowledge-base engine: ingest, remove, search, and count how chunks are used.

:class:`KnowledgeBase` is shared by every user of a :class:`memstrata.Memory` (like the
retriever); it works on knowledge-base scopes (:func:`memstrata.stores.knowledge.kb_scope`).
The per-user and per-namespace surface is :class:`memstrata.knowledge.Knowledge`.

Retrieval is the memory's own hybrid engine — the :class:`~memstrata.retrieval.search.Retriever`
over the knowledge base's scope, BM25 over jieba/Snowball tokens (chunk text, and its
document title and heading path as a second field) fused with the cosine of e5 vectors —
scored by similarity alone (the age of a manual says nothing about its relevance),
then down-weighted for stale chunks (recalled often, never used) and cut at
``min_score``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
from tqdm import tqdm

from ..errors import ValidationError, shown
from ..providers.embedders import Embedder
from ..retrieval.documents import chunk_texts
from ..retrieval.indexer import Indexer, cache_key, embed_cached
from ..retrieval.request import SearchRequest
from ..retrieval.search import Mode, Retriever
from ..stores.base import Store
from ..stores.knowledge import (KnowledgeChunk, KnowledgeDocument, KnowledgeRecall, is_kb_scope,
                               kb_scope)
from ..types import Filters, Scope, ScoreParts, utcnow
from .chunking import ChunkSpec
from .ingest import IngestResult, Plan, plan
from .parse import Parsed
from .settings import KnowledgeSettings
from .usage import draws_on

__all__ = ["KnowledgeBase", "KnowledgeHit", "DocumentHit"]

log = logging.getLogger("memstrata.knowledge")


@dataclass(frozen=True, slots=True)
class KnowledgeHit:
    """One chunk found for a query. ``text`` is the chunk's text, with its neighbours
    (``expanded``: their ids) when the hit was cut mid-paragraph; ``shared`` says it
    came from the namespace's shared knowledge base (else the user's private one)."""

    chunk: KnowledgeChunk
    score: float
    parts: ScoreParts
    text: str
    kb: Scope
    shared: bool = True
    expanded: tuple[str, ...] = ()
    stale: bool = False

    @property
    def id(self) -> str:
        return self.chunk.id

    @property
    def doc_id(self) -> str:
        return self.chunk.doc_id

    @property
    def heading_path(self) -> tuple[str, ...]:
        return self.chunk.heading_path

    @property
    def source(self) -> str:
        return self.chunk.source

    @property
    def label(self) -> str:
        """Where it comes from, for a reader: "title › heading › subheading"."""
        title = self.chunk.title or self.chunk.source
        path = self.heading_path
        return " › ".join(h for h in ((title,) if title not in path[:1] else ()) + path if h)

    @property
    def content(self) -> str:
        """``text`` without the heading lines it starts with (the label names them)."""
        names = {self.chunk.title, *self.heading_path}
        parts = self.text.split("\n\n")
        while len(parts) > 1 and " ".join(parts[0].split()) in names:
            parts.pop(0)
        return "\n\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"id": self.id, "doc_id": self.doc_id, "score": self.score, "text": self.text,
                "label": self.label, "heading_path": list(self.heading_path), "source": self.source,
                "shared": self.shared, "expanded": list(self.expanded), "stale": self.stale,
                "chunk": self.chunk.to_dict(), "parts": self.parts.to_dict()}


@dataclass(frozen=True, slots=True)
class DocumentHit:
    """A document found for a query: its best chunk's score and its chunks that matched."""

    document: KnowledgeDocument
    score: float
    hits: tuple[KnowledgeHit, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"document": self.document.to_dict(), "score": self.score,
                "hits": [h.to_dict() for h in self.hits]}


class KnowledgeBase:
    """Ingestion, retrieval and usage over knowledge-base scopes of one store."""

    def __init__(self, store: Store, indexer: Indexer, embedder: Embedder,
                 settings: KnowledgeSettings | None = None) -> None:
        self.store = store
        self.indexer = indexer
        self.embedder = embedder
        self.settings = s = settings or KnowledgeSettings.from_settings()
        # The memory's engine, tuned for documents: the title/heading field has its own
        # weight, and nothing is said by a speaker.
        self.retriever = Retriever(store, embedder, replace(
            s.retriever, context_weight=s.kb_context_weight, speaker_boost=0.0))

    def spec(self, **overrides: Any) -> ChunkSpec:
        """The chunking settings, with ``max_chars``/``min_chars``/``cjk_weight`` overrides."""
        s = self.settings
        values: dict[str, Any] = {"max_chars": s.kb_chunk_chars,
                                  "min_chars": min(s.kb_min_chunk_chars, s.kb_chunk_chars),
                                  "cjk_weight": s.kb_cjk_weight}
        values.update({k: v for k, v in overrides.items() if v is not None})
        if "max_chars" in overrides and "min_chars" not in overrides:
            values["min_chars"] = min(values["min_chars"], values["max_chars"])
        return ChunkSpec(**values)

    # -- ingestion --------------------------------------------------------------------
    def plan(self, kb: Scope, parsed: Parsed, *, doc_id: str, source: str,
             tags: Sequence[str] = (), last_reviewed: datetime | None = None,
             owner: str | None = None, metadata: dict[str, Any] | None = None,
             spec: ChunkSpec | None = None, duplicates: str = "skip",
             now: datetime | None = None, pending: Sequence[KnowledgeDocument] = (),
             stored: Sequence[KnowledgeDocument] | None = None) -> Plan:
        """What ingesting ``parsed`` as ``doc_id`` would write (nothing is written).
        ``pending``: documents planned in the same batch and not yet written (a file
        that repeats one of them is a duplicate too); ``stored``: the knowledge base's
        documents when the caller has read them already (one read for a folder)."""
        _check_kb(kb)
        if not parsed.text.strip():
            raise ValidationError(f"document {shown(doc_id)} ({source or 'no source'}) has no text "
                                  "after cleaning; nothing to ingest")
        if duplicates not in ("skip", "keep"):
            raise ValidationError(f"duplicates must be 'skip' or 'keep', not {shown(duplicates)}")
        existing = self.store.list_knowledge_documents(kb, doc_ids=[doc_id], limit=1)
        before = existing[0] if existing else None
        chunks = self.store.knowledge_chunks(kb, doc_id=doc_id) if before else []
        if duplicates == "skip":
            known = self.store.list_knowledge_documents(kb, limit=10**9) if stored is None else stored
            others = [*known, *pending]
        else:
            others = []
        spec = spec or self.spec()
        draft = plan(parsed, doc_id=doc_id, source=source, tags=tags, last_reviewed=last_reviewed,
                     owner=owner, metadata=metadata or {}, spec=spec, now=now or utcnow(),
                     existing=before, existing_chunks=chunks, others=others,
                     same_text_chunks={}, duplicates=duplicates)
        if not draft.chunks:
            return draft
        hashes = sorted({c.content_hash for c in draft.chunks})
        same = {c.content_hash: c.id for c in self.store.knowledge_chunks(kb, content_hashes=hashes)
                if c.doc_id != doc_id and c.duplicate_of is None}
        if not same:
            return draft
        return plan(parsed, doc_id=doc_id, source=source, tags=tags, last_reviewed=last_reviewed,
                    owner=owner, metadata=metadata or {}, spec=spec, now=now or utcnow(),
                    existing=before, existing_chunks=chunks, others=others, same_text_chunks=same,
                    duplicates=duplicates)

    def embed_plans(self, kb: Scope, plans: Sequence[Plan], *, progress: bool = False) -> int:
        """Embed the new chunks of ``plans`` into knowledge base ``kb``'s partition of the
        vector cache, in batches, with a progress bar; returns how many chunks. Writing
        them then costs no embedding."""
        texts = [chunk_texts(c.text, c.title, c.heading_path)[3] for p in plans for c in p.embed]
        batch = max(1, self.settings.embed_batch)
        with tqdm(total=len(texts), desc="embedding chunks", unit="chunk",
                  disable=not progress or not texts, leave=False) as bar:
            for start in range(0, len(texts), batch):
                embed_cached(self.store, self.embedder, kb, texts[start:start + batch])
                bar.update(len(texts[start:start + batch]))
        return len(texts)

    def write(self, kb: Scope, draft: Plan) -> IngestResult:
        """Write a plan: the rows, the index documents of new and changed chunks and the
        deletion of the chunks that are gone (their vectors' cache rows too) — one
        transaction."""
        if draft.document is None:
            return draft.result
        gone = self.store.knowledge_chunks(kb, ids=draft.delete) if draft.delete else []
        with self.store.transaction():
            self.store.write_knowledge(kb, draft.document, draft.chunks, delete_chunks=draft.delete)
            if draft.embed:
                self.indexer.index_chunks(kb, draft.embed)
            if draft.reindex:
                self.indexer.index_chunks(kb, draft.reindex, vectors=False)
        self._forget_vectors(kb, [c for c in gone if c.id not in {x.id for x in draft.chunks}])
        log.info("knowledge %s %r: %d chunks (%d new, %d removed, %d kept)", draft.result.status,
                 draft.result.doc_id, draft.result.chunks, draft.result.added,
                 draft.result.removed, draft.result.kept)
        return draft.result

    def _forget_vectors(self, kb: Scope, chunks: Iterable[KnowledgeChunk]) -> None:
        hashes = sorted({cache_key(kb, chunk_texts(c.text, c.title, c.heading_path)[3])
                         for c in chunks})
        if hashes:
            self.store.forget_vectors(self.embedder.name, hashes)

    def remove(self, kb: Scope, doc_id: str) -> int:
        """Hard delete a document: rows, chunks, index documents, vectors and their cache
        rows, pending recalls. A chunk of another document that duplicated one of its
        chunks is indexed in its place. Returns the number of chunks deleted; the bytes
        leave the file at the next :meth:`memstrata.Memory.compact`."""
        _check_kb(kb)
        deleted = self.store.delete_knowledge_document(kb, doc_id)
        self._forget_vectors(kb, deleted)
        ids = {c.id for c in deleted}
        orphans = [c for c in self.store.knowledge_chunks(
            kb, content_hashes=sorted({c.content_hash for c in deleted})) if c.duplicate_of in ids]
        promoted: dict[str, KnowledgeChunk] = {}
        for c in orphans:  # the first duplicate of each removed chunk takes its place
            promoted.setdefault(c.content_hash, replace(c, duplicate_of=None))
        for c in orphans:
            first = promoted[c.content_hash]
            if c.id != first.id:
                promoted[c.id] = replace(c, duplicate_of=first.id)
        if promoted:
            by_doc: dict[str, list[KnowledgeChunk]] = {}
            for c in promoted.values():
                by_doc.setdefault(c.doc_id, []).append(c)
            with self.store.transaction():
                for other_id, rows in by_doc.items():
                    document = self.store.get_knowledge_document(kb, other_id)
                    self.store.write_knowledge(kb, document, rows)
                self.indexer.index_chunks(kb, [c for c in promoted.values() if c.duplicate_of is None])
        log.info("knowledge: removed %r (%d chunks)", doc_id, len(deleted))
        return len(deleted)

    def reindex(self, kb: Scope, *, progress: bool = False) -> int:
        """Rebuild the index documents and vectors of every indexed chunk from the rows
        (after a change of embedder); returns how many chunks."""
        _check_kb(kb)
        chunks = [c for d in self.store.list_knowledge_documents(kb, limit=10**9)
                  for c in self.store.knowledge_chunks(kb, doc_id=d.id) if c.duplicate_of is None]
        batch = max(1, self.settings.embed_batch)
        with tqdm(total=len(chunks), desc="reindexing chunks", unit="chunk",
                  disable=not progress or not chunks, leave=False) as bar:
            for start in range(0, len(chunks), batch):
                self.indexer.index_chunks(kb, chunks[start:start + batch])
                bar.update(len(chunks[start:start + batch]))
        return len(chunks)

    def forget_private(self, user: Scope) -> None:
        """Drop the cached embeddings of ``user``'s private knowledge base (its rows go
        with the user, in ``Store.delete_user``)."""
        private = kb_scope(user.namespace, user.user_id)
        chunks = [c for d in self.store.list_knowledge_documents(private, limit=10**9)
                  for c in self.store.knowledge_chunks(private, doc_id=d.id)]
        self._forget_vectors(private, chunks)

    # -- retrieval --------------------------------------------------------------------
    def search(self, kbs: Sequence[Scope], query: str, *, k: int = 5, tags: Sequence[str] = (),
               sources: Sequence[str] = (), documents: Sequence[str] = (),
               min_score: float | None = None, expand: bool = True, mode: Mode = "hybrid",
               shared: Scope | None = None, query_vector: np.ndarray | None = None,
               expansion: float | None = None) -> list[KnowledgeHit]:
        """The best ``k`` chunks for ``query`` across knowledge bases ``kbs``, narrowed to
        chunks with every tag in ``tags``, of any source in ``sources`` and any document
        in ``documents``; hits under ``min_score`` (default: the ``kb_min_score``
        setting) are left out. ``shared`` names the shared scope among ``kbs``;
        ``query_vector`` is the embedded query (else it is embedded here) and
        ``expansion`` overrides the query-expansion weight (0: off)."""
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1000:
            raise ValidationError(f"k must be an integer between 1 and 1000, got {shown(k)}")
        floor = self.settings.kb_min_score if min_score is None else min_score
        vector = query_vector
        if mode != "lexical" and vector is None:
            vector = self.embedder.embed([query], kind="query")[0]
        scored: list[tuple[float, KnowledgeHit]] = []
        for kb in kbs:
            _check_kb(kb)
            doc_ids = self._narrow(kb, sources, documents)
            if doc_ids is not None and not doc_ids:
                continue
            filters = Filters(session_ids=tuple(doc_ids or ()), tags=tuple(tags))
            found = self.retriever.search(
                kb, SearchRequest(query, k=max(3 * k, k + 10), filters=filters,
                                  scoring="relevance", mode=mode),
                query_vector=vector, touch=False, split=False, expansion=expansion)
            rows = {c.id: c for c in self.store.knowledge_chunks(kb, ids=[h.id for h in found.hits])}
            for hit in found.hits:
                row = rows.get(hit.id)
                if row is None:
                    continue  # deleted between the two reads
                stale = row.used == 0 and row.recalled >= self.settings.kb_stale_recalls
                weight = self.settings.kb_stale_weight if stale else 1.0
                # ranked as the engine ranks (its relative fusion), as Memory.search is;
                # the score, for min_score, stays the calibrated similarity
                order = found.orders.get(hit.id, hit.score) * weight
                scored.append((order, KnowledgeHit(row, hit.score * weight,
                                                   replace(hit.parts, boost=weight), row.text, kb,
                                                   shared=shared is None or kb == shared,
                                                   stale=stale)))
        scored = _with_neighbours(scored, self.settings.kb_neighbour_weight)
        scored.sort(key=lambda o: (-o[0], o[1].id))
        hits = [h for _, h in scored if h.score >= floor][:k]
        if expand:
            hits = self._expand(hits)
        if log.isEnabledFor(logging.DEBUG):  # DEBUG may quote content (and says so at start)
            log.debug("knowledge search %r: %d candidates -> %d hits%s", query[:80], len(scored),
                      len(hits), "".join(f"\n  {h.score:.3f} [{h.label[:40]}] {h.chunk.text[:60]}"
                                         for h in hits[:5]))
        else:  # ids, counts and scores only
            log.info("knowledge search (%d characters): %d candidates -> %d hits%s", len(query),
                     len(scored), len(hits), "".join(f"\n  {h.score:.3f} {h.chunk.id}" for h in hits[:5]))
        return hits

    def _narrow(self, kb: Scope, sources: Sequence[str], documents: Sequence[str]) -> list[str] | None:
        """Document ids the source/document filters allow in ``kb`` (None: no filter)."""
        if not sources:
            return list(documents) if documents else None
        ids = [d.id for d in self.store.list_knowledge_documents(kb, sources=sources, limit=10**9)]
        return [i for i in ids if not documents or i in documents]

    def _expand(self, hits: list[KnowledgeHit]) -> list[KnowledgeHit]:
        """Neighbouring-chunk expansion: a hit whose paragraph goes on in the next chunk
        (or began in the previous one) is shown with that neighbour, unless the
        neighbour is a hit of its own."""
        taken = {h.id for h in hits}
        out = []
        for hit in hits:
            c = hit.chunk
            near = {x.ordinal: x for x in self.store.knowledge_chunks(hit.kb, doc_id=c.doc_id)
                    if abs(x.ordinal - c.ordinal) == 1 and x.id not in taken}
            before, after = near.get(c.ordinal - 1), near.get(c.ordinal + 1)
            parts, extra = [c.text], []
            if before is not None and before.joins_next:
                parts.insert(0, before.text)
                extra.append(before.id)
            if after is not None and c.joins_next:
                parts.append(after.text)
                extra.append(after.id)
            taken.update(extra)
            out.append(replace(hit, text="\n".join(parts), expanded=tuple(extra)) if extra else hit)
        return out

    # -- usage --------------------------------------------------------------------------
    def recalled(self, user: Scope, session_id: str, hits: Sequence[tuple[Scope, str]],
                 query: str, at: datetime | None = None) -> None:
        """Chunks put into ``user``'s context in ``session_id``: count a recall each and
        keep them until the reply (:meth:`replied`) says whether they were used."""
        at = at or utcnow()
        with self.store.transaction():
            for kb in {kb for kb, _ in hits}:
                self.store.count_knowledge_usage(kb, [cid for s, cid in hits if s == kb], at=at,
                                                 recalled=1)
            self.store.add_knowledge_recalls(user, session_id, [KnowledgeRecall(kb, cid, query, at)
                                                                for kb, cid in hits])

    def replied(self, user: Scope, session_id: str, reply: str,
                at: datetime | None = None) -> list[str]:
        """The assistant's reply in ``session_id``: the chunks recalled for it that it
        draws on (:func:`~memstrata.knowledge.usage.draws_on`) count as used. Returns
        their ids; the pending recalls are settled either way."""
        recalls = self.store.take_knowledge_recalls(user, session_id)
        if not recalls or not reply.strip():
            return []
        at = at or utcnow()
        used: list[tuple[Scope, str]] = []
        for kb in {r.kb for r in recalls}:
            mine = [r for r in recalls if r.kb == kb]
            rows = {c.id: c for c in self.store.knowledge_chunks(kb, ids=[r.chunk_id for r in mine])}
            used += [(kb, r.chunk_id) for r in mine if r.chunk_id in rows and draws_on(
                reply, rows[r.chunk_id].text, r.query, min_share=self.settings.kb_used_overlap)]
        self.mark_used(used, at=at)
        return [cid for _, cid in used]

    def mark_used(self, chunks: Sequence[tuple[Scope, str]], at: datetime | None = None) -> None:
        """Count a use of each chunk (the explicit form of what :meth:`replied` measures)."""
        at = at or utcnow()
        with self.store.transaction():
            for kb in {kb for kb, _ in chunks}:
                self.store.count_knowledge_usage(kb, [cid for s, cid in chunks if s == kb], at=at,
                                                 used=1)


def _with_neighbours(scored: list[tuple[float, KnowledgeHit]],
                     weight: float) -> list[tuple[float, KnowledgeHit]]:
    """Neighbour-aware ordering: each candidate's ordering value plus ``weight`` times
    the best ordering value among its adjacent chunks that continue its paragraph (the
    previous chunk when it ``joins_next``, the next one when this chunk does — the
    neighbours :meth:`KnowledgeBase._expand` shows with a hit) and are candidates too.
    A paragraph cut in two keeps its two halves' evidence together: the half that
    holds the answer often shares few words with the question."""
    if weight <= 0 or not scored:
        return scored
    by_place = {(h.kb, h.doc_id, h.chunk.ordinal): (order, h) for order, h in scored}
    out = []
    for order, h in scored:
        before = by_place.get((h.kb, h.doc_id, h.chunk.ordinal - 1))
        after = by_place.get((h.kb, h.doc_id, h.chunk.ordinal + 1))
        near = [before[0]] if before is not None and before[1].chunk.joins_next else []
        near += [after[0]] if after is not None and h.chunk.joins_next else []
        out.append((order + weight * max(near, default=0.0), h))
    return out


def _check_kb(scope: Scope) -> None:
    if not is_kb_scope(scope):
        raise ValidationError(f"{scope} is a user's scope, not a knowledge base's; use kb_scope()")

