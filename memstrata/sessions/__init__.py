"""Session state (L1/L2 hot state): the :class:`SessionStore` seam and its backends.

=====================================  ===========================================
(no URL)                               the main store's own session rows (SQLite
                                       or PostgreSQL alike)
``redis://host:6379/0?prefix=ms``      the main store's rows, cached in one Redis server
``redis+cluster://host:7000``          the same, cached in a Redis Cluster
=====================================  ===========================================

The L2 life cycle over these stores — progressive summaries, idle archiving, resume —
is :class:`memstrata.layers.episodic.SessionManager`.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..stores.base import Store
from .base import DEFAULT_WINDOW_MESSAGES, STATUSES, SessionState, SessionStore

__all__ = ["SessionState", "SessionStore", "open_session_store", "SESSION_BACKENDS", "STATUSES"]


def _redis(url: str, store: Store, window: int) -> SessionStore:
    from .redis import RedisSessionStore

    return RedisSessionStore(url, store, window=window)


def _main(url: str, store: Store, window: int) -> SessionStore:
    from .store import StoreSessionStore

    if url != store.url:
        raise ConfigError(f"sessions={url!r} names another database than the main store "
                          f"{store.url!r}; leave sessions empty to keep them in the main store, "
                          "or use redis://host:6379/0")
    return StoreSessionStore(store, window=window)


# scheme -> factory(url, main store, window)
SESSION_BACKENDS: dict[str, Callable[[str, Store, int], SessionStore]] = {
    "redis": _redis,
    "rediss": _redis,
    "redis+cluster": _redis,
    "rediss+cluster": _redis,
    "sqlite": _main,
    "memory": _main,
    "postgresql": _main,
    "postgres": _main,
}


def open_session_store(url: str | None, store: Store, *,
                       window: int = DEFAULT_WINDOW_MESSAGES) -> SessionStore:
    """The session store a URL names; None or ``""`` means the main store's own rows.

    ``store`` is the main Store: the default backend lives in it, and the others archive
    into it.
    """
    if not url:
        url = store.url
    scheme = urlsplit(url).scheme
    factory = SESSION_BACKENDS.get(scheme)
    if factory is None:
        raise ConfigError(f"unknown sessions URL {url!r}; use redis://host:6379/0, "
                          f"redis+cluster://host:7000, or leave it empty for the main store "
                          f"(known schemes: {', '.join(sorted(SESSION_BACKENDS))})")
    return factory(url, store, window)
