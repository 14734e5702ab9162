"""The OpenAI-compatible memory proxy: ``POST /v1/chat/completions``.

Point any OpenAI client at the service instead of the model: the proxy finds the user
(the ``X-Memstrata-User`` header, else the body's ``user`` field; an end-user key is
always its own user), replaces ``messages`` with :meth:`~memstrata.UserMemory.context`
under the ``proxy_budget`` (profile, session summary, recalled memories, the recent
turns), forwards the request — every other field untouched, ``tools`` and ``stream``
included — to the ``upstream``, and returns the upstream's answer byte for byte (its
status too). Once the answer is complete it stores the turn: the messages after the
request's last assistant message (the new user turn, or the tool results) and the
answer (content and tool calls). A failed upstream call stores nothing.

Streaming answers are relayed chunk by chunk as they arrive while the deltas are
accumulated, so the stored answer is the one the caller saw; the stream's last chunk
is sent once the turn is stored (a stream the upstream breaks off stores nothing).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from fastapi import APIRouter, Body, Request
from fastapi.responses import Response, StreamingResponse

from ..errors import (PermissionDeniedError, ProviderError, ProviderTimeoutError, ValidationError)
from ..user import UserMemory
from .auth import CurrentPrincipal
from .routes.common import Svc

__all__ = ["router", "turn_to_store", "Accumulator"]

log = logging.getLogger("memstrata.proxy")

router = APIRouter(tags=["proxy"])

SESSION_HEADER = "x-memstrata-session"
_DROPPED_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding"}


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
        self._buffer = b""

    def feed(self, data: bytes) -> None:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                continue
            try:
                chunk = json.loads(payload)
            except ValueError:
                continue
            self.usage = chunk.get("usage") or self.usage
            for choice in chunk.get("choices") or ():
                if choice.get("index", 0) == 0:
                    self._delta(choice.get("delta") or {})

    def _delta(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        for call in delta.get("tool_calls") or ():
            slot = self.calls.setdefault(int(call.get("index", 0)),
                                         {"id": "", "type": "function",
                                          "function": {"name": "", "arguments": ""}})
            slot["id"] = call.get("id") or slot["id"]
            function = call.get("function") or {}
            slot["function"]["name"] += function.get("name") or ""
            slot["function"]["arguments"] += function.get("arguments") or ""

    def message(self) -> dict[str, Any]:
        """The assistant message the stream spelled out."""
        out: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.calls:
            out["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        elif out["content"] is None:
            out["content"] = ""
        return out


def _answer(body: dict[str, Any]) -> dict[str, Any] | None:
    choices = body.get("choices") or []
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        return None
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    elif out["content"] is None:
        out["content"] = ""
    return out


def _user(request: Request, who: CurrentPrincipal, body: dict[str, Any], header: str) -> str:
    named = request.headers.get(header) or body.get("user")
    if who.role == "end-user":
        if named and named != who.key.user_id:
            raise PermissionDeniedError("this end-user key belongs to another user id")
        return str(who.key.user_id)
    if not isinstance(named, str) or not named:
        raise ValidationError(f"name the end user in the {header} header or the body's "
                              "'user' field")
    return named


def _store(handle: UserMemory, session_id: str, turn: list[dict[str, Any]],
           answer: dict[str, Any] | None) -> None:
    messages = turn + ([answer] if answer is not None else [])
    if messages:
        handle.add(messages, session_id)


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
    session_id = request.headers.get(SESSION_HEADER) or "proxy"
    turn = turn_to_store(messages)
    context = await anyio.to_thread.run_sync(
        lambda: handle.context(session_id, messages, budget=settings.proxy_budget))
    upstream_body = {**body, "messages": context.messages}
    headers = {"content-type": "application/json"}
    auth = f"Bearer {settings.upstream_key}" if settings.upstream_key else \
        request.headers.get("x-upstream-authorization")
    if auth:
        headers["authorization"] = auth
    client = svc.upstream_client()
    url = settings.upstream.rstrip("/") + "/chat/completions"
    stream = bool(body.get("stream"))
    try:
        upstream = await client.send(client.build_request("POST", url, json=upstream_body,
                                                          headers=headers), stream=stream)
    except httpx.TimeoutException as exc:
        svc.metrics.upstream.labels("timeout", str(stream).lower()).inc()
        raise ProviderTimeoutError(f"the upstream {settings.upstream} did not answer in "
                                   f"{settings.upstream_timeout_s:g}s") from exc
    except httpx.HTTPError as exc:
        svc.metrics.upstream.labels("unreachable", str(stream).lower()).inc()
        raise ProviderError(f"cannot reach the upstream {settings.upstream} ({exc}); is it "
                            "running, and is the upstream setting right?") from exc
    svc.metrics.upstream.labels(str(upstream.status_code), str(stream).lower()).inc()
    passed = {k: v for k, v in upstream.headers.items() if k.lower() not in _DROPPED_HEADERS}
    if not stream or upstream.status_code >= 400:
        content = await upstream.aread() if stream else upstream.content
        await upstream.aclose()
        if upstream.status_code < 400:
            try:
                parsed = json.loads(content)
            except ValueError:
                parsed = None
            answer = _answer(parsed) if isinstance(parsed, dict) else None
            svc.count_upstream_usage(parsed.get("usage") if isinstance(parsed, dict) else None)
            await anyio.to_thread.run_sync(_store, handle, session_id, turn, answer)
        return Response(content, status_code=upstream.status_code, headers=passed)

    accumulator = Accumulator()

    async def relay() -> AsyncIterator[bytes]:
        # the last chunk is held back until the turn is stored: a caller that has seen
        # the end of the stream can read its turn back
        held: bytes | None = None
        try:
            async for chunk in upstream.aiter_raw():
                accumulator.feed(chunk)
                if held is not None:
                    yield held
                held = chunk
        finally:
            await upstream.aclose()
        svc.count_upstream_usage(accumulator.usage)
        await anyio.to_thread.run_sync(_store, handle, session_id, turn, accumulator.message())
        if held is not None:
            yield held

    return StreamingResponse(relay(), status_code=upstream.status_code, headers=passed,
                             media_type=upstream.headers.get("content-type", "text/event-stream"))
