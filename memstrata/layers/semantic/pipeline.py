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

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from memstrata.errors import NotFoundError
from memstrata.providers.embedders import Embedder
from memstrata.retrieval.documents import item_texts
from memstrata.retrieval.indexer import Indexer, embed_cached
from memstrata.retrieval.search import Retriever
from memstrata.stores.base import ItemStore, Job, JobQueue, Lifecycle, MessageLog, SearchIndex, VectorCache
from memstrata.types import Filters, Layer, MemoryItem, Message, Role, Scope, Status, new_id, utcnow

from .credibility import CredibilityConfig, screen
from .decide import (Action, DecayConfig, DecideConfig, FeedbackConfig, Neighbor, apply_decision,
                     decay, decide, evict, forget_request, to_item)
from .extract import Candidate, extract
from .forget import Forgetter
from .items import ItemWriter
from .llm import LLMExtractor
from .profiles import Profiles

__all__ = ["PipelineConfig", "Pipeline", "MaintenanceReport"]

log = logging.getLogger("memstrata.pipeline")

_SEMANTIC = Filters(layers=(Layer.SEMANTIC,))
_OPS = {Action.BOOST: "boost", Action.SUPERSEDE: "supersede", Action.KEEP_BOTH: "edit"}


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


class _PipelineBackend(Lifecycle, MessageLog, ItemStore, JobQueue, SearchIndex, VectorCache,
                       Protocol):
    """What the write path needs of a store."""


class Pipeline:
    """The L3 jobs (extract, maintain, profile) through one store, one embedder, the item
    writer and, when configured, the LLM."""

    def __init__(self, store: _PipelineBackend, embedder: Embedder, retriever: Retriever,
                 writer: ItemWriter, forgetter: Forgetter, profiles: Profiles,
                 config: PipelineConfig = PipelineConfig(),
                 extractor: LLMExtractor | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.retriever = retriever
        self.writer = writer
        self.forgetter = forgetter
        self.profiles = profiles
        self.indexer: Indexer = writer.indexer
        self.config = config
        self.extractor = extractor  # the LLM path, when one is configured

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
        self.indexer.index_turns(scope, sid, [m for m in messages if m.seq >= lo])
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
        if self.extractor is not None:  # one call for the job; the rules fill in
            candidates = [c for c in self.extractor.extract(
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
        verdicts = self._prejudge(scope, keep, vectors) if self.extractor is not None and keep else {}
        with self.store.transaction():
            hits = [self.store.vector_search(scope, vector, _SEMANTIC, self.config.neighbours)
                    for vector in (vectors if vectors is not None else ())]
            if forget_ids:
                self.forgetter.forget(scope, forget_ids, messages=self.config.forget_messages)
            written = self._apply(scope, keep, vectors, hits, set(forget_ids), job, now, sid, verdicts)
            self.store.finish_job(job)
        log.info("job %s (extract %r/%s turns %d-%d): %d candidate(s), %d kept, %d write(s), "
                 "%d forgotten", job.id, scope.user_id, sid, lo, hi, len(candidates), len(keep),
                 written, len(forget_ids))

    def _as_item(self, cand: Candidate, scope: Scope, now: datetime, sid: str) -> MemoryItem:
        return to_item(cand, id="probe", user_id=scope.user_id, now=now,
                       namespace=scope.namespace, session_id=sid)

    def _prejudge(self, scope: Scope, cands: Sequence[Candidate],
                  vectors: np.ndarray | None) -> dict[tuple[str, str, int], str]:
        """LLM verdicts for the (candidate, neighbour) pairs ``decide`` will ask about:
        a dry run of the decisions records the band cases, then one call each."""
        assert self.extractor is not None and vectors is not None
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
        judge = self.extractor.judge(scope)
        out = {}
        for cand, item in asked:
            verdict = judge(cand, item)
            if verdict:
                out[(cand.content, item.id, item.version)] = verdict
        return out

    def _apply(self, scope: Scope, cands: Sequence[Candidate], vectors: np.ndarray | None,
               hits: Sequence[list[tuple[str, float]]], gone: set[str], job: Job,
               now: datetime, sid: str, verdicts: dict[tuple[str, str, int], str] | None = None,
               ) -> int:
        """Decide and write each candidate; the number of item versions written."""
        def judge(cand: Candidate, item: MemoryItem) -> str | None:
            return verdicts.get((cand.content, item.id, item.version)) if verdicts else None

        state: dict[str, MemoryItem] = {}
        for item_id in sorted({i for h in hits for i, _ in h} - gone):
            try:
                state[item_id] = self.store.get_item(scope, item_id)
            except NotFoundError:
                pass
        fresh: list[tuple[str, np.ndarray]] = []  # items written by this job, with vectors
        written = 0
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
            elif decision.reason == "llm" and self.extractor is not None:
                actor = self.extractor.source  # a rule candidate, an LLM verdict
            else:
                actor = f"rule:{cand.rule or 'extract'}"
            for row in rows:
                row = row.evolve(metadata={**row.metadata, "job": job.id, "source": actor})
                old = existing if existing is not None and row.id == existing.id else None
                op = _OPS[decision.action] if old is not None else "create"
                state[row.id] = self.writer.write(scope, row, old, op, actor, decision.reason, now)
                written += 1
                if old is None:
                    fresh.append((row.id, vectors[i]))
        return written

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

    # -- maintenance --------------------------------------------------------------------
    def maintain(self, scopes: Sequence[Scope], now: datetime) -> MaintenanceReport:
        """Decay (R3.8) and the per-user cap (R3.7) for each scope; idempotent."""
        deactivated = reweighted = evicted = 0
        changed: list[str] = []
        for scope in scopes:
            with self.store.transaction():
                (d, r, e), ids = self._maintain_scope(scope, now)
            deactivated, reweighted, evicted = deactivated + d, reweighted + r, evicted + e
            changed += ids
        return MaintenanceReport(len(scopes), deactivated, reweighted, evicted,
                                 changed_ids=tuple(changed))

    def _maintain_scope(self, scope: Scope, now: datetime) -> tuple[tuple[int, int, int], list[str]]:
        deactivated = reweighted = evicted = 0
        changed: list[str] = []
        items = self.store.list_items(scope, Filters(), limit=10**9)
        by_id = {i.id: i for i in items}
        for new in decay(items, now, self.config.decay):
            old = by_id[new.id]
            op, reason = (("decay", str(new.metadata.get("decay", "")))
                          if new.status is not old.status else ("reweight", "never recalled"))
            by_id[new.id] = self.writer.write(scope, new, old, op, "rule:decay", reason, now)
            deactivated += new.status is not old.status
            reweighted += new.status is old.status
            changed.append(new.id)
        for item_id in evict(list(by_id.values()), self.config.max_items):
            old = by_id[item_id]
            new = old.evolve(status=Status.INACTIVE, updated_at=now,
                             metadata={**old.metadata, "decay": "evicted"})
            self.writer.write(scope, new, old, "evict", "rule:evict",
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
            self.profiles.refresh(job.scope)
            self.store.finish_job(job)
