"""Forgetting for real, through one path over every store: items, their versions,
index entries, vectors and cached embeddings — including the vectors of the turns after
a forgotten one, which embedded its text and are re-embedded — the raw turns they came
from wherever they are held (the main store's log, a Redis session), the session
summaries (rebuilt without the forgotten turns) and the profile snapshot. Bytes leave
the files at the next ``compact()``: a forget never compacts the whole store on the
caller's request (that stalled every tenant, once per request); ``forget_user`` schedules
one compaction within ``erase_within_s`` (:meth:`Forgetter.schedule_erase`, the earliest
ask wins, so every forget of the window shares it) and the worker runs it
(:meth:`Forgetter.erase_if_due`).

Every call returns a :class:`ForgetReport`: what was removed, per store (counts only,
never content).

**Linearisable with the background jobs.** A forget runs in one transaction that holds
the user's write lock (``store.lock_user``) and reads what it erases under it, and it
sets the user's *forget epoch* (a random value in the meta table, under a hashed key).
A job reads the epoch before it reads anything, and writes in :meth:`Forgetter.unchanged`
— its transaction under the same lock, which checks the epoch again: when a forget
committed in between, :class:`~memstrata.stores.policy.Rerun` rolls the job back and the
worker runs it again on what is left. Either the job commits first (the forget then sees
and erases what it wrote) or the forget does (the job starts over without the words).
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ...providers.embedders import Embedder
from ...retrieval.documents import window_texts
from ...retrieval.indexer import Indexer, cache_key
from ...sessions.base import SessionStore
from ...stores.base import (AdminStore, CompactReport, ItemStore, JobQueue, Lifecycle, MessageLog, MetaStore,
                            SessionRows, VectorCache)
from ...stores.jobs import ConsolidatePayload, enqueue
from ...stores.policy import Rerun
from ...types import Filters, Kind, Message, Role, Scope, Status, utcnow
from .profiles import Profiles
from .stage import consolidated_key, stage_attribute

__all__ = ["Forgetter", "ForgetReport"]

log = logging.getLogger("memstrata.forget")
#: The meta key holding when the scheduled compaction is due (epoch seconds; empty: none).
ERASE_DUE = "erase-due"
_EVERY_STATUS = Filters(statuses=tuple(Status))


class _ForgetBackend(ItemStore, MessageLog, SessionRows, VectorCache, Lifecycle, JobQueue, MetaStore,
                     AdminStore, Protocol):
    """What forgetting needs of a store."""


def epoch_key(scope: Scope) -> str:
    """The meta key of a user's forget epoch; hashed, so it names no user."""
    raw = f"{scope.namespace}\x00{scope.user_id}".encode()
    return f"forget-epoch:{hashlib.sha256(raw).hexdigest()[:32]}"


def _hashes(scope: Scope, texts: set[str]) -> list[str]:
    return sorted(cache_key(scope, t) for t in texts if t)


@dataclass
class ForgetReport:
    """What one forgetting removed, per store — counts, never content.

    ``store``: items (with every version and index entry), raw ``turns`` of the main
    log, ``cached_vectors`` (embedding-cache entries of every text they had),
    ``reembedded`` neighbouring turns (their vector embedded a forgotten turn),
    ``summaries`` rebuilt without the forgotten turns, ``stages`` (stage-summary items of
    those sessions, which quoted them: deleted, and a ``consolidate`` job queued to build
    them again), ``profile`` (snapshot rebuilt or blanked). ``sessions``: turns the
    session store still ``held`` (Redis) and ``keys`` it removed. ``compact``: how the
    compaction went, and ``audit``: how many audit entries of the HTTP service now name
    ``pseudonym`` (a random id) instead of the user, and how many of the user's end-user
    keys were revoked (``revoked_keys``; they name the pseudonym too) — ``forget_user`` only;
    ``erase_by``: when the compaction it scheduled is due (epoch seconds)."""

    user_id: str
    sessions_backend: str = "main store"
    items: int = 0
    turns: int = 0
    cached_vectors: int = 0
    reembedded: int = 0
    summaries: int = 0
    stages: int = 0
    profile: bool = False
    held: int = 0
    keys: int = 0
    compact: CompactReport | None = None
    audit: int = 0
    pseudonym: str | None = None
    revoked_keys: int = 0
    erase_by: float | None = None

    def per_store(self) -> dict[str, dict[str, Any]]:
        """The report as ``{"store": {...}, "sessions": {...}, "compact": {...}}``."""
        out: dict[str, dict[str, Any]] = {
            "store": {"items": self.items, "turns": self.turns,
                      "cached_vectors": self.cached_vectors, "reembedded": self.reembedded,
                      "summaries": self.summaries, "stages": self.stages,
                      "profile": self.profile},
            "sessions": {"backend": self.sessions_backend, "held": self.held, "keys": self.keys}}
        if self.compact is not None:
            out["compact"] = self.compact.to_dict()
        if self.erase_by is not None:
            out["erase"] = {"by": datetime.fromtimestamp(self.erase_by, UTC).isoformat()}
        if self.pseudonym is not None:
            out["audit"] = {"entries": self.audit, "pseudonym": self.pseudonym,
                            "revoked_keys": self.revoked_keys}
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``user_id`` and :meth:`per_store` (what the HTTP service
        answers a forget with)."""
        return {"user_id": self.user_id, **self.per_store()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ForgetReport":
        """The inverse of :meth:`to_dict`."""
        store, sessions = data.get("store") or {}, data.get("sessions") or {}
        compact = data.get("compact")
        return cls(str(data["user_id"]), str(sessions.get("backend", "main store")),
                   **{k: int(store.get(k, 0)) for k in ("items", "turns", "cached_vectors",
                                                       "reembedded", "summaries", "stages")},
                   profile=bool(store.get("profile", False)),
                   held=int(sessions.get("held", 0)), keys=int(sessions.get("keys", 0)),
                   compact=None if compact is None else CompactReport(
                       bool(compact["checkpointed"]), float(compact.get("waited_s", 0.0)),
                       str(compact.get("detail", ""))),
                   audit=int((data.get("audit") or {}).get("entries", 0)),
                   pseudonym=(data.get("audit") or {}).get("pseudonym"),
                   revoked_keys=int((data.get("audit") or {}).get("revoked_keys", 0)),
                   erase_by=datetime.fromisoformat(data["erase"]["by"]).timestamp()
                   if data.get("erase") else None)

    def __str__(self) -> str:
        return "; ".join(f"{name}: " + ", ".join(f"{k}={v}" for k, v in part.items())
                         for name, part in self.per_store().items())


class Forgetter:
    """Hard deletes through the main store and the session store, with the embedder
    whose cache entries go too. ``rebuild_summary(scope, session_id)`` rebuilds a
    session's summary from the turns it still has (True when it had one)."""

    def __init__(self, store: _ForgetBackend, embedder: Embedder, indexer: Indexer,
                 profiles: Profiles, sessions: SessionStore | None = None,
                 rebuild_summary: Callable[[Scope, str], bool] | None = None, *,
                 compact_wait_s: float = 10.0, erase_within_s: float = 300.0) -> None:
        self.store = store
        self.embedder = embedder
        self.indexer = indexer
        self.profiles = profiles
        self.sessions = sessions
        self.rebuild_summary = rebuild_summary
        self.compact_wait_s = compact_wait_s
        self.erase_within_s = erase_within_s

    # -- the user's write lock, shared with the jobs --------------------------------------
    def epoch(self, scope: Scope) -> str:
        """The user's forget epoch: changes with every forget of theirs."""
        return self.store.get_meta(epoch_key(scope)) or ""

    @contextmanager
    def unchanged(self, scope: Scope, seen: str) -> Iterator[None]:
        """A transaction under the user's write lock in which nothing of theirs was
        forgotten since the epoch ``seen`` was read (before the caller read its inputs);
        :class:`Rerun` (the transaction rolled back) when something was."""
        with self.store.transaction():
            self.store.lock_user(scope)
            if self.epoch(scope) != seen:
                raise Rerun(f"a forget of {scope.user_id!r} committed while this job ran; "
                            "running it again on what is left")
            yield

    @contextmanager
    def exclusive(self, scope: Scope) -> Iterator[None]:
        """The transaction a forget runs in: the user's write lock, a new epoch (every
        job of the user that read before it starts over). Read what to erase inside."""
        with self.store.transaction():
            self.store.lock_user(scope)
            self.store.set_meta(epoch_key(scope), uuid.uuid4().hex)
            yield

    def _report(self, scope: Scope) -> ForgetReport:
        backend = "main store" if self.sessions is None or not self.sessions.hot_log \
            else self.sessions.url.split(":", 1)[0]
        return ForgetReport(scope.user_id, backend)

    def _item_texts(self, scope: Scope, item_id: str, sources: set[str],
                    sessions: set[str] | None = None) -> set[str]:
        texts: set[str] = set()
        for version in self.store.history(scope, item_id):
            for value in (version.before, version.after):
                if value:
                    texts.add(str(value.get("content", "")))
                    sources.update(value.get("source_message_ids") or ())
                    if sessions is not None and value.get("source_session_id"):
                        sessions.add(str(value["source_session_id"]))
        return texts

    def _drop_stages(self, scope: Scope, session_ids: set[str], report: ForgetReport) -> set[str]:
        """Delete the stage-summary items of these sessions (they quote the session's
        items and summary) and queue their consolidation again; returns their texts."""
        wanted = {stage_attribute(sid): sid for sid in session_ids}
        if not wanted:
            return set()
        texts: set[str] = set()
        events = self.store.list_items(scope, Filters(kinds=(Kind.EVENT,), statuses=tuple(Status)),
                                       limit=10**9)
        for item in events:
            sid = wanted.get(item.attribute or "")
            if sid is None:
                continue
            texts |= self._item_texts(scope, item.id, set())
            self.store.delete_item(scope, item.id)
            self.store.set_meta(consolidated_key(scope, sid), "forgotten")
            enqueue(self.store, scope, ConsolidatePayload(sid))
            report.stages += 1
        return texts

    def forget(self, scope: Scope, item_ids: Sequence[str], *,
               messages: bool = False) -> ForgetReport:
        """Hard delete items: rows, versions, index documents, vectors, the cached
        embeddings of every text they ever had and (with ``messages``) the raw turns
        they were extracted from, wherever they are held."""
        report = self._report(scope)
        texts: set[str] = set()
        sources: set[str] = set()
        sessions: set[str] = set()
        with self.exclusive(scope):
            for item_id in item_ids:
                texts |= self._item_texts(scope, item_id, sources, sessions)
                self.store.delete_item(scope, item_id)
                report.items += 1
            if messages and sources:
                self._forget_messages(scope, sources, report)
            texts |= self._drop_stages(scope, sessions, report)
            hashes = _hashes(scope, texts)
            self.store.forget_vectors(self.embedder.name, hashes)
            report.cached_vectors += len(hashes)
            report.profile = self.profiles.refresh_if_cached(scope) is not None
        log.info("forgot %d item(s) of %r: %s", len(item_ids), scope.user_id, report)
        return report

    def forget_turns(self, scope: Scope, message_ids: Sequence[str]) -> int:
        """Hard delete raw turns by id — rows, held copies, index documents, cached
        vectors — re-embed and re-index the turns whose vector or context carried their
        words, and rebuild their sessions' summaries. Returns how many of the ids were
        found. Used by spoken forgetting for the turns that state what is forgotten,
        including the request."""
        return self.forget_turns_report(scope, message_ids).turns

    def forget_turns_report(self, scope: Scope, message_ids: Sequence[str]) -> ForgetReport:
        """:meth:`forget_turns`, returning the whole report."""
        report = self._report(scope)
        ids = set(message_ids)
        if ids:
            with self.exclusive(scope):
                self._forget_messages(scope, ids, report)
            log.info("forgot %d turn(s) of %r: %s", report.turns, scope.user_id, report)
        return report

    def _session_ids(self, scope: Scope) -> list[str]:
        ids = [info.session_id for info in self.store.list_sessions(scope)]
        if self.sessions is not None:
            ids += self.sessions.session_ids(scope)
        return list(dict.fromkeys(ids))

    def _messages(self, scope: Scope, session_id: str) -> list[Message]:
        if self.sessions is not None:
            return self.sessions.messages(scope, session_id)
        return self.store.get_messages(scope, session_id)

    def _forget_messages(self, scope: Scope, ids: set[str], report: ForgetReport) -> None:
        texts: set[str] = set()
        touched: dict[str, tuple[list[Message], set[str]]] = {}
        for session_id in self._session_ids(scope):
            every = self._messages(scope, session_id)
            gone = [m for m in every if m.id in ids]
            if not gone:
                continue
            kept = [m for m in every if m.id not in ids]
            before = [m for m in every if m.role is not Role.SYSTEM]
            after = [m for m in kept if m.role is not Role.SYSTEM]
            # a turn's vector embeds its predecessor's text: every turn whose dense text
            # changes loses its cached vector and is embedded again
            old = {m.id: window_texts(before, i)[3] for i, m in enumerate(before)}
            new = {m.id: window_texts(after, i)[3] for i, m in enumerate(after)}
            changed = {mid for mid, text in new.items() if old.get(mid) != text}
            texts.update(m.text for m in gone)
            texts.update(old[m.id] for m in before if m.id in ids or m.id in changed)
            report.turns += len(gone)
            if self.sessions is not None:
                report.held += self.sessions.forget_messages(scope, session_id, [m.id for m in gone])
            touched[session_id] = (kept, changed)
        self.store.delete_messages(scope, sorted(ids))
        texts |= self._drop_stages(scope, set(touched), report)
        hashes = _hashes(scope, texts)
        self.store.forget_vectors(self.embedder.name, hashes)
        report.cached_vectors += len(hashes)
        for session_id, (kept, changed) in touched.items():
            # neighbouring turns carry a deleted turn's words in their context field
            self.indexer.refresh_session(scope, session_id, kept, reembed=changed)
            report.reembedded += len(changed)
            if self.rebuild_summary is not None and self.rebuild_summary(scope, session_id):
                report.summaries += 1

    def forget_user(self, scope: Scope, *, messages: bool = True) -> ForgetReport:
        """Everything of a user — in the main store and the session store, the user id
        included — then compaction so the bytes leave the files."""
        report = self._report(scope)
        texts: set[str] = set()
        with self.exclusive(scope):
            items = self.store.list_items(scope, _EVERY_STATUS, limit=10**9)
            for item in items:
                texts |= self._item_texts(scope, item.id, set())
            report.items = len(items)
            if messages:
                for session_id in self._session_ids(scope):
                    turns = [m for m in self._messages(scope, session_id) if m.role is not Role.SYSTEM]
                    texts.update(m.text for m in turns)
                    texts.update(window_texts(turns, i)[3] for i in range(len(turns)))
                    report.turns += len(turns)
            self.store.delete_user(scope, messages=messages)
            # after delete_user, which may clear the user's meta: a job that read before
            # this forget must still find the epoch changed
            self.store.set_meta(epoch_key(scope), uuid.uuid4().hex)
            report.profile = self.profiles.blank(scope)
            hashes = _hashes(scope, texts)
            self.store.forget_vectors(self.embedder.name, hashes)
            report.cached_vectors = len(hashes)
        if messages and self.sessions is not None:
            report.keys = self.sessions.forget_user(scope)
        if messages:  # the audit log keeps what was done, under a random id
            report.pseudonym = f"forgotten-{uuid.uuid4().hex[:12]}"
            report.audit = self.store.pseudonymise_audit(scope.namespace, scope.user_id,
                                                         report.pseudonym)
            # a key bound to a user who no longer exists: it stops working, and stops naming them
            report.revoked_keys = self.store.revoke_user_keys(scope.namespace, scope.user_id,
                                                              report.pseudonym, utcnow())
        report.erase_by = self.schedule_erase()
        log.info("forgot user %r: %s", scope.user_id, report)
        return report

    # -- erasing the freed pages: scheduled, batched, off the request path ----------------
    def schedule_erase(self) -> float:
        """Ask for one compaction of the store within ``erase_within_s``; an ask already
        pending is earlier and covers this one too (it runs after this commit). Returns
        when it is due (epoch seconds)."""
        with self.store.transaction():
            pending = self.store.get_meta(ERASE_DUE)
            due = float(pending) if pending else time.time() + self.erase_within_s
            if not pending:
                self.store.set_meta(ERASE_DUE, repr(due))
        return due

    def erase_if_due(self, now: float | None = None) -> CompactReport | None:
        """Run the scheduled compaction if it is due (one process takes it); None when
        nothing was due. A compaction that could not finish (a reader held an old SQLite
        snapshot) is asked for again in a minute."""
        now = time.time() if now is None else now
        pending = self.store.get_meta(ERASE_DUE)
        if not pending or float(pending) > now:
            return None
        with self.store.transaction():
            if self.store.get_meta(ERASE_DUE) != pending:
                return None  # another worker took it
            self.store.set_meta(ERASE_DUE, "")
        started = time.monotonic()
        report = self.store.compact(wait_s=self.compact_wait_s)
        if report.checkpointed:
            log.info("erased the pages freed by forgetting (%.1f s after it was due, in %.1f s): %s",
                     now - float(pending) + report.waited_s, time.monotonic() - started,
                     report.to_dict())
        else:
            log.warning("erasing freed pages: %s; trying again in a minute", report.detail)
            self.store.set_meta(ERASE_DUE, repr(now + min(60.0, self.erase_within_s)))
        return report
