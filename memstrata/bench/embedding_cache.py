"""An on-disk embedding cache for benchmarks: the same text embedded by the same model
is computed once across runs.

:class:`DiskCachedEmbedder` wraps an embedder and keeps its vectors in one SQLite file,
keyed by the model's ``name`` and :func:`~memstrata.providers.embedders.content_hash`
of what the model reads (the text as the embedder's ``clip`` cuts it, when it has one:
e5 reads at most 512 tokens) and whether it is a query or a passage. It has the wrapped embedder's
``name``, ``dim`` and ``batch_size``, so a store, a calibration and an export see the
same embedder; a cached vector is the float32 the embedder returned, so a run with the
cache scores exactly as a run without it. Opt in with ``memstrata bench kb
--embedding-cache FILE``: retrieval variants over the same chunks then cost no
embedding (``hits``/``misses`` count what it served). A benchmark's ingestion rate is
honest only from a run that embedded its chunks (misses), not from cache hits.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import numpy as np

from ..providers.embedders import Embedder, TextKind, content_hash

__all__ = ["DiskCachedEmbedder"]


class DiskCachedEmbedder:
    """``inner`` with its vectors kept in the SQLite file ``path`` across processes."""

    def __init__(self, inner: Embedder, path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.batch_size = inner.batch_size
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, hash TEXT NOT NULL, "
                         "dim INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, hash))")
        self._db.commit()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _lookup(self, hashes: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        unique = sorted(set(hashes))
        for start in range(0, len(unique), 500):
            part = unique[start:start + 500]
            rows = self._db.execute(
                f"SELECT hash, dim, vec FROM vectors WHERE model=? AND hash IN ({','.join('?' * len(part))})",
                (self.name, *part)).fetchall()
            out.update({h: np.frombuffer(v, dtype=np.float32) for h, d, v in rows if d == self.dim})
        return out

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        clip = getattr(self.inner, "clip", None)
        hashes = [content_hash(clip(t, kind) if clip is not None and t.strip() else t, kind)
                  for t in texts]
        with self._lock:
            found = self._lookup(hashes)
            missing = {h: t for h, t in zip(hashes, texts) if h not in found}
            if missing:
                keys = list(missing)
                vectors = np.asarray(self.inner.embed([missing[h] for h in keys], kind=kind),
                                     dtype=np.float32)
                fresh = {h: vectors[i].copy() for i, h in enumerate(keys)}
                self._db.executemany("INSERT OR IGNORE INTO vectors (model, hash, dim, vec) VALUES (?,?,?,?)",
                                     [(self.name, h, self.dim, v.tobytes()) for h, v in fresh.items()])
                self._db.commit()
                found.update(fresh)
            self.misses += len(missing)
            self.hits += len(texts) - len(missing)
        return np.stack([found[h] for h in hashes]).astype(np.float32)

    def close(self) -> None:
        with self._lock:
            self._db.close()
