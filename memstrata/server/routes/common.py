"""Helpers every router shares: pagination, the user path parameter, dependencies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request

from ...ids import ID_PATTERN, MAX_ID_CHARS
from ..service import Service
from ..auth import CurrentPrincipal, service

__all__ = ["UserId", "SessionId", "Limit", "Offset", "Svc", "page", "CurrentPrincipal", "to_dicts",
           "audit_target"]

_RULE = ("1-256 characters, no control characters, no '/', at least one character other "
         "than spaces and dots (memstrata.ids); percent-encoded in the path")
UserId = Annotated[str, Path(description=f"The end user's id (within the key's tenant): {_RULE}",
                             examples=["lin"], max_length=MAX_ID_CHARS, pattern=ID_PATTERN)]
SessionId = Annotated[str, Path(description=f"The session's id: {_RULE}", examples=["s1"],
                                max_length=MAX_ID_CHARS, pattern=ID_PATTERN)]
Limit = Annotated[int | None, Query(ge=1, le=1000, description="Page size (default: the "
                                                             "page_size setting)")]
Offset = Annotated[int, Query(ge=0, le=10**12,
                              description="Rows to skip (the previous page's next_offset)")]
Svc = Annotated[Service, Depends(service)]


def to_dicts(values: Sequence[Any]) -> list[dict[str, Any]]:
    return [v.to_dict() for v in values]


def page(rows: Sequence[Any], offset: int, limit: int) -> dict[str, Any]:
    """A page of ``rows`` (fetched with one row more than ``limit``, to know whether
    another page follows)."""
    more = len(rows) > limit
    return {"data": to_dicts(rows[:limit]), "next_offset": offset + limit if more else None}


def audit_target(request: Request, target: str) -> None:
    """Name what a request created (an item, a key, a document) in its audit entry; the
    path names the target of every other mutation."""
    request.scope["memstrata.target"] = target
