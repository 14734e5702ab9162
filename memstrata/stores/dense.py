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
    vector have scale 0 and never match."""

    def __init__(self, dim: int, q: np.ndarray | None = None,
                 scale: np.ndarray | None = None) -> None:
        self.dim = dim
        n = 0 if scale is None else len(scale)
        self._q = np.zeros((max(n, 16), dim), dtype=np.int8)
        self._scale = np.zeros(max(n, 16), dtype=np.float32)
        if q is not None and scale is not None and n:
            self._q[:n] = q
            self._scale[:n] = scale
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
    def nbytes(self) -> int:
        return self._q.nbytes + self._scale.nbytes

    def grow(self, n_rows: int) -> None:
        """Make room for rows up to ``n_rows`` (new rows have no vector)."""
        if n_rows > len(self._scale):
            size = max(n_rows, int(len(self._scale) * _GROW))
            q = np.zeros((size, self.dim), dtype=np.int8)
            q[: self._n] = self._q[: self._n]
            scale = np.zeros(size, dtype=np.float32)
            scale[: self._n] = self._scale[: self._n]
            self._q, self._scale = q, scale
        self._n = max(self._n, n_rows)

    def set_rows(self, rows: np.ndarray, records: np.ndarray) -> None:
        """Set ``rows`` from an (len(rows), dim + 4) uint8 array of records."""
        self.grow(int(rows.max()) + 1 if len(rows) else 0)
        self._q[rows] = records[:, : self.dim].view(np.int8)
        self._scale[rows] = np.ascontiguousarray(records[:, self.dim:]).view(np.float32).reshape(-1)

    def kill(self, rows: np.ndarray) -> None:
        """Forget rows' vectors (their bytes are zeroed, not just masked)."""
        rows = rows[rows < self._n]
        self._q[rows] = 0
        self._scale[rows] = 0.0

    def compacted(self, keep: np.ndarray) -> "QuantizedMatrix":
        """Only rows ``keep``, renumbered 0… in that order."""
        keep = keep[keep < self._n]  # rows past the end never had a vector
        out = QuantizedMatrix(self.dim, self._q[keep], self._scale[keep])
        return out

    def parts(self) -> dict[str, bytes]:
        return {"q8": self._q[: self._n].tobytes(), "scale": self._scale[: self._n].tobytes()}

    @classmethod
    def from_parts(cls, dim: int, parts: dict[str, bytes]) -> "QuantizedMatrix":
        scale = np.frombuffer(parts["scale"], dtype=np.float32)
        return cls(dim, np.frombuffer(parts["q8"], dtype=np.int8).reshape(len(scale), dim), scale)

    def candidates(self, query: np.ndarray, depth: int, mask: np.ndarray) -> np.ndarray:
        """Rows (at most ``depth``) of the highest approximate cosine among ``mask``."""
        n = self._n
        allowed = mask[:n] & (self._scale[:n] != 0)
        count = int(allowed.sum())
        if not count:
            return np.zeros(0, dtype=np.int64)
        if count <= depth:
            return np.flatnonzero(allowed)
        q = np.asarray(query, dtype=np.float32).reshape(self.dim)
        top = float(np.abs(q).max()) or 1.0
        q8 = np.clip(np.rint(q * (127.0 / top)), -127, 127).astype(np.int8)
        dots = np.asarray(simsimd.cdist(q8[None, :], self._q[:n], metric="dot"),
                          dtype=np.float32)[0]
        dots *= self._scale[:n]
        dots[~allowed] = -np.inf
        return np.argpartition(dots, n - depth)[n - depth:]
