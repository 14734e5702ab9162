"""BM25 over postings held as numpy arrays: one scope's lexical index, in process.

Each document's analysed tokens are stored once more, beside its text, as a small
binary *term record* (:func:`encode_terms`): for every distinct term a 64-bit hash and
its counts in the body and in the context. Loading a scope is then a few SQL reads and
one sort of those records — no tokenising in Python — and a write by any process is one
record to append. Term hashes are BLAKE2b-64 of the term's UTF-8: stable across
processes and machines; two terms of one scope colliding is a 1-in-10¹⁰ event at a
million distinct terms, and would merge their statistics, nothing worse.

The formula is FTS5's ``bm25()`` with per-field weights — the PostgreSQL backend uses
the same — with statistics taken per scope (user), so one user's ranking never depends
on another user's data::

    freq  = body_weight · tf(body) + context_weight · tf(context)
    idf   = ln((N − n + 0.5) / (n + 0.5)), floored at 1e-6
    score = Σ_terms idf · freq · (k1 + 1) / (freq + k1 · (1 − b + b · |D| / avg|D|))

with k1 = 1.2, b = 0.75 and |D| the document's token count plus one (the scope token
FTS5 also counts).

:class:`Postings` keeps a *base* — every posting sorted by term hash, found with one
binary search per query term — and a small *tail* of documents added since the base
was built, scanned directly. The owner (:class:`~memstrata.stores.mirror.ScopeMirror`)
numbers the rows and folds the tail into the base when it grows.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

__all__ = ["Postings", "encode_terms", "decode_terms", "term_hash", "K1", "B", "TERM_RECORD"]

K1 = 1.2
B = 0.75

#: One entry of a term record: the term's hash, its count in the body, in the context.
TERM_RECORD = np.dtype([("h", "<u8"), ("b", "<u2"), ("c", "<u2")])
_MAX_TF = 65535


def term_hash(term: str) -> int:
    """The 64-bit hash a term is stored and looked up by."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


def encode_terms(body: str, context: str) -> bytes:
    """A document's term record: its distinct terms (space-separated analysed tokens in
    ``body`` and ``context``) with their counts, as :data:`TERM_RECORD` entries."""
    in_body, in_context = Counter(body.split()), Counter(context.split())
    terms = sorted(in_body.keys() | in_context.keys())
    record = np.zeros(len(terms), dtype=TERM_RECORD)
    if terms:
        record["h"] = [term_hash(t) for t in terms]
        record["b"] = [min(in_body.get(t, 0), _MAX_TF) for t in terms]
        record["c"] = [min(in_context.get(t, 0), _MAX_TF) for t in terms]
    return record.tobytes()


def decode_terms(blob: bytes | None) -> np.ndarray:
    """The :data:`TERM_RECORD` entries of a stored record (empty for None)."""
    return np.frombuffer(blob or b"", dtype=TERM_RECORD)


class _Grow:
    """A growable 1-d numpy array (amortised appends; ``view`` is the filled part)."""

    def __init__(self, dtype: "np.typing.DTypeLike", data: np.ndarray | None = None) -> None:
        self.data = np.zeros(64, dtype=dtype) if data is None else np.array(data, dtype=dtype)
        self.n = 0 if data is None else len(data)

    def extend(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.data):
            bigger = np.zeros(max(need, 2 * len(self.data), 64), dtype=self.data.dtype)
            bigger[: self.n] = self.data[: self.n]
            self.data = bigger
        self.data[self.n:need] = values
        self.n = need

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.n]


class Postings:
    """The postings and per-row statistics of one scope; rows are numbered by the owner.

    A row is *alive* while its document exists: only alive rows count in N, the average
    length and each term's document frequency, exactly as FTS5 counts its rows.
    """

    def __init__(self, entries: np.ndarray | None = None, rows: np.ndarray | None = None,
                 n_rows: int = 0) -> None:
        """A base over ``n_rows`` rows, every one alive: ``entries`` (:data:`TERM_RECORD`)
        are their term records end to end, ``rows`` the row of each entry."""
        if entries is None or rows is None:
            entries, rows = np.zeros(0, dtype=TERM_RECORD), np.zeros(0, dtype=np.int32)
        rows = rows.astype(np.int32, copy=False)
        # + 1: FTS5 counts the scope column's token in |D|
        length = np.bincount(rows, weights=entries["b"].astype(np.float64) + entries["c"],
                             minlength=n_rows) + 1
        order = np.argsort(entries["h"], kind="stable")  # stable: rows ascending per term
        self._hash = entries["h"][order]  # the base: every posting, by term hash
        self._rows = rows[order]
        self._tf_body = entries["b"][order]
        self._tf_context = entries["c"][order]
        # the tail: postings of rows appended since, in arrival order
        self._t_hash = _Grow(np.uint64)
        self._t_rows = _Grow(np.int32)
        self._t_body = _Grow(np.uint16)
        self._t_context = _Grow(np.uint16)
        self._length = _Grow(np.float32, length)
        self._alive = _Grow(bool, np.ones(n_rows, dtype=bool))
        self._total = float(self._length.view.sum(dtype=np.float64))
        self._count = n_rows
        self.tail_rows = 0

    def append(self, row: int, record: np.ndarray) -> None:
        """Add a document at ``row`` (the next row number)."""
        assert row == self._length.n, "rows are appended in order"
        length = np.float32(int(record["b"].sum(dtype=np.int64))
                            + int(record["c"].sum(dtype=np.int64)) + 1)
        self._length.extend(np.array([length]))
        self._alive.extend(np.array([True]))
        self._total += float(length)
        self._count += 1
        self.tail_rows += 1
        if len(record):
            self._t_hash.extend(record["h"])
            self._t_rows.extend(np.full(len(record), row, dtype=np.int32))
            self._t_body.extend(record["b"])
            self._t_context.extend(record["c"])

    def kill(self, row: int) -> None:
        """The document at ``row`` is gone (deleted, or replaced by a newer row)."""
        alive = self._alive.view
        if alive[row]:
            alive[row] = False
            self._total -= float(self._length.view[row])
            self._count -= 1

    @property
    def alive(self) -> np.ndarray:
        """Per row: the document exists (a view; the owner may read, not write)."""
        return self._alive.view

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self._hash, self._rows, self._tf_body, self._tf_context,
                                      self._t_hash.data, self._t_rows.data, self._t_body.data,
                                      self._t_context.data, self._length.data, self._alive.data))

    def __len__(self) -> int:
        return self._count

    # -- searching ------------------------------------------------------------------
    def _posting(self, h: np.uint64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lo = int(np.searchsorted(self._hash, h, side="left"))
        hi = int(np.searchsorted(self._hash, h, side="right"))
        rows, tf_body, tf_context = self._rows[lo:hi], self._tf_body[lo:hi], self._tf_context[lo:hi]
        if self._t_hash.n:
            hit = np.flatnonzero(self._t_hash.view == h)
            if len(hit):
                rows = np.concatenate([rows, self._t_rows.view[hit]])
                tf_body = np.concatenate([tf_body, self._t_body.view[hit]])
                tf_context = np.concatenate([tf_context, self._t_context.view[hit]])
        return rows, tf_body, tf_context

    def scores(self, terms: Sequence[str], *, context_weight: float = 0.3,
               body_weight: float = 1.0) -> np.ndarray:
        """BM25 of every row for ``terms`` (0 for rows without them or not alive)."""
        n_rows = self._length.n
        scores = np.zeros(n_rows, dtype=np.float64)
        if not self._count:
            return scores
        alive, lengths = self._alive.view, self._length.view
        average = self._total / self._count
        for term in sorted(set(terms)):  # sorted: the same float sums in every process
            rows, tf_body, tf_context = self._posting(np.uint64(term_hash(term)))
            keep = alive[rows]
            rows = rows[keep]
            n = len(rows)  # documents holding the term in either field, whatever the weights
            if not n:
                continue
            idf = math.log((self._count - n + 0.5) / (n + 0.5))
            if idf <= 0:
                idf = 1e-6
            freq = (body_weight * tf_body[keep].astype(np.float32)
                    + context_weight * tf_context[keep].astype(np.float32))
            hit = freq > 0
            rows, freq = rows[hit], freq[hit]
            norm = K1 * (1 - B + B * lengths[rows] / average)
            scores[rows] += idf * freq * (K1 + 1) / (freq + norm)
        return scores
