"""The knowledge base: documents the agent answers from, beside what it remembers.

==========================  ==========================================================
module                      what it does
==========================  ==========================================================
:mod:`.parse`               text, Markdown, HTML, PDF → cleaned text and blocks
:mod:`.chunking`            blocks → chunks on heading/paragraph/sentence boundaries
:mod:`.dedup`               exact hashes and MinHash near-duplicate signatures
:mod:`.ingest`              the rows an ingestion writes (new, changed, gone chunks)
:mod:`.usage`               did the reply draw on a recalled chunk?
:mod:`.base`                :class:`KnowledgeBase`: ingest, remove, search, usage
:mod:`.handle`              :class:`Knowledge`: the API of ``memory.kb`` / ``user.kb``
==========================  ==========================================================

Rows live behind :class:`memstrata.stores.knowledge.KnowledgeStore`; chunks are indexed
through the ordinary search index, in the knowledge base's own scope. See
``docs/knowledge.md``.
"""

from __future__ import annotations

from .base import DocumentHit, KnowledgeBase, KnowledgeHit
from .chunking import ChunkSpec
from .handle import Knowledge
from .ingest import IngestResult

__all__ = ["Knowledge", "KnowledgeBase", "KnowledgeHit", "DocumentHit", "IngestResult", "ChunkSpec"]
