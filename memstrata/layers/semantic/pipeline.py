"""The L3 write path through the store: the impure shell around the pure stages.

An ``extract`` job (enqueued by :meth:`memstrata.Memory.add` in the same transaction as
the raw messages) runs :func:`extract` → :func:`screen` → :func:`decide` →
:func:`apply_decision` and writes the resulting rows, their version rows (the *why* is
the rule id of the decision) and their index documents **in one transaction** with
``finish_job``: a job's effects commit once or not at all.

Neighbours of a candidate are the user's top ``neighbours`` active semantic-layer
documents by cosine (the store's vector search, with the Memory's embedder through the
embedding cache), plus the items written earlier in the same job.

Session-only candidates (jokes, hedged claims under the credibility threshold) are
dropped: they stay in the raw session log they came from, never in long-term memory.
"Forget that" / "忘掉…" in a user turn is applied here too: see :meth:`Pipeline.run_extract`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memstrata.errors import NotFoundError, ValidationError
from memstrata.providers.embedders import Embedder, content_hash
from memstrata.retrieval.documents import item_texts, speaker_tags, window_texts
from memstrata.retrieval.search import Retriever, embed_cached
from memstrata.stores.base import IndexDoc, Job, ProfileVersion, Store
from memstrata.types import (Filters, ItemVersion, Layer, MemoryItem, Message, Role, Scope,
                             Status, new_id, utcnow)

from .credibility import CredibilityConfig, screen
from .decide import (Action, DecayConfig, DecideConfig, FeedbackConfig, Neighbor, apply_decision,
                     apply_feedback, decay, decide, evict, forget_request)
from .extract import Candidate, extract
from .profile import Profile, aggregate

__all__ = ["PipelineConfig", "Pipeline", "MaintenanceReport", "PROFILE_FIELDS"]

if TYPE_CHECKING:
    from memstrata.assist import Assist

log = logging.getLogger("memstrata.pipeline")


def _turn_doc(turn: Message, texts: tuple[str, str, str, str], session_id: str,
              vector: np.ndarray | None = None) -> IndexDoc:
    """The index document of a raw turn from its :func:`window_texts`; without a
    ``vector`` the store keeps the one it has."""
    display, body, context, _ = texts
    return IndexDoc(id=turn.id, layer=Layer.EPISODIC, text=display, body=body, context=context,
                    created_at=turn.created_at, session_id=session_id, tags=speaker_tags(turn),
                    vector=vector)

_SEMANTIC = Filters(layers=(Layer.SEMANTIC,))
_OPS = {Action.BOOST: "boost", Action.SUPERSEDE: "supersede", Action.KEEP_BOTH: "edit"}
PROFILE_FIELDS = ("name", "role", "goals", "current", "preferences", "language")


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Every knob of the write path (each one a setting in :mod:`memstrata.config`)."""

    decide: DecideConfig = DecideConfig()
    credibility: CredibilityConfig = CredibilityConfig()
    decay: DecayConfig = DecayConfig()
    feedback: FeedbackConfig = FeedbackConfig()
    window: int = 6
    neighbours: int = 5
    max_items: int = 1000
    forget_similarity: float = 0.9
    forget_messages: bool = True

    @classmethod
    def from_settings(cls, s: Any) -> "PipelineConfig":
        return cls(
            decide=DecideConfig(dedup_threshold=s.dedup_threshold, conflict_low=s.conflict_low,
                                boost_step=s.boost_step),
            credibility=CredibilityConfig(session_only_below=s.session_only_below,
                                          require_repetition=s.require_repetition),
            decay=DecayConfig(max_age_days=s.decay_max_age_days,
                              min_confidence=s.decay_min_confidence),
            feedback=FeedbackConfig(up=s.feedback_up, down=s.feedback_down),
            window=s.extract_window, max_items=s.max_items_per_user,
            forget_similarity=s.forget_similarity, forget_messages=s.forget_messages)


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What :meth:`Pipeline.maintain` changed, per counter, over all users it visited."""

    users: int = 0
    deactivated: int = 0
    reweighted: int = 0
    evicted: int = 0
    changed_ids: tuple[str, ...] = field(default=(), repr=False)
    #: ids of the ``maintain`` and ``profile`` jobs enqueued instead of running inline
    queued: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"users": self.users, "deactivated": self.deactivated,
                "reweighted": self.reweighted, "evicted": self.evicted,
                "queued": list(self.queued)}


def _chat(messages: Sequence[Message]) -> int:
    return sum(1 for m in messages if m.role in (Role.USER, Role.ASSISTANT))


class Pipeline:
    """Applies L3 decisions through a store, with one embedder for neighbours and index."""

    def __init__(self, store: Store, embedder: Embedder, retriever: Retriever,
                 config: PipelineConfig = PipelineConfig(), assist: "Assist | None" = None) -> None:
        self.store = store
        self.embedder = embedder
        self.retriever = retriever
        self.config = config
        self.assist = assist  # the LLM path, when one is configured (memstrata.assist)

    # -- writing rows -------------------------------------------------------------------
    def index_item(self, scope: Scope, item: MemoryItem) -> None:
        display, body, context, dense = item_texts(item)
        vector = embed_cached(self.store, self.embedder, [dense])[0]
        self.store.index(scope, [IndexDoc(id=item.id, layer=Layer.SEMANTIC, text=display, body=body,
                                          context=context, created_at=item.created_at,
                                          session_id=item.source_session_id, kind=item.kind.value,
                                          status=item.status.value, tags=item.tags,
                                          importance=item.importance, vector=vector)])

    def index_turns(self, scope: Scope, session_id: str, stored: list[Message], *,
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
        embedded = embed_cached(self.store, self.embedder, [t[3] for t in texts]) if vectors else None
        out = [_turn_doc(turns[i], t, session_id, embedded[j] if embedded is not None else None)
               for j, (i, t) in enumerate(zip(fresh, texts))]
        out += [_turn_doc(turns[i], window_texts(turns, i), session_id)
                for i in range(max(0, fresh[0] - 2), fresh[0])]
        self.store.index(scope, out)

    def write(self, scope: Scope, new: MemoryItem, old: MemoryItem | None, op: str, actor: str,
              reason: str, at: datetime) -> MemoryItem:
        """One version: the row, its version row (with the previous value) and, when the
        text, tags or status changed, its index document."""
        self.store.write_item(scope, new, ItemVersion(new.id, new.version, op, actor, reason, at,
                                                      old.to_dict() if old else None, new.to_dict()))
        if old is None or (old.content, old.tags, old.kind, old.status) != (
                new.content, new.tags, new.kind, new.status):
            self.index_item(scope, new)
        return new

    # -- the extract job --------------------------------------------------------------
    def run_extract(self, job: Job) -> None:
        """Apply one ``extract`` job: payload ``{session_id, from_seq, to_seq}``.

        Candidates come only from the job's own user turns (earlier turns of the window
        were applied by earlier jobs). When the session holds fewer than two chat turns
        the job defers: the next job of the session starts from its first turn. A user
        turn that asks to forget ("forget my address", "忘掉这个") deletes what it names
        — a query is searched among the user's items; an empty one means the items
        extracted from the previous user turn — and, with ``forget_messages``, the raw
        turns those items came from.
        """
        scope = job.scope
        sid, lo, hi = job.payload["session_id"], int(job.payload["from_seq"]), int(job.payload["to_seq"])
        ctx = self.config.window
        start = 0 if lo <= ctx + 2 else lo - ctx
        messages = self.store.get_messages(scope, sid, start=start, limit=hi - start + 1)
        # the job's turns get their vectors here when add() indexed only their words
        # (embedding is the slow part of a write); from the cache when it did not
        self.index_turns(scope, sid, [m for m in messages if m.seq >= lo])
        before = [m for m in messages if m.seq < lo]
        if start == 0 and _chat(before) < 2:
            lo = 0  # earlier jobs of this session deferred: they had under two turns
        own = [m for m in messages if m.seq >= lo]
        forgets = {m.id: q for m in own if m.role is Role.USER
                   and (q := forget_request(m)) is not None}
        own_ids = {m.id for m in own}

        def from_this_job(c: Candidate) -> bool:  # read from the job's turns, not a forget turn
            return bool(set(c.source_message_ids) & own_ids) and not set(c.source_message_ids) & set(forgets)

        candidates = [c for c in extract(messages, window=0) if from_this_job(c)]
        if self.assist is not None:  # one call for the job; the rules fill in
            candidates = [c for c in self.assist.extract(
                scope, messages, [m for m in own if m.id not in forgets], candidates)
                if from_this_job(c)]
        screened = screen(candidates, self.config.credibility)
        if screened.session_only or screened.dropped:
            log.debug("job %s: %d session-only and %d dropped candidates not stored", job.id,
                      len(screened.session_only), len(screened.dropped))
        keep = list(screened.long_term)
        now = utcnow()
        probes = [item_texts(self._as_item(c, scope, now, sid))[3] for c in keep]
        vectors = embed_cached(self.store, self.embedder, probes) if probes else None
        forget_ids = self._forget_targets(scope, messages, forgets)
        # band judgments before the transaction: no LLM call while holding the write lock
        verdicts = self._prejudge(scope, keep, vectors) if self.assist is not None and keep else {}
        with self.store.transaction():
            hits = [self.store.vector_search(scope, vectors[i], _SEMANTIC, self.config.neighbours)
                    for i in range(len(keep))]
            if forget_ids:
                self.forget(scope, forget_ids, messages=self.config.forget_messages)
            self._apply(scope, keep, vectors, hits, set(forget_ids), job, now, sid, verdicts)
            self.store.finish_job(job)

    def _as_item(self, cand: Candidate, scope: Scope, now: datetime, sid: str) -> MemoryItem:
        from .decide import to_item

        return to_item(cand, id="probe", user_id=scope.user_id, now=now,
                       namespace=scope.namespace, session_id=sid)

    def _prejudge(self, scope: Scope, cands: Sequence[Candidate],
                  vectors: np.ndarray | None) -> dict[tuple[str, str, int], str]:
        """LLM verdicts for the (candidate, neighbour) pairs ``decide`` will ask about:
        a dry run of the decisions records the band cases, then one call each."""
        assert self.assist is not None and vectors is not None
        asked: list[tuple[Candidate, MemoryItem]] = []
        for i, cand in enumerate(cands):
            neighbours = []
            for item_id, cos in self.store.vector_search(scope, vectors[i], _SEMANTIC,
                                                         self.config.neighbours):
                try:
                    neighbours.append(Neighbor(self.store.get_item(scope, item_id), cos))
                except NotFoundError:
                    pass
            decide(cand, neighbours, self.config.decide,
                   judge=lambda c, item: asked.append((c, item)))  # records, answers None
        judge = self.assist.judge(scope)
        out = {}
        for cand, item in asked:
            verdict = judge(cand, item)
            if verdict:
                out[(cand.content, item.id, item.version)] = verdict
        return out

    def _apply(self, scope: Scope, cands: Sequence[Candidate], vectors: np.ndarray | None,
               hits: Sequence[list[tuple[str, float]]], gone: set[str], job: Job,
               now: datetime, sid: str, verdicts: dict[tuple[str, str, int], str] | None = None,
               ) -> None:
        def judge(cand: Candidate, item: MemoryItem) -> str | None:
            return verdicts.get((cand.content, item.id, item.version)) if verdicts else None

        state: dict[str, MemoryItem] = {}
        for item_id in sorted({i for h in hits for i, _ in h} - gone):
            try:
                state[item_id] = self.store.get_item(scope, item_id)
            except NotFoundError:
                pass
        fresh: list[tuple[str, np.ndarray]] = []  # items written by this job, with vectors
        for i, cand in enumerate(cands):
            assert vectors is not None
            near = {item_id: cos for item_id, cos in hits[i] if item_id in state}
            near.update({item_id: float(vectors[i] @ vec) for item_id, vec in fresh})
            neighbours = [Neighbor(state[item_id], cos) for item_id, cos in near.items()]
            decision = decide(cand, neighbours, self.config.decide, judge=judge if verdicts else None)
            existing = state.get(decision.target_id) if decision.target_id else None
            rows = apply_decision(decision, cand, existing, id=new_id("mem"), user_id=scope.user_id,
                                  now=now, namespace=scope.namespace, session_id=sid)
            if cand.rule.startswith("llm:"):
                actor = cand.rule
            elif decision.reason == "llm" and self.assist is not None:
                actor = self.assist.source  # a rule candidate, an LLM verdict
            else:
                actor = f"rule:{cand.rule or 'extract'}"
            for row in rows:
                row = row.evolve(metadata={**row.metadata, "job": job.id, "source": actor})
                old = existing if existing is not None and row.id == existing.id else None
                op = _OPS[decision.action] if old is not None else "create"
                state[row.id] = self.write(scope, row, old, op, actor, decision.reason, now)
                if old is None:
                    fresh.append((row.id, vectors[i]))

    def _forget_targets(self, scope: Scope, messages: Sequence[Message],
                        forgets: dict[str, str]) -> list[str]:
        out: list[str] = []
        for mid, query in forgets.items():
            if query:
                out += self.matching(scope, query)
                continue
            seq = next(m.seq for m in messages if m.id == mid)
            previous = [m for m in messages if m.role is Role.USER and m.seq < seq
                        and forget_request(m) is None]
            if previous:
                source = previous[-1].id
                items = self.store.list_items(scope, Filters(statuses=tuple(Status)), limit=10**6)
                out += [i.id for i in items if source in i.source_message_ids]
        return list(dict.fromkeys(out))

    def matching(self, scope: Scope, query: str) -> list[str]:
        """Ids of the user's items a forget query names: a shared word (lexical hit), a slot
        that contains it, or a near-identical meaning (cosine ≥ ``forget_similarity``)."""
        # Words from the query itself (no expansion words), and the raw cosine: the
        # hits' dense part is normalised within the list, so the nearest item always has 1.0.
        result = self.retriever.search(scope, query, k=50, filters=Filters(
            layers=(Layer.SEMANTIC,), statuses=tuple(Status)), touch=False, explain=True,
            expansion=0.0)
        cosine = dict(result.dense_candidates)
        out = [h.id for h in result.hits if h.parts.lexical is not None
               or cosine.get(h.id, 0.0) >= self.config.forget_similarity]
        q = query.casefold().strip()
        for item in self.store.list_items(scope, Filters(statuses=tuple(Status)), limit=10**6):
            slots = " ".join(v for v in (item.attribute, item.value) if v).casefold()
            if q and (q in slots or q in item.content.casefold()):
                out.append(item.id)
        return list(dict.fromkeys(out))

    # -- forgetting -------------------------------------------------------------------
    def forget(self, scope: Scope, item_ids: Sequence[str], *, messages: bool = False) -> None:
        """Hard delete items: rows, versions, index documents, vectors, the cached
        embeddings of every text they ever had and (with ``messages``) the raw turns
        they were extracted from."""
        texts: set[str] = set()
        sources: set[str] = set()
        with self.store.transaction():
            for item_id in item_ids:
                for version in self.store.history(scope, item_id):
                    for value in (version.before, version.after):
                        if value:
                            texts.add(str(value.get("content", "")))
                            sources.update(value.get("source_message_ids") or ())
                self.store.delete_item(scope, item_id)
            if messages and sources:
                self._forget_messages(scope, sources)
            self.store.forget_vectors(self.embedder.name,
                                      [content_hash(t, "passage") for t in texts if t])
            if self.store.get_meta(_snapshot_key(scope)) not in (None, "{}"):
                self.refresh_profile(scope)  # the snapshot must not keep what was forgotten

    def _forget_messages(self, scope: Scope, ids: set[str]) -> None:
        texts, touched = [], []
        for info in self.store.list_sessions(scope):
            for m in self.store.get_messages(scope, info.session_id):
                if m.id in ids:
                    texts.append(m.text)
                    touched.append(info.session_id)
        self.store.delete_messages(scope, sorted(ids))
        self.store.forget_vectors(self.embedder.name, [content_hash(t, "passage") for t in texts])
        for session_id in dict.fromkeys(touched):
            # neighbouring turns carry a deleted turn's words in their context field
            kept = [m for m in self.store.get_messages(scope, session_id) if m.role is not Role.SYSTEM]
            self.store.index(scope, [_turn_doc(m, window_texts(kept, i), session_id)
                                     for i, m in enumerate(kept)])

    def forget_user(self, scope: Scope, *, messages: bool = True) -> None:
        """Everything of a user, then compaction so the bytes leave the file."""
        texts: set[str] = set()
        for item in self.store.list_items(scope, Filters(statuses=tuple(Status)), limit=10**9):
            for version in self.store.history(scope, item.id):
                for value in (version.before, version.after):
                    if value:
                        texts.add(str(value.get("content", "")))
        if messages:
            for info in self.store.list_sessions(scope):
                texts.update(m.text for m in self.store.get_messages(scope, info.session_id))
        with self.store.transaction():
            self.store.delete_user(scope, messages=messages)
            if self.store.get_meta(_snapshot_key(scope)) is not None:
                self.store.set_meta(_snapshot_key(scope), "{}")
            self.store.forget_vectors(self.embedder.name,
                                      [content_hash(t, "passage") for t in texts if t])
        self.store.compact()

    # -- feedback, status, undo -------------------------------------------------------
    def feedback(self, scope: Scope, item_id: str, signal: str, actor: str = "user") -> MemoryItem:
        with self.store.transaction():
            old = self.store.get_item(scope, item_id)
            now = utcnow()
            new = apply_feedback(old, signal, now, self.config.feedback)
            return self.write(scope, new, old, "feedback", actor, f"thumbs {signal}", now)

    def set_status(self, scope: Scope, item_id: str, status: Status, *, actor: str = "api",
                   reason: str = "") -> MemoryItem:
        with self.store.transaction():
            old = self.store.get_item(scope, item_id)
            now = utcnow()
            new = old.evolve(status=status, updated_at=now)
            return self.write(scope, new, old, "status", actor, reason or f"marked {status.value}", now)

    def undo(self, scope: Scope, item_id: str, actor: str = "api") -> MemoryItem | None:
        """Revert an item's last change as a new version. Undoing its creation deletes it
        and, when it superseded another item, makes that one active again (returned)."""
        with self.store.transaction():
            history = self.store.history(scope, item_id)
            last = history[-1]
            item = self.store.get_item(scope, item_id)
            now = utcnow()
            if last.before is None:
                restored = None
                if item.supersedes:
                    try:
                        prev = self.store.get_item(scope, item.supersedes)
                    except NotFoundError:
                        prev = None
                    if prev is not None and prev.status is Status.SUPERSEDED:
                        restored = self.write(scope, prev.evolve(status=Status.ACTIVE, updated_at=now),
                                              prev, "undo", actor, f"undo: {item_id} removed", now)
                self.store.delete_item(scope, item_id)
                return restored
            back = MemoryItem.from_dict(last.before).evolve(updated_at=now, version=item.version,
                                                            access_count=item.access_count,
                                                            last_accessed=item.last_accessed)
            return self.write(scope, back, item, "undo", actor, f"undo {last.op} v{last.version}", now)

    # -- maintenance --------------------------------------------------------------------
    def maintain(self, scopes: Sequence[Scope], now: datetime) -> MaintenanceReport:
        """Decay (R3.8) and the per-user cap (R3.7) for each scope; idempotent."""
        totals = [0, 0, 0]
        changed: list[str] = []
        for scope in scopes:
            with self.store.transaction():
                counts, ids = self._maintain_scope(scope, now)
            totals = [a + b for a, b in zip(totals, counts)]
            changed += ids
        return MaintenanceReport(len(scopes), *totals, changed_ids=tuple(changed))

    def _maintain_scope(self, scope: Scope, now: datetime) -> tuple[tuple[int, int, int], list[str]]:
        deactivated = reweighted = evicted = 0
        changed: list[str] = []
        items = self.store.list_items(scope, Filters(), limit=10**9)
        by_id = {i.id: i for i in items}
        for new in decay(items, now, self.config.decay):
            old = by_id[new.id]
            op, reason = (("decay", str(new.metadata.get("decay", "")))
                          if new.status is not old.status else ("reweight", "never recalled"))
            by_id[new.id] = self.write(scope, new, old, op, "rule:decay", reason, now)
            deactivated += new.status is not old.status
            reweighted += new.status is old.status
            changed.append(new.id)
        for item_id in evict(list(by_id.values()), self.config.max_items):
            old = by_id[item_id]
            new = old.evolve(status=Status.INACTIVE, updated_at=now,
                             metadata={**old.metadata, "decay": "evicted"})
            self.write(scope, new, old, "evict", "rule:evict",
                       f"over the cap of {self.config.max_items}", now)
            evicted += 1
            changed.append(item_id)
        return (deactivated, reweighted, evicted), changed

    def run_maintain(self, job: Job) -> None:
        """Apply one ``maintain`` job: decay and the cap for the job's user at the
        payload's ``now`` (its enqueue time), in one transaction with ``finish_job``.
        Running it again changes nothing: decay at the same instant is a fixed point."""
        now = datetime.fromisoformat(job.payload["now"]) if job.payload.get("now") else utcnow()
        with self.store.transaction():
            counts, _ = self._maintain_scope(job.scope, now)
            self.store.finish_job(job)
        log.debug("job %s: maintain %s -> %s", job.id, job.scope, counts)

    def run_profile(self, job: Job) -> None:
        """Apply one ``profile`` job: re-aggregate the user's core profile and store the
        snapshot :meth:`cached_profile` reads, with ``finish_job`` in one transaction."""
        with self.store.transaction():
            self.refresh_profile(job.scope)
            self.store.finish_job(job)

    # -- core profile -------------------------------------------------------------------
    def profile(self, scope: Scope) -> Profile:
        """Aggregated from active items, then the latest manual overrides on top."""
        items = self.store.list_items(scope, Filters(), limit=10**6)
        base = aggregate(items)
        versions = self.store.profile_versions(scope)
        if not versions:
            return base
        overrides = dict(versions[-1].data)
        changes = {k: (tuple(v) if isinstance(v, (list, tuple)) else v)
                   for k, v in overrides.items() if k in PROFILE_FIELDS}
        return base.__class__(**{**{k: getattr(base, k) for k in PROFILE_FIELDS}, **changes},
                              sources=base.sources)

    def update_profile(self, scope: Scope, changes: dict[str, Any], *, actor: str = "api",
                       reason: str = "update_profile() call") -> Profile:
        unknown = set(changes) - set(PROFILE_FIELDS)
        if unknown:
            raise ValidationError(f"cannot edit profile field(s) {sorted(unknown)}; fields: "
                                  f"{', '.join(PROFILE_FIELDS)}")
        for key, value in changes.items():
            if key in ("goals", "current", "preferences"):
                if value is not None and (isinstance(value, str) or not all(
                        isinstance(v, str) for v in value)):
                    raise ValidationError(f"profile {key} must be a list of strings")
            elif value is not None and not isinstance(value, str):
                raise ValidationError(f"profile {key} must be a string or None")
        versions = self.store.profile_versions(scope)
        data = dict(versions[-1].data) if versions else {}
        for key, value in changes.items():
            if value is None:
                data.pop(key, None)  # back to the aggregated value
            else:
                data[key] = list(value) if key in ("goals", "current", "preferences") else value
        self.store.add_profile_version(scope, ProfileVersion(len(versions) + 1, data, actor,
                                                             reason, utcnow()))
        if self.store.get_meta(_snapshot_key(scope)) not in (None, "{}"):
            return self.refresh_profile(scope)
        return self.profile(scope)

    def refresh_profile(self, scope: Scope) -> Profile:
        """Store the current profile as the user's snapshot (latest only, no history)."""
        profile = self.profile(scope)
        self.store.set_meta(_snapshot_key(scope), json.dumps(profile.to_dict(), ensure_ascii=False))
        return profile

    def cached_profile(self, scope: Scope) -> Profile | None:
        """The snapshot the last refresh stored (None when there is none): one key
        read instead of an aggregation over every item, for per-prompt injection."""
        raw = self.store.get_meta(_snapshot_key(scope))
        if not raw or raw == "{}":
            return None
        data = json.loads(raw)
        return Profile(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items()})


def _snapshot_key(scope: Scope) -> str:
    # hashed, so the key itself names no user once forget_user blanked the value
    digest = hashlib.sha256(f"{scope.namespace}\x00{scope.user_id}".encode()).hexdigest()[:24]
    return f"profile-snapshot:{digest}"
