"""What the inspector adds to the REST API: the timeline of a user's memory, the exact
list of what a forget would erase, and forgetting a session's turns (with the summary
written from them). The inspector's pages use the same functions (``server/ui``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field

from ..schemas import JsonObject, _Out
from ..ui.erase import erase_session, plan_item, plan_session
from ..ui.views import timeline
from .common import CurrentPrincipal, Svc, SessionId, UserId

router = APIRouter(prefix="/v1/users/{user_id}")

Digest = Annotated[str | None, Query(max_length=64, description="The digest of the list you were "
                                                                "shown: if the list changed since, "
                                                                "nothing is erased (409)")]


class ErasedItemOut(_Out):
    id: str
    kind: str
    status: str
    content: str
    versions: int


class ErasedTurnOut(_Out):
    id: str
    session_id: str
    seq: int
    role: str
    content: str


class ErasedSummaryOut(_Out):
    session_id: str
    version: int
    message_range_end: int


class ShrunkItemOut(_Out):
    id: str
    kind: str
    content: str
    sources: dict[str, str] = Field(description="The sources it keeps: message id -> session id")


class ErasureOut(_Out):
    items: list[ErasedItemOut]
    turns: list[ErasedTurnOut]
    summaries: list[ErasedSummaryOut]
    shrunk: list[ShrunkItemOut] = Field(description="Items the turns stated that other sessions "
                                                    "state too: kept, their sources shrink")
    session_id: str | None
    with_turns: bool
    with_items: bool
    digest: str


class ErasedOut(_Out):
    items: int
    turns: int
    summaries: int
    shrunk: int


class SummaryVersionOut(_Out):
    version: int
    range_start: int
    range_end: int
    summary: JsonObject
    at: str


class SummaryVersionsOut(_Out):
    data: list[SummaryVersionOut]


class TimelineEntryOut(_Out):
    at: str
    what: str
    op: str
    item_id: str | None
    version: int | None
    actor: str
    reason: str
    content: str


class TimelineOut(_Out):
    data: list[TimelineEntryOut]


@router.get("/timeline", response_model=TimelineOut, tags=["memory"], name="users.timeline",
            summary="What changed in the user's memory and why, newest first")
def user_timeline(user_id: UserId, who: CurrentPrincipal, svc: Svc,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    """Every version row of every item (extracted, remembered, boosted, superseded,
    corrected, feedback, undone…; reads left out), profile edits, and forgets from the
    audit log (ids only: the content is gone)."""
    handle = who.user(svc, user_id, write=False)
    audit = svc.memory.store.list_audit(who.tenant, user_id=user_id, limit=1000)
    return {"data": timeline(handle, audit, limit=limit)}


@router.get("/items/{item_id}/erasure", response_model=ErasureOut, tags=["items"],
            name="items.erasure", summary="What forgetting the item would erase")
def item_erasure(user_id: UserId, item_id: str, who: CurrentPrincipal, svc: Svc,
                 messages: Annotated[bool, Query(description="With the turns it came from")] = False,
                 ) -> dict[str, Any]:
    """The item with its number of versions, (with ``messages``) its source turns, and the
    session summaries that go with them. ``DELETE …/items/{item_id}`` erases it."""
    return plan_item(who.user(svc, user_id, write=False), item_id, turns=messages).to_dict()


@router.get("/sessions/{session_id}/erasure", response_model=ErasureOut, tags=["sessions"],
            name="sessions.erasure", summary="What forgetting the session's turns would erase")
def session_erasure(user_id: UserId, session_id: SessionId, who: CurrentPrincipal, svc: Svc,
                    items: Annotated[bool, Query(description="With the items extracted from them")]
                    = False) -> dict[str, Any]:
    return plan_session(who.user(svc, user_id, write=False), session_id, items=items).to_dict()


@router.delete("/sessions/{session_id}/messages", response_model=ErasedOut, tags=["sessions"],
               name="sessions.forget", summary="Forget a session's turns (and its summary)")
def forget_session(user_id: UserId, session_id: SessionId, who: CurrentPrincipal, svc: Svc,
                   items: Annotated[bool, Query(description="Also the items extracted from them")]
                   = False, digest: Digest = None) -> dict[str, Any]:
    """Every raw turn of the session — rows, index entries, cached vectors — and the
    summary written from them (rebuilt from what remains: nothing); with ``items`` the
    memory items extracted from them too. The session row stays, with no messages."""
    # planned and erased under the user's write lock: an extraction of these turns that
    # commits meanwhile is either in the plan or starts over without them
    return erase_session(who.user(svc, user_id, write=True), session_id, items=items, digest=digest)


@router.get("/sessions/{session_id}/summaries", response_model=SummaryVersionsOut, tags=["sessions"],
            name="sessions.summaries", summary="The session's progressive summary, v1…vN")
def session_summaries(user_id: UserId, session_id: SessionId, who: CurrentPrincipal,
                      svc: Svc) -> dict[str, Any]:
    """Every summary step, oldest first: its version, the messages ``[range_start,
    range_end)`` it folded in, and the summary as it then read (kept by the main store's
    session rows; a Redis session store keeps only the latest)."""
    handle = who.user(svc, user_id, write=False)
    return {"data": [v.to_dict() for v in svc.memory.store.summary_versions(handle.scope, session_id)]}
