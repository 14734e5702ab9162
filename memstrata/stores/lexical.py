"""An in-process BM25 index per scope: postings as numpy arrays, scored vectorised.

The SQLite backend keeps each document's analysed tokens durable (in its FTS5 table)
and mirrors a scope's postings here on first search, then keeps the mirror in step on
every write. Scoring one query over 100k documents is a few numpy gathers, where
FTS5's ``bm25()`` has to walk every matching row in C and then sort (≈ 5× slower at
100k in ``memstrata bench latency``).

The formula is FTS5's ``bm25()`` with per-field weights — the PostgreSQL backend uses
the same — with statistics taken per scope (user), so one user's ranking never depends
on another user's data::

    freq  = body_weight · tf(body) + context_weight · tf(context)
    idf   = ln((N − n + 0.5) / (n + 0.5)), floored at 1e-6
    score = Σ_terms idf · freq · (k1 + 1) / (freq + k1 · (1 − b + b · |D| / avg|D|))

with k1 = 1.2, b = 0.75 and |D| the document's token count plus one (the scope token
FTS5 also counts).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

__all__ = ["LexicalIndex", "K1", "B"]

K1 = 1.2
B = 0.75


class _Grow:
    """A growable 1-d numpy array."""

    def __init__(self, dtype: type) -> None:
        self.data: np.ndarray = np.zeros(64, dtype=dtype)
        self.n = 0

    def append(self, value: object) -> None:
        if self.n == len(self.data):
            bigger = np.zeros(len(self.data) * 2, dtype=self.data.dtype)
            bigger[: self.n] = self.data
            self.data = bigger
        self.data[self.n] = value
        self.n += 1

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.n]


class LexicalIndex:
    """BM25 over two fields (body, context) for the documents of one scope."""

    def __init__(self, generation: int = 0) -> None:
        self.generation = generation
        self._row: dict[str, int] = {}
        self._ids: list[str] = []
        self._length = _Grow(np.float32)
        self._alive = _Grow(bool)  # counts in the statistics
        self._visible = _Grow(bool)  # returned by default (active items, all turns)
        self._postings: dict[str, tuple[list[int], list[int], list[int]]] = {}
        self._frozen: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._total = 0.0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def upsert(self, doc_id: str, body: str, context: str, visible: bool = True) -> None:
        """Add a document, replacing any earlier version of it."""
        self.remove(doc_id)
        body_tokens, context_tokens = body.split(), context.split()
        row = len(self._ids)
        self._ids.append(doc_id)
        self._row[doc_id] = row
        length = len(body_tokens) + len(context_tokens) + 1
        self._length.append(length)
        self._alive.append(True)
        self._visible.append(visible)
        self._total += length
        self._count += 1
        in_body, in_context = Counter(body_tokens), Counter(context_tokens)
        for term in in_body.keys() | in_context.keys():
            rows, tf_body, tf_context = self._postings.setdefault(term, ([], [], []))
            rows.append(row)
            tf_body.append(in_body.get(term, 0))
            tf_context.append(in_context.get(term, 0))
            self._frozen.pop(term, None)

    def remove(self, doc_id: str) -> None:
        row = self._row.pop(doc_id, None)
        if row is None:
            return
        self._alive.data[row] = False
        self._visible.data[row] = False
        self._total -= float(self._length.data[row])
        self._count -= 1
        self._ids[row] = ""

    def set_visible(self, doc_id: str, visible: bool) -> None:
        row = self._row.get(doc_id)
        if row is not None:
            self._visible.data[row] = visible

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        frozen = self._frozen.get(term)
        if frozen is None:
            raw = self._postings.get(term)
            if raw is None:
                return None
            frozen = (np.asarray(raw[0], dtype=np.int64), np.asarray(raw[1], dtype=np.float32),
                      np.asarray(raw[2], dtype=np.float32))
            self._frozen[term] = frozen
        return frozen

    def search(self, terms: list[str], limit: int, *, context_weight: float = 0.3,
               body_weight: float = 1.0, allowed: set[str] | None = None) -> list[tuple[str, float]]:
        """Top ``limit`` (doc id, score > 0), best first; ties by insertion order.

        ``allowed`` (ids, possibly hidden ones) replaces the default visibility mask.
        """
        if not self._count or limit <= 0:
            return []
        n_rows = len(self._ids)
        alive = self._alive.view
        length = self._length.view
        average = self._total / self._count
        scores = np.zeros(n_rows, dtype=np.float64)
        for term in set(terms):
            posting = self._posting(term)
            if posting is None:
                continue
            rows, tf_body, tf_context = posting
            keep = alive[rows]
            rows, tf_body, tf_context = rows[keep], tf_body[keep], tf_context[keep]
            n = len(rows)  # documents holding the term in either field, whatever the weights
            if not n:
                continue
            idf = math.log((self._count - n + 0.5) / (n + 0.5))
            if idf <= 0:
                idf = 1e-6
            freq = body_weight * tf_body + context_weight * tf_context
            hit = freq > 0
            rows, freq = rows[hit], freq[hit]
            norm = K1 * (1 - B + B * length[rows] / average)
            scores[rows] += idf * freq * (K1 + 1) / (freq + norm)
        if allowed is None:
            mask = self._visible.view & (scores > 0)
        else:
            mask = np.zeros(n_rows, dtype=bool)
            mask[[self._row[i] for i in allowed if i in self._row]] = True
            mask &= scores > 0
        candidates = np.flatnonzero(mask)
        if not len(candidates):
            return []
        if len(candidates) > limit:
            part = np.argpartition(-scores[candidates], limit - 1)[:limit]
            candidates = candidates[part]
        order = np.lexsort((candidates, -scores[candidates]))
        return [(self._ids[r], float(scores[r])) for r in candidates[order]]
