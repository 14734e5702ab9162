"""Vectors of one scope in process: an int8 matrix for a first pass, exact cosine after.

Each stored vector also keeps an int8 copy beside it (:func:`quantize`: the vector
scaled so its largest component is ±127, and that scale), written with the vector.
Searching multiplies the query by the whole int8 matrix with SimSIMD's integer
dot-product kernels (AVX-512 VNNI, AVX2, NEON…: a quarter of float32's memory traffic,
≈ 1.5 ms at 100k × 384 where numpy's float32 product takes 10–15 ms), keeps the best
``depth`` rows, and the owner re-scores those exactly from the stored float32 vectors.
The returned cosines are exact; the int8 pass only chooses which rows to re-score, and
``memstrata bench latency`` measures how often that choice misses a row of the exact
top ``limit`` (recall@10 of the first pass against a full exact scan).
"""

from __future__ import annotations

import numpy as np
import simsimd

__all__ = ["QuantizedMatrix", "quantize", "rescore_depth"]

_GROW = 1.5


def quantize(vector: np.ndarray) -> bytes:
    """A vector's int8 record: ``dim`` int8 components, then the float32 scale that
    turns them back into the vector (component ≈ int8 · scale)."""
    vec = np.asarray(vector, dtype=np.float32).reshape(-1)
    top = float(np.abs(vec).max()) if vec.size else 0.0
    scale = np.float32(top / 127.0) if top > 0 else np.float32(1.0)
    q = np.clip(np.rint(vec / scale), -127, 127).astype(np.int8)
    return q.tobytes() + scale.tobytes()


def rescore_depth(limit: int) -> int:
    """How many rows the int8 pass hands to the exact re-scoring for ``limit`` hits
    (at 2× the exact top 50 came out identical for 200 of 200 queries over 100k
    near-duplicate vectors; see docs/benchmarks.md)."""
    return max(2 * limit, 100)


class QuantizedMatrix:
    """Int8 rows (one per document row of the owner) with their scales; rows without a
    vector have scale 0 and never match.

    The rows live in two blocks: a *base*, the rows the matrix was made with (possibly a
    read-only view of the stored snapshot's bytes: loading copies nothing), which is
    never reallocated, and a *tail* for rows appended since, grown on its own. Appending
    100 rows to a 100k-row matrix so touches 100 rows, not 38 MB (before, the whole
    matrix was reallocated and copied on the first append after a load or a fold).
    The owner folds the tail into a new base when it compacts.
    """

    def __init__(self, dim: int, q: np.ndarray | None = None,
                 scale: np.ndarray | None = None) -> None:
        self.dim = dim
        n = 0 if scale is None else len(scale)
        self._base = (np.ascontiguousarray(q[:n], dtype=np.int8).reshape(n, dim)
                      if q is not None and n else np.zeros((0, dim), dtype=np.int8))
        self._scale = np.array(scale, dtype=np.float32) if n else np.zeros(16, dtype=np.float32)
        self._tail = np.zeros((0, dim), dtype=np.int8)
        self._n = n

    @classmethod
    def from_records(cls, records: np.ndarray) -> "QuantizedMatrix":
        """From an (n, dim + 4) uint8 array of :func:`quantize` records (zero rows: none)."""
        dim = records.shape[1] - 4
        return cls(dim, records[:, :dim].view(np.int8),
                   np.ascontiguousarray(records[:, dim:]).view(np.float32).reshape(-1))

    def __len__(self) -> int:
        return self._n

    @property
    def base_rows(self) -> int:
        """Rows in the base block (the rest are in the tail)."""
        return len(self._base)

    @property
    def nbytes(self) -> int:
        return self._base.nbytes + self._tail.nbytes + self._scale.nbytes

    def grow(self, n_rows: int) -> None:
        """Make room for rows up to ``n_rows`` (new rows have no vector); only the tail
        and the scales are ever reallocated."""
        if n_rows <= self._n:
            return
        if n_rows > len(self._scale):
            scale = np.zeros(max(n_rows, int(len(self._scale) * _GROW)), dtype=np.float32)
            scale[: self._n] = self._scale[: self._n]
            self._scale = scale
        need = n_rows - len(self._base)
        if need > len(self._tail):
            tail = np.zeros((max(need, int(len(self._tail) * _GROW), 16), self.dim), dtype=np.int8)
            used = self._n - len(self._base)
            tail[:used] = self._tail[:used]
            self._tail = tail
        self._n = n_rows

    def _writable_base(self) -> np.ndarray:
        """The base, copied first if it is a read-only view of stored bytes."""
        if not self._base.flags.writeable:
            self._base = self._base.copy()
        return self._base

    def set_rows(self, rows: np.ndarray, records: np.ndarray) -> None:
        """Set ``rows`` from an (len(rows), dim + 4) uint8 array of records."""
        self.grow(int(rows.max()) + 1 if len(rows) else 0)
        q = records[:, : self.dim].view(np.int8)
        self._scale[rows] = np.ascontiguousarray(records[:, self.dim:]).view(np.float32).reshape(-1)
        nb = len(self._base)
        in_base = rows < nb
        if in_base.any():
            self._writable_base()[rows[in_base]] = q[in_base]
        self._tail[rows[~in_base] - nb] = q[~in_base]

    def kill(self, rows: np.ndarray) -> None:
        """Forget rows' vectors (their bytes are zeroed, not just masked)."""
        rows = rows[rows < self._n]
        self._scale[rows] = 0.0
        nb = len(self._base)
        in_base = rows < nb
        if in_base.any():
            self._writable_base()[rows[in_base]] = 0
        self._tail[rows[~in_base] - nb] = 0

    def _gather(self, rows: np.ndarray) -> np.ndarray:
        nb = len(self._base)
        out = np.empty((len(rows), self.dim), dtype=np.int8)
        in_base = rows < nb
        out[in_base] = self._base[rows[in_base]]
        out[~in_base] = self._tail[rows[~in_base] - nb]
        return out

    def compacted(self, keep: np.ndarray) -> "QuantizedMatrix":
        """Only rows ``keep``, renumbered 0… in that order (all in one new base)."""
        keep = keep[keep < self._n]  # rows past the end never had a vector
        return QuantizedMatrix(self.dim, self._gather(keep), self._scale[keep])

    def parts(self) -> dict[str, bytes]:
        used = self._n - len(self._base)
        return {"q8": self._base.tobytes() + self._tail[:used].tobytes(),
                "scale": self._scale[: self._n].tobytes()}

    @classmethod
    def from_parts(cls, dim: int, parts: dict[str, bytes]) -> "QuantizedMatrix":
        """The matrix over stored parts: its base is a read-only view of ``parts["q8"]``."""
        scale = np.frombuffer(parts["scale"], dtype=np.float32)
        return cls(dim, np.frombuffer(parts["q8"], dtype=np.int8).reshape(len(scale), dim), scale)

    def candidates(self, query: np.ndarray, depth: int, mask: np.ndarray) -> np.ndarray:
        """Rows (at most ``depth``) of the highest approximate cosine among ``mask``."""
        n = self._n
        scale = self._scale[:n]
        allowed = mask[:n] & (scale != 0)
        count = int(allowed.sum())
        if not count:
            return np.zeros(0, dtype=np.int64)
        if count <= depth:
            return np.flatnonzero(allowed)
        q = np.asarray(query, dtype=np.float32).reshape(self.dim)
        top = float(np.abs(q).max()) or 1.0
        q8 = np.clip(np.rint(q * (127.0 / top)), -127, 127).astype(np.int8)[None, :]
        nb = min(len(self._base), n)
        dots = np.empty(n, dtype=np.float32)
        if nb:
            dots[:nb] = np.asarray(simsimd.cdist(q8, self._base[:nb], metric="dot"),
                                   dtype=np.float32)[0]
        if n > nb:
            dots[nb:] = np.asarray(simsimd.cdist(q8, self._tail[: n - nb], metric="dot"),
                                   dtype=np.float32)[0]
        dots *= scale
        dots[~allowed] = -np.inf
        return np.argpartition(dots, n - depth)[n - depth:]
