"""How PostgreSQL speaks the shared row SQL (see :mod:`memstrata.stores.sql.dialect`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any

from ..sql.dialect import SQLDialect
from ..sql.schema import TYPES
from .connection import PostgresConnection, as_json

__all__ = ["PostgresDialect"]

_LOCK_JOBS = 72_616_003  # advisory lock key: one job claimer at a time


@functools.lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresDialect(PostgresConnection, SQLDialect):
    """Times as TIMESTAMPTZ, JSON as JSONB, lists bound as one array."""

    _batch = 2**31  # one array parameter holds any number of values
    _for_update = " FOR UPDATE"
    _rate_window = TYPES["postgres"]["minute"]  # WINDOW is a reserved word here

    def _sql(self, sql: str) -> str:
        return _pyformat(sql)

    def _time_in(self, value: datetime | None) -> Any:
        return value

    def _json_in(self, value: Any) -> Any:
        return as_json(value)

    def _in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    def _contains(self, column: str, tags: Sequence[str], *,
                  json_column: bool) -> tuple[list[str], list[Any]]:
        return [f"{column} @> ?"], [as_json(list(tags)) if json_column else list(tags)]

    def _one_write(self) -> AbstractContextManager[None]:
        return nullcontext()  # autocommit: the statement is its own transaction

    def _lazy_commit(self) -> str:
        if getattr(self._local, "conn", None) is not None:
            return ""  # inside the caller's transaction: its commit decides
        # on its own: set_config(…, true) lasts to the statement's own commit — one round
        # trip where BEGIN, SET LOCAL, UPDATE, COMMIT took four
        return " FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async"

    def _lock_jobs(self) -> None:
        # the head-of-queue test of claim_job is not safe under SKIP LOCKED alone (two
        # workers could take two jobs of one user)
        self._x("SELECT pg_advisory_xact_lock(%s)", (_LOCK_JOBS,))
