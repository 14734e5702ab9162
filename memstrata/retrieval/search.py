"""Hybrid retrieval: dense ∥ lexical → fusion → scoring preset → top k.

The :class:`Retriever` holds no state of its own; it asks the store for two candidate
lists, fuses them with :mod:`~memstrata.retrieval.fusion`, scores them with a
:mod:`~memstrata.retrieval.scoring` preset and returns :class:`~memstrata.types.SearchHit`
values whose ``parts`` say how each score was made. ``explain`` keeps every candidate
of both lists, so a caller can see why a hit ranks where it does.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

import numpy as np

from ..providers.embedders import Embedder, QueryCache
from ..providers.rerank import Reranker
from ..stores.base import DocInfo, ItemStore, MetaStore, SearchIndex
from ..text import analyze
from ..types import Filters, Kind, Layer, Scope, ScoreParts, SearchHit, Status, utcnow
from .calibration import Calibration, calibration_for
from .currency import (Stale, asks_about_now, asks_about_past, current_first, earlier_states, latest_first,
                       stale_marks)
from .documents import (RESTATES_TAG, SOURCE_TAG, asks_about_assistant, build_query, is_question,
                        split_question, states_something)
from .fusion import Candidate, Fused, fuse
from .indexer import cache_partition
from .rank import feature_matrix
from .scoring import ScoringPreset, final_score, get_preset
from .settings import RetrieverSettings
from .request import MODES, Mode, SearchRequest
from .units import (ROLES, Unit, is_weak, item_text, merge_units, reply_to, role_of,
                    role_weight, sources_of)

__all__ = ["Retriever", "SearchResult", "Mode", "MODES", "ROLES"]

log = logging.getLogger("memstrata.search")



class _SearchBackend(SearchIndex, ItemStore, MetaStore, Protocol):
    """What search needs of a store: the index, access statistics of items, and ``meta``
    (where the embedder's score calibration is kept)."""


def _speakers_named(query: str, infos: "Iterable[DocInfo]") -> list[str]:
    """The speaker tags of the candidates whose name the query says ("What did Caroline
    say…" → ``speaker:Caroline``)."""
    speakers = {t for info in infos for t in info.tags if t.startswith("speaker:")}
    lowered = query.lower()
    return sorted(t for t in speakers if re.search(rf"(?<!\w){re.escape(t[8:].lower())}(?!\w)", lowered))


def _said_by_user(info: DocInfo | None, hit: SearchHit) -> bool:
    """Whether a hit is something the user stated in a conversation, at a time: their own
    turn that states something (not only a question), or an item drawn from one. A
    knowledge-base chunk, an item remembered directly (a LangGraph store value), an
    assistant's turn or a repeated question is not a statement of the user's current
    state (:func:`.currency.latest_first`)."""
    if info is None:
        return False
    if hit.layer is Layer.EPISODIC:
        return hit.role == "user" and states_something(info.text)
    return hit.layer is Layer.SEMANTIC and any(t.startswith(SOURCE_TAG) for t in info.tags)


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Hits best first, and (when asked) the candidate lists they came from."""

    hits: list[SearchHit]
    lexical_candidates: list[tuple[str, float]] = field(default_factory=list)
    dense_candidates: list[tuple[str, float]] = field(default_factory=list)
    query_tokens: str = ""
    #: hit id -> the value that ordered it (the relative fusion, weights applied; a hit's
    #: ``score`` is the calibrated similarity, which says how well it matched but is not
    #: what ranks hits). Not serialised: a caller that merges lists ranks by it.
    orders: dict[str, float] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"hits": [h.to_dict() for h in self.hits], "query_tokens": self.query_tokens,
                "lexical_candidates": self.lexical_candidates,
                "dense_candidates": self.dense_candidates}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SearchResult":
        return cls([SearchHit.from_dict(h) for h in data["hits"]],
                   [(str(i), float(x)) for i, x in data.get("lexical_candidates", ())],
                   [(str(i), float(x)) for i, x in data.get("dense_candidates", ())],
                   data.get("query_tokens", ""))


_SUPERSEDED = Filters(statuses=(Status.SUPERSEDED,))
_MAX_SUPERSEDED = 2000  # the newest changes of a user; older ones lose their mark first


def _admits(filters: Filters, info: DocInfo) -> bool:
    """Whether the filters of a search let an item in that the ranker did not find."""
    return ((not filters.layers or info.layer in filters.layers) and not filters.session_ids
            and not filters.tags and filters.since is None and filters.until is None
            and (not filters.kinds or any(k.value == info.kind for k in filters.kinds)))


def _best_first(scores: dict[str, float]) -> list[Candidate]:
    return sorted(scores.items(), key=lambda c: (-c[1], c[0]))


def _one_per_doc(per_question: list[list[Fused]]) -> list[Fused]:
    """Every candidate once, as its best question ranked it, best first. Each question of
    a compound query counts as much as the best-matched one: its best candidate is raised
    to that one's similarity, the rest in proportion."""
    best: dict[str, Fused] = {}
    top = max((f[0].similarity for f in per_question if f), default=0.0)
    for fused in per_question:
        lift = top / fused[0].similarity if len(per_question) > 1 and fused and \
            fused[0].similarity > 0 else 1.0
        for f in fused:
            if lift != 1.0:
                f = replace(f, similarity=min(1.0, f.similarity * lift))
            if f.id not in best or f.order_key > best[f.id].order_key:
                best[f.id] = f
    return sorted(best.values(), key=lambda f: (-f.order_key, f.id))


def _hits(merged: list[Unit], parts_of: dict[str, ScoreParts], reranked: dict[str, float],
          min_score: float, k: int, stop_at_k: bool) -> tuple[list[SearchHit], dict[str, float]]:
    """The units as hits, each with its score parts, and the value that ordered each;
    the first ``k`` when ``stop_at_k`` (else all: a later pass reorders them)."""
    hits = []
    orders: dict[str, float] = {}
    for unit in merged:
        if unit.score < min_score:
            continue
        orders[unit.id] = unit.order
        parts = parts_of[unit.parts_id]
        if unit.weight != parts.role_weight or unit.id in reranked:
            parts = replace(parts, role_weight=unit.weight, rerank=reranked.get(unit.id))
        if unit.similarity > parts.similarity:  # an item over its turn: the better of the two
            parts = replace(parts, similarity=unit.similarity)
        since = unit.info.stale_since
        hits.append(SearchHit(id=unit.id, layer=unit.info.layer, text=unit.text, score=unit.score,
                              parts=parts, created_at=unit.info.created_at,
                              session_id=unit.info.session_id,
                              kind=Kind(unit.info.kind) if unit.info.kind else None,
                              role=unit.role, merged_ids=unit.merged,
                              stale_since=datetime.fromtimestamp(since, UTC) if since else None))
        if len(hits) == k and stop_at_k:
            break
    return hits, orders


@dataclass(slots=True)
class _Gathered:
    """The candidate lists of every question of a search — ``(lexical query, fused,
    lexical, dense, ids only expansion found)`` — and each candidate's best lexical and
    dense score over all of them."""

    lists: list[tuple[str, list[Fused], list[Candidate], list[Candidate], set[str]]] = field(
        default_factory=list)
    lexical_all: dict[str, float] = field(default_factory=dict)
    dense_all: dict[str, float] = field(default_factory=dict)


class Retriever:
    """Hybrid search over one store with one embedder."""

    def __init__(self, store: _SearchBackend, embedder: Embedder,
                 settings: RetrieverSettings | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings or RetrieverSettings.from_settings()
        self.queries = QueryCache(embedder, self.settings.query_cache)  # query vectors by text
        self.reranker: Reranker | None = None  # off by default (setting ``reranker``)
        self._calibration: Calibration | None = None  # read from the store on first use

    def _named_speaker(self, query: str, infos: "Iterable[DocInfo]", *,
                       always: bool = False) -> str | None:
        """The speaker tag to boost when the query names exactly one of the speakers
        among the candidates ("What did Caroline say…" → Caroline's turns)."""
        if not self.settings.speaker_boost and not always:
            return None
        named = _speakers_named(query, infos)
        return named[0] if len(named) == 1 else None

    def _candidates(self, scope: Scope, query: str, recent: Sequence[str], filters: Filters,
                    limit: int, mode: Mode, vector: np.ndarray | None, expansion: float,
                    ) -> tuple[list[Fused], list[Candidate], list[Candidate], str, set[str]]:
        """Fused candidates for one question: ``(fused, lexical, dense, lexical_query,
        expanded)`` (``expanded``: the ids only query expansion found)."""
        lexical_query, dense_text = build_query(query, recent, self.settings.query_turns)
        lexical: list[Candidate] = []
        if mode != "dense":
            lexical = self._lexical(scope, lexical_query, filters, limit)
        dense: list[Candidate] = []
        if mode != "lexical":
            if vector is None:
                vector = self.queries.embed([dense_text], cache_partition(scope))[0]
            dense = self.store.vector_search(scope, vector, filters, limit)
        fused = self._fuse(dense, lexical, query)
        expanded: set[str] = set()
        if expansion > 0 and lexical and fused:
            first = {d for d, _ in lexical}
            lexical = self._expand(scope, lexical_query, fused[0].id, lexical, filters, limit,
                                   expansion)
            expanded = {d for d, _ in lexical} - first
            fused = self._fuse(dense, lexical, query)
        return fused, lexical, dense, lexical_query, expanded

    def _lexical(self, scope: Scope, tokens: str, filters: Filters, limit: int) -> list[Candidate]:
        return self.store.lexical_search(scope, tokens, filters, limit,
                                         context_weight=self.settings.context_weight,
                                         body_weight=self.settings.body_weight)

    def _fuse(self, dense: list[Candidate], lexical: list[Candidate], query: str) -> list[Fused]:
        s = self.settings
        dense_map = None
        if dense and s.calibration == "fitted":
            if self._calibration is None:
                self._calibration = calibration_for(self.embedder, self.store)
            dense_map = self._calibration.band(query)
        return fuse(dense, lexical, method=s.fusion, dense_weight=s.dense_weight,
                    lexical_weight=s.lexical_weight, dense_map=dense_map,
                    lexical_saturation=s.lexical_saturation or None)

    def _expand(self, scope: Scope, lexical_query: str, top_id: str, lexical: list[Candidate],
                filters: Filters, limit: int, weight: float) -> list[Candidate]:
        """Query expansion by pseudo-relevance feedback: the words of the best hit that the
        query lacks are a second lexical query, added at ``weight`` (the second list scaled
        to the first one's best score).

        "我刚路过的商场叫什么？" finds "我刚才路过的商场是大润发。"; its new word
        "大润发" then finds "大润发里的东西真全…", which the question never names.
        """
        info = self.store.doc_info(scope, [top_id]).get(top_id)
        asked = set(lexical_query.split())
        extra = [t for t in dict.fromkeys(analyze(info.text)) if t not in asked] if info else []
        if not extra:
            return lexical
        second = [(d, s) for d, s in self._lexical(scope, " ".join(extra), filters, limit)
                  if d != top_id]
        if not second:
            return lexical
        first_best = max(s for _, s in lexical) or 1.0
        second_best = max(s for _, s in second) or 1.0
        scores = dict(lexical)
        for d, s in second:
            scores[d] = scores.get(d, 0.0) + weight * first_best * s / second_best
        return _best_first(scores)[:limit]

    def _stale(self, scope: Scope, infos: Mapping[str, DocInfo],
               ) -> tuple[dict[str, Stale], dict[str, DocInfo]]:
        """Which candidates describe a past state (:func:`.currency.stale_marks`), and
        the index documents of the items that replaced them."""
        if not infos:
            return {}, {}
        superseded = self.store.list_items(scope, _SUPERSEDED, limit=_MAX_SUPERSEDED)
        if not superseded:
            return {}, {}
        targets = {str(i.metadata["replaced_by"]) for i in superseded
                   if isinstance(i.metadata.get("replaced_by"), str)}
        replacing = {i: d for i, d in self.store.doc_info(scope, sorted(targets)).items()
                     if d.status in (None, Status.ACTIVE.value)}
        sources = {i: [t[len(SOURCE_TAG):] for t in d.tags if t.startswith(SOURCE_TAG)]
                   for i, d in replacing.items()}
        marks = stale_marks(superseded, sources)
        return {i: m for i, m in marks.items() if i in infos}, replacing

    def _sources(self, scope: Scope, infos: Mapping[str, DocInfo]) -> dict[str, DocInfo]:
        """The source turns of the restating items among ``infos`` that are not there."""
        wanted = {s for i in infos.values() if RESTATES_TAG in i.tags for s in sources_of(i)}
        missing = sorted(wanted - infos.keys())
        return self.store.doc_info(scope, missing) if missing else {}

    @staticmethod
    def _current_hit(stale: SearchHit, info: DocInfo, turns: Mapping[str, DocInfo]) -> SearchHit:
        """The hit of the item that replaced a stale hit's fact, in the stale hit's place
        (in its speaker's words where the item says less: :func:`.units.item_text`)."""
        return SearchHit(id=info.id, layer=info.layer, text=item_text(info, turns), score=stale.score,
                         parts=stale.parts, created_at=info.created_at, session_id=info.session_id,
                         kind=Kind(info.kind) if info.kind else None)

    def search(self, scope: Scope, request: SearchRequest, *, explain: bool = False,
               query_vector: np.ndarray | None = None, touch: bool = True,
               split: bool | None = None, expansion: float | None = None,
               collect: "list[tuple[str, list[float]]] | None" = None) -> SearchResult:
        """Top ``request.k`` hits for ``request.query`` in ``scope``, none scoring under
        ``request.min_score`` (the request is taken as valid: callers check it).
        ``collect`` (a list) receives ``(doc id, features)`` of every candidate of every
        question: the learned ranker's inputs (:mod:`.rank`), for
        ``memstrata bench train-ranker``; the order does not use them (yet).

        The request's ``scoring`` preset defaults to the ``scoring`` setting. The
        keywords are the engine's own knobs, not the caller's question: ``explain``
        keeps both candidate lists, ``touch=False`` leaves access statistics alone.

        A compound query ("X? Also, Y?") is searched question by question and each
        candidate keeps its best similarity, so one question cannot crowd the other out
        of the top ``k``. ``query_vector`` is the embedded query and is used when the
        query is a single question. ``split``/``expansion`` override the retriever's
        settings for this call (``expansion=0`` turns query expansion off). Hits are
        units (:mod:`.units`): assistant turns and bare questions weigh less, an
        acknowledgement comes with the turn it answers, an item takes the slot of the
        turn it was extracted from; ``roles`` keeps only turns by those roles.
        """
        query, k, filters, mode = request.query, request.k, request.filters, request.mode
        recent, min_score, roles = request.recent, request.min_score, request.roles
        scoring = get_preset(request.scoring or self.settings.scoring)
        now = request.now or utcnow()
        limit = max(self.settings.candidates, k) * (2 if roles else 1)
        expansion = self.settings.expansion_weight if expansion is None else expansion
        split = self.settings.split_questions if split is None else split
        query, recent, questions = self._questions(query, recent, split)
        vectors = self._question_vectors(scope, questions, recent, mode, query_vector)
        found = self._gather(scope, questions, vectors, recent, filters, limit, mode, expansion)
        fused = _one_per_doc([fused for _, fused, _, _, _ in found.lists])
        infos, marks, replacing = self._mark_stale(scope, self._read_infos(scope, fused))
        if collect is not None:  # the learned ranker's features (memstrata bench train-ranker)
            matrix, owners = feature_matrix(found.lists, infos, query, self._named_speaker(
                query, infos.values(), always=True))
            collect.extend((doc_id, row.tolist()) for (doc_id, _), row in zip(owners, matrix))
        merged, parts_of = self._units(scope, query, fused, infos, now, scoring, roles)
        merged, reranked = self._rerank(scope, query, [u for u in merged if u.score >= min_score])
        hits, orders = _hits(merged, parts_of, reranked, min_score, k, stop_at_k=not marks)
        if marks:  # the final pass: stale evidence never outranks current truth
            hits, orders = self._current_truth(scope, hits, orders, infos, replacing, filters, query, k)
        hits, orders = self._latest(hits, orders, infos, query, k)
        self._log(scope, query, mode, questions, found, fused, merged, hits)
        if touch:
            items = [h.id for h in hits if h.layer is Layer.SEMANTIC]
            if items:
                self.store.touch_items(scope, items, now)
        lexical_all, dense_all = (found.lexical_all, found.dense_all) if explain else ({}, {})
        return SearchResult(hits, _best_first(lexical_all), _best_first(dense_all),
                            " | ".join(q for q, *_ in found.lists), orders)

    def _questions(self, query: str, recent: Sequence[str],
                   split: bool) -> tuple[str, tuple[str, ...], list[str]]:
        """The query and the recent turns cut to ``max_query_chars``, and the query's
        questions: bounded work whatever the caller sends (the questions past
        ``max_query_parts`` are searched as one; cost grows with the number of parts)."""
        query = query[:self.settings.max_query_chars]
        recent = tuple(r[-self.settings.max_query_chars:] for r in recent)
        questions = split_question(query) if split else [query]
        cap = self.settings.max_query_parts
        if len(questions) > cap:
            questions = [*questions[:cap - 1], " ".join(questions[cap - 1:])]
        return query, recent, questions

    def _question_vectors(self, scope: Scope, questions: list[str], recent: Sequence[str],
                          mode: Mode, query_vector: np.ndarray | None) -> list[np.ndarray | None]:
        """The caller's ``query_vector`` for a single question; each question of a compound
        query embedded with the recent turns (none for a lexical search)."""
        if len(questions) <= 1:
            return [query_vector]
        if mode == "lexical":
            return [None] * len(questions)
        texts = [build_query(q, recent, self.settings.query_turns)[1] for q in questions]
        return list(self.queries.embed(texts, cache_partition(scope)))

    def _gather(self, scope: Scope, questions: list[str], vectors: list[np.ndarray | None],
                recent: Sequence[str], filters: Filters, limit: int, mode: Mode,
                expansion: float) -> "_Gathered":
        """Every question's candidate lists, under one index refresh."""
        out = _Gathered()
        with self.store.one_search(scope):  # the index brought up to date once for all lists
            for question, vector in zip(questions, vectors):
                fused, lexical, dense, lexical_query, expanded = self._candidates(
                    scope, question, recent, filters, limit, mode, vector, expansion)
                out.lists.append((lexical_query, fused, lexical, dense, expanded))
                for pool, found in ((out.lexical_all, lexical), (out.dense_all, dense)):
                    for d, s in found:
                        pool[d] = max(s, pool.get(d, s))
        return out

    def _read_infos(self, scope: Scope, fused: list[Fused]) -> dict[str, DocInfo]:
        """The candidates' documents in their fused order."""
        infos = self.store.doc_info(scope, [f.id for f in fused])
        return {f.id: infos[f.id] for f in fused if f.id in infos}

    def _mark_stale(self, scope: Scope, infos: dict[str, DocInfo],
                    ) -> tuple[dict[str, DocInfo], dict[str, Stale], dict[str, DocInfo]]:
        """``infos`` with the candidates that describe a past state marked, the marks, and
        the index documents of the items that replaced them."""
        marks, replacing = self._stale(scope, infos)
        if marks:
            infos = {i: replace(info, stale_since=marks[i].since.timestamp(),
                                replaced_by=marks[i].replaced_by) if i in marks else info
                     for i, info in infos.items()}
        return infos, marks, replacing

    def _units(self, scope: Scope, query: str, fused: list[Fused], infos: dict[str, DocInfo],
               now: datetime, scoring: ScoringPreset,
               roles: tuple[str, ...]) -> tuple[list[Unit], dict[str, ScoreParts]]:
        """The candidates scored and merged into units (:mod:`.units`): an acknowledgement
        with the turn it answers, an item in the slot of its turn; each one's score parts."""
        answered_ids = {r for r in (reply_to(i) for i in infos.values()) if r}
        missing = sorted(answered_ids - infos.keys())
        answered = {**{i: infos[i] for i in answered_ids if i in infos},
                    **(self.store.doc_info(scope, missing) if missing else {})}
        boosted = self._named_speaker(query, infos.values())
        about_assistant = asks_about_assistant(query)
        weigh = partial(role_weight, query_is_question=is_question(query),
                        about_assistant=about_assistant,
                        assistant_weight=self.settings.assistant_weight,
                        question_weight=self.settings.question_weight)
        units, parts_of = [], {}
        for f in fused:
            info = infos.get(f.id)
            if info is None:  # deleted between the two reads
                continue
            score, fresh, layer_weight = final_score(f.similarity, info.created_at, info.importance,
                                                     info.layer.value, now, scoring)
            boost = 1.0 + self.settings.speaker_boost if boosted and boosted in info.tags else 1.0
            weight = weigh(info)
            parts_of[info.id] = ScoreParts(
                similarity=f.similarity, dense=f.dense, lexical=f.lexical, recency=fresh,
                importance=info.importance, layer_weight=layer_weight, dense_rank=f.dense_rank,
                lexical_rank=f.lexical_rank, preset=scoring.name, boost=boost, role_weight=weight)
            order = score if f.order is None else final_score(
                f.order, info.created_at, info.importance, info.layer.value, now, scoring)[0]
            units.append(Unit(info.id, info, score * boost * weight, weight, info.text,
                              role_of(info), similarity=f.similarity,
                              weak=is_weak(info, query, about_assistant=about_assistant),
                              rank=order * boost * weight))
        merged = merge_units(units, answered, {i: weigh(a) for i, a in answered.items()},
                             {i: is_weak(a, query, about_assistant=about_assistant)
                              for i, a in answered.items()}, roles, self._sources(scope, infos))
        return merged, parts_of

    def _rerank(self, scope: Scope, query: str, merged: list[Unit]) -> tuple[list[Unit], dict[str, float]]:
        """The head of the list reordered by the reranker, when one is set and may run now,
        and its scores."""
        reranked: dict[str, float] = {}
        if self.reranker is not None and self.settings.rerank_k > 0 and len(merged) > 1:
            head = merged[:self.settings.rerank_k]
            scores = self.reranker.rerank(query, [u.text for u in head], scope=scope)
            if scores is not None:  # None: the reranker may not run now (budget spent)
                reranked = {u.id: float(x) for u, x in zip(head, scores)}
                head = sorted(head, key=lambda u: -reranked[u.id])
                merged = head + merged[len(head):]
        return merged, reranked

    def _current_truth(self, scope: Scope, hits: list[SearchHit], orders: dict[str, float],
                       infos: dict[str, DocInfo], replacing: dict[str, DocInfo], filters: Filters,
                       query: str, k: int) -> tuple[list[SearchHit], dict[str, float]]:
        """Each stale hit's current fact above it (:func:`.currency.current_first`)."""
        chosen = [(h, replacing[r]) for h in hits
                  if (r := infos[h.id].replaced_by if h.id in infos else None) in replacing
                  and _admits(filters, replacing[r])]
        turns = self._sources(scope, {info.id: info for _, info in chosen})  # one read for all
        current = {h.id: self._current_hit(h, info, turns) for h, info in chosen}
        hits = current_first(hits, current, past=asks_about_past(query))[:k]
        return hits, {h.id: orders.get(h.id, h.score) for h in hits}

    def _latest(self, hits: list[SearchHit], orders: dict[str, float], infos: dict[str, DocInfo],
                query: str, k: int) -> tuple[list[SearchHit], dict[str, float]]:
        """The latest statement wins (:func:`.currency.latest_first`) for a question about
        the present — not for one naming a speaker of a transcript between people ("What
        is Caroline reading?", "What do Jon and Gina both like?" ask what they said); and
        what a later change replaced is marked as a former state, to be shown so."""
        if not (self.settings.latest_ratio and asks_about_now(query)
                and not _speakers_named(query, infos.values())):
            return hits, orders
        said = {h.id for h in hits if _said_by_user(infos.get(h.id), h)}
        placed = latest_first(hits[:k], ratio=self.settings.latest_ratio, among=said)
        placed = earlier_states(placed, ratio=self.settings.latest_ratio, among=said,
                                texts={h.id: infos[h.id].text for h in placed if h.id in infos},
                                query=query)
        # each place keeps its score and its order value, whichever hit now stands there
        return placed, {new.id: orders.get(old.id, old.score) for old, new in zip(hits, placed)}

    @staticmethod
    def _log(scope: Scope, query: str, mode: Mode, questions: list[str], found: "_Gathered",
             fused: list[Fused], merged: list[Unit], hits: list[SearchHit]) -> None:
        if log.isEnabledFor(logging.DEBUG):  # DEBUG may quote memory (and says so at start)
            log.debug("search %r for %r (%s, %d question(s)): %d lexical + %d dense candidates "
                      "-> %d fused -> %d units -> top %d%s", query[:80], scope.user_id, mode,
                      len(questions), len(found.lexical_all), len(found.dense_all), len(fused),
                      len(merged), len(hits),
                      "".join(f"\n  {h.score:.3f} [{h.layer.value}] {h.text[:70]}" for h in hits[:5]))
        elif log.isEnabledFor(logging.INFO):  # ids, counts and scores: never a word of memory
            log.info("search for %r (%s, %d question(s), %d characters): %d lexical + %d dense "
                     "candidates -> %d fused -> %d units -> top %d%s", scope.user_id, mode,
                     len(questions), len(query), len(found.lexical_all), len(found.dense_all),
                     len(fused), len(merged), len(hits),
                     "".join(f"\n  {h.score:.3f} [{h.layer.value}] {h.id}" for h in hits[:5]))
