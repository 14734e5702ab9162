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
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from memstrata.errors import NotFoundError
from memstrata.providers.embedders import Embedder
from memstrata.retrieval.documents import item_texts
from memstrata.retrieval.indexer import Indexer, embed_cached
from memstrata.retrieval.request import SearchRequest
from memstrata.retrieval.search import Retriever
from memstrata.stores.base import (ItemStore, Job, JobQueue, Lifecycle, MessageLog, MetaStore, SearchIndex,
                                   VectorCache)
from memstrata.stores.jobs import ExtractPayload, MaintainPayload
from memstrata.types import Filters, Kind, Layer, MemoryItem, Message, Role, Scope, Status, new_id, utcnow

from .credibility import CredibilityConfig, screen
from .decide import (Action, DecayConfig, DecideConfig, Decision, FeedbackConfig, Neighbor,
                     apply_decision, decay, decide, evict, forget_request, to_item)
from .extract import CORRECTION, Candidate, extract, normalise_value
from .statements import COMPLETION, completes
from .state import SLOTS, SlotMatcher, is_negation, same_name, slot_named
from .values import ValueMatcher
from .forget import Forgetter
from .items import ItemWriter
from .llm import LLMExtractor
from .profiles import Profiles

__all__ = ["PipelineConfig", "Pipeline", "MaintenanceReport"]

log = logging.getLogger("memstrata.pipeline")

_SEMANTIC = Filters(layers=(Layer.SEMANTIC,))
_ACTIVE_ANY = Filters()
_OPEN_TODOS = Filters(kinds=(Kind.TODO,))
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


def _names(query: str, cand: Candidate) -> bool:
    """Does a forget query ("phone number", "电话号码") describe this candidate?"""
    q = query.casefold().strip()
    text = " ".join(x for x in (cand.content, cand.attribute, cand.value) if x).casefold()
    if q and q in text:
        return True
    words = [w for w in re.findall(r"[a-z0-9]{3,}", q) if w not in ("the", "and", "about", "that")]
    return bool(words) and all(w in text for w in words)


class _PipelineBackend(Lifecycle, MessageLog, ItemStore, JobQueue, SearchIndex, VectorCache, MetaStore,
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
        self.values = ValueMatcher(embedder)
        self.slots = SlotMatcher(embedder)

    # -- the extract job --------------------------------------------------------------
    def run_extract(self, job: Job) -> None:
        """Apply one ``extract`` job: payload ``{session_id, from_seq, to_seq}``.

        Candidates come only from the job's own user turns (earlier turns of the window
        are context, applied by earlier jobs); a lone user turn is read at once. A user
        turn that asks to forget ("forget my phone number", "could you forget that?",
        "忘掉我刚才说的…") is resolved against this batch as well as what is stored: the
        statement it names — the previous user turn for "that", the items and this
        batch's statements matching a described query — is not written, its items are
        deleted, and so are the raw turns that state it, the request turn included when
        it repeats what it asks to forget. The job's result counts what was forgotten
        (never the content). A stated completion marks the matching open todo done; a
        bare correction ("不是上海，是北京") edits the slot that held the wrong value.
        """
        scope = job.scope
        seen = self.forgetter.epoch(scope)  # before reading a turn: see Forgetter.unchanged
        span = ExtractPayload.read(job)
        sid, lo, hi = span.session_id, span.from_seq, span.to_seq
        start = max(0, lo - self.config.window)
        messages = self.store.get_messages(scope, sid, start=start, limit=hi - start + 1)
        # the job's turns get their vectors here when add() indexed only their words
        # (embedding is the slow part of a write); from the cache when it did not
        self.indexer.embed_turns(scope, sid, [m for m in messages if m.seq >= lo])
        own = [m for m in messages if m.seq >= lo]
        forgets = {m.id: q for m in own if m.role is Role.USER
                   and (q := forget_request(m)) is not None}
        stated = self._stated_before(messages, forgets)  # "forget that" → the turn it means
        candidates, named = self._job_candidates(scope, messages, own, forgets, stated)
        screened = screen(candidates, self.config.credibility)
        if screened.session_only or screened.dropped:
            log.debug("job %s: %d session-only and %d dropped candidates not stored", job.id,
                      len(screened.session_only), len(screened.dropped))
        now = utcnow()
        keep = self._resolve_people(scope, self._resolve_corrections(scope, list(screened.long_term)))
        vectors = self.embed_probes(scope, keep, now, sid) if keep else None
        forget_ids = self._forget_targets(scope, messages, forgets, stated)
        # turns that state what is forgotten: the statement "that" meant, this batch's
        # statements a query named, and a request that repeats what it asks to forget
        turns = set(stated) | {m for c in named for m in c.source_message_ids} | {
            mid for mid, q in forgets.items() if q}
        # band judgments before the transaction: no LLM call while holding the write lock
        verdicts = self._prejudge(scope, keep, vectors) if self.extractor is not None and keep else {}
        result: dict[str, Any] = {"candidates": len(candidates), "kept": len(keep)}
        # under the user's write lock, and only if none of their turns was forgotten since
        # they were read (else Rerun: the worker runs the job again on what is left)
        with self.forgetter.unchanged(scope, seen):
            hits = [self.store.vector_search(scope, vector, _SEMANTIC, self.config.neighbours)
                    for vector in (vectors if vectors is not None else ())]
            gone_turns = self._forget_now(scope, forget_ids, turns)
            times = {m.id: m.created_at for m in messages}
            counts = self._apply(scope, keep, vectors, hits, set(forget_ids), job, now, sid, verdicts,
                                 times)
            result.update(counts)
            if forgets:
                result["forgotten"] = {"requests": len(forgets), "items": len(forget_ids),
                                       "statements": len(named) + len(stated), "turns": gone_turns}
            self.store.finish_job(job, result=result)
        log.info("job %s (extract %r/%s turns %d-%d): %s", job.id, scope.user_id, sid, lo, hi, result)

    def _job_candidates(self, scope: Scope, messages: Sequence[Message], own: list[Message],
                        forgets: dict[str, str],
                        stated: list[str]) -> tuple[list[Candidate], list[Candidate]]:
        """The candidates read from the job's own turns and not from a forgotten one (the
        LLM's, when one is configured, with the rules filling in), and the statements a
        forget query names."""
        own_ids = {m.id for m in own}
        every = [c for c in extract(messages, window=0) if set(c.source_message_ids) & own_ids]
        named = [c for c in every if any(q and _names(q, c) for q in forgets.values())]
        silenced = set(forgets) | set(stated) | {m for c in named for m in c.source_message_ids}

        def kept(c: Candidate) -> bool:  # read from the job's turns, not a forgotten one
            return bool(set(c.source_message_ids) & own_ids) and not set(c.source_message_ids) & silenced

        candidates = [c for c in every if kept(c)]
        if self.extractor is not None:  # one call for the job; the rules fill in
            candidates = [c for c in self.extractor.extract(
                scope, messages, [m for m in own if m.id not in silenced], candidates) if kept(c)]
        return candidates, named

    def _forget_now(self, scope: Scope, forget_ids: list[str], turns: set[str]) -> int:
        """Delete the forgotten items and, with ``forget_messages``, the turns that state
        them (``turns`` plus each item's sources); the number of turns deleted."""
        gone_turns = 0
        if self.config.forget_messages:
            for item_id in forget_ids:
                turns.update(self._sources(scope, item_id))
        if forget_ids:
            self.forgetter.forget(scope, forget_ids, messages=False)
        if turns and self.config.forget_messages:
            gone_turns = self.forgetter.forget_turns(scope, sorted(turns))
        return gone_turns

    def _stated_before(self, messages: Sequence[Message], forgets: dict[str, str]) -> list[str]:
        """For each "forget that" (an empty query), the user turn it means: the last user
        turn before it that is not itself a request to forget — in this batch or earlier."""
        out: list[str] = []
        for mid, query in forgets.items():
            if query:
                continue
            seq = next(m.seq for m in messages if m.id == mid)
            previous = [m for m in messages if m.role is Role.USER and m.seq < seq
                        and m.id not in forgets and forget_request(m) is None]
            if previous:
                out.append(previous[-1].id)
        return list(dict.fromkeys(out))

    def _resolve_corrections(self, scope: Scope, cands: list[Candidate]) -> list[Candidate]:
        """A bare correction ("不是上海，是北京", "6, not 5") becomes an edit of the slot
        whose value it says was wrong; with no such slot it is dropped. Completions
        pass through (the writer matches them to todos)."""
        if not any(c.attribute == CORRECTION for c in cands):
            return cands
        items = sorted(self.store.list_items(scope, _ACTIVE_ANY, limit=10_000),
                       key=lambda i: i.updated_at, reverse=True)
        out = []
        for cand in cands:
            if cand.attribute != CORRECTION:
                out.append(cand)
                continue
            old = normalise_value(cand.replaces) or ""
            target = next((i for i in items if i.attribute and old and (
                normalise_value(i.value) == old or (cand.replaces or "") in i.content)), None)
            if target is None or not cand.replaces or not cand.value:
                log.debug("correction %r: no slot holds %r", cand.value, cand.replaces)
                continue
            # "其实我女儿是9岁": the new value without the clause's own subject and copula
            value = re.sub(r"^(?:我|他|她)?(?:是|才|已经|现在)*", "", cand.value).strip() or cand.value
            out.append(replace(cand, kind=target.kind, subject=target.subject or "user",
                               attribute=target.attribute, value=value,
                               content=target.content.replace(cand.replaces, value)))
        return out

    def _resolve_people(self, scope: Scope, cands: list[Candidate]) -> list[Candidate]:
        """A person named in a statement is the relative the user gave that name, in
        either script: after "我女儿叫朵朵", "Duoduo is 9 now" is about the daughter
        (subject ``daughter``), so it updates her age (:func:`.state.same_name`)."""
        named = [c for c in cands if c.subject not in ("user", "")]
        if not named:
            return cands
        names = {(c.value or ""): c.attribute[len("family:"):] for c in cands
                 if c.attribute and c.attribute.startswith("family:") and c.value}
        for item in self.store.list_slot_items(scope, "family:", among=10_000):
            if item.attribute and item.value:
                names.setdefault(item.value, item.attribute[len("family:"):])
        out = []
        for cand in cands:
            rel = next((r for name, r in names.items() if cand in named and same_name(name, cand.subject)),
                       None)
            out.append(replace(cand, subject=rel) if rel else cand)
        return out

    def embed_probes(self, scope: Scope, cands: Sequence[Candidate], now: datetime,
                     sid: str) -> np.ndarray:
        """The vectors candidates are compared with stored items by (through the cache)."""
        return embed_cached(self.store, self.embedder, scope, self._probe_texts(scope, cands, now, sid))

    def _probe_texts(self, scope: Scope, cands: Sequence[Candidate], now: datetime, sid: str) -> list[str]:
        return [item_texts(self._as_item(c, scope, now, sid))[3] for c in cands]

    def foreseen(self, scope: Scope, sid: str, messages: Sequence[Message],
                 lo: int) -> tuple[list[str], list[str]]:
        """What an ``extract`` job over ``messages`` (its own turns from seq ``lo``, the
        ones before as context, as :meth:`run_extract` reads them) will embed, as far as
        the rules tell before it runs: ``(probes, slot_texts)`` — its candidates' probe
        texts (embedded through the store's cache) and the slot texts not in the slot
        matcher's cache. The worker embeds those of many queued jobs in a few batches
        instead of each job making a call or two of one text each; a text the job ends
        up not needing costs only its share of a batch, one it needs that was not
        foreseen (after the LLM's or the stored people's say) it embeds itself."""
        own = {m.id for m in messages if m.seq >= lo}
        cands = [c for c in extract(messages, window=0) if set(c.source_message_ids) & own]
        kept = screen(cands, self.config.credibility).long_term
        return self._probe_texts(scope, kept, utcnow(), sid), self.slots.slot_texts(kept)

    def apply(self, scope: Scope, cands: Sequence[Candidate], vectors: np.ndarray,
              hits: Sequence[list[tuple[str, float]]], job: Job, now: datetime,
              sid: str) -> dict[str, int]:
        """Decide and write candidates against their neighbours (``hits``), inside the
        caller's transaction: what consolidation shares with the extract job."""
        return self._apply(scope, cands, vectors, hits, set(), job, now, sid)

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
            decide(cand, neighbours, self.config.decide, same_value=self.values.same,
                   covers=self.values.covers, updates=self.slots.updates,
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
               times: dict[str, datetime] | None = None) -> dict[str, int]:
        """Decide and write each candidate; counts of versions written and todos done."""
        def judge(cand: Candidate, item: MemoryItem) -> str | None:
            return verdicts.get((cand.content, item.id, item.version)) if verdicts else None

        state: dict[str, MemoryItem] = {}
        for item_id in sorted({i for h in hits for i, _ in h} - gone):
            try:
                state[item_id] = self.store.get_item(scope, item_id)
            except NotFoundError:
                pass
        todos = None
        fresh: list[tuple[str, np.ndarray]] = []  # items written by this job, with vectors
        written = done = 0
        # "I don't drive the Corolla anymore, I drive a Tesla": the new value first; when it
        # supersedes the old one, the negation said beside it adds nothing
        order = sorted(range(len(cands)), key=lambda n: is_negation(cands[n].content))
        changed: set[str] = set()  # messages whose statement superseded a fact in this job
        for i in order:
            cand = cands[i]
            if changed & set(cand.source_message_ids) and is_negation(cand.content):
                continue
            assert vectors is not None
            said_done = cand.attribute == COMPLETION
            if said_done or (cand.kind is Kind.EVENT and cand.polarity):
                if todos is None:
                    todos = [t for t in self.store.list_items(scope, _OPEN_TODOS, limit=1000)
                             if t.id not in gone]
                todo = self._todo_closed_by(cand, todos, times, now)
                if todo is not None:  # "I already booked the dentist": that todo is done
                    todos.remove(todo)
                    state[todo.id] = self._mark_done(scope, todo, cand, now)
                    done += 1
                    continue
                if not said_done:
                    pass
                elif cand.rule.endswith("done_any"):
                    continue  # "X已经…了" closes a todo or is not a memory of its own
                else:
                    cand = replace(cand, attribute="events")  # nothing open: an event of its own
            near = {item_id: cos for item_id, cos in hits[i] if item_id in state}
            near.update({item_id: float(vectors[i] @ vec) for item_id, vec in fresh})
            neighbours = [Neighbor(state[item_id], cos) for item_id, cos in near.items()]
            decision = decide(cand, neighbours, self.config.decide,
                              judge=judge if verdicts else None, same_value=self.values.same,
                              covers=self.values.covers, updates=self.slots.updates)
            if decision.action is Action.SUPERSEDE:
                changed.update(cand.source_message_ids)
            for row_id, is_new in self._write_decision(scope, decision, cand, state, job, now, sid, times):
                written += 1
                if is_new:
                    fresh.append((row_id, vectors[i]))
        return {"written": written, "todos_done": done}

    def _todo_closed_by(self, cand: Candidate, todos: list[MemoryItem],
                        times: dict[str, datetime] | None, now: datetime) -> MemoryItem | None:
        """The open todo a stated completion or a past event ("I renewed my passport
        yesterday") closes: one it shares its words with, or for a stated completion the
        one it means in either language ("护照已经续签好了") — only a todo that was open
        when the statement was made."""
        said_when = max((t for m in cand.source_message_ids
                         if (t := (times or {}).get(m))), default=now)
        before = [t for t in todos if t.said_at <= said_when]
        todo = completes(cand, before) if before else None
        if todo is None and cand.attribute == COMPLETION and before:
            todo = self.slots.completes(cand, before)
        return todo

    def _mark_done(self, scope: Scope, todo: MemoryItem, cand: Candidate, now: datetime) -> MemoryItem:
        new = todo.evolve(status=Status.DONE, updated_at=now,
                          metadata={**todo.metadata, "done_by": cand.source_message_ids[:1]})
        return self.writer.write(scope, new, todo, "status", self._actor(cand, None), "said done", now)

    def _write_decision(self, scope: Scope, decision: Decision, cand: Candidate,
                        state: dict[str, MemoryItem], job: Job, now: datetime, sid: str,
                        times: dict[str, datetime] | None) -> list[tuple[str, bool]]:
        """Write the rows a decision makes (``state`` gets what was written); each row's id
        and whether it is a new item."""
        existing = state.get(decision.target_id) if decision.target_id else None
        said = [times[m] for m in cand.source_message_ids if times and m in times]
        rows = apply_decision(decision, cand, existing, id=new_id("mem"), user_id=scope.user_id,
                              now=now, namespace=scope.namespace, session_id=sid,
                              said_at=max(said) if said else None)
        actor = self._actor(cand, decision)
        out = []
        for row in rows:
            row = row.evolve(metadata={**row.metadata, "job": job.id, "source": actor})
            old = existing if existing is not None and row.id == existing.id else None
            op = _OPS[decision.action] if old is not None else "create"
            state[row.id] = self.writer.write(scope, row, old, op, actor, decision.reason, now)
            out.append((row.id, old is None))
        return out

    def _actor(self, cand: Candidate, decision: Any) -> str:
        if cand.rule.startswith("llm:"):
            return cand.rule
        if decision is not None and decision.reason == "llm" and self.extractor is not None:
            return self.extractor.source  # a rule candidate, an LLM verdict
        return f"rule:{cand.rule or 'extract'}"

    def _sources(self, scope: Scope, item_id: str) -> set[str]:
        out: set[str] = set()
        for version in self.store.history(scope, item_id):
            for value in (version.before, version.after):
                out.update((value or {}).get("source_message_ids") or ())
        return out

    def _forget_targets(self, scope: Scope, messages: Sequence[Message],
                        forgets: dict[str, str], stated: Sequence[str]) -> list[str]:
        """Stored items the requests name: a described query's matches, and the items
        extracted from the turns a "forget that" meant."""
        out: list[str] = []
        for query in forgets.values():
            if query:
                out += self.matching(scope, query)
        if stated:
            items = self.store.list_items(scope, Filters(statuses=tuple(Status)), limit=10**6)
            out += [i.id for i in items if set(stated) & set(i.source_message_ids)]
        return list(dict.fromkeys(out))

    def matching(self, scope: Scope, query: str) -> list[str]:
        """Ids of the user's items a forget query names: a shared word (lexical hit), a slot
        that contains it, or a near-identical meaning (cosine ≥ ``forget_similarity``)."""
        # Words from the query itself (no expansion words), and the raw cosine: the
        # hits' dense part is normalised within the list, so the nearest item always has 1.0.
        result = self.retriever.search(scope, SearchRequest(query, k=50, filters=Filters(
            layers=(Layer.SEMANTIC,), statuses=tuple(Status)), scoring="balanced"),
            touch=False, explain=True, expansion=0.0)
        cosine = dict(result.dense_candidates)
        out = [h.id for h in result.hits if h.parts.lexical is not None
               or cosine.get(h.id, 0.0) >= self.config.forget_similarity]
        q = query.casefold().strip()
        named = slot_named(query)  # "forget my work" / "忘掉我的工作": the slot, every version
        attributes = SLOTS[named][0] if named else ()
        for item in self.store.list_items(scope, Filters(statuses=tuple(Status)), limit=10**6):
            slots = " ".join(v for v in (item.attribute, item.value) if v).casefold()
            if q and (q in slots or q in item.content.casefold()) or item.attribute in attributes:
                out.append(item.id)
        return list(dict.fromkeys(out))

    # -- maintenance --------------------------------------------------------------------
    def maintain(self, scopes: Sequence[Scope], now: datetime) -> MaintenanceReport:
        """Decay and the per-user cap for each scope; idempotent."""
        deactivated = reweighted = evicted = 0
        changed: list[str] = []
        for scope in scopes:
            with self.store.transaction():
                self.store.lock_user(scope)
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
        now = MaintainPayload.read(job).now or utcnow()
        with self.store.transaction():
            self.store.lock_user(job.scope)  # reads and writes after any forget, or before it
            counts, _ = self._maintain_scope(job.scope, now)
            self.store.finish_job(job)
        log.debug("job %s: maintain %s -> %s", job.id, job.scope, counts)

    def run_profile(self, job: Job) -> None:
        """Apply one ``profile`` job: re-aggregate the user's core profile and store the
        snapshot :meth:`cached_profile` reads, with ``finish_job`` in one transaction."""
        with self.store.transaction():
            self.store.lock_user(job.scope)  # reads and writes after any forget, or before it
            self.profiles.refresh(job.scope)
            self.store.finish_job(job)
