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


def decode_terms(blobs: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray]:
    """The :data:`TERM_RECORD` entries of stored records end to end, and for each entry
    the index of its record."""
    counts = np.array([len(b) if b else 0 for b in blobs], dtype=np.int64) // TERM_RECORD.itemsize
    entries = np.frombuffer(b"".join(b for b in blobs if b), dtype=TERM_RECORD)
    return entries, np.repeat(np.arange(len(blobs), dtype=np.int64), counts)


def _lengths(entries: np.ndarray, rows: np.ndarray, n_rows: int) -> np.ndarray:
    """|D| per row: its token count, + 1 as FTS5 counts the scope column's token."""
    total = np.bincount(rows, weights=entries["b"].astype(np.float64) + entries["c"],
                        minlength=n_rows)
    return (total + 1).astype(np.float32)


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

    def __init__(self, hashes: np.ndarray, rows: np.ndarray, tf_body: np.ndarray,
                 tf_context: np.ndarray, length: np.ndarray) -> None:
        """A base of postings sorted by term hash over ``len(length)`` rows, all alive
        (the arrays may be read-only views of stored bytes: the base is never written)."""
        self._hash, self._rows, self._tf_body, self._tf_context = hashes, rows, tf_body, tf_context
        # the tail: postings of rows appended since, in arrival order
        self._t_hash = _Grow(np.uint64)
        self._t_rows = _Grow(np.int32)
        self._t_body = _Grow(np.uint16)
        self._t_context = _Grow(np.uint16)
        self._length = _Grow(np.float32, length)
        self._alive = _Grow(bool, np.ones(len(length), dtype=bool))
        self._total = float(self._length.view.sum(dtype=np.float64))
        self._count = len(length)
        self.tail_rows = 0

    @classmethod
    def from_records(cls, entries: np.ndarray, rows: np.ndarray, n_rows: int) -> "Postings":
        """A base over ``n_rows`` rows: ``entries`` (:data:`TERM_RECORD`) are their term
        records end to end, ``rows`` the row of each entry."""
        order = np.argsort(entries["h"], kind="stable")  # stable: rows ascending per term
        return cls(entries["h"][order], rows[order].astype(np.int32), entries["b"][order],
                   entries["c"][order], _lengths(entries, rows, n_rows))

    def append(self, first_row: int, entries: np.ndarray, rows: np.ndarray, n_rows: int) -> None:
        """Add ``n_rows`` documents at rows ``first_row…`` (the next row numbers):
        ``entries`` are their term records, ``rows`` each entry's row."""
        assert first_row == self._length.n, "rows are appended in order"
        length = _lengths(entries, rows - first_row, n_rows)
        self._length.extend(length)
        self._alive.extend(np.ones(n_rows, dtype=bool))
        self._total += float(length.sum(dtype=np.float64))
        self._count += n_rows
        self.tail_rows += n_rows
        if len(entries):
            self._t_hash.extend(entries["h"])
            self._t_rows.extend(rows.astype(np.int32))
            self._t_body.extend(entries["b"])
            self._t_context.extend(entries["c"])

    def kill(self, rows: np.ndarray) -> None:
        """The documents at ``rows`` are gone (deleted, or replaced by newer rows)."""
        alive = self._alive.view
        rows = rows[alive[rows]]
        alive[rows] = False
        self._total -= float(self._length.view[rows].sum(dtype=np.float64))
        self._count -= len(rows)

    def compacted(self, keep: np.ndarray) -> "Postings":
        """A new base holding only rows ``keep`` (alive rows), renumbered 0… in that order."""
        new_row = np.full(self._length.n, -1, dtype=np.int64)
        new_row[keep] = np.arange(len(keep))
        hashes = np.concatenate([self._hash, self._t_hash.view])
        rows = np.concatenate([self._rows, self._t_rows.view])
        mapped = new_row[rows]
        live = mapped >= 0
        # the base is sorted already and the tail is short: timsort's runs make this linear
        order = np.argsort(hashes[live], kind="stable")
        return Postings(hashes[live][order], mapped[live][order].astype(np.int32),
                        np.concatenate([self._tf_body, self._t_body.view])[live][order],
                        np.concatenate([self._tf_context, self._t_context.view])[live][order],
                        self._length.view[keep].copy())

    def parts(self) -> dict[str, bytes]:
        """The base as bytes (only for a mirror without tail or dead rows)."""
        assert not self.tail_rows and self._count == self._length.n
        return {"hash": self._hash.tobytes(), "rows": self._rows.tobytes(),
                "tf_body": self._tf_body.tobytes(), "tf_context": self._tf_context.tobytes(),
                "length": self._length.view.tobytes()}

    @classmethod
    def from_parts(cls, parts: dict[str, bytes]) -> "Postings":
        return cls(np.frombuffer(parts["hash"], dtype=np.uint64),
                   np.frombuffer(parts["rows"], dtype=np.int32),
                   np.frombuffer(parts["tf_body"], dtype=np.uint16),
                   np.frombuffer(parts["tf_context"], dtype=np.uint16),
                   np.frombuffer(parts["length"], dtype=np.float32))

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
