"""Forgetting for real (R3.9): items, their versions, index entries, vectors, cached
embeddings, the raw turns they came from, and the profile snapshot — through the store's
seams, on every backend. Bytes leave the files at the next ``compact()``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from ...providers.embedders import Embedder, content_hash
from ...retrieval.indexer import Indexer
from ...stores.base import ItemStore, Lifecycle, MessageLog, SessionRows, VectorCache
from ...types import Filters, Scope, Status
from .profiles import Profiles

__all__ = ["Forgetter"]

log = logging.getLogger("memstrata.forget")
_EVERY_STATUS = Filters(statuses=tuple(Status))


class _ForgetBackend(ItemStore, MessageLog, SessionRows, VectorCache, Lifecycle, Protocol):
    """What forgetting needs of a store."""


def _hashes(texts: set[str]) -> list[str]:
    return [content_hash(t, "passage") for t in texts if t]


class Forgetter:
    """Hard deletes through one store, with the embedder whose cache entries go too."""

    def __init__(self, store: _ForgetBackend, embedder: Embedder, indexer: Indexer,
                 profiles: Profiles) -> None:
        self.store = store
        self.embedder = embedder
        self.indexer = indexer
        self.profiles = profiles

    def _item_texts(self, scope: Scope, item_id: str, sources: set[str]) -> set[str]:
        texts: set[str] = set()
        for version in self.store.history(scope, item_id):
            for value in (version.before, version.after):
                if value:
                    texts.add(str(value.get("content", "")))
                    sources.update(value.get("source_message_ids") or ())
        return texts

    def forget(self, scope: Scope, item_ids: Sequence[str], *, messages: bool = False) -> None:
        """Hard delete items: rows, versions, index documents, vectors, the cached
        embeddings of every text they ever had and (with ``messages``) the raw turns
        they were extracted from."""
        texts: set[str] = set()
        sources: set[str] = set()
        with self.store.transaction():
            for item_id in item_ids:
                texts |= self._item_texts(scope, item_id, sources)
                self.store.delete_item(scope, item_id)
            if messages and sources:
                self._forget_messages(scope, sources)
            self.store.forget_vectors(self.embedder.name, _hashes(texts))
            self.profiles.refresh_if_cached(scope)
        log.info("forgot %d item(s) of %r%s", len(item_ids), scope.user_id,
                 " and their source turns" if messages and sources else "")

    def forget_turns(self, scope: Scope, message_ids: Sequence[str]) -> int:
        """Hard delete raw turns by id — rows, index documents, cached vectors — and
        refresh the index of their sessions' neighbouring turns (whose context field
        carried their words). Returns how many of the ids were found. Used by spoken
        forgetting for the turns that state what is forgotten, including the request."""
        ids = set(message_ids)
        if not ids:
            return 0
        with self.store.transaction():
            found = self._forget_messages(scope, ids)
        log.info("forgot %d turn(s) of %r", found, scope.user_id)
        return found

    def _forget_messages(self, scope: Scope, ids: set[str]) -> int:
        texts, touched = [], []
        for info in self.store.list_sessions(scope):
            for m in self.store.get_messages(scope, info.session_id):
                if m.id in ids:
                    texts.append(m.text)
                    touched.append(info.session_id)
        self.store.delete_messages(scope, sorted(ids))
        self.store.forget_vectors(self.embedder.name, _hashes(set(texts)))
        for session_id in dict.fromkeys(touched):
            # neighbouring turns carry a deleted turn's words in their context field
            self.indexer.refresh_session(scope, session_id)
        return len(texts)

    def forget_user(self, scope: Scope, *, messages: bool = True) -> None:
        """Everything of a user, then compaction so the bytes leave the file."""
        texts: set[str] = set()
        for item in self.store.list_items(scope, _EVERY_STATUS, limit=10**9):
            texts |= self._item_texts(scope, item.id, set())
        if messages:
            for info in self.store.list_sessions(scope):
                texts.update(m.text for m in self.store.get_messages(scope, info.session_id))
        with self.store.transaction():
            self.store.delete_user(scope, messages=messages)
            self.profiles.blank(scope)
            self.store.forget_vectors(self.embedder.name, _hashes(texts))
        self.store.compact()
        log.info("forgot user %r%s", scope.user_id, " with every message" if messages else "")
