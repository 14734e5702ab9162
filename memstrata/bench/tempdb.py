"""A throw-away PostgreSQL 16 + pgvector for benchmarks, from the PyPI package ``pgserver``.

``memstrata bench latency --compare-postgres`` and ``bench locomo --compare-postgres``
use it to put PostgreSQL next to SQLite in one run without a server of your own.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError

__all__ = ["temporary_postgres"]


@contextmanager
def temporary_postgres() -> Iterator[str]:
    """Start PostgreSQL in a temporary directory; yield its URL; stop and delete it after."""
    try:
        import pgserver
    except ImportError as exc:
        raise ConfigError("--compare-postgres starts a private PostgreSQL from the `pgserver` "
                          "package: pip install pgserver (or pass --store postgresql://…)") from exc
    root = Path(tempfile.mkdtemp(prefix="memstrata-bench-pg-"))
    server = pgserver.get_server(root / "pgdata", cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
