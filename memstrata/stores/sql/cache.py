"""The embedding cache (:class:`~memstrata.stores.base.VectorCache`): float32 vectors by
model and a hash of (tenant, user, text), written once for both SQL backends."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import policy
from .dialect import SQLDialect

__all__ = ["SQLVectorCache"]


class SQLVectorCache(SQLDialect):
    """:class:`~memstrata.stores.base.VectorCache` over the backend's dialect."""

    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for clause, chunk in self._in_chunks("hash", hashes):
            rows = self._q(f"SELECT hash, vec FROM embedding_cache WHERE model=? AND {clause}",
                           (model, *chunk))
            # a damaged cache entry is a miss: the text is embedded again and stored anew
            out.update({r["hash"]: np.frombuffer(r["vec"], dtype=np.float32) for r in rows
                        if policy.is_vector(r["vec"])})
        return out

    def cache_vectors(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        with self.transaction():
            self._qm("INSERT INTO embedding_cache (model, hash, vec) VALUES (?,?,?) "
                     "ON CONFLICT (model, hash) DO UPDATE SET vec = excluded.vec "
                     "WHERE length(embedding_cache.vec) % 4 != 0",  # only a damaged one is replaced
                     [(model, h, np.asarray(v, dtype=np.float32).tobytes())
                      for h, v in sorted(vectors.items())])

    def forget_vectors(self, model: str, hashes: Sequence[str]) -> None:
        with self._one_write():
            for clause, chunk in self._in_chunks("hash", hashes):
                self._q(f"DELETE FROM embedding_cache WHERE model=? AND {clause}", (model, *chunk))
