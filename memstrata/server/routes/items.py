"""Memory items (remember, list, get, update with If-Match, history, undo, feedback,
complete, forget) and the core profile."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response

from ...errors import ValidationError
from ...types import Filters
from .. import schemas as s
from .common import CurrentPrincipal, Limit, Offset, Svc, UserId, audit_target, page, to_dicts

router = APIRouter(prefix="/v1/users/{user_id}")

_ETAG = re.compile(r'^(?:W/)?"?(\d+)"?$')
_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"model": s.ErrorOut, "description": "The item changed meanwhile"}}
_PRECONDITION: dict[int | str, dict[str, Any]] = {412: {"model": s.ErrorOut,
                       "description": "If-Match names another version than the stored one"}}


def etag(version: int) -> str:
    """An item's ETag: its version, quoted."""
    return f'"{version}"'


def _expected(if_match: str | None, body: int | None) -> int | None:
    if if_match is None or if_match.strip() == "*":
        return body
    found = _ETAG.match(if_match.strip())
    if found is None:
        raise ValidationError(f"If-Match must be the item's ETag (like \"3\"), not {if_match!r}")
    return int(found.group(1))


@router.post("/items", status_code=201, response_model=s.ItemOut, tags=["items"],
             name="items.remember", summary="Remember: store a memory item directly (version 1)")
def remember(user_id: UserId, body: s.RememberIn, who: CurrentPrincipal, svc: Svc,
             request: Request, response: Response) -> dict[str, Any]:
    fields = body.model_dump(exclude={"content"})
    item = who.user(svc, user_id, write=True).remember(body.content, actor=f"key:{who.key.id}",
                                                       **fields)
    audit_target(request, item.id)
    response.headers["ETag"] = etag(item.version)
    return item.to_dict()


@router.get("/items", response_model=s.ItemPage, tags=["items"], name="items.list")
def list_items(user_id: UserId, who: CurrentPrincipal, svc: Svc, limit: Limit = None,
               offset: Offset = 0,
               kind: Annotated[list[s.KindName] | None, Query()] = None,
               status: Annotated[list[s.StatusName] | None,
                                 Query(description="Default: active only")] = None,
               tag: Annotated[list[str] | None, Query()] = None,
               session_id: str | None = None,
               since: Annotated[str | None, Query(description="ISO-8601 time")] = None,
               until: Annotated[str | None, Query(description="ISO-8601 time")] = None) -> dict[str, Any]:
    """Memory items, newest first."""
    limit = limit or svc.settings.page_size
    spec: dict[str, Any] = {"kind": kind or [], "tags": tag or [], "since": since, "until": until}
    if status:
        spec["status"] = status
    if session_id is not None:
        spec["session_id"] = session_id
    rows = who.user(svc, user_id, write=False).list(filters=Filters.build(spec), limit=limit + 1,
                                                    offset=offset)
    return page(rows, offset, limit)


@router.get("/items/{item_id}", response_model=s.ItemOut, tags=["items"], name="items.get",
            responses={200: {"headers": {"ETag": {"description": "The item's version, for If-Match",
                                                  "schema": {"type": "string"}}}}})
def get_item(user_id: UserId, item_id: str, who: CurrentPrincipal, svc: Svc,
             response: Response) -> dict[str, Any]:
    item = who.user(svc, user_id, write=False).get(item_id)
    response.headers["ETag"] = etag(item.version)
    return item.to_dict()


@router.patch("/items/{item_id}", response_model=s.ItemOut, tags=["items"], name="items.update",
              responses={**_CONFLICT, **_PRECONDITION},
              summary="Edit an item (a new version); If-Match for optimistic concurrency")
def update_item(user_id: UserId, item_id: str, body: s.UpdateIn, who: CurrentPrincipal, svc: Svc,
                response: Response,
                if_match: Annotated[str | None, Header(description='The ETag of the version '
                                                                   'you edited, e.g. "3"')] = None,
                ) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True, exclude={"reason", "expected_version"})
    expected = _expected(if_match, body.expected_version)
    item = who.user(svc, user_id, write=True).update(item_id, actor=f"key:{who.key.id}",
                                                     reason=body.reason, expected_version=expected,
                                                     **changes)
    response.headers["ETag"] = etag(item.version)
    return item.to_dict()


@router.delete("/items/{item_id}", response_model=s.ForgetOut, tags=["items"], name="items.forget",
               summary="Forget an item for real: row, versions, index entry, vector")
def forget_item(user_id: UserId, item_id: str, who: CurrentPrincipal, svc: Svc,
                messages: Annotated[bool, Query(description="Also the raw turns it came from")] = False,
                ) -> dict[str, Any]:
    """Answers what was removed, per store (counts, never content)."""
    return who.user(svc, user_id, write=True).forget(item_id, messages=messages).to_dict()


@router.get("/items/{item_id}/history", response_model=s.VersionPage, tags=["items"],
            name="items.history")
def history(user_id: UserId, item_id: str, who: CurrentPrincipal, svc: Svc, limit: Limit = None,
            offset: Offset = 0) -> dict[str, Any]:
    """Every version, oldest first: who changed what, when and why."""
    limit = limit or svc.settings.page_size
    rows = who.user(svc, user_id, write=False).history(item_id)
    return page(rows[offset:offset + limit + 1], offset, limit)


@router.post("/items/{item_id}/undo", response_model=s.UndoOut, tags=["items"], name="items.undo")
def undo(user_id: UserId, item_id: str, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """Revert the item's last change (a new version); undoing a creation deletes it and
    reactivates what it superseded."""
    item = who.user(svc, user_id, write=True).undo(item_id)
    return {"item": item.to_dict() if item is not None else None}


@router.post("/items/{item_id}/feedback", response_model=s.ItemOut, tags=["items"],
             name="items.feedback")
def feedback(user_id: UserId, item_id: str, body: s.FeedbackIn, who: CurrentPrincipal,
             svc: Svc) -> dict[str, Any]:
    """Thumbs up or down on the item's confidence (a new version)."""
    return who.user(svc, user_id, write=True).feedback(item_id, body.signal).to_dict()


@router.post("/items/{item_id}/complete", response_model=s.ItemOut, tags=["items"],
             name="items.complete")
def complete(user_id: UserId, item_id: str, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """Mark a todo done."""
    return who.user(svc, user_id, write=True).complete(item_id).to_dict()


@router.get("/profile", response_model=s.ProfileOut, tags=["profile"], name="profile.get")
def profile(user_id: UserId, who: CurrentPrincipal, svc: Svc, cached: bool = False) -> dict[str, Any]:
    """The core profile, aggregated from active items with manual edits on top."""
    return who.user(svc, user_id, write=False).profile(cached=cached).to_dict()


@router.patch("/profile", response_model=s.ProfileOut, tags=["profile"], name="profile.update")
def update_profile(user_id: UserId, body: s.ProfileIn, who: CurrentPrincipal,
                   svc: Svc) -> dict[str, Any]:
    """Edit profile fields (a new version); a field set to null goes back to aggregation."""
    fields = body.model_dump(exclude_unset=True)
    return who.user(svc, user_id, write=True).update_profile(actor=f"key:{who.key.id}",
                                                             **fields).to_dict()


@router.get("/profile/history", response_model=list[s.ProfileVersionOut], tags=["profile"],
            name="profile.history")
def profile_history(user_id: UserId, who: CurrentPrincipal, svc: Svc) -> list[dict[str, Any]]:
    """Every version of the profile edits, oldest first."""
    return to_dicts(who.user(svc, user_id, write=False).profile_history())
