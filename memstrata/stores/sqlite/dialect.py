"""How SQLite speaks the shared row SQL (see :mod:`memstrata.stores.sql.dialect`)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from ...types import dumps
from ..sql.dialect import SQLDialect
from ..sql.schema import TYPES
from .connection import SQLiteConnection

__all__ = ["SQLiteDialect"]


class SQLiteDialect(SQLiteConnection, SQLDialect):
    """Times as seconds since the epoch, JSON as text, lists bound value by value."""

    _rate_window = TYPES["sqlite"]["minute"]

    def _time_in(self, value: datetime | None) -> Any:
        return None if value is None else value.timestamp()

    def _json_in(self, value: Any) -> Any:
        return dumps(value)

    def _in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def _contains(self, column: str, tags: Sequence[str], *,
                  json_column: bool) -> tuple[list[str], list[Any]]:
        return ([f"EXISTS (SELECT 1 FROM json_each({column}) WHERE value = ?)"] * len(tags),
                list(tags))

    def _one_write(self) -> AbstractContextManager[None]:
        # BEGIN IMMEDIATE: waits for the write lock (the busy timeout) before it starts,
        # and runs the on-commit hooks
        return self.transaction()
