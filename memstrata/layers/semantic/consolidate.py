"""Consolidation ("sleep"): a closed session's episode becomes a stage summary and
distilled facts in long-term memory.

A ``consolidate`` job is queued when a session is archived (after its extraction job,
so the session's items exist). :meth:`Consolidator.run` then, in one transaction with
``finish_job``:

* writes the **stage summary** — one EVENT item per session (attribute
  ``stage:<session id>``, tag ``stage``) built from the session's L2 summary (written by
  the LLM summariser when one is configured, the extractive one offline) and the facts
  the session taught: searchable as "what happened in that conversation";
* **distils facts** from the summary's parts (goal, decisions, constraints) with the
  same rules the turns went through (and, with an LLM configured, one metered extraction
  call over them, grounded in the summary's words), deciding against what is stored — a decision the
  turns never stated in first person still becomes an item; one they did is boosted
  once, with the summary as its evidence.

It is idempotent and durable like the other jobs: a meta key records the summary
version consolidated, so a rerun (a crash after commit, a second archive of an
unchanged session) changes nothing.
"""

from __future__ import annotations

import logging
from datetime import datetime

from memstrata.sessions.base import SessionStore
from memstrata.stores.base import Job
from memstrata.stores.jobs import ConsolidatePayload, enqueue
from memstrata.text import detect_language
from memstrata.types import Filters, Kind, MemoryItem, Message, Role, Scope, Status, new_id, utcnow

from .credibility import screen
from .extract import extract_text
from .pipeline import Pipeline
from .stage import consolidated_key, stage_attribute, stage_text

__all__ = ["Consolidator", "stage_text", "consolidated_key", "stage_attribute"]

log = logging.getLogger("memstrata.consolidate")


class Consolidator:
    """Runs ``consolidate`` jobs through the write path's pipeline."""

    def __init__(self, pipeline: Pipeline, sessions: SessionStore) -> None:
        self.pipeline = pipeline
        self.sessions = sessions

    def _key(self, scope: Scope, session_id: str) -> str:
        return consolidated_key(scope, session_id)

    def run(self, job: Job) -> None:
        """Consolidate the payload's ``session_id`` once per summary version."""
        scope, sid = job.scope, ConsolidatePayload.read(job).session_id
        store = self.pipeline.store
        seen = self.pipeline.forgetter.epoch(scope)  # before the reads: see Forgetter.unchanged
        state = self.sessions.load(scope, sid)
        summary = state.summary
        marker = str(summary.version) if summary is not None else "none"
        result: dict[str, object] = {"session_id": sid, "stage": False, "distilled": 0}
        if store.get_meta(self._key(scope, sid)) == marker or summary is None or summary.is_empty:
            with store.transaction():
                store.finish_job(job, result={**result, "skipped": True})
            return
        parts = {p: getattr(summary, p) for p in ("goal", "decisions", "done", "open_questions",
                                                  "constraints")}
        items = [i for i in store.list_items(scope, Filters(), limit=10_000)
                 if i.source_session_id == sid and i.kind is not Kind.EVENT]
        lang = detect_language(" ".join(parts.values()))
        text = stage_text(sid, parts, [i.content for i in items], lang)
        # facts the summary states that the turns may not have, read by the same rules
        said = " ".join(v for k, v in parts.items() if k in ("goal", "decisions", "constraints") and v)
        found = screen(list(extract_text(said.replace("；", "。").replace("; ", ". ")))).long_term
        distilled = [c for c in found if c.attribute not in (None, "notes", "events")]
        if self.pipeline.extractor is not None and said:
            # with an LLM: one metered call over the summary; its items must be grounded
            # in the summary's words, and the rules' slots win where both read a fact
            digest = Message(Role.USER, said, utcnow(), id=f"summary:{sid}")
            distilled = [c for c in screen(self.pipeline.extractor.extract(
                scope, [digest], [digest], distilled)).long_term
                if c.attribute not in ("notes", "events")]
        now = utcnow()
        with self.pipeline.forgetter.unchanged(scope, seen):
            # read again under the write lock: a forget that committed since the reads
            # above rebuilt the summary and deleted items this text may still quote
            if self.sessions.load(scope, sid).summary != summary:
                enqueue(store, scope, ConsolidatePayload(sid))
                store.finish_job(job, result={**result, "skipped": True, "stale": True})
                return
            items = [i for i in store.list_items(scope, Filters(), limit=10_000)
                     if i.source_session_id == sid and i.kind is not Kind.EVENT]
            text = stage_text(sid, parts, [i.content for i in items], lang)
            if text:
                result["stage"] = self._write_stage(scope, sid, text, lang, now, job.id)
            if distilled:
                vectors = self.pipeline.embed_probes(scope, distilled, now, sid)
                hits = [store.vector_search(scope, v, Filters(), self.pipeline.config.neighbours)
                        for v in vectors]
                counts = self.pipeline.apply(scope, distilled, vectors, hits, job, now, sid)
                result["distilled"] = counts["written"]
            store.set_meta(self._key(scope, sid), marker)
            store.finish_job(job, result=result)
        log.info("job %s: consolidated %r/%s -> %s", job.id, scope.user_id, sid, result)

    def _write_stage(self, scope: Scope, sid: str, text: str, lang: str, now: datetime,
                     job_id: str) -> bool:
        store, writer = self.pipeline.store, self.pipeline.writer
        attribute = stage_attribute(sid)
        old = next((i for i in store.list_items(scope, Filters(kinds=(Kind.EVENT,)), limit=10_000)
                    if i.attribute == attribute and i.status is Status.ACTIVE), None)
        if old is not None and old.content == text:
            return False
        if old is not None:
            writer.write(scope, old.evolve(content=text, updated_at=now), old, "edit",
                         "rule:consolidate", "stage summary updated", now)
            return True
        item = MemoryItem(id=new_id("mem"), user_id=scope.user_id, namespace=scope.namespace,
                          kind=Kind.EVENT, content=text, attribute=attribute, value=sid,
                          importance=0.5, created_at=now, updated_at=now,
                          source_session_id=sid, tags=("stage",),
                          metadata={"lang": lang, "job": job_id, "source": "rule:consolidate"})
        writer.write(scope, item, None, "create", "rule:consolidate", "stage summary", now)
        return True
