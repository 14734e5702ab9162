"""The hooks through which SQLite's SQL and PostgreSQL's differ.

The shared row code writes each query once, with ``?`` placeholders and SQL both
databases accept (``ON CONFLICT … DO UPDATE``, ``RETURNING``, ``substr``, ``CASE``), and
asks its backend's dialect for the rest:

=====================  ===================================  ====================================
hook                   SQLite (``sqlite/dialect.py``)       PostgreSQL (``postgres/dialect.py``)
=====================  ===================================  ====================================
``_sql``               the text as written                  ``?`` → ``%s``, ``%`` → ``%%``
``_time_in``           seconds since the epoch (REAL)       the datetime (TIMESTAMPTZ)
``_json_in``           JSON text                            JSONB
``_in``, ``_batch``    ``col IN (?,…)``, 500 values a       ``col = ANY(?)``, one array
                       statement
``_contains``          one ``json_each`` test per tag       ``@>`` (JSONB, or the index's
                                                            TEXT[] tags)
``_one_write``         a transaction (``BEGIN IMMEDIATE``)  none: autocommit makes a lone
                                                            statement its own transaction
``_lazy_commit``       nothing                              a commit that does not wait for
                                                            the WAL flush (access statistics)
``_lock_jobs``         nothing (the write lock is held)     an advisory lock: one claimer
``_for_update``        nothing (the write lock is held)     ``FOR UPDATE``
``_rate_window``       ``window``                           ``window_min`` (a reserved word)
=====================  ===================================  ====================================

Reading needs no hook: :func:`time_out` and :func:`json_out` take what either driver
returns. A driver error is mapped by the backend's connection, by code.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, TypeVar

from ...types import Filters
from .. import policy

__all__ = ["SQLDialect", "time_out", "stored_time", "json_out", "decoded"]


def time_out(value: Any) -> datetime | None:
    """A stored time as an aware UTC datetime (SQLite stores seconds since the epoch)."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromtimestamp(float(value), UTC)


def stored_time(value: Any) -> datetime:
    """:func:`time_out` of a column that is never NULL."""
    out = time_out(value)
    assert out is not None
    return out


def json_out(value: Any) -> Any:
    """A stored JSON value (SQLite stores its text; psycopg decodes JSONB itself)."""
    return json.loads(value) if isinstance(value, str) else value


_R = TypeVar("_R")


def decoded(what: str) -> Callable[[Callable[[Any], _R]], Callable[[Any], _R]]:
    """A row decoder whose failure on a damaged row (bad JSON, a missing or malformed
    value) is a StoreError naming the row, not a raw JSONDecodeError or KeyError."""
    def wrap(decode: Callable[[Any], _R]) -> Callable[[Any], _R]:
        @functools.wraps(decode)
        def read(row: Any) -> _R:
            try:
                return decode(row)
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                keys = row.keys()
                row_id = row["id"] if "id" in keys else row["session_id"] if "session_id" in keys else "?"
                raise policy.damaged(what, row_id, exc) from exc
        return read
    return wrap


class SQLDialect:
    """The base of the shared row code: :meth:`_q` and :meth:`_qm` run a query written
    with ``?`` placeholders; the hooks below are the dialect (see the module)."""

    # the backend's connection supplies these (annotations only: nothing here shadows them)
    _x: Callable[..., Any]
    _many: Callable[..., None]
    transaction: Callable[[], AbstractContextManager[None]]

    #: the most values one ``_in`` condition binds (see :meth:`_in_chunks`)
    _batch = 500
    #: ``" FOR UPDATE"`` where a read inside a transaction must lock the rows it reads
    _for_update = ""
    #: the name of ``rate_windows``' minute column (:data:`..schema.TYPES`)
    _rate_window: str

    def _sql(self, sql: str) -> str:
        """``sql`` in the driver's placeholder style."""
        return sql

    def _time_in(self, value: datetime | None) -> Any:
        raise NotImplementedError

    def _json_in(self, value: Any) -> Any:
        raise NotImplementedError

    def _in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """The condition "``column`` is one of ``values``" (not empty) and its parameters."""
        raise NotImplementedError

    def _contains(self, column: str, tags: Sequence[str], *,
                  json_column: bool) -> tuple[list[str], list[Any]]:
        """Conditions that the tag list in ``column`` holds every one of ``tags`` (a JSON
        list, or with ``json_column=False`` the index's own tag column)."""
        raise NotImplementedError

    def _one_write(self) -> AbstractContextManager[None]:
        """What a write of one statement runs in."""
        raise NotImplementedError

    def _lazy_commit(self) -> str:
        """A ``FROM`` clause for an UPDATE of access statistics only, whose commit need
        not wait for the disk; empty where that does not apply."""
        return ""

    def _lock_jobs(self) -> None:
        """Inside a transaction: make this the one claimer of the job queue."""

    # -- running -------------------------------------------------------------------
    def _q(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        """Run ``sql``; its rows (read by column name), all of them read."""
        return list(self._x(self._sql(sql), tuple(params)))

    def _qm(self, sql: str, rows: Sequence[Sequence[object]], *,
            taken: Callable[[object], Exception] | None = None) -> None:
        """Run ``sql`` once per row; where a uniqueness constraint fails, ``taken(detail)``
        builds the error (the caller sent an id that is stored already)."""
        if rows:
            self._many(self._sql(sql), rows, taken=taken)

    def _in_chunks(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, list[Any]]]:
        """:meth:`_in` for ``values`` in parts of at most ``_batch`` (none when empty)."""
        values = list(values)
        for start in range(0, len(values), self._batch):
            yield self._in(column, values[start:start + self._batch])

    def _filter_clauses(self, filters: Filters, table: str, *,
                        items: bool = False) -> tuple[list[str], list[object]]:
        """SQL conditions (and parameters) for ``filters`` on the index's ``docs`` (raw
        turns have no status and pass a status filter) or, with ``items``, on ``items``
        (the session is ``source_session_id``). The one filter-to-SQL builder."""
        where: list[str] = []
        params: list[object] = []

        def any_of(column: str, values: Sequence[object]) -> None:
            clause, values = self._in(f"{table}.{column}", values)
            where.append(clause)
            params.extend(values)

        if filters.statuses:
            any_of("status", [s.value for s in filters.statuses])
            if not items:
                where[-1] = f"({table}.status IS NULL OR {where[-1]})"
        if filters.layers and not items:
            any_of("layer", [x.value for x in filters.layers])
        if filters.kinds:
            any_of("kind", [k.value for k in filters.kinds])
        if filters.session_ids:
            any_of("source_session_id" if items else "session_id", list(filters.session_ids))
        if filters.since:
            where.append(f"{table}.created_at >= ?")
            params.append(self._time_in(filters.since))
        if filters.until:
            where.append(f"{table}.created_at <= ?")
            params.append(self._time_in(filters.until))
        if filters.tags:
            clauses, values = self._contains(f"{table}.tags", list(filters.tags), json_column=items)
            where += clauses
            params += values
        return where, params
