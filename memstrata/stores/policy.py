"""Backend-neutral rules: what every store decides the same way, written once.

The backends run SQL; the decisions behind it — how a job moves between states, which
documents a search sees by default, what an error says — are here, so SQLite and
PostgreSQL cannot drift apart.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConflictError, NotFoundError, StoreError, ValidationError, shown
from ..types import Filters, MemoryItem, Scope, Status

__all__ = ["Rerun", "unstorable", "abandoned", "newer_schema", "damaged", "vector", "is_vector",
           "JOB_STATUSES", "UNFINISHED", "job_outcome", "not_claimed", "item_not_found",
           "check_owner", "session_conflict", "message_id_taken", "visible_by_default",
           "default_mask", "query_terms", "SESSION_STATUSES", "job_statuses"]

#: A job's life: pending → running → done | failed (a failed attempt goes back to pending).
JOB_STATUSES = ("pending", "running", "done", "failed")
#: Jobs a worker still has to finish.
UNFINISHED = ("pending", "running")
def job_statuses(status: object) -> tuple[str, ...]:
    """The statuses a ``status`` argument of a job listing asks for: all for None."""
    if status is None:
        return ()
    if status not in JOB_STATUSES:
        raise ValidationError(f"status must be one of {', '.join(JOB_STATUSES)} (or None), "
                              f"not {shown(status)}")
    return (str(status),)


#: A session's life: open → closed → archived (a write opens it again).
SESSION_STATUSES = ("open", "closed", "archived")


class Rerun(ConflictError):
    """A job's inputs changed under it — a forget of its user committed after the job
    read them — so what it computed may quote forgotten words: the worker runs it again
    from the start (its transaction rolled back; no attempt is counted)."""


def job_outcome(attempts: int, max_attempts: int, error: str | None) -> str:
    """The status a claimed job ends an attempt in: ``done``, or with an ``error``
    ``pending`` again until ``max_attempts`` attempts were made, then ``failed``."""
    if error is None:
        return "done"
    return "failed" if attempts >= max_attempts else "pending"


def abandoned(attempts: int, worker: str | None) -> str:
    """The error recorded on a job whose holder died during its last allowed attempt."""
    return (f"the worker {worker!r} running attempt {attempts} stopped (killed, or its "
            "lease expired) and no attempt is left; see the worker's log, then re-queue the work")


def not_claimed(job_id: str, worker: str | None) -> ConflictError:
    return ConflictError(f"job {job_id} is no longer claimed by {worker!r} (its lease expired "
                         "and another worker took it); its work is discarded here and done there")


def item_not_found(scope: Scope, item_id: str) -> NotFoundError:
    return NotFoundError(f"no memory item {item_id!r} for user {scope.user_id!r}"
                         + (f" in namespace {scope.namespace!r}" if scope.namespace else "")
                         + "; list them with `memstrata list --user ...`")


def check_owner(scope: Scope, item: MemoryItem) -> None:
    """Refuse to write an item under another user's or namespace's scope."""
    if (item.user_id, item.namespace) != (scope.user_id, scope.namespace):
        raise ValidationError(f"item {item.id} belongs to user {item.user_id!r} in namespace "
                              f"{item.namespace!r}, not to {scope.user_id!r} in {scope.namespace!r}")


def session_conflict(scope: Scope, session_id: str, expected: int, actual: int) -> ConflictError:
    return ConflictError(f"session {session_id!r} of {scope.user_id!r} is at version {actual}, "
                         f"not {expected}: someone else wrote first; reload and retry")


def message_id_taken(detail: object) -> ValidationError:
    return ValidationError(f"message id already stored ({detail}); leave 'id' empty to let "
                           "memstrata assign one")


def visible_by_default(status: str | None) -> bool:
    """Whether a document is searched when no status filter is given: every raw turn
    (no status) and active items."""
    return status is None or status == Status.ACTIVE.value


def query_terms(query: str, limit: int) -> list[str]:
    """The terms a lexical search looks up (the query is tokenised already); none when
    there is nothing to find, so the search reads nothing."""
    return query.split() if limit > 0 else []


def default_mask(filters: Filters) -> bool:
    """True when ``filters`` ask for exactly the default visibility (all turns, active
    items, no other narrowing): the fast path of an in-process mirror."""
    return filters.is_scope_only and not filters.layers and set(filters.statuses) == {Status.ACTIVE}


def unstorable(exc: UnicodeEncodeError) -> ValidationError:
    """The error for a value the driver cannot encode (a lone surrogate in a string):
    refused before the statement ran, so nothing was written."""
    return ValidationError(f"a text value holds a lone surrogate ({exc.object[exc.start:exc.end]!r}) "
                           "and cannot be stored as UTF-8; decode the input with errors='replace'")


def newer_schema(where: str, unknown: list[str]) -> str:
    """The error for a store migrated by a newer memstrata."""
    return (f"{where} was migrated by a newer memstrata (migrations {', '.join(unknown[:5])} are "
            "unknown to this version); nothing was written to it — upgrade memstrata to open it")


def is_vector(blob: object, dim: int | None = None) -> bool:
    """Whether a stored blob can be a float32 vector (of ``dim`` numbers, when given)."""
    return (isinstance(blob, (bytes, bytearray, memoryview)) and len(blob) > 0 and len(blob) % 4 == 0
            and (dim is None or len(blob) == 4 * dim))


def vector(blob: object, row_id: object, dim: int | None = None) -> np.ndarray:
    """A stored float32 vector; a damaged one (no bytes, or a length that is not four bytes
    a number of the expected dimension) is a :class:`StoreError` naming its row."""
    if not isinstance(blob, (bytes, bytearray, memoryview)) or not is_vector(blob, dim):
        size = len(blob) if isinstance(blob, (bytes, bytearray, memoryview)) else None
        raise damaged("vector", row_id, ValueError(
            f"{size} bytes where {'4 × ' + str(dim) if dim else 'a multiple of 4'} were expected"))
    return np.frombuffer(blob, dtype=np.float32)


def damaged(what: str, row_id: object, exc: Exception) -> StoreError:
    """The error for a stored row that cannot be decoded."""
    return StoreError(f"a damaged {what} row ({row_id!r}) cannot be read ({type(exc).__name__}: "
                      f"{exc}); restore the store from a backup or a `memstrata export`, or delete "
                      "the row")
