"""The knowledge base over HTTP: the tenant's shared documents, and a user's private ones.

The tenant's knowledge base (``/v1/kb/...``) is read by every key of the tenant and
written by ``admin`` and ``app`` keys; a user's view (``/v1/users/{user_id}/kb/...``)
searches the shared documents and that user's private ones, and writes the private ones
(the user's ordinary write rights).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import Field

from ...knowledge import Knowledge
from ..auth import Principal
from ..schemas import JsonObject, PartsOut, _In, _Out
from .common import CurrentPrincipal, Limit, Offset, Svc, UserId, audit_target, page

router = APIRouter()

DocId = Annotated[str, Path(description="The document id", examples=["router.md"],
                            min_length=1, max_length=256)]


# ---------------------------------------------------------------- schemas


class DocumentIn(_In):
    """One document to add (or update: only the chunks that changed are re-embedded)."""

    doc_id: str = Field(min_length=1, max_length=256, examples=["returns.md"])
    content: str = Field(min_length=1, description="The document: text, Markdown or HTML")
    format: Literal["auto", "text", "markdown", "html"] = "auto"
    title: str | None = Field(None, max_length=1000)
    source: str | None = Field(None, max_length=2000, description="Where it came from (a path, a URL)")
    tags: list[str] = Field(default_factory=list)
    last_reviewed: str | None = Field(None, description="ISO-8601 time it was last reviewed")
    duplicates: Literal["skip", "keep"] = "skip"


class IngestOut(_Out):
    doc_id: str
    source: str
    status: Literal["added", "updated", "unchanged", "duplicate", "near_duplicate"]
    chunks: int
    added: int
    removed: int
    kept: int
    duplicate_of: str | None
    similarity: float | None


class DocumentOut(_Out):
    id: str
    title: str
    source: str
    format: str
    content_hash: str
    tags: list[str]
    last_reviewed: str | None
    owner: str | None
    created_at: str
    updated_at: str
    chunk_count: int
    metadata: JsonObject
    chars: int
    text: str | None = None


class DocumentPage(_Out):
    data: list[DocumentOut]
    next_offset: int | None


class ChunkOut(_Out):
    id: str
    doc_id: str
    ordinal: int
    text: str
    start: int
    end: int
    created_at: str
    heading_path: list[str]
    joins_next: bool
    duplicate_of: str | None
    tags: list[str]
    source: str
    title: str
    last_reviewed: str | None
    recalled: int
    used: int
    last_recalled: str | None
    last_used: str | None


class ChunksOut(_Out):
    chunks: list[ChunkOut]


class KnowledgeHitOut(_Out):
    id: str
    doc_id: str
    score: float
    text: str
    label: str
    heading_path: list[str]
    source: str
    shared: bool
    expanded: list[str]
    stale: bool
    chunk: ChunkOut
    parts: PartsOut


class KnowledgeHitsOut(_Out):
    hits: list[KnowledgeHitOut]


class KnowledgeSearchIn(_In):
    """A knowledge-base search."""

    query: str = Field(min_length=1, max_length=20_000, examples=["退货的运费谁出？"])
    k: int = Field(5, ge=1, le=100)
    tags: list[str] = Field(default_factory=list, description="Chunks with every one of these tags")
    sources: list[str] = Field(default_factory=list, description="Chunks from any of these sources")
    documents: list[str] = Field(default_factory=list, description="Chunks of any of these documents")
    min_score: float | None = Field(None, ge=0.0, description="Leave out chunks scoring under this")
    mode: Literal["hybrid", "lexical", "dense"] = "hybrid"
    expand: bool = Field(True, description="Add the neighbour of a hit cut mid-paragraph")


class UsedIn(_In):
    chunk_ids: list[str] = Field(min_length=1, max_length=1000)


class UsedOut(_Out):
    found: int


# ---------------------------------------------------------------- helpers


def _shared(who: Principal, svc: Any, *, write: bool) -> Knowledge:
    if write:
        who.require("admin", "app")
    handle: Knowledge = svc.memory.knowledge(agent_id=who.tenant)
    return handle


def _private(who: Principal, svc: Any, user_id: str, *, write: bool) -> Knowledge:
    handle: Knowledge = who.user(svc, user_id, write=write).kb
    return handle


def _add(handle: Knowledge, body: DocumentIn, private: bool) -> dict[str, Any]:
    result = handle.add_text(body.content, doc_id=body.doc_id, source=body.source, title=body.title,
                             format=body.format, tags=body.tags, last_reviewed=body.last_reviewed,
                             duplicates=body.duplicates, private=private)
    return result.to_dict()


def _search(handle: Knowledge, body: KnowledgeSearchIn, private: bool | None) -> dict[str, Any]:
    hits = handle.search(body.query, k=body.k, tags=body.tags, sources=body.sources,
                         documents=body.documents, min_score=body.min_score, mode=body.mode,
                         expand=body.expand, private=private)
    return {"hits": [h.to_dict() for h in hits]}


# ---------------------------------------------------------------- the tenant's knowledge base


@router.post("/v1/kb/documents", status_code=201, response_model=IngestOut, tags=["knowledge"],
             name="kb.add", summary="Add or update a document of the tenant's knowledge base")
def kb_add(body: DocumentIn, who: CurrentPrincipal, svc: Svc, request: Request) -> dict[str, Any]:
    """Cleaned, de-duplicated, chunked and indexed; an unchanged document is left as it is."""
    audit_target(request, body.doc_id)
    return _add(_shared(who, svc, write=True), body, False)


@router.get("/v1/kb/documents", response_model=DocumentPage, tags=["knowledge"], name="kb.list")
def kb_list(who: CurrentPrincipal, svc: Svc, limit: Limit = None, offset: Offset = 0,
            tag: Annotated[list[str] | None, Query(description="Every one of these tags")] = None,
            source: Annotated[list[str] | None, Query(description="Any of these sources")] = None
            ) -> dict[str, Any]:
    """The tenant's documents by id (without their text)."""
    limit = limit or svc.settings.page_size
    rows = _shared(who, svc, write=False).list(tags=tag or (), sources=source or (),
                                               private=False, limit=limit + 1, offset=offset)
    return page(rows, offset, limit)


@router.get("/v1/kb/documents/{doc_id}", response_model=DocumentOut, tags=["knowledge"], name="kb.get")
def kb_get(doc_id: DocId, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """One document with its cleaned text."""
    return _shared(who, svc, write=False).get(doc_id).to_dict(text=True)


@router.get("/v1/kb/documents/{doc_id}/chunks", response_model=ChunksOut, tags=["knowledge"],
            name="kb.chunks")
def kb_chunks(doc_id: DocId, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """A document's chunks in order: offsets, heading path, usage counts."""
    return {"chunks": [c.to_dict() for c in _shared(who, svc, write=False).chunks(doc_id)]}


@router.delete("/v1/kb/documents/{doc_id}", status_code=204, tags=["knowledge"], name="kb.remove",
               summary="Remove a document and every trace of it")
def kb_remove(doc_id: DocId, who: CurrentPrincipal, svc: Svc) -> Response:
    _shared(who, svc, write=True).remove(doc_id)
    return Response(status_code=204)


@router.post("/v1/kb/search", response_model=KnowledgeHitsOut, tags=["knowledge"], name="kb.search",
             summary="Hybrid search over the tenant's knowledge base")
def kb_search(body: KnowledgeSearchIn, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """Best chunks first, with heading paths and score parts."""
    return _search(_shared(who, svc, write=False), body, False)


@router.get("/v1/kb/stale", response_model=ChunksOut, tags=["knowledge"], name="kb.stale")
def kb_stale(who: CurrentPrincipal, svc: Svc,
             min_recalls: Annotated[int | None, Query(ge=1, le=10**9)] = None) -> dict[str, Any]:
    """Chunks recalled into contexts often and never used by the reply."""
    handle = _shared(who, svc, write=False)
    return {"chunks": [c.to_dict() for c in handle.stale(min_recalls=min_recalls, private=False)]}


# ---------------------------------------------------------------- a user's view


@router.post("/v1/users/{user_id}/kb/documents", status_code=201, response_model=IngestOut,
             tags=["knowledge"], name="users.kb_add", summary="Add a document to the user's private "
                                                              "knowledge base")
def user_kb_add(user_id: UserId, body: DocumentIn, who: CurrentPrincipal, svc: Svc,
                request: Request) -> dict[str, Any]:
    """Only this user reads it (with the tenant's shared documents); forgetting the user
    deletes it."""
    audit_target(request, body.doc_id)
    return _add(_private(who, svc, user_id, write=True), body, True)


@router.delete("/v1/users/{user_id}/kb/documents/{doc_id}", status_code=204, tags=["knowledge"],
               name="users.kb_remove", summary="Remove a document of the user's private knowledge base")
def user_kb_remove(user_id: UserId, doc_id: DocId, who: CurrentPrincipal, svc: Svc) -> Response:
    _private(who, svc, user_id, write=True).remove(doc_id, private=True)
    return Response(status_code=204)


@router.post("/v1/users/{user_id}/kb/search", response_model=KnowledgeHitsOut, tags=["knowledge"],
             name="users.kb_search", summary="Search the shared and the user's private documents")
def user_kb_search(user_id: UserId, body: KnowledgeSearchIn, who: CurrentPrincipal,
                   svc: Svc) -> dict[str, Any]:
    return _search(_private(who, svc, user_id, write=False), body, None)


@router.post("/v1/users/{user_id}/kb/used", response_model=UsedOut, tags=["knowledge"],
             name="users.kb_used", summary="Count explicit uses of chunks (say, the answer cited them)")
def user_kb_used(user_id: UserId, body: UsedIn, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    return {"found": _private(who, svc, user_id, write=True).mark_used(body.chunk_ids)}
