"""One user's memory: messages and sessions, search, context, resume, jobs, usage,
export, forgetting the user."""

from __future__ import annotations

import io
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response

from ...requests import ContextRequest, SearchRequest
from ...stores.transfer import export_jsonl
from ...types import parse_time
from .. import schemas as s
from .common import CurrentPrincipal, Limit, Offset, Svc, SessionId, UserId, audit_target, page, to_dicts

router = APIRouter(prefix="/v1/users/{user_id}")


@router.post("/messages", status_code=201, response_model=s.AddOut, tags=["sessions"],
             name="messages.add", summary="Add messages (the raw turns) to a session")
def add_messages(user_id: UserId, body: s.AddIn, who: CurrentPrincipal, svc: Svc,
                 request: Request, idempotency_key: Annotated[str | None, Header(
                     alias="Idempotency-Key",
                     description="Any id-like string naming this add (a request id): a "
                                 "retry with it stores nothing again and answers what the "
                                 "first add stored (replayed: true); with other messages or "
                                 "another session it is a 422")] = None) -> dict[str, Any]:
    """Stores OpenAI-format messages in the session's log and indexes them; an
    extraction job runs in the background (see the jobs endpoint)."""
    result = who.user(svc, user_id, write=True).add(body.messages, body.session_id,
                                                    index=body.index, extract=body.extract,
                                                    idempotency_key=idempotency_key)
    audit_target(request, result.session_id)
    return {"session_id": result.session_id, "messages": to_dicts(result.messages),
            "replayed": result.replayed}


@router.get("/sessions", response_model=s.SessionPage, tags=["sessions"], name="sessions.list")
def list_sessions(user_id: UserId, who: CurrentPrincipal, svc: Svc, limit: Limit = None,
                  offset: Offset = 0) -> dict[str, Any]:
    """The user's sessions, oldest first."""
    limit = limit or svc.settings.page_size
    rows = who.user(svc, user_id, write=False).sessions()
    return page(rows[offset:offset + limit + 1], offset, limit)


@router.get("/sessions/{session_id}", response_model=s.SessionStateOut, tags=["sessions"],
            name="sessions.get")
def get_session(user_id: UserId, session_id: SessionId, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """A session's state: version, status, running summary, recent messages."""
    return who.user(svc, user_id, write=False).session(session_id).to_dict()


@router.get("/sessions/{session_id}/messages", response_model=s.MessagePage, tags=["sessions"],
            name="sessions.messages")
def list_messages(user_id: UserId, session_id: SessionId, who: CurrentPrincipal, svc: Svc,
                  limit: Limit = None, offset: Offset = 0) -> dict[str, Any]:
    """A session's raw log in order."""
    limit = limit or svc.settings.page_size
    rows = who.user(svc, user_id, write=False).messages(session_id)
    return page(rows[offset:offset + limit + 1], offset, limit)


@router.post("/sessions/{session_id}/archive", response_model=s.SessionStateOut, tags=["sessions"],
             name="sessions.archive")
def archive_session(user_id: UserId, session_id: SessionId, who: CurrentPrincipal,
                    svc: Svc) -> dict[str, Any]:
    """Close and archive a session now (a last summary step first)."""
    return who.user(svc, user_id, write=True).archive_session(session_id).to_dict()


def _search_request(body: s.SearchIn) -> SearchRequest:
    filters = body.filters.model_dump(exclude_none=True) if body.filters else None
    now = parse_time(body.now, what="now") if body.now is not None else None
    return SearchRequest.build(body.query, filters=filters, recent=body.recent, k=body.k,
                               scoring=body.scoring, mode=body.mode, now=now,
                               min_score=body.min_score, roles=body.roles)


@router.post("/search", response_model=s.HitsOut, tags=["memory"], name="users.search",
             summary="Hybrid search over the user's turns and memory items")
def search(user_id: UserId, body: s.SearchIn, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """Best first; each hit carries its score parts."""
    hits = who.user(svc, user_id, write=False).search(_search_request(body))
    return {"hits": to_dicts(hits)}


@router.post("/search/explain", response_model=s.ExplainOut, tags=["memory"], name="users.explain")
def explain(user_id: UserId, body: s.SearchIn, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """Search, with both candidate lists and the analysed query: why each hit ranks where it does."""
    return who.user(svc, user_id, write=False).explain(_search_request(body)).to_dict()


@router.post("/context", response_model=s.ContextOut, tags=["memory"], name="users.context",
             summary="The messages to send next, under a token budget")
def context(user_id: UserId, body: s.ContextIn, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """System messages, core profile, session summary, recalled memories and the recent
    turns, trimmed to ``budget`` tokens with per-layer quotas; the report says what each
    layer cost and what was dropped."""
    fields = body.model_dump(exclude={"session_id", "messages", "filters"})
    fields["filters"] = body.filters.model_dump(exclude_none=True) if body.filters else None
    request = ContextRequest.build(body.session_id, body.messages, **fields)
    return who.user(svc, user_id, write=False).context(request).to_dict()


@router.get("/resume", response_model=s.ResumeOut, tags=["sessions"], name="sessions.resume")
def resume(user_id: UserId, who: CurrentPrincipal, svc: Svc,
           exclude_session: str | None = None) -> dict[str, Any]:
    """Where the user left off: the latest session's summary and the open todos."""
    return who.user(svc, user_id, write=False).resume(exclude_session=exclude_session).to_dict()


@router.get("/jobs", response_model=s.JobPage, tags=["memory"], name="jobs.list")
def jobs(user_id: UserId, who: CurrentPrincipal, svc: Svc, status: str | None = None,
         limit: Limit = None, offset: Offset = 0) -> dict[str, Any]:
    """The user's background jobs, oldest first."""
    limit = limit or svc.settings.page_size
    rows = who.user(svc, user_id, write=False).jobs(status=status, limit=offset + limit + 1)
    return page(rows[offset:], offset, limit)


@router.get("/usage", response_model=s.UsageOut, tags=["memory"], name="usage.get")
def usage(user_id: UserId, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """LLM calls, tokens and latency per purpose, and item writes per path."""
    return who.user(svc, user_id, write=False).usage().to_dict()


@router.get("/export", tags=["memory"], name="users.export", response_class=Response,
            responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                             "description": "The versioned JSON Lines export of the user"},
                       422: {"model": s.ErrorOut,
                             "description": "The request is not valid (say, a user id with a "
                                            "control character); nothing was read"}})
def export(user_id: UserId, who: CurrentPrincipal, svc: Svc) -> Response:
    """Everything of the user as ``memstrata export`` writes it (``memstrata restore``
    reads it into any store)."""
    handle = who.user(svc, user_id, write=False)
    out = io.StringIO()
    export_jsonl(svc.memory.store, out, scopes=[handle.scope])
    return Response(out.getvalue(), media_type="application/x-ndjson")


@router.delete("", response_model=s.ForgetOut, tags=["memory"], name="users.forget",
               summary="Forget the user: every item, version, job, profile edit, index entry "
                       "and vector, and (by default) every session and raw message")
def forget_user(user_id: UserId, who: CurrentPrincipal, svc: Svc, request: Request,
                messages: Annotated[bool, Query(description="Also the raw turns")] = True,
                ) -> dict[str, Any]:
    """Answers what was removed, per store, and how the compaction went. The user's
    audit entries (this request's too) name a random ``audit.pseudonym`` from then on."""
    report = who.user(svc, user_id, write=True).forget_all(messages=messages)
    if report.pseudonym:
        request.scope["memstrata.forgotten"] = report.pseudonym
    return report.to_dict()
