"""An in-process dense matrix per scope: exact cosine search with numpy.

The SQLite backend keeps vectors durable in a table and mirrors each scope's vectors
here, appending on write instead of rebuilding. Exact search over 100k × 384 float32 is
one matrix-vector product (a few milliseconds), which beats an approximate index at this
size and needs no tuning.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DenseMatrix"]

_GROW = 1.5


class DenseMatrix:
    """Rows of unit vectors keyed by document id, with a per-row status code for masking."""

    def __init__(self, dim: int, generation: int = 0) -> None:
        self.dim = dim
        self.generation = generation
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._active = np.zeros(0, dtype=bool)  # False for deleted/hidden rows
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._n = 0

    def __len__(self) -> int:
        return len(self._row)

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        if need <= self._matrix.shape[0]:
            return
        size = max(need, int(self._matrix.shape[0] * _GROW), 64)
        matrix = np.zeros((size, self.dim), dtype=np.float32)
        matrix[: self._n] = self._matrix[: self._n]
        active = np.zeros(size, dtype=bool)
        active[: self._n] = self._active[: self._n]
        self._matrix, self._active = matrix, active

    def upsert(self, ids: list[str], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        new = [i for i, doc_id in enumerate(ids) if doc_id not in self._row]
        for i, doc_id in enumerate(ids):
            row = self._row.get(doc_id)
            if row is not None:
                self._matrix[row] = vectors[i]
                self._active[row] = True
        self._reserve(len(new))
        for i in new:
            row = self._n
            self._matrix[row] = vectors[i]
            self._active[row] = True
            self._ids.append(ids[i])
            self._row[ids[i]] = row
            self._n += 1

    def remove(self, ids: list[str]) -> None:
        for doc_id in ids:
            row = self._row.pop(doc_id, None)
            if row is not None:
                self._active[row] = False
                self._matrix[row] = 0.0  # the bytes of a forgotten vector do not linger
                self._ids[row] = ""

    def set_visible(self, doc_id: str, visible: bool) -> None:
        row = self._row.get(doc_id)
        if row is not None:
            self._active[row] = visible

    def search(self, query: np.ndarray, limit: int,
               allowed: set[str] | None = None) -> list[tuple[str, float]]:
        """Top ``limit`` (id, cosine) among visible rows, optionally only ids in ``allowed``."""
        if self._n == 0 or limit <= 0:
            return []
        scores = self._matrix[: self._n] @ np.asarray(query, dtype=np.float32).reshape(self.dim)
        mask = self._active[: self._n].copy()
        if allowed is not None:  # explicit ids may include hidden (non-active) rows
            mask = np.zeros(self._n, dtype=bool)
            mask[[self._row[i] for i in allowed if i in self._row]] = True
        scores = np.where(mask, scores, -np.inf)
        count = int(mask.sum())
        if count == 0:
            return []
        take = min(limit, count)
        top = np.argpartition(-scores, take - 1)[:take] if take < self._n else np.arange(self._n)
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self._ids[r], float(scores[r])) for r in top[:take] if mask[r]]
