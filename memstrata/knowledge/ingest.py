"""Planning an ingestion (pure): what a new or changed document means for the rows.

:func:`plan` takes the parsed document, what the knowledge base already holds of it
(and of its duplicates) and returns a :class:`Plan`: the document row, every chunk row,
which chunks are new (to embed and index), which changed only in their fields (index
rewritten, vector kept), which are gone. A chunk's id is derived from its document,
heading path and text, so a chunk that did not change keeps its id — and its vector,
its usage counters — when the document around it is edited.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..stores.knowledge import KnowledgeChunk, KnowledgeDocument
from .chunking import CHUNKER_VERSION, ChunkSpec, chunk
from .dedup import NEAR_DUPLICATE, signature, similarity, text_hash
from .parse import Parsed

__all__ = ["Plan", "plan", "chunk_id", "IngestResult", "STATUSES"]

#: What ingesting one document did: ``added`` (new), ``updated`` (changed chunks
#: rewritten), ``unchanged`` (nothing to do), ``duplicate`` / ``near_duplicate`` (skipped:
#: the same or nearly the same text is stored as another document), ``empty`` (a file of
#: a folder with no text after cleaning: skipped, what is stored of it stays).
STATUSES = ("added", "updated", "unchanged", "duplicate", "near_duplicate", "empty")


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What :meth:`memstrata.knowledge.Knowledge.add` did with one document."""

    doc_id: str
    source: str
    status: str
    chunks: int = 0  # chunks the document has now
    added: int = 0  # chunks new or changed, embedded and indexed
    removed: int = 0  # chunks no longer in the document, deleted
    kept: int = 0  # chunks unchanged (vectors and usage kept)
    duplicate_of: str | None = None
    similarity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"doc_id": self.doc_id, "source": self.source, "status": self.status,
                "chunks": self.chunks, "added": self.added, "removed": self.removed,
                "kept": self.kept, "duplicate_of": self.duplicate_of, "similarity": self.similarity}


@dataclass(frozen=True, slots=True)
class Plan:
    """The rows an ingestion writes: see the module docstring."""

    result: IngestResult
    document: KnowledgeDocument | None = None
    chunks: tuple[KnowledgeChunk, ...] = ()
    embed: tuple[KnowledgeChunk, ...] = ()  # new chunks: vectors and words
    reindex: tuple[KnowledgeChunk, ...] = ()  # fields changed: words only, vectors kept
    delete: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)


def chunk_id(doc_id: str, heading_path: Sequence[str], text: str, occurrence: int) -> str:
    """A chunk's id: stable while its document, heading path and text stay the same."""
    key = "\x00".join([doc_id, *heading_path, "\x01", " ".join(text.split()), str(occurrence)])
    return "kc_" + hashlib.blake2b(key.encode(), digest_size=10).hexdigest()


def _spec_key(spec: ChunkSpec) -> dict[str, Any]:
    return {"max_chars": spec.max_chars, "min_chars": spec.min_chars, "cjk_weight": spec.cjk_weight,
            "version": CHUNKER_VERSION}


def _duplicate(doc_id: str, source: str, content_hash: str, sig: tuple[int, ...],
               others: Sequence[KnowledgeDocument]) -> Plan | None:
    """A skip plan when another document holds the same text or nearly the same."""
    for other in others:
        if other.id == doc_id:
            continue
        if other.content_hash == content_hash:
            return Plan(IngestResult(doc_id, source, "duplicate", duplicate_of=other.id,
                                     similarity=1.0))
        near = similarity(sig, other.signature)
        if near >= NEAR_DUPLICATE:
            return Plan(IngestResult(doc_id, source, "near_duplicate", duplicate_of=other.id,
                                     similarity=round(near, 3)))
    return None


def _chunk_rows(parsed: Parsed, spec: ChunkSpec, document: KnowledgeDocument,
                old: Mapping[str, KnowledgeChunk],
                same_text_chunks: Mapping[str, str]) -> list[KnowledgeChunk]:
    """The document's chunk rows: the same text under the same headings keeps its id
    (and creation time); a chunk whose text is stored elsewhere, or earlier in this
    document, is marked a duplicate of that one."""
    seen: dict[tuple[tuple[str, ...], str], int] = {}
    first_of_hash: dict[str, str] = {}
    chunks: list[KnowledgeChunk] = []
    for ordinal, piece in enumerate(chunk(parsed, spec)):
        text = parsed.text[piece.start:piece.end]
        key = (piece.heading_path, " ".join(text.split()))
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        cid = chunk_id(document.id, piece.heading_path, text, occurrence)
        digest = text_hash(text)
        duplicate_of = same_text_chunks.get(digest) or first_of_hash.get(digest)
        first_of_hash.setdefault(digest, cid)
        before = old.get(cid)
        chunks.append(KnowledgeChunk(
            id=cid, doc_id=document.id, ordinal=ordinal, text=text, start=piece.start, end=piece.end,
            content_hash=digest, created_at=before.created_at if before else document.updated_at,
            heading_path=piece.heading_path, joins_next=piece.joins_next,
            duplicate_of=duplicate_of, tags=document.tags, source=document.source, title=parsed.title,
            last_reviewed=document.last_reviewed))
    return chunks


def _changes(chunks: list[KnowledgeChunk], old: Mapping[str, KnowledgeChunk],
             new_ids: set[str]) -> tuple[list[KnowledgeChunk], list[KnowledgeChunk], list[str]]:
    """``(embed, reindex, delete)``: new chunks, chunks whose fields changed (vector
    kept), and ids whose index document goes."""
    delete = [cid for cid in old if cid not in new_ids]
    embed, reindex = [], []
    for c in chunks:
        before = old.get(c.id)
        if c.duplicate_of is not None:
            if before is not None and before.duplicate_of is None:
                delete.append(c.id)  # now a duplicate: its index document goes (row rewritten)
            continue
        if before is None or before.duplicate_of is not None:
            embed.append(c)
        elif (before.tags, before.last_reviewed, before.title, before.source) != \
                (c.tags, c.last_reviewed, c.title, c.source):
            reindex.append(c)
    return embed, reindex, delete


def plan(parsed: Parsed, *, doc_id: str, source: str, tags: Sequence[str],
         last_reviewed: datetime | None, owner: str | None, metadata: Mapping[str, Any],
         spec: ChunkSpec, now: datetime, existing: KnowledgeDocument | None,
         existing_chunks: Sequence[KnowledgeChunk], others: Sequence[KnowledgeDocument],
         same_text_chunks: Mapping[str, str], duplicates: str = "skip") -> Plan:
    """Plan the ingestion of ``parsed`` as document ``doc_id``.

    ``existing``/``existing_chunks``: what is stored under ``doc_id`` (None/empty for a
    new document). ``others``: the knowledge base's other documents (their hashes and
    signatures: duplicate detection). ``same_text_chunks``: content hash → id of a chunk
    of *another* document with that text (such a chunk here is a duplicate: stored, not
    indexed). ``duplicates="keep"`` ingests a duplicate document anyway.
    """
    content_hash = text_hash(parsed.text)
    meta = {**dict(metadata), "chunking": _spec_key(spec)}
    tags = tuple(dict.fromkeys(tags))
    if existing is not None and existing.content_hash == content_hash and existing.tags == tags \
            and existing.last_reviewed == last_reviewed and existing.title == parsed.title \
            and existing.source == source and dict(existing.metadata) == meta:
        return Plan(IngestResult(doc_id, source, "unchanged", existing.chunk_count,
                                 kept=existing.chunk_count))
    sig = signature(parsed.text)
    if duplicates == "skip":
        skipped = _duplicate(doc_id, source, content_hash, sig, others)
        if skipped is not None:
            return skipped
    document = KnowledgeDocument(
        id=doc_id, title=parsed.title, source=source, format=parsed.format, text=parsed.text,
        content_hash=content_hash, created_at=existing.created_at if existing else now,
        updated_at=now, tags=tags, last_reviewed=last_reviewed, owner=owner, signature=sig,
        metadata=meta)
    old = {c.id: c for c in existing_chunks}
    chunks = _chunk_rows(parsed, spec, document, old, same_text_chunks)
    new_ids = {c.id for c in chunks}
    embed, reindex, delete = _changes(chunks, old, new_ids)
    embedded = {c.id for c in embed}
    kept = sum(1 for c in chunks if c.id in old and c.id not in embedded)
    status = "added" if existing is None else "updated"
    result = IngestResult(doc_id, source, status, len(chunks), added=len(embed),
                          removed=len([d for d in delete if d not in new_ids]), kept=kept)
    return Plan(result, replace(document, chunk_count=len(chunks)), tuple(chunks), tuple(embed),
                tuple(reindex), tuple(delete), meta)
