"""The OpenAI-compatible memory proxy: ``POST /v1/chat/completions``.

Point any OpenAI client at the service instead of the model: the proxy finds the user
(the ``X-Memstrata-User`` header, percent-encoded UTF-8, else the body's ``user`` field;
an end-user key is always its own user), replaces ``messages`` with
:meth:`~memstrata.UserMemory.context` under the ``proxy_budget`` (profile, session
summary, recalled memories, the recent turns), forwards the request — every other field
untouched, ``tools`` and ``stream`` included — to the ``upstream``, and returns the
upstream's answer byte for byte (its status too). Once the answer is complete it stores
the turn: the messages after the request's last assistant message (the new user turn, or
the tool results) and the answer (content and tool calls). A failed upstream call (not
2xx: a redirect is no success) stores nothing.

The caller always gets what the upstream answered, whatever memstrata makes of it: an
answer it cannot read (not JSON, no ``choices``, odd types) or cannot store (a value
memstrata refuses) is passed through unchanged, the user's turn is stored without it,
and ``memstrata_proxy_warnings{kind}`` counts it. Headers that belong to one hop
(``Connection`` and the ones it names, ``Keep-Alive``, ``Transfer-Encoding``…) or to the
upstream's origin (``Set-Cookie``, ``Location``) are not relayed.

Streaming answers are relayed chunk by chunk as they arrive, whatever the chunks hold,
while the deltas are accumulated, so the stored answer is the one the caller saw; the
stream's last chunk is sent once the turn is stored (a stream the upstream breaks off
stores nothing).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
from fastapi import APIRouter, Body, Request
from fastapi.responses import Response, StreamingResponse

from ..errors import (MemstrataError, PermissionDeniedError, ProviderError, ProviderTimeoutError,
                      ValidationError, mask_credentials)
from ..ids import from_header
from ..stores import safe_url
from ..user import UserMemory
from .auth import CurrentPrincipal
from .observe import Repeats
from .routes.common import Svc
from .service import Service

__all__ = ["router", "turn_to_store", "Accumulator"]

log = logging.getLogger("memstrata.proxy")
_repeats = Repeats(log)

router = APIRouter(tags=["proxy"])

SESSION_HEADER = "x-memstrata-session"
# hop-by-hop (RFC 9110 §7.6.1), what the relay recomputes (length, encoding: the body
# is relayed decoded) and what speaks for the upstream's origin, not this service's
_DROPPED_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive",
                    "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
                    "trailer", "trailers", "upgrade", "content-encoding", "set-cookie",
                    "set-cookie2", "location", "content-location", "refresh"}
_MAX_LINE = 1 << 20  # a streamed line longer than this is not read (it is still relayed)


def relayed_headers(headers: httpx.Headers) -> dict[str, str]:
    """The upstream's headers that reach the caller."""
    named = {h.strip().lower() for h in headers.get("connection", "").split(",")}
    return {k: v for k, v in headers.items()
            if k.lower() not in _DROPPED_HEADERS and k.lower() not in named}


def turn_to_store(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a request adds to the conversation: the messages after its last assistant
    message, without system prompts (clients resend those with every call)."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return [m for m in messages[last + 1:] if m.get("role") not in ("system", "developer")]


class Accumulator:
    """Rebuilds the assistant message from streamed ``chat.completion.chunk`` deltas."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] | None = None
        self.read = 0  # data lines understood
        self.unreadable = 0  # data lines (or parts of them) that were not
        self._buffer = b""

    def feed(self, data: bytes) -> None:
        """Read what a chunk adds; never raises (what it cannot read, it counts)."""
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > _MAX_LINE:
            self._buffer = b""
            self.unreadable += 1
        for line in lines:
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                continue
            try:
                chunk = json.loads(payload)
                if not isinstance(chunk, dict):
                    raise TypeError("a chunk is an object")
                usage = chunk.get("usage")
                self.usage = usage if isinstance(usage, dict) else self.usage
                choices = chunk.get("choices") or ()
                for choice in choices if isinstance(choices, list) else ():
                    if isinstance(choice, dict) and choice.get("index", 0) == 0:
                        delta = choice.get("delta")
                        self._delta(delta if isinstance(delta, dict) else {})
                self.read += 1
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError):
                self.unreadable += 1

    def _delta(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict):
                raise TypeError("a tool call is an object")
            index = call.get("index", 0)
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 1024:
                raise TypeError("a tool call's index is a small integer")
            slot = self.calls.setdefault(index, {"id": "", "type": "function",
                                                 "function": {"name": "", "arguments": ""}})
            if isinstance(call.get("id"), str) and call["id"]:
                slot["id"] = call["id"]
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            for part in ("name", "arguments"):
                if isinstance(function.get(part), str):
                    slot["function"][part] += function[part]

    def message(self) -> dict[str, Any]:
        """The assistant message the stream spelled out."""
        out: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.calls:
            out["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        elif out["content"] is None:
            out["content"] = ""
        return out


def _answer(content: bytes) -> tuple[dict[str, Any] | None, Any]:
    """The assistant message and the usage of a plain answer, each None when it cannot
    be read; never raises."""
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(body, dict):
        return None, None
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        return None, body.get("usage")
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    elif out["content"] is None:
        out["content"] = ""
    return out, body.get("usage")


def _user(request: Request, who: CurrentPrincipal, body: dict[str, Any], header: str) -> str:
    named = from_header(request.headers.get(header), header) or body.get("user")
    if who.role == "end-user":
        if named and named != who.key.user_id:
            raise PermissionDeniedError("this end-user key belongs to another user id")
        return str(who.key.user_id)
    if not isinstance(named, str) or not named:
        raise ValidationError(f"name the end user in the {header} header or the body's "
                              "'user' field")
    return named


def _store(handle: UserMemory, session_id: str, turn: list[dict[str, Any]],
           answer: dict[str, Any] | None) -> str | None:
    """Store the turn and the answer; what memstrata cannot store is left out, never
    raised: the caller has its answer either way. Returns a warning kind or None."""
    warning = "unreadable_answer" if answer is None else None
    if answer is not None:
        try:
            handle.add(turn + [answer], session_id)
            return None
        except Exception as exc:  # refused (or worse): keep the user's turn at least
            warning = "unstorable_answer"
            if not isinstance(exc, MemstrataError):
                _repeats.log(logging.ERROR, f"answer {type(exc).__name__}", "proxy: storing an "
                             "answer failed (%s)", type(exc).__name__, exc=exc)
    if turn:
        try:
            handle.add(turn, session_id)
        except Exception as exc:  # the answer still reaches the caller
            _repeats.log(logging.WARNING, f"turn {type(exc).__name__}",
                         "proxy: the user's turn was not stored (%s)", type(exc).__name__,
                         exc=None if isinstance(exc, MemstrataError) else exc)
            return "unstored_turn"
    return warning


def _warn(svc: Any, kind: str | None) -> None:
    if kind is not None:
        svc.metrics.proxy_warnings.labels(kind).inc()
        _repeats.log(logging.WARNING, kind, "proxy: an upstream answer was passed through "
                     "although memstrata could not read or store it all (%s)", kind)


@router.post("/v1/chat/completions", name="proxy.chat",
             summary="OpenAI-compatible chat completions, with the user's memory in the context",
             responses={200: {"description": "The upstream's answer, unchanged (JSON, or "
                                             "text/event-stream when stream is true)"},
                        502: {"description": "The upstream failed or cannot be reached"},
                        504: {"description": "The upstream did not answer in time"}})
async def chat_completions(request: Request, who: CurrentPrincipal, svc: Svc,
                           body: dict[str, Any] = Body(..., examples=[{
                               "model": "smollm2", "user": "lin",
                               "messages": [{"role": "user", "content": "What did I say last time "
                                                                        "about the migration?"}]}]),
                           ) -> Response:
    """The request goes to the configured upstream with ``messages`` replaced by the
    user's context; the answer comes back unchanged and the turn is stored."""
    settings = svc.settings
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ValidationError("messages must be a non-empty list of OpenAI-format message objects")
    user_id = _user(request, who, body, settings.proxy_user_header)
    request.scope["memstrata.user"] = user_id  # for the audit entry
    handle = who.user(svc, user_id, write=True)
    session_id = from_header(request.headers.get(SESSION_HEADER), SESSION_HEADER) or "proxy"
    turn = _Turn(handle, session_id, turn_to_store(messages))
    context = await anyio.to_thread.run_sync(
        lambda: handle.context(session_id, messages, budget=settings.proxy_budget))
    stream = bool(body.get("stream"))
    upstream = await _send(svc, {**body, "messages": context.messages}, _upstream_headers(request, svc),
                           stream)
    if stream and 200 <= upstream.status_code < 300:
        return _relay_stream(svc, upstream, turn)
    return await _relay_whole(svc, upstream, turn, stream)


@dataclass(frozen=True)
class _Turn:
    """Where a proxied turn is stored once its answer is read: the user's handle, the
    session and the turn's own messages."""

    handle: UserMemory
    session_id: str
    messages: list[dict[str, Any]]

    def store(self, answer: dict[str, Any] | None) -> str | None:
        """:func:`_store` of this turn with ``answer``."""
        return _store(self.handle, self.session_id, self.messages, answer)


def _upstream_headers(request: Request, svc: Service) -> dict[str, str]:
    """JSON, and the upstream's key: the server's own, else the one the caller passed."""
    headers = {"content-type": "application/json"}
    key = svc.settings.upstream_key
    auth = f"Bearer {key}" if key else request.headers.get("x-upstream-authorization")
    if auth:
        headers["authorization"] = auth
    return headers


async def _send(svc: Service, body: dict[str, Any], headers: dict[str, str],
                stream: bool) -> httpx.Response:
    """The upstream's response (its body not read yet when ``stream``), counted; a
    timeout or a connection that fails is a provider error."""
    settings, client = svc.settings, svc.upstream_client()
    url = settings.upstream.rstrip("/") + "/chat/completions"
    try:
        upstream = await client.send(client.build_request("POST", url, json=body, headers=headers),
                                     stream=stream)
    except httpx.TimeoutException as exc:
        svc.metrics.upstream.labels("timeout", str(stream).lower()).inc()
        raise ProviderTimeoutError(f"the upstream {safe_url(settings.upstream)} did not answer in "
                                   f"{settings.upstream_timeout_s:g}s") from exc
    except httpx.HTTPError as exc:
        svc.metrics.upstream.labels("unreachable", str(stream).lower()).inc()
        raise ProviderError(f"cannot reach the upstream {safe_url(settings.upstream)} "
                            f"({mask_credentials(str(exc))}); is it "
                            "running, and is the upstream setting right?") from exc
    svc.metrics.upstream.labels(str(upstream.status_code), str(stream).lower()).inc()
    return upstream


async def _relay_whole(svc: Service, upstream: httpx.Response, turn: _Turn, stream: bool) -> Response:
    """A plain answer (or a failed stream) read whole and passed on; a successful one
    is stored with its turn first."""
    try:
        content = await upstream.aread() if stream else upstream.content
    except httpx.HTTPError as exc:
        raise ProviderError(f"the upstream {safe_url(svc.settings.upstream)} broke off its answer "
                            f"({mask_credentials(str(exc))})") from exc
    finally:
        await upstream.aclose()
    if 200 <= upstream.status_code < 300:
        answer, usage = _answer(content)
        svc.count_upstream_usage(usage)
        _warn(svc, await anyio.to_thread.run_sync(turn.store, answer))
    return Response(content, status_code=upstream.status_code, headers=relayed_headers(upstream.headers))


def _relay_stream(svc: Service, upstream: httpx.Response, turn: _Turn) -> StreamingResponse:
    """A successful stream relayed chunk by chunk as it came, the answer read along the
    way and stored with its turn before the last chunk goes out."""
    passed = relayed_headers(upstream.headers)
    accumulator = Accumulator()
    # a compressed stream is relayed as it came, with its Content-Encoding, and not read
    encoded = upstream.headers.get("content-encoding", "identity").strip().lower() != "identity"
    if encoded:
        passed["content-encoding"] = upstream.headers["content-encoding"]

    async def relay() -> AsyncIterator[bytes]:
        # the last chunk is held back until the turn is stored: a caller that has seen
        # the end of the stream can read its turn back
        held: bytes | None = None
        try:
            async for chunk in upstream.aiter_raw():  # as sent: an encoded stream stays encoded
                if not encoded:
                    accumulator.feed(chunk)
                if held is not None:
                    yield held
                held = chunk
        finally:
            await upstream.aclose()
        svc.count_upstream_usage(accumulator.usage)
        answer = accumulator.message() if accumulator.read else None
        warning = await anyio.to_thread.run_sync(turn.store, answer)
        _warn(svc, warning or ("unreadable_chunks" if accumulator.unreadable or encoded else None))
        if held is not None:
            yield held

    return StreamingResponse(relay(), status_code=upstream.status_code, headers=passed,
                             media_type=upstream.headers.get("content-type", "text/event-stream"))
