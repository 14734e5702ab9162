"""The tenant as a whole (users, jobs, usage), API keys and the audit log."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from ...errors import NotFoundError
from ...stores.policy import UNFINISHED
from ...types import parse_time
from ...usage import usage_report
from .. import schemas as s
from .common import CurrentPrincipal, Limit, Offset, Svc, audit_target, page

router = APIRouter(prefix="/v1")


def _tenant_scopes(who: CurrentPrincipal, svc: Svc) -> list[Any]:
    only = who.users_filter()
    return [scope for scope in svc.memory.store.list_users()
            if scope.namespace == who.tenant and (only is None or scope.user_id == only)]


@router.get("/users", response_model=s.UserPage, tags=["tenant"], name="tenant.users")
def users(who: CurrentPrincipal, svc: Svc, limit: Limit = None, offset: Offset = 0) -> dict[str, Any]:
    """The tenant's users (those with a session or an item); an end-user key sees itself."""
    limit = limit or svc.settings.page_size
    scopes = _tenant_scopes(who, svc)[offset:offset + limit + 1]
    more = len(scopes) > limit
    return {"data": [{"user_id": scope.user_id} for scope in scopes[:limit]],
            "next_offset": offset + limit if more else None}


@router.get("/jobs", response_model=s.JobPage, tags=["tenant"], name="tenant.jobs")
def tenant_jobs(who: CurrentPrincipal, svc: Svc, limit: Limit = None, offset: Offset = 0,
                unfinished: Annotated[bool, Query(description="Only pending and running")] = False,
                ) -> dict[str, Any]:
    """Background jobs of every user of the tenant, oldest first."""
    limit = limit or svc.settings.page_size
    only = who.users_filter()
    rows = [job for job in svc.memory.store.list_jobs(statuses=UNFINISHED if unfinished else (),
                                                      limit=1_000_000)
            if job.namespace == who.tenant and (only is None or job.user_id == only)]
    return page(rows[offset:offset + limit + 1], offset, limit)


@router.get("/usage", response_model=s.UsageOut, tags=["tenant"], name="tenant.usage")
def tenant_usage(who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """LLM calls and write paths summed over the tenant's users."""
    return usage_report(svc.memory.store, _tenant_scopes(who, svc)).to_dict()


@router.get("/keys/me", response_model=s.KeyOut, tags=["admin"], name="keys.me")
def me(who: CurrentPrincipal) -> dict[str, Any]:
    """The key this request was made with (any role): tenant, role, user."""
    return who.key.to_dict()


@router.post("/keys", status_code=201, response_model=s.NewKeyOut, tags=["admin"],
             name="keys.create", summary="Make an API key of this tenant (admin keys only)")
def create_key(body: s.KeyIn, who: CurrentPrincipal, svc: Svc, request: Request) -> dict[str, Any]:
    who.require("admin")
    made = svc.keys.create(who.tenant, body.role, name=body.name, user_id=body.user_id,
                           rate_limit=body.rate_limit, created_by=who.key.id)
    audit_target(request, made.key.id)
    return {"key": made.key.to_dict(), "token": made.token}


@router.get("/keys", response_model=s.KeyPage, tags=["admin"], name="keys.list")
def list_keys(who: CurrentPrincipal, svc: Svc, limit: Limit = None, offset: Offset = 0) -> dict[str, Any]:
    """The tenant's keys, oldest first, revoked ones included (admin keys only)."""
    who.require("admin")
    limit = limit or svc.settings.page_size
    rows = svc.memory.store.list_keys(who.tenant)
    return page(rows[offset:offset + limit + 1], offset, limit)


@router.delete("/keys/{key_id}", response_model=s.KeyOut, tags=["admin"], name="keys.revoke")
def revoke_key(key_id: str, who: CurrentPrincipal, svc: Svc) -> dict[str, Any]:
    """Revoke a key of this tenant now (admin keys only)."""
    who.require("admin")
    key = svc.memory.store.get_key(key_id)
    if key is None or key.tenant != who.tenant:
        raise NotFoundError(f"no API key {key_id!r} in this tenant")
    return svc.keys.revoke(key_id).to_dict()


@router.get("/audit", response_model=s.AuditPage, tags=["admin"], name="audit.list",
            summary="The audit log: every mutation, newest first")
def audit(who: CurrentPrincipal, svc: Svc, limit: Limit = None,
          before: Annotated[int | None, Query(ge=1, le=2**63 - 1, description="Entries older than this seq "
                                                                "(the previous page's next_before)")] = None,
          user_id: str | None = None, key_id: str | None = None,
          action: Annotated[str | None, Query(description="An action or its prefix: items, "
                                                          "items.update…")] = None,
          since: Annotated[str | None, Query(description="ISO-8601 time")] = None) -> dict[str, Any]:
    """Who changed what, when, with which key. An end-user key sees its own user's."""
    limit = limit or svc.settings.page_size
    only = who.users_filter()
    if only is not None:
        if user_id is not None and user_id != only:
            who.check_user(user_id)
        user_id = only
    rows = svc.memory.store.list_audit(
        who.tenant, user_id=user_id, key_id=key_id, action=action,
        since=parse_time(since, what="since") if since is not None else None,
        before_seq=before, limit=limit + 1)
    more = len(rows) > limit
    return {"data": [r.to_dict() for r in rows[:limit]],
            "next_before": rows[limit - 1].seq if more else None}
