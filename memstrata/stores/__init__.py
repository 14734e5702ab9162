"""Storage backends, opened by URL.

==============================  =================================================
``sqlite:///memstrata.db``       one SQLite file (the embedded default)
``memory://``                    SQLite in memory (tests, throw-away runs)
``postgresql://user@host/db``    PostgreSQL + pgvector (``memstrata[postgres]``)
==============================  =================================================

The seams every backend implements are in :mod:`memstrata.stores.base`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ConfigError, mask_credentials
from .base import DocInfo, IndexDoc, SessionInfo, SessionRecord, Store

__all__ = ["Store", "IndexDoc", "DocInfo", "SessionInfo", "SessionRecord", "open_store", "BACKENDS",
           "safe_url"]


def _sqlite(url: str, index_memory_mb: float | None = None, quick_check: bool | None = None,
            read_only: bool | None = None, durability: str | None = None) -> Store:
    from .sqlite import open_sqlite

    return open_sqlite(url, index_memory_mb=index_memory_mb, quick_check=quick_check,
                       read_only=read_only, durability=durability)


def _postgres(url: str, index_memory_mb: float | None = None, quick_check: bool | None = None,
              read_only: bool | None = None, durability: str | None = None) -> Store:
    # the server checks its own pages (no quick_check)
    if read_only:
        raise ConfigError("read_only is for SQLite files; on PostgreSQL connect as a role "
                          "with SELECT rights only")
    try:
        from .postgres import open_postgres
    except ImportError as exc:
        raise ConfigError(f"the PostgreSQL backend needs psycopg, psycopg-pool and pgvector "
                          f"({exc.name or exc} is missing): pip install 'memstrata[postgres]'") from exc
    return open_postgres(url, index_memory_mb=index_memory_mb, durability=durability)


# scheme -> factory; the one table that maps URLs to backends
BACKENDS: dict[str, Callable[[str, float | None, bool | None, bool | None, str | None], Store]] = {
    "sqlite": _sqlite,
    "memory": _sqlite,
    "postgresql": _postgres,
    "postgres": _postgres,
}


def open_store(url: "str | Store", *, index_memory_mb: float | None = None,
               quick_check: bool | None = None, read_only: bool | None = None,
               durability: str | None = None) -> Store:
    """Open (and migrate) the store a URL names; a Store passes through unchanged.

    ``index_memory_mb`` bounds the store's in-process search index (default: the
    ``index_memory_mb`` setting); ``quick_check`` runs SQLite's ``PRAGMA quick_check``
    before anything is written, ``read_only`` opens an SQLite file read-only,
    ``durability`` is what a commit survives (``full``: power loss; ``normal``: a process
    crash) (defaults: the settings)."""
    if isinstance(url, Store):
        return url
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"store must be a URL like sqlite:///memstrata.db, memory:// or "
                          f"postgresql://user@host/db, not {url!r}")
    scheme = url.split("://", 1)[0].split("+", 1)[0]
    factory = BACKENDS.get(scheme)
    if factory is None:
        raise ConfigError(f"unknown store scheme {scheme!r} in {url!r}; known: "
                          f"{', '.join(sorted(BACKENDS))}")
    return factory(url, index_memory_mb, quick_check, read_only, durability)


def safe_url(url: str) -> str:
    """``url`` fit for logs: a password in it becomes ``***``
    (``postgresql://app:s3cret@db/m`` → ``postgresql://app:***@db/m``)."""
    return mask_credentials(url)
