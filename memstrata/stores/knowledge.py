"""The knowledge-base seam: documents, their chunks, and how chunks are used.

A knowledge base lives in the main store, beside the users' memories, on every backend.
It is addressed by a :class:`~memstrata.types.Scope` of its own (:func:`kb_scope`): the
namespace's *shared* knowledge base (every user of the agent reads it) or one user's
*private* one. That scope keys its rows here and its chunks' documents in the ordinary
:class:`~memstrata.stores.base.SearchIndex` (layer ``knowledge``) — so BM25 statistics,
vectors and filters are the ones every search uses, and a user's own search never sees
knowledge chunks (they are in another scope).

==================  ==========================================================
table               rows
==================  ==========================================================
``kb_documents``    one per document: title, source, format, cleaned text, hash,
                    MinHash signature, tags, ``last_reviewed``
``kb_chunks``       one per chunk: document, ordinal, offsets, heading path, text,
                    hash, tags, source, ``last_reviewed``, recalled/used counters
``kb_recalls``      chunks put into a user's context and not yet judged against the
                    assistant's reply (keyed by the *user's* scope and session)
==================  ==========================================================

:class:`KnowledgeRows` implements :class:`KnowledgeStore` once for both backends; each
backend passes its dialect (:mod:`memstrata.stores.sql.dialect`).
"""

from __future__ import annotations

import uuid
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from ..errors import NotFoundError
from ..ids import RESERVED_ID_MARK
from ..types import Scope
from .sql.dialect import SQLDialect, json_out, stored_time, time_out

__all__ = ["KnowledgeDocument", "KnowledgeChunk", "KnowledgeRecall", "KnowledgeStore",
           "KnowledgeRows", "kb_scope", "is_kb_scope", "KB_USER"]

#: The user id of a namespace's shared knowledge base. It starts with the unit separator
#: (:data:`~memstrata.ids.RESERVED_ID_MARK`), which a caller's id may not hold.
KB_USER = RESERVED_ID_MARK + "kb"


def kb_scope(namespace: str, owner: str | None = None) -> Scope:
    """The scope of a knowledge base: the namespace's shared one, or ``owner``'s private
    one (a fixed-length derived id, so any user id fits)."""
    if owner is None:
        return Scope(KB_USER, namespace)
    return Scope(f"{KB_USER}:{uuid.uuid5(uuid.NAMESPACE_URL, owner).hex}", namespace)


def is_kb_scope(scope: Scope) -> bool:
    """Whether ``scope`` is a knowledge base's rather than a user's."""
    return scope.user_id.startswith(KB_USER)


@dataclass(frozen=True, slots=True)
class KnowledgeDocument:
    """One ingested document. ``text`` is the cleaned text the chunks' offsets point
    into; ``signature`` its MinHash (near-duplicate detection); ``owner`` the user of a
    private knowledge base (None: shared)."""

    id: str
    title: str
    source: str
    format: str
    text: str
    content_hash: str
    created_at: datetime
    updated_at: datetime
    tags: tuple[str, ...] = ()
    last_reviewed: datetime | None = None
    owner: str | None = None
    signature: tuple[int, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    chunk_count: int = 0

    def to_dict(self, *, text: bool = False) -> dict[str, Any]:
        """A JSON-ready dict (without the text and signature unless ``text``)."""
        out = {"id": self.id, "title": self.title, "source": self.source, "format": self.format,
               "content_hash": self.content_hash, "tags": list(self.tags),
               "last_reviewed": self.last_reviewed.isoformat() if self.last_reviewed else None,
               "owner": self.owner, "created_at": self.created_at.isoformat(),
               "updated_at": self.updated_at.isoformat(), "chunk_count": self.chunk_count,
               "metadata": dict(self.metadata), "chars": len(self.text)}
        if text:
            out["text"] = self.text
        return out


@dataclass(frozen=True, slots=True)
class KnowledgeChunk:
    """One chunk: ``text`` is ``document.text[start:end]`` under ``heading_path``.

    ``joins_next``: its paragraph goes on in the next chunk. ``duplicate_of``: the id of
    an earlier chunk of the knowledge base with the same text (a duplicate is stored,
    not indexed). ``recalled``/``used`` count how often it was put into a context and
    how often the reply that followed drew on it.
    """

    id: str
    doc_id: str
    ordinal: int
    text: str
    start: int
    end: int
    content_hash: str
    created_at: datetime  # when this text entered the knowledge base
    heading_path: tuple[str, ...] = ()
    joins_next: bool = False
    duplicate_of: str | None = None
    tags: tuple[str, ...] = ()
    source: str = ""
    title: str = ""
    last_reviewed: datetime | None = None
    recalled: int = 0
    used: int = 0
    last_recalled: datetime | None = None
    last_used: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"id": self.id, "doc_id": self.doc_id, "ordinal": self.ordinal, "text": self.text,
                "start": self.start, "end": self.end, "created_at": self.created_at.isoformat(),
                "heading_path": list(self.heading_path),
                "joins_next": self.joins_next, "duplicate_of": self.duplicate_of,
                "tags": list(self.tags), "source": self.source, "title": self.title,
                "last_reviewed": self.last_reviewed.isoformat() if self.last_reviewed else None,
                "recalled": self.recalled, "used": self.used,
                "last_recalled": self.last_recalled.isoformat() if self.last_recalled else None,
                "last_used": self.last_used.isoformat() if self.last_used else None}


@dataclass(frozen=True, slots=True)
class KnowledgeRecall:
    """A chunk put into a user's context, waiting for the reply that may use it."""

    kb: Scope
    chunk_id: str
    query: str
    at: datetime


class KnowledgeStore(Protocol):
    """Knowledge-base rows. Index documents of chunks go through ``SearchIndex.index``;
    deleting chunks here deletes their index documents too, as deleting an item does."""

    @abstractmethod
    def write_knowledge(self, scope: Scope, document: KnowledgeDocument,
                        chunks: Sequence[KnowledgeChunk], *,
                        delete_chunks: Sequence[str] = ()) -> None:
        """Insert or replace the document row and the given chunk rows (a chunk that is
        stored keeps its usage counters), and hard delete the chunks ``delete_chunks``
        names with their index documents and pending recalls."""

    @abstractmethod
    def get_knowledge_document(self, scope: Scope, doc_id: str) -> KnowledgeDocument:
        """The document (with its chunk count), or NotFoundError."""

    @abstractmethod
    def list_knowledge_documents(self, scope: Scope, *, doc_ids: Sequence[str] = (),
                                 sources: Sequence[str] = (), tags: Sequence[str] = (),
                                 content_hash: str | None = None, limit: int = 1000,
                                 offset: int = 0, text: bool = False) -> list[KnowledgeDocument]:
        """Documents by id, narrowed to any of ``doc_ids``/``sources``, all of ``tags``
        and a content hash; without ``text`` the text field is left empty."""

    @abstractmethod
    def knowledge_chunks(self, scope: Scope, *, doc_id: str | None = None,
                         ids: Sequence[str] = (), content_hashes: Sequence[str] = ()
                         ) -> list[KnowledgeChunk]:
        """Chunks of one document, by id or by content hash, in document order."""

    @abstractmethod
    def delete_knowledge_document(self, scope: Scope, doc_id: str) -> list[KnowledgeChunk]:
        """Hard delete a document: its row, its chunks, their index documents and every
        pending recall of them. Returns the chunks deleted; NotFoundError if unknown."""

    @abstractmethod
    def count_knowledge_usage(self, scope: Scope, chunk_ids: Sequence[str], *, at: datetime,
                              recalled: int = 0, used: int = 0) -> None:
        """Add to the recalled/used counters of chunks (and stamp the time)."""

    @abstractmethod
    def add_knowledge_recalls(self, user: Scope, session_id: str,
                              recalls: Sequence[KnowledgeRecall]) -> None:
        """Remember chunks put into ``user``'s context in ``session_id`` until the reply."""

    @abstractmethod
    def take_knowledge_recalls(self, user: Scope, session_id: str) -> list[KnowledgeRecall]:
        """The pending recalls of a session, removed as they are read."""

    @abstractmethod
    def stale_knowledge(self, scope: Scope, *, min_recalls: int, limit: int = 100
                        ) -> list[KnowledgeChunk]:
        """Chunks recalled at least ``min_recalls`` times and never used, most recalled first."""


# ---------------------------------------------------------------- one implementation


def iter_chunks(values: Sequence[Any], size: int = 500) -> list[list[Any]]:
    """``values`` in lists of at most ``size`` (bound parameters per statement)."""
    values = list(values)
    return [values[i:i + size] for i in range(0, len(values), size)]


_DOC_COLUMNS = ("namespace, user_id, id, owner, title, source, format, text, content_hash, "
                "signature, tags, last_reviewed, created_at, updated_at, metadata")
_CHUNK_COLUMNS = ("namespace, user_id, id, doc_id, ordinal, text, start_offset, end_offset, "
                  "content_hash, heading_path, joins_next, duplicate_of, tags, source, title, "
                  "last_reviewed, created_at")


class KnowledgeRows(SQLDialect):
    """:class:`KnowledgeStore` in SQL both backends speak, over the backend's dialect
    (:mod:`memstrata.stores.sql.dialect`); the backend's index supplies ``_delete_docs``
    and ``_delete_scope_docs``."""

    # the search index's own (annotations only: nothing here shadows them in the MRO)
    _delete_docs: Callable[[Scope, Sequence[str]], None]
    _delete_scope_docs: Callable[..., None]

    def _doc(self, r: Any, with_text: bool) -> KnowledgeDocument:
        created, updated = stored_time(r["created_at"]), stored_time(r["updated_at"])
        return KnowledgeDocument(
            id=r["id"], title=r["title"], source=r["source"], format=r["format"],
            text=r["text"] if with_text else "", content_hash=r["content_hash"],
            created_at=created, updated_at=updated, tags=tuple(json_out(r["tags"])),
            last_reviewed=time_out(r["last_reviewed"]), owner=r["owner"],
            signature=tuple(json_out(r["signature"])),
            metadata=json_out(r["metadata"]), chunk_count=int(r["n_chunks"] or 0))

    def _chunk(self, r: Any) -> KnowledgeChunk:
        created = stored_time(r["created_at"])
        return KnowledgeChunk(
            id=r["id"], doc_id=r["doc_id"], ordinal=int(r["ordinal"]), text=r["text"],
            start=int(r["start_offset"]), end=int(r["end_offset"]), content_hash=r["content_hash"],
            created_at=created,
            heading_path=tuple(json_out(r["heading_path"])), joins_next=bool(r["joins_next"]),
            duplicate_of=r["duplicate_of"], tags=tuple(json_out(r["tags"])),
            source=r["source"], title=r["title"], last_reviewed=time_out(r["last_reviewed"]),
            recalled=int(r["recalled"]), used=int(r["used"]),
            last_recalled=time_out(r["last_recalled"]),
            last_used=time_out(r["last_used"]))

    # -- writing ------------------------------------------------------------------
    def write_knowledge(self, scope: Scope, document: KnowledgeDocument,
                        chunks: Sequence[KnowledgeChunk], *,
                        delete_chunks: Sequence[str] = ()) -> None:
        ns, uid = scope.namespace, scope.user_id
        d = document
        with self.transaction():
            self._delete_chunks(scope, delete_chunks)
            self._q("DELETE FROM kb_documents WHERE namespace=? AND user_id=? AND id=?", (ns, uid, d.id))
            self._q(f"INSERT INTO kb_documents ({_DOC_COLUMNS}) VALUES ({','.join('?' * 15)})",
                    (ns, uid, d.id, d.owner, d.title, d.source, d.format, d.text, d.content_hash,
                     self._json_in(list(d.signature)), self._json_in(list(d.tags)),
                     self._time_in(d.last_reviewed), self._time_in(d.created_at),
                     self._time_in(d.updated_at), self._json_in(dict(d.metadata))))
            rows = [(ns, uid, c.id, c.doc_id, c.ordinal, c.text, c.start, c.end, c.content_hash,
                     self._json_in(list(c.heading_path)), bool(c.joins_next), c.duplicate_of,
                     self._json_in(list(c.tags)), c.source, c.title, self._time_in(c.last_reviewed),
                     self._time_in(c.created_at)) for c in chunks]
            # an upsert that leaves the usage counters of a kept chunk alone
            self._qm(f"INSERT INTO kb_chunks ({_CHUNK_COLUMNS}) VALUES ({','.join('?' * 17)}) "
                     "ON CONFLICT (namespace, user_id, id) DO UPDATE SET doc_id=excluded.doc_id, "
                     "ordinal=excluded.ordinal, text=excluded.text, start_offset=excluded.start_offset, "
                     "end_offset=excluded.end_offset, content_hash=excluded.content_hash, "
                     "heading_path=excluded.heading_path, joins_next=excluded.joins_next, "
                     "duplicate_of=excluded.duplicate_of, tags=excluded.tags, source=excluded.source, "
                     "title=excluded.title, last_reviewed=excluded.last_reviewed", rows)

    def _delete_chunks(self, scope: Scope, ids: Sequence[str]) -> None:
        if not ids:
            return
        self._delete_docs(scope, list(ids))
        for part in iter_chunks(list(ids)):
            marks = ",".join("?" * len(part))
            self._q(f"DELETE FROM kb_chunks WHERE namespace=? AND user_id=? AND id IN ({marks})",
                    (scope.namespace, scope.user_id, *part))
            self._q(f"DELETE FROM kb_recalls WHERE namespace=? AND kb_user_id=? AND chunk_id IN "
                    f"({marks})", (scope.namespace, scope.user_id, *part))

    def delete_knowledge_document(self, scope: Scope, doc_id: str) -> list[KnowledgeChunk]:
        with self.transaction():
            self.get_knowledge_document(scope, doc_id)
            chunks = self.knowledge_chunks(scope, doc_id=doc_id)
            self._delete_chunks(scope, [c.id for c in chunks])
            self._q("DELETE FROM kb_documents WHERE namespace=? AND user_id=? AND id=?",
                    (scope.namespace, scope.user_id, doc_id))
        return chunks

    def _delete_user_knowledge(self, user: Scope, *, documents: bool = True) -> None:
        """What the knowledge base holds of a user being forgotten: their pending recalls
        and, with ``documents``, their private knowledge base (rows and the whole of its
        index scope). Runs in the caller's transaction."""
        self._q("DELETE FROM kb_recalls WHERE namespace=? AND user_id=?", (user.namespace, user.user_id))
        if not documents:
            return
        private = kb_scope(user.namespace, user.user_id)
        ids = [r["id"] for r in self._q("SELECT id FROM kb_chunks WHERE namespace=? AND user_id=?",
                                        (private.namespace, private.user_id))]
        self._delete_chunks(private, ids)
        self._q("DELETE FROM kb_documents WHERE namespace=? AND user_id=?",
                (private.namespace, private.user_id))
        # what is left of its index: documents no chunk row names, its log and state
        self._delete_scope_docs(private, semantic_only=False)

    # -- reading --------------------------------------------------------------------
    def get_knowledge_document(self, scope: Scope, doc_id: str) -> KnowledgeDocument:
        found = self.list_knowledge_documents(scope, doc_ids=[doc_id], text=True, limit=1)
        if not found:
            raise NotFoundError(f"no document {doc_id!r} in this knowledge base; list them with "
                                "`memstrata kb list`")
        return found[0]

    def list_knowledge_documents(self, scope: Scope, *, doc_ids: Sequence[str] = (),
                                 sources: Sequence[str] = (), tags: Sequence[str] = (),
                                 content_hash: str | None = None, limit: int = 1000,
                                 offset: int = 0, text: bool = False) -> list[KnowledgeDocument]:
        where = ["d.namespace=?", "d.user_id=?"]
        params: list[object] = [scope.namespace, scope.user_id]
        for column, values in (("id", doc_ids), ("source", sources)):
            if values:
                where.append(f"d.{column} IN ({','.join('?' * len(values))})")
                params += list(values)
        if content_hash is not None:
            where.append("d.content_hash=?")
            params.append(content_hash)
        columns = "d.*" if text else ("d.namespace, d.user_id, d.id, d.owner, d.title, d.source, "
                                      "d.format, '' AS text, d.content_hash, d.tags, d.last_reviewed, "
                                      "d.created_at, d.updated_at, d.metadata, d.signature")
        page = "" if tags else " LIMIT ? OFFSET ?"  # tags are matched here, after the query
        rows = self._q(f"SELECT {columns}, (SELECT COUNT(*) FROM kb_chunks c WHERE "
                       "c.namespace=d.namespace AND c.user_id=d.user_id AND c.doc_id=d.id) AS n_chunks "
                       f"FROM kb_documents d WHERE {' AND '.join(where)} ORDER BY d.id{page}",
                       params + ([] if tags else [min(limit, 2**62), offset]))
        docs = [self._doc(r, text) for r in rows]
        if tags:
            docs = [d for d in docs if set(tags) <= set(d.tags)][offset:offset + limit]
        return docs

    def knowledge_chunks(self, scope: Scope, *, doc_id: str | None = None,
                         ids: Sequence[str] = (), content_hashes: Sequence[str] = ()
                         ) -> list[KnowledgeChunk]:
        base = "SELECT * FROM kb_chunks WHERE namespace=? AND user_id=?"
        key: tuple[object, ...] = (scope.namespace, scope.user_id)
        out: list[KnowledgeChunk] = []
        if doc_id is not None and not ids and not content_hashes:
            rows = self._q(f"{base} AND doc_id=? ORDER BY ordinal", (*key, doc_id))
            return [self._chunk(r) for r in rows]
        for column, values in (("id", ids), ("content_hash", content_hashes)):
            for part in iter_chunks(list(values)):
                extra = " AND doc_id=?" if doc_id is not None else ""
                rows = self._q(f"{base} AND {column} IN ({','.join('?' * len(part))}){extra}",
                               (*key, *part, *((doc_id,) if doc_id is not None else ())))
                out += [self._chunk(r) for r in rows]
        unique = {c.id: c for c in out}
        return sorted(unique.values(), key=lambda c: (c.doc_id, c.ordinal, c.id))

    # -- usage ------------------------------------------------------------------------
    def count_knowledge_usage(self, scope: Scope, chunk_ids: Sequence[str], *, at: datetime,
                              recalled: int = 0, used: int = 0) -> None:
        stamp = self._time_in(at)
        for part in iter_chunks(sorted(set(chunk_ids))):
            self._q("UPDATE kb_chunks SET recalled=recalled+?, used=used+?, "
                    "last_recalled=CASE WHEN ?>0 THEN ? ELSE last_recalled END, "
                    "last_used=CASE WHEN ?>0 THEN ? ELSE last_used END "
                    f"WHERE namespace=? AND user_id=? AND id IN ({','.join('?' * len(part))})",
                    (recalled, used, recalled, stamp, used, stamp, scope.namespace, scope.user_id,
                     *part))

    def add_knowledge_recalls(self, user: Scope, session_id: str,
                              recalls: Sequence[KnowledgeRecall]) -> None:
        with self.transaction():
            for r in recalls:
                self._q("DELETE FROM kb_recalls WHERE namespace=? AND user_id=? AND session_id=? "
                        "AND kb_user_id=? AND chunk_id=?",
                        (user.namespace, user.user_id, session_id, r.kb.user_id, r.chunk_id))
            self._qm("INSERT INTO kb_recalls (namespace, user_id, session_id, kb_user_id, chunk_id, "
                     "query, at) VALUES (?,?,?,?,?,?,?)",
                     [(user.namespace, user.user_id, session_id, r.kb.user_id, r.chunk_id, r.query,
                       self._time_in(r.at)) for r in recalls])

    def take_knowledge_recalls(self, user: Scope, session_id: str) -> list[KnowledgeRecall]:
        key = (user.namespace, user.user_id, session_id)
        select = ("SELECT * FROM kb_recalls WHERE namespace=? AND user_id=? AND session_id=? "
                  "ORDER BY at, chunk_id")
        if not self._q(select, key):  # the common case, read without taking the write lock
            return []
        with self.transaction():
            rows = self._q(select, key)
            self._q("DELETE FROM kb_recalls WHERE namespace=? AND user_id=? AND session_id=?", key)
        out = []
        for r in rows:
            out.append(KnowledgeRecall(Scope(r["kb_user_id"], user.namespace), r["chunk_id"],
                                       r["query"], stored_time(r["at"])))
        return out

    def stale_knowledge(self, scope: Scope, *, min_recalls: int, limit: int = 100
                        ) -> list[KnowledgeChunk]:
        rows = self._q("SELECT * FROM kb_chunks WHERE namespace=? AND user_id=? AND used=0 AND "
                       "recalled>=? ORDER BY recalled DESC, id LIMIT ?",
                       (scope.namespace, scope.user_id, min_recalls, limit))
        return [self._chunk(r) for r in rows]
