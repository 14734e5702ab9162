"""One scope's search structures in process, and a memory budget for all of them.

A :class:`ScopeMirror` holds, for every document of one (namespace, user) — a *row* —
its store row id, its document id, whether it is visible by default, its BM25 postings
(:class:`~memstrata.stores.lexical.Postings`) and its int8 vector
(:class:`~memstrata.stores.dense.QuantizedMatrix`). It is built from stored records in
one vectorised pass and then follows the store's change log: a document written again
gets a new row (the old one dies), a deleted one dies. ``seq`` is the last change
applied. Ties in either ranking are broken by the store row id — insertion order, as
PostgreSQL breaks them — whatever order the changes arrived in.

:class:`MirrorCache` keeps the mirrors of recently searched scopes under a byte budget
(least recently used first out), so a server touching 10,000 users holds only as many
as fit; an evicted scope is rebuilt from the store when it is searched again.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np

from .dense import QuantizedMatrix
from .lexical import TERM_RECORD, Postings, _Grow, decode_terms

__all__ = ["DocRecord", "ScopeMirror", "MirrorCache"]


#: A stored document as the mirror needs it: (store row id, document id, visible by
#: default, term record, int8 vector record or None) — the columns of one SQL row.
DocRecord = tuple[int, str, int, "bytes | None", "bytes | None"]


class ScopeMirror:
    """Rows of one scope: ids, visibility, postings and int8 vectors (see the module)."""

    def __init__(self, seq: int, docs: Sequence[DocRecord]) -> None:
        """Rows for ``docs`` (in row id order), reflecting the change log up to ``seq``."""
        self.seq = seq
        n = len(docs)
        columns = list(zip(*docs)) if n else [(), (), (), (), ()]
        rowids, ids, visible, terms, q8s = columns
        self._rowid = _Grow(np.int64, np.array(rowids, dtype=np.int64))
        self._base = n  # rows [0, base) are in row id order: found by binary search
        self._tail: dict[int, int] = {}  # row id -> row, for rows appended since
        self._visible = _Grow(bool, np.array(visible, dtype=bool))
        self._ids: list[str] = list(ids)
        counts = np.array([len(t) if t else 0 for t in terms], dtype=np.int64) // TERM_RECORD.itemsize
        self.lexical = Postings(np.frombuffer(b"".join(t for t in terms if t), dtype=TERM_RECORD),
                                np.repeat(np.arange(n, dtype=np.int32), counts), n)
        self.dense: QuantizedMatrix | None = None
        sizes = Counter(len(q) for q in q8s if q)
        if sizes:
            size = sizes.most_common(1)[0][0]  # one embedder per store; others are ignored
            present = np.array([q is not None and len(q) == size for q in q8s], dtype=bool)
            records = np.frombuffer(b"".join(q for q in q8s if q is not None and len(q) == size),
                                    dtype=np.uint8).reshape(-1, size)
            if not present.all():
                full = np.zeros((n, size), dtype=np.uint8)
                full[present] = records
                records = full
            self.dense = QuantizedMatrix(size - 4, records)

    # -- rows -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.lexical)

    @property
    def rows(self) -> int:
        return self._rowid.n

    @property
    def tail_rows(self) -> int:
        return self.rows - self._base

    @property
    def nbytes(self) -> int:
        """Roughly what this mirror holds in memory (its arrays and tables)."""
        dense = self.dense.nbytes if self.dense is not None else 0
        # a document id: a str of ~25 characters (≈ 75 bytes) and its list slot
        return (self.lexical.nbytes + dense + self._rowid.data.nbytes + self._visible.data.nbytes
                + 83 * len(self._ids) + 100 * len(self._tail) + 1024)

    def row_of(self, rowid: int) -> int | None:
        """The live row of a store row id, or None."""
        row = self._tail.get(rowid)
        if row is None:
            i = int(np.searchsorted(self._rowid.data[: self._base], rowid))
            if i < self._base and self._rowid.data[i] == rowid:
                row = i
        if row is not None and self.lexical.alive[row]:
            return row
        return None

    def rows_of(self, rowids: Iterable[int]) -> np.ndarray:
        found = [self.row_of(int(r)) for r in rowids]
        return np.array([r for r in found if r is not None], dtype=np.int64)

    def id_of(self, row: int) -> str:
        return self._ids[row]

    def rowid_of(self, row: int) -> int:
        return int(self._rowid.data[row])

    def apply(self, seq: int, changed: Iterable[int], docs: "dict[int, DocRecord]") -> None:
        """Apply changes up to ``seq``: every row id in ``changed`` now reads as
        ``docs[rowid]``, or is gone when it is missing there."""
        for rowid in dict.fromkeys(changed):
            old = self.row_of(rowid)
            if old is not None:
                self._kill(old)
            doc = docs.get(rowid)
            if doc is not None:
                self._append(doc)
        self.seq = max(self.seq, seq)

    def _kill(self, row: int) -> None:
        self.lexical.kill(row)
        self._visible.data[row] = False
        if self.dense is not None and row < len(self.dense):
            self.dense.kill(row)
        self._tail.pop(int(self._rowid.data[row]), None)

    def _append(self, doc: DocRecord) -> None:
        rowid, doc_id, visible, terms, q8 = doc
        row = self._rowid.n
        self._rowid.extend(np.array([rowid], dtype=np.int64))
        self._visible.extend(np.array([bool(visible)]))
        self._ids.append(doc_id)
        self._tail[rowid] = row
        self.lexical.append(row, decode_terms(terms))
        if q8 is not None and self.dense is None:
            self.dense = QuantizedMatrix(len(q8) - 4)
        if self.dense is not None:
            self.dense.append(row, q8)

    # -- searching ------------------------------------------------------------------
    def mask(self, allowed_rowids: Iterable[int] | None) -> np.ndarray:
        """Rows a search may return: the visible ones, or exactly ``allowed_rowids``
        (which may name hidden rows, e.g. superseded items asked for by status)."""
        if allowed_rowids is None:
            return self._visible.view & self.lexical.alive
        mask = np.zeros(self.rows, dtype=bool)
        mask[self.rows_of(allowed_rowids)] = True
        return mask

    def best(self, scores: np.ndarray, mask: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """(row, score) of the top ``limit`` positive scores in ``mask``, best first,
        ties by row id."""
        candidates = np.flatnonzero(mask & (scores > 0))
        if not len(candidates) or limit <= 0:
            return []
        if len(candidates) > limit:
            values = scores[candidates]
            kth = np.partition(values, len(values) - limit)[len(values) - limit]
            candidates = candidates[values >= kth]  # every row tied with the last one
        order = np.lexsort((self._rowid.data[candidates], -scores[candidates]))[:limit]
        return [(int(candidates[i]), float(scores[candidates[i]])) for i in order]

    def lexical_search(self, terms: Sequence[str], limit: int, mask: np.ndarray, *,
                       context_weight: float, body_weight: float) -> list[tuple[str, float]]:
        scores = self.lexical.scores(terms, context_weight=context_weight, body_weight=body_weight)
        return [(self.id_of(r), s) for r, s in self.best(scores, mask, limit)]

    def vector_candidates(self, query: np.ndarray, depth: int, mask: np.ndarray) -> list[int]:
        """Store row ids of the rows the int8 pass ranks highest (at most ``depth``)."""
        if self.dense is None:
            return []
        rows = self.dense.candidates(query, depth, mask)
        return [int(r) for r in self._rowid.data[rows]]


class MirrorCache:
    """Mirrors by scope key, least recently used evicted first once their bytes pass
    ``budget`` (the mirror in use is never evicted, even when it alone is larger)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._mirrors: OrderedDict[str, ScopeMirror] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self.total = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._mirrors)

    def get(self, key: str) -> ScopeMirror | None:
        mirror = self._mirrors.get(key)
        if mirror is not None:
            self._mirrors.move_to_end(key)
        return mirror

    def put(self, key: str, mirror: ScopeMirror) -> None:
        """Add or re-measure ``key``'s mirror, then evict others over the budget."""
        self.total -= self._sizes.get(key, 0)
        self._mirrors[key] = mirror
        self._mirrors.move_to_end(key)
        self._sizes[key] = mirror.nbytes
        self.total += self._sizes[key]
        while self.total > self.budget and len(self._mirrors) > 1:
            old, _ = self._mirrors.popitem(last=False)
            self.total -= self._sizes.pop(old)
            self.evictions += 1

    def drop(self, key: str) -> None:
        if self._mirrors.pop(key, None) is not None:
            self.total -= self._sizes.pop(key)

    def clear(self) -> None:
        self._mirrors.clear()
        self._sizes.clear()
        self.total = 0
