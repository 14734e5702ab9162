"""The knowledge base as an agent or one of its users sees it: :class:`Knowledge`.

::

    kb = memory.kb                              # the namespace's shared knowledge base
    kb.add("docs/")                             # every Markdown/text/HTML/PDF file under it
    for hit in memory.user("lin").kb.search("how do I reset the router?", k=3):
        print(f"{hit.score:.3f} {hit.label}: {hit.text[:80]}")

A handle from :attr:`memstrata.Memory.kb` (or :meth:`memstrata.Memory.knowledge`) reads
and writes the namespace's shared knowledge base. A handle from
:attr:`memstrata.UserMemory.kb` also reads the user's private knowledge base, and
writes there with ``private=True``.
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..checks import check_count, check_json, check_label
from ..errors import NotFoundError, ValidationError, shown
from ..retrieval.search import MODES, Mode
from ..stores.knowledge import KnowledgeChunk, KnowledgeDocument, kb_scope
from ..types import Scope, check_text, parse_time
from .base import DocumentHit, KnowledgeBase, KnowledgeHit
from .ingest import IngestResult, Plan
from .parse import FORMATS, parse

__all__ = ["Knowledge", "SUFFIXES"]

log = logging.getLogger("memstrata.knowledge")

#: File names a folder ingestion picks up.
SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".text", ".rst", ".html", ".htm", ".xhtml", ".pdf")


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError(f"{what} must be a string or a list of non-empty strings, got {shown(value)}")
    return tuple(value)


def _doc_id(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 256:
        raise ValidationError(f"doc_id must be a non-empty string of at most 256 characters, "
                              f"got {shown(value)}")
    return value


class Knowledge:
    """One namespace's knowledge base, seen by its agent or by one of its users."""

    def __init__(self, engine: KnowledgeBase, namespace: str = "", user_id: str | None = None) -> None:
        self.engine = engine
        self.namespace = namespace
        self.user_id = user_id
        self.shared_scope = kb_scope(namespace)
        self.private_scope = kb_scope(namespace, user_id) if user_id is not None else None

    def __repr__(self) -> str:
        return f"Knowledge(namespace={self.namespace!r}, user_id={self.user_id!r})"

    def _scope(self, private: bool) -> Scope:
        if not private:
            return self.shared_scope
        if self.private_scope is None:
            raise ValidationError("a private knowledge base belongs to a user: use "
                                  "memory.user(user_id).kb for private=True")
        return self.private_scope

    def _scopes(self, private: bool | None) -> list[Scope]:
        if private is None:
            return [self.shared_scope] + ([self.private_scope] if self.private_scope else [])
        return [self._scope(private)]

    # -- ingestion ----------------------------------------------------------------
    def add(self, path: "str | Path", *, tags: Sequence[str] = (), private: bool = False,
            last_reviewed: "datetime | str | None" = None, doc_id: str | None = None,
            format: str = "auto", duplicates: str = "skip", progress: bool = True,
            max_chars: int | None = None, min_chars: int | None = None,
            cjk_weight: float | None = None) -> builtins.list[IngestResult]:
        """Ingest a file, or every document file under a folder (Markdown, text, HTML,
        PDF; see :data:`SUFFIXES`), with progress bars. A file's id is its path relative
        to the folder (its name, for a single file; ``doc_id`` overrides it); ingesting
        the same path again updates only the chunks that changed. Returns one
        :class:`~memstrata.knowledge.ingest.IngestResult` per file; a file of the folder
        with no text is skipped as ``empty`` (a single file with none is an error)."""
        if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
            raise ValidationError(f"path must be a str or a Path, not {type(path).__name__}")
        root = Path(path).expanduser()
        try:
            folder, single = root.is_dir(), root.is_file()
        except (OSError, ValueError):  # a name too long for the file system, a NUL in it
            folder = single = False
        if folder:
            files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES
                           and not any(part.startswith(".") for part in p.relative_to(root).parts))
            if doc_id is not None:
                raise ValidationError("doc_id names one document; a folder gives each file its "
                                      "relative path as id")
            named = [(f, f.relative_to(root).as_posix()) for f in files]
        elif single:
            named = [(root, root.name if doc_id is None else doc_id)]
        else:
            raise NotFoundError(f"no file or folder {str(path)!r}")
        if not named:
            return []
        scope = self._scope(private)
        spec = self.engine.spec(max_chars=max_chars, min_chars=min_chars, cjk_weight=cjk_weight)
        reviewed = parse_time(last_reviewed, what="last_reviewed") if last_reviewed is not None else None
        plans: list[Plan] = []
        stored = self.engine.store.list_knowledge_documents(scope, limit=10**9) \
            if duplicates == "skip" else []
        for file, name in tqdm(named, desc="reading documents", unit="doc",
                               disable=not progress or len(named) < 2, leave=False):
            parsed = parse(file.read_bytes(), format, name=file.name)
            if folder and not parsed.text.strip():  # one empty file does not stop the folder
                log.warning("knowledge: %s has no text after cleaning; skipped", file)
                plans.append(Plan(IngestResult(_doc_id(name), str(file), "empty")))
                continue
            plans.append(self.engine.plan(
                scope, parsed, doc_id=_doc_id(name), source=str(file), tags=_strings(tags, "tags"),
                last_reviewed=reviewed, owner=self.user_id if private else None, spec=spec,
                duplicates=duplicates, pending=[p.document for p in plans if p.document],
                stored=stored))
        return self._write(scope, plans, progress)

    def add_text(self, content: "str | bytes", *, doc_id: str, source: str | None = None,
                 title: str | None = None, format: str = "auto", tags: Sequence[str] = (),
                 private: bool = False, last_reviewed: "datetime | str | None" = None,
                 metadata: Mapping[str, Any] | None = None, duplicates: str = "skip",
                 max_chars: int | None = None, min_chars: int | None = None,
                 cjk_weight: float | None = None, progress: bool = False) -> IngestResult:
        """Ingest one document given as text (or bytes: PDF, or encoded text) under
        ``doc_id``; ``format`` is ``auto`` or one of text, markdown, html, pdf. Calling
        it again with a changed text updates only the chunks that changed."""
        if not isinstance(content, (str, bytes)):
            raise ValidationError(f"content must be str or bytes, not {type(content).__name__}")
        if isinstance(content, str):
            check_text(content, "content")
        for name, label in (("source", source), ("title", title)):
            if label is not None:
                check_label(label, name)
        if format != "auto" and format not in FORMATS:
            raise ValidationError(f"unknown document format {shown(format)}; use auto, {', '.join(FORMATS)}")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValidationError(f"metadata must be a dict, not {type(metadata).__name__}")
        check_json(metadata, "metadata")
        scope = self._scope(private)
        doc_id = _doc_id(doc_id)
        parsed = parse(content, format, name=source or doc_id, title=title or "")
        draft = self.engine.plan(
            scope, parsed, doc_id=doc_id, source=source or doc_id, tags=_strings(tags, "tags"),
            last_reviewed=parse_time(last_reviewed, what="last_reviewed") if last_reviewed is not None
            else None, owner=self.user_id if private else None, metadata=dict(metadata or {}),
            spec=self.engine.spec(max_chars=max_chars, min_chars=min_chars, cjk_weight=cjk_weight),
            duplicates=duplicates)
        return self._write(scope, [draft], progress)[0]

    def _write(self, scope: Scope, plans: Sequence[Plan], progress: bool) -> builtins.list[IngestResult]:
        self.engine.embed_plans(scope, plans, progress=progress)
        out = []
        for draft in tqdm(plans, desc="writing documents", unit="doc",
                          disable=not progress or len(plans) < 2, leave=False):
            out.append(self.engine.write(scope, draft))
        return out

    def remove(self, doc_id: str, *, private: bool = False) -> int:
        """Delete a document and every trace of it (rows, chunks, index entries, vectors,
        cached embeddings, pending recalls); returns the chunks deleted. Run
        :meth:`memstrata.Memory.compact` for the bytes to leave the file."""
        return self.engine.remove(self._scope(private), _doc_id(doc_id))

    def clear(self, *, private: bool = False) -> int:
        """Remove every document of the (shared, or private) knowledge base; returns how many."""
        docs = self.list(private=private)
        for doc in docs:
            self.engine.remove(self._scope(private), doc.id)
        return len(docs)

    def reindex(self, *, private: bool | None = None, progress: bool = True) -> int:
        """Re-embed and re-index every chunk (both knowledge bases unless ``private``
        says which) — after switching embedders; returns how many chunks."""
        return sum(self.engine.reindex(scope, progress=progress) for scope in self._scopes(private))

    # -- reading --------------------------------------------------------------------
    def list(self, *, tags: Sequence[str] = (), sources: Sequence[str] = (),
             private: bool | None = None, limit: int = 1000, offset: int = 0
             ) -> builtins.list[KnowledgeDocument]:
        """Documents (without their text), by id; both knowledge bases unless
        ``private`` is True (the user's only) or False (the shared one only)."""
        check_count(limit, "limit")
        check_count(offset, "offset")
        out: builtins.list[KnowledgeDocument] = []
        for scope in self._scopes(private):
            out += self.engine.store.list_knowledge_documents(
                scope, tags=_strings(tags, "tags"), sources=_strings(sources, "sources"),
                limit=limit + offset)
        return out[offset:offset + limit]

    def get(self, doc_id: str, *, private: bool = False) -> KnowledgeDocument:
        """One document with its cleaned text, or NotFoundError."""
        return self.engine.store.get_knowledge_document(self._scope(private), _doc_id(doc_id))

    def chunks(self, doc_id: str, *, private: bool = False) -> builtins.list[KnowledgeChunk]:
        """A document's chunks in order, with offsets, heading paths and usage counts."""
        scope = self._scope(private)
        self.engine.store.get_knowledge_document(scope, _doc_id(doc_id))
        return self.engine.store.knowledge_chunks(scope, doc_id=doc_id)

    def is_empty(self) -> bool:
        """True when neither knowledge base this handle reads has a document."""
        return not any(self.engine.store.list_knowledge_documents(s, limit=1)
                       for s in self._scopes(None))

    # -- retrieval ----------------------------------------------------------------------
    def search(self, query: str, *, k: int = 5, tags: Sequence[str] = (),
               sources: Sequence[str] = (), documents: Sequence[str] = (),
               min_score: float | None = None, expand: bool = True, mode: Mode = "hybrid",
               private: bool | None = None) -> builtins.list[KnowledgeHit]:
        """The best ``k`` chunks for ``query`` (hybrid BM25 + vectors), with heading
        paths, each expanded with its neighbour when cut mid-paragraph; narrowed to every
        tag in ``tags``, any of ``sources``/``documents``; none under ``min_score``."""
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must be a non-empty string")
        check_count(k, "k", minimum=1, maximum=1000)
        if mode not in MODES:
            raise ValidationError(f"mode must be one of {', '.join(MODES)}, not {shown(mode)}")
        if min_score is not None and (isinstance(min_score, bool) or not isinstance(min_score, (int, float))):
            raise ValidationError(f"min_score must be a number, not {shown(min_score)}")
        return self.engine.search(self._scopes(private), query, k=k, tags=_strings(tags, "tags"),
                                  sources=_strings(sources, "sources"),
                                  documents=_strings(documents, "documents"), min_score=min_score,
                                  expand=expand, mode=mode, shared=self.shared_scope)

    def search_documents(self, query: str, *, k: int = 5, **options: Any) -> builtins.list[DocumentHit]:
        """Documents ranked by their best chunk for ``query``, each with its matching
        chunks; options as for :meth:`search`."""
        hits = self.search(query, k=max(4 * check_count(k, "k", minimum=1, maximum=1000), 20),
                           expand=False, **options)
        grouped: dict[tuple[str, str], builtins.list[KnowledgeHit]] = {}
        for hit in hits:
            grouped.setdefault((hit.kb.user_id, hit.doc_id), []).append(hit)
        out = []
        for (_, doc_id), found in grouped.items():
            document = self.engine.store.list_knowledge_documents(found[0].kb, doc_ids=[doc_id], limit=1)
            if document:
                out.append(DocumentHit(document[0], found[0].score, tuple(found)))
        out.sort(key=lambda d: (-d.score, d.document.id))
        return out[:k]

    # -- usage ----------------------------------------------------------------------------
    def stale(self, *, min_recalls: int | None = None, limit: int = 100,
              private: bool | None = None) -> builtins.list[KnowledgeChunk]:
        """Chunks recalled into contexts at least ``min_recalls`` times (default: the
        ``kb_stale_recalls`` setting) and never used — for review; search ranks them
        lower (the ``kb_stale_weight`` setting)."""
        floor = self.engine.settings.kb_stale_recalls if min_recalls is None else min_recalls
        check_count(floor, "min_recalls", minimum=1)
        check_count(limit, "limit")
        out: builtins.list[KnowledgeChunk] = []
        for scope in self._scopes(private):
            out += self.engine.store.stale_knowledge(scope, min_recalls=floor, limit=limit)
        out.sort(key=lambda c: (-c.recalled, c.id))
        return out[:limit]

    def mark_used(self, chunk_ids: "str | Sequence[str]") -> int:
        """Count an explicit use of chunks (say, the answer cited them); returns how many
        of the ids were found."""
        ids = _strings(chunk_ids, "chunk_ids")
        found: builtins.list[tuple[Scope, str]] = []
        for scope in self._scopes(None):
            found += [(scope, c.id) for c in self.engine.store.knowledge_chunks(scope, ids=ids)]
        self.engine.mark_used(found)
        return len(found)
