"""Who is calling: the API key of a request, its role and tenant, its rate limit, and
the one way a route gets a user's memory (:meth:`Principal.user`).

Every per-user route goes through :meth:`Principal.user`, which scopes the handle to
the key's tenant namespace — so a key of one tenant can name any user id and only ever
reach its own tenant's data (another tenant's ids are simply not found) — and enforces
the role: ``read-only`` keys may not write, ``end-user`` keys reach one user id only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ..errors import PermissionDeniedError, RateLimitError, with_article
from ..stores.base import ApiKey
from ..user import UserMemory
from .service import Service

__all__ = ["Principal", "principal", "CurrentPrincipal", "service"]

_bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer msk_…`")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="`X-API-Key: msk_…`")


@dataclass(frozen=True, slots=True)
class Principal:
    """The key a request was made with."""

    key: ApiKey

    @property
    def tenant(self) -> str:
        return self.key.tenant

    @property
    def role(self) -> str:
        return self.key.role

    def require(self, *roles: str) -> None:
        """PermissionDeniedError unless the key has one of ``roles``."""
        if self.role not in roles:
            raise PermissionDeniedError(f"{with_article(self.role)} key may not do this; it needs "
                                        f"{with_article(' or '.join(roles))} key")

    def require_write(self) -> None:
        if self.role == "read-only":
            raise PermissionDeniedError("a read-only key may not change memory")

    def check_user(self, user_id: str) -> None:
        """An end-user key reaches its own user id only."""
        if self.role == "end-user" and user_id != self.key.user_id:
            raise PermissionDeniedError("this end-user key belongs to another user id")

    def user(self, service: Service, user_id: str, *, write: bool) -> UserMemory:
        """The handle on ``user_id`` in this key's tenant, if the role allows it."""
        self.check_user(user_id)
        if write:
            self.require_write()
        return service.memory.user(user_id, agent=self.tenant)

    def users_filter(self) -> str | None:
        """The one user id an end-user key is bound to (None: every user of the tenant)."""
        return self.key.user_id if self.role == "end-user" else None


def service(request: Request) -> Service:
    """The running :class:`~memstrata.server.service.Service`."""
    found: Service = request.app.state.service
    return found


def principal(request: Request,
              bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
              header: Annotated[str | None, Depends(_header)]) -> Principal:
    """Authenticate the request's key and count it against the key's rate limit."""
    svc = service(request)
    token = bearer.credentials if bearer is not None else header
    key = svc.keys.authenticate(token)
    request.scope["memstrata.principal"] = who = Principal(key)
    limit = key.rate_limit if key.rate_limit is not None else svc.settings.rate_limit
    if limit:
        now = time.time()
        hits = svc.memory.store.hit_rate(key.id, int(now // 60))
        request.scope["memstrata.rate"] = (limit, hits)
        if hits > limit:
            raise RateLimitError(f"key {key.id} made more than {limit} requests this minute; "
                                 "retry after the Retry-After seconds, or raise its limit "
                                 "(memstrata keys create --rate-limit)", retry_after=60 - now % 60)
    return who


CurrentPrincipal = Annotated[Principal, Depends(principal)]
