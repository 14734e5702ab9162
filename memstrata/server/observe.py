"""Operations: request ids, structured access logs, request metrics and the audit log.

:class:`ServiceMiddleware` is a plain ASGI middleware (it must not buffer: the memory
proxy streams). For every request it assigns a request id (or keeps a sane
``X-Request-ID`` the caller sent), times it, logs one line, counts it in the metrics
and — for a mutation made with a valid key — appends an :class:`AuditEntry` once the
response has been sent.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from ..stores.base import AdminStore, AuditEntry
from ..types import utcnow
from .auth import Principal
from .metrics import Metrics

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope as AsgiScope, Send

    from ..priority import Foreground

__all__ = ["ServiceMiddleware", "JsonFormatter", "Repeats", "READ_POSTS"]

log = logging.getLogger("memstrata.server")
access = logging.getLogger("memstrata.access")

#: POST routes that only read (the body carries a query): not audited.
READ_POSTS = frozenset({"users.search", "users.explain", "users.context", "mcp"})
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_TARGETS = ("item_id", "session_id", "key_id", "doc_id")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the request's fields."""

    _FIELDS = ("request_id", "method", "path", "route", "status", "duration_ms", "key_id",
               "tenant", "user_id")

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"at": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
                               "level": record.levelname.lower(), "logger": record.name,
                               "message": record.getMessage()}
        out.update({k: getattr(record, k) for k in self._FIELDS if hasattr(record, k)})
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class Repeats:
    """A failure that repeats — a full disk, a database gone — is logged once with its
    traceback, then as one line with a count at its 2nd, 4th, 8th… occurrence and at
    least once a minute while it lasts; after ``quiet_s`` without it, the next one is a
    new episode (with its traceback again). Keys name the failure, never its content."""

    def __init__(self, logger: logging.Logger, *, every_s: float = 60.0, quiet_s: float = 600.0) -> None:
        self.logger = logger
        self.every_s = every_s
        self.quiet_s = quiet_s
        self._seen: dict[str, tuple[int, float, float]] = {}  # key -> count, first, last logged
        self._lock = threading.Lock()

    def log(self, level: int, key: str, message: str, *args: Any,
            exc: BaseException | None = None) -> None:
        now = time.monotonic()
        with self._lock:
            count, first, logged = self._seen.get(key, (0, now, 0.0))
            if count and now - logged > self.quiet_s and now - first > self.quiet_s:
                count, first = 0, now
            count += 1
            due = count == 1 or count & (count - 1) == 0 or now - logged >= self.every_s
            self._seen[key] = (count, first, now if due else logged)
        if not due:
            return
        if count == 1:
            self.logger.log(level, message, *args, exc_info=exc)
        else:
            self.logger.log(level, message + " (%d times in %.0fs; the traceback was logged the "
                            "first time)", *args, count, now - first)


def _header(scope: "AsgiScope", name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class ServiceMiddleware:
    """Request id, access log, metrics and audit for every HTTP request."""

    def __init__(self, app: "ASGIApp", *, metrics: Metrics, admin: AdminStore,
                 foreground: "Foreground | None" = None) -> None:
        self.app = app
        self.metrics = metrics
        self.admin = admin
        self.foreground = foreground  # background jobs wait while a request is in flight

    async def __call__(self, scope: "AsgiScope", receive: "Receive", send: "Send") -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = _header(scope, b"x-request-id")
        request_id = sent if sent and _REQUEST_ID.match(sent) else uuid.uuid4().hex
        scope["memstrata.request_id"] = request_id
        started = time.perf_counter()
        status = 500
        self.metrics.in_flight.inc()
        if self.foreground is not None:
            self.foreground.enter()

        async def send_with_id(message: "Message") -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                # audited before the caller sees the answer, so it can read its own entry
                await self._audit(scope, status, request_id)
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                limit = scope.get("memstrata.rate")
                if limit is not None:
                    headers.append((b"x-ratelimit-limit", str(limit[0]).encode()))
                    headers.append((b"x-ratelimit-remaining", str(max(0, limit[0] - limit[1])).encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.in_flight.dec()
            if self.foreground is not None:
                self.foreground.leave()
            elapsed = time.perf_counter() - started
            await self._finish(scope, status, elapsed, request_id)

    async def _finish(self, scope: "AsgiScope", status: int, elapsed: float, request_id: str) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        method = scope["method"]
        self.metrics.requests.labels(method, template, str(status)).inc()
        self.metrics.latency.labels(method, template).observe(elapsed)
        principal: Principal | None = scope.get("memstrata.principal")
        params: Mapping[str, Any] = scope.get("path_params") or {}
        extra = {"request_id": request_id, "method": method, "path": scope.get("path", ""),
                 "route": template, "status": status, "duration_ms": round(elapsed * 1000, 2)}
        if principal is not None:
            extra.update(key_id=principal.key.id, tenant=principal.tenant)
        if "user_id" in params:
            extra["user_id"] = params["user_id"]
        access.info("%s %s %d %.1fms", method, scope.get("path", ""), status, elapsed * 1000,
                    extra=extra)

    async def _audit(self, scope: "AsgiScope", status: int, request_id: str) -> None:
        route = scope.get("route")
        name = getattr(route, "name", None) or ""
        method = scope["method"]
        principal: Principal | None = scope.get("memstrata.principal")
        params: Mapping[str, Any] = scope.get("path_params") or {}
        if principal is None or method in ("GET", "HEAD", "OPTIONS") or name in READ_POSTS:
            return
        target = scope.get("memstrata.target") or next(
            (str(params[k]) for k in _TARGETS if k in params), None)
        user = str(params["user_id"]) if "user_id" in params else scope.get("memstrata.user")
        path = scope.get("path", "")
        pseudonym = scope.get("memstrata.forgotten")
        if pseudonym and user:  # the request that forgot the user: it names them no more
            path, user = path.replace(f"/users/{user}", f"/users/{pseudonym}"), pseudonym
        entry = AuditEntry(utcnow(), principal.tenant, principal.key.id, principal.role,
                           scope.get("memstrata.action") or name, method, path, status,
                           user_id=user, target=target, request_id=request_id)
        try:
            await anyio.to_thread.run_sync(self.admin.append_audit, entry)
        except Exception:  # the mutation is done; a failed audit write must at least be loud
            log.exception("could not write the audit entry of request %s", request_id)
