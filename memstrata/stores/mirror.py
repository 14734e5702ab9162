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

import json
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np

from .dense import QuantizedMatrix
from .lexical import Postings, _Grow, decode_terms

__all__ = ["DocRecord", "ScopeMirror", "MirrorCache"]


#: A stored document as the mirror needs it: (store row id, document id, visible by
#: default, term record, int8 vector record or None) — the columns of one SQL row.
DocRecord = tuple[int, str, int, "bytes | None", "bytes | None"]


class ScopeMirror:
    """Rows of one scope: ids, visibility, postings and int8 vectors (see the module)."""

    def __init__(self, seq: int, rowids: np.ndarray, visible: np.ndarray, ids: list[str],
                 lexical: Postings, dense: QuantizedMatrix | None) -> None:
        """Rows in row id order, every one alive, reflecting the change log up to ``seq``
        (use :meth:`build` or :meth:`from_parts`)."""
        self.seq = seq
        #: (the store's data version, its own commit count) when last brought up to date
        self.checked: tuple[int, int] | None = None
        self._rowid = _Grow(np.int64, rowids)
        self._base = len(rowids)  # rows [0, base) are in row id order: found by binary search
        self._tail: dict[int, int] = {}  # row id -> row, for rows appended since
        self._visible = _Grow(bool, visible)
        self._ids = ids
        self.lexical = lexical
        self.dense = dense

    @classmethod
    def build(cls, seq: int, docs: Sequence[DocRecord]) -> "ScopeMirror":
        """Rows for ``docs`` (stored records in row id order)."""
        n = len(docs)
        rowids, ids, visible, terms, q8s = list(zip(*docs)) if n else [(), (), (), (), ()]
        entries, rows = decode_terms(terms)
        return cls(seq, np.array(rowids, dtype=np.int64), np.array(visible, dtype=bool),
                   list(ids), Postings.from_records(entries, rows, n), _vectors(q8s))

    def to_parts(self) -> dict[str, bytes]:
        """The mirror as named byte strings (compact it first: no tail, no dead rows)."""
        meta = {"seq": self.seq, "rows": self.rows,
                "dim": self.dense.dim if self.dense is not None else 0}
        parts = {"meta": json.dumps(meta).encode(), "rowid": self._rowid.view.tobytes(),
                 "visible": self._visible.view.tobytes(),
                 "ids": json.dumps(self._ids, ensure_ascii=False).encode("utf-8"),
                 **self.lexical.parts()}
        if self.dense is not None:
            self.dense.grow(self.rows)
            parts.update(self.dense.parts())
        return parts

    @classmethod
    def from_parts(cls, parts: dict[str, bytes]) -> "ScopeMirror":
        meta = json.loads(parts["meta"])
        dense = QuantizedMatrix.from_parts(meta["dim"], parts) if meta["dim"] else None
        return cls(int(meta["seq"]), np.frombuffer(parts["rowid"], dtype=np.int64),
                   np.frombuffer(parts["visible"], dtype=bool),
                   json.loads(parts["ids"].decode("utf-8")), Postings.from_parts(parts), dense)

    def compacted(self) -> "ScopeMirror":
        """The same documents without dead rows, in row id order, tail folded in."""
        alive = np.flatnonzero(self.lexical.alive)
        keep = alive[np.argsort(self._rowid.view[alive], kind="stable")]
        dense = self.dense.compacted(keep) if self.dense is not None else None
        if dense is not None:
            dense.grow(len(keep))
        return ScopeMirror(self.seq, self._rowid.view[keep].copy(), self._visible.view[keep].copy(),
                           [self._ids[i] for i in keep], self.lexical.compacted(keep), dense)

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

    def apply(self, seq: int, changed: Iterable[int], docs: "dict[int, DocRecord]") -> None:
        """Apply changes up to ``seq``: every row id in ``changed`` now reads as
        ``docs[rowid]``, or is gone when it is missing there."""
        changed = list(dict.fromkeys(changed))
        old = self.rows_of(changed)
        self.lexical.kill(old)
        self._visible.view[old] = False
        if self.dense is not None:
            self.dense.kill(old)
        for rowid in changed:
            self._tail.pop(rowid, None)
        new = [docs[r] for r in changed if r in docs]
        if new:
            first = self.rows
            rowids, ids, visible, terms, q8s = list(zip(*new))
            self._rowid.extend(np.array(rowids, dtype=np.int64))
            self._visible.extend(np.array(visible, dtype=bool))
            self._ids.extend(ids)
            self._tail.update({r: first + i for i, r in enumerate(rowids)})
            entries, rows = decode_terms(terms)
            self.lexical.append(first, entries, rows + first, len(new))
            vectors = _records(q8s, self.dense.dim + 4 if self.dense is not None else None)
            if vectors is not None:
                present, records = vectors
                if self.dense is None:
                    self.dense = QuantizedMatrix(records.shape[1] - 4)
                self.dense.grow(self.rows)
                self.dense.set_rows(np.flatnonzero(present) + first, records[present])
            elif self.dense is not None:
                self.dense.grow(self.rows)
        self.seq = max(self.seq, seq)

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

    def vector_candidates(self, query: np.ndarray, depth: int,
                          mask: np.ndarray) -> dict[int, str]:
        """Store row id -> document id of the rows the int8 pass ranks highest (at most
        ``depth``)."""
        if self.dense is None:
            return {}
        rows = self.dense.candidates(query, depth, mask)
        return {int(self._rowid.data[r]): self._ids[r] for r in rows}


def _records(q8s: Sequence[bytes | None], size: int | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(which rows have a record, an (n, size) uint8 array of them) for int8 vector
    records of one size — the scope's, or the most common one — or None if there is none."""
    if size is None:
        sizes = Counter(len(q) for q in q8s if q)
        if not sizes:
            return None
        size = sizes.most_common(1)[0][0]  # one embedder per store; other sizes are ignored
    present = np.array([q is not None and len(q) == size for q in q8s], dtype=bool)
    if not present.any():
        return None
    records = np.zeros((len(q8s), size), dtype=np.uint8)
    records[present] = np.frombuffer(b"".join(q or b"" for q, p in zip(q8s, present) if p),
                                     dtype=np.uint8).reshape(-1, size)
    return present, records


def _vectors(q8s: Sequence[bytes | None]) -> QuantizedMatrix | None:
    found = _records(q8s, None)
    return QuantizedMatrix.from_records(found[1]) if found is not None else None


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
