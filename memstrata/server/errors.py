"""The one place memstrata errors become HTTP responses.

Every error body has the same shape::

    {"error": {"type": "NotFoundError", "message": "no memory item mem_…", "status": 404,
               "request_id": "9f…"}}

The status is chosen by the error's class (the most specific match in :data:`STATUS`),
never by its message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ..errors import mask_credentials
from ..errors import (AuthenticationError, BudgetError, ConfigError, ConflictError, JobError,
                      MemstrataError, NotFoundError, PermissionDeniedError, ProviderAuthError,
                      ProviderError, ProviderNotFoundError, ProviderRateLimitError,
                      ProviderTimeoutError, RateLimitError, StoreError, StoreUnavailableError,
                      ValidationError)
from .observe import Repeats

__all__ = ["STATUS", "status_of", "install", "error_body"]

log = logging.getLogger("memstrata.server")
_repeats = Repeats(log)

#: Error class -> HTTP status; a subclass not listed takes its nearest listed base's.
STATUS: dict[type[MemstrataError], int] = {
    MemstrataError: 500,
    ConfigError: 500,
    ValidationError: 422,
    BudgetError: 422,
    NotFoundError: 404,
    ConflictError: 409,
    AuthenticationError: 401,
    PermissionDeniedError: 403,
    RateLimitError: 429,
    JobError: 500,
    StoreError: 500,
    StoreUnavailableError: 503,
    ProviderError: 502,
    ProviderAuthError: 502,
    ProviderNotFoundError: 502,
    ProviderRateLimitError: 503,
    ProviderTimeoutError: 504,
}


def status_of(exc: MemstrataError, *, if_match: bool = False) -> int:
    """The HTTP status of ``exc``; a conflict on a request that sent ``If-Match`` is
    412 Precondition Failed."""
    for cls in type(exc).__mro__:
        if cls in STATUS:
            status = STATUS[cls]
            return 412 if status == 409 and if_match else status
    return 500


def error_body(status: int, kind: str, message: str, request_id: str | None) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "status": status, "request_id": request_id}}


def _request_id(request: Request) -> str | None:
    value = request.scope.get("memstrata.request_id")
    return str(value) if value else None


def _problem(problem: Mapping[str, Any], content_type: str) -> str:
    """One validation problem as a sentence; the body's own shape said plainly (FastAPI's
    wording for these, e.g. ``1: JSON decode error``, names no cause and no fix)."""
    loc = tuple(problem.get("loc", ()))
    kind = problem.get("type")
    if kind == "json_invalid":
        why = (problem.get("ctx") or {}).get("error") or "not JSON"
        return f"the body is not valid JSON: {why} (at character {loc[-1]})"
    if loc == ("body",) and kind == "missing":
        return "the body is empty: send a JSON object with Content-Type: application/json"
    if loc == ("body",) and kind in ("model_attributes_type", "dict_type"):
        if "json" not in content_type.lower():
            return (f"the body must be a JSON object sent with Content-Type: application/json "
                    f"(got {content_type or 'no Content-Type'})")
        return "the body must be a JSON object, not another JSON value"
    where = ".".join(str(p) for p in loc if p != "body") or "body"
    return f"{where}: {problem.get('msg', 'invalid')}"


def install(app: FastAPI) -> None:
    """Register the handlers: memstrata errors, request validation, HTTP errors."""

    async def memstrata_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, MemstrataError)
        status = status_of(exc, if_match="if-match" in request.headers)
        message = mask_credentials(str(exc))  # a URL an error names never shows its password
        if status >= 500:  # once with its traceback, then counted (a full disk: every request)
            route = getattr(request.scope.get("route"), "path", request.url.path)
            _repeats.log(logging.ERROR, f"{type(exc).__name__} {route}",
                         "%s %s failed: %s: %s", request.method, request.url.path,
                         type(exc).__name__, message, exc=exc)
        headers = {}
        if isinstance(exc, RateLimitError):
            headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        if isinstance(exc, AuthenticationError):
            headers["WWW-Authenticate"] = "Bearer"
        return JSONResponse(error_body(status, type(exc).__name__, message, _request_id(request)),
                            status_code=status, headers=headers)

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        parts = [_problem(problem, request.headers.get("content-type", "")) for problem in exc.errors()]
        return JSONResponse(error_body(422, "ValidationError", "; ".join(parts) or "invalid request",
                                       _request_id(request)), status_code=422)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if exc.status_code in (404, 405) and b"%2f" in request.scope.get("raw_path", b"").lower():
            # the server decoded the path before routing: an id with '/' split it in two
            return JSONResponse(error_body(422, "ValidationError", "a path segment holds an escaped "
                                           "'/' (%2F): ids may not hold '/' (see memstrata.ids)",
                                           _request_id(request)), status_code=422)
        return JSONResponse(error_body(exc.status_code, "HTTPError", str(exc.detail),
                                       _request_id(request)),
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    app.add_exception_handler(MemstrataError, memstrata_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)
