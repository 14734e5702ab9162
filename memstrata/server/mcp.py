"""The MCP server (official ``mcp`` SDK): memstrata's memory as tools and a resource for
assistant clients, over stdio (``memstrata mcp``) or streamable HTTP (``/mcp`` of
``memstrata serve``).

Tools: ``add_messages``, ``remember``, ``search``, ``get_context``, ``update_memory``,
``memory_history``, ``forget``, ``list_memories``, ``get_profile``, ``update_profile``;
resource: ``memstrata://profile``. The tools take
no user id: over stdio the process serves the one user named by ``--user``; over HTTP
the API key decides — an end-user key is its user, any other key names the user in the
``X-Memstrata-User`` header (percent-encoded UTF-8: :func:`memstrata.ids.from_header`)
— and the key's role and tenant apply as on every REST call
(mutations are audited).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .. import __version__
from ..errors import MemstrataError, ValidationError
from ..ids import from_header
from ..stores.base import AuditEntry
from ..types import utcnow
from ..user import UserMemory
from .auth import Principal, principal
from .errors import error_body, status_of
from .service import Service

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

__all__ = ["build_mcp", "McpEndpoint", "TOOLS", "USER_HEADER"]

#: The tools every memstrata MCP server lists.
TOOLS = ("add_messages", "remember", "search", "get_context", "update_memory", "memory_history",
         "forget", "list_memories", "get_profile", "update_profile")
#: The header naming the end user on an MCP-over-HTTP call made with a non-end-user key.
USER_HEADER = "x-memstrata-user"

#: ``resolve(ctx, write)`` -> the user's handle and, over HTTP, the calling key.
Resolver = Callable[[Context | None, bool], tuple[UserMemory, Principal | None]]
_REQUEST: ContextVar[Any] = ContextVar("memstrata_mcp_request", default=None)
#: ``audit(ctx, action, target, status)``: record a mutation, done (200) or refused.
Auditor = Callable[[Context | None, str, str | None, int], Awaitable[None]]

_INSTRUCTIONS = ("Long-term memory of the user you are talking to. Call get_context (or "
                 "search) before answering questions about the user's past, preferences or "
                 "plans; call remember when the user states something worth keeping; forget "
                 "when asked to. 用户的长期记忆：回答前先检索，值得记住的就记下。")


_KIND = Literal["fact", "preference", "instruction", "todo", "event"]


class _Caller:
    """Runs one tool's work on the handle ``resolve`` gives, in a worker thread; a
    memstrata error becomes a ToolError the client reads; mutations are audited, done or
    refused, as over REST."""

    def __init__(self, resolve: Resolver, audit: Auditor | None) -> None:
        self.resolve = resolve
        self.audit = audit

    async def __call__(self, ctx: Context | None, write: bool, action: str,
                       fn: Callable[[UserMemory], Any],
                       target: Callable[[Any], str | None] | None = None) -> Any:
        try:
            handle, who = self.resolve(ctx, write)
            result = await anyio.to_thread.run_sync(fn, handle)
        except MemstrataError as exc:  # the client sees what to fix, as REST callers do
            if write and self.audit is not None:  # a refused mutation is audited, as over REST
                await self.audit(ctx, f"mcp.{action}", None, status_of(exc))
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        if write and who is not None and self.audit is not None:
            await self.audit(ctx, f"mcp.{action}", target(result) if target else None, 200)
        return result


def build_mcp(resolve: Resolver, *, audit: Auditor | None = None) -> MCPServer:
    """An MCP server whose tools act on the handle ``resolve`` returns for each call."""
    server: MCPServer = MCPServer("memstrata", version=__version__, instructions=_INSTRUCTIONS)
    call = _Caller(resolve, audit)
    _add_turn_tools(server, call)  # the order is the order clients list the tools in
    _add_item_tools(server, call)
    _add_profile_tools(server, call)
    return server


def _add_turn_tools(server: MCPServer, call: _Caller) -> None:
    """add_messages, remember, search, get_context: storing and recalling."""

    @server.tool(description="Store conversation turns (OpenAI-format messages: role and "
                             "content) in a session's log; memstrata learns from them in the "
                             "background. The same turns sent again to the same session are "
                             "not stored twice.")
    async def add_messages(messages: list[dict[str, Any]], ctx: Context,
                           session_id: str = "default") -> dict[str, Any]:
        result = await call(ctx, True, "add", lambda h: h.add(messages, session_id),
                            lambda r: r.session_id)
        return {"session_id": result.session_id, "message_ids": result.message_ids,
                "replayed": result.replayed}

    @server.tool(description="Store a memory about the user (a fact, preference, instruction, "
                             "todo or event), as version 1.")
    async def remember(content: str, ctx: Context, kind: _KIND = "fact",
                       tags: list[str] | None = None) -> dict[str, Any]:
        item = await call(ctx, True, "remember",
                          lambda h: h.remember(content, kind=kind, tags=tags or (), actor="mcp"),
                          lambda i: i.id)
        return dict(item.to_dict())

    @server.tool(description="Hybrid (vector + BM25, Chinese and English) search over the "
                             "user's past turns and memories; best first, with scores.")
    async def search(query: str, ctx: Context, k: int = 5) -> list[dict[str, Any]]:
        hits = await call(ctx, False, "search", lambda h: h.search(query, k=k))
        return [h.to_dict() for h in hits]

    @server.tool(description="The messages to send next: the user's core profile, the "
                             "session summary and recalled memories, then the recent turns, "
                             "trimmed to a token budget.")
    async def get_context(ctx: Context, query: str | None = None,
                          messages: list[dict[str, Any]] | None = None, budget: int = 2000,
                          session_id: str = "default") -> dict[str, Any]:
        sent = messages if messages is not None else (
            [{"role": "user", "content": query}] if query else None)
        result = await call(ctx, False, "context",
                            lambda h: h.context(session_id, sent, budget=budget, query=query,
                                                recall="deep" if query else "auto"))
        return dict(result.to_dict())


def _add_item_tools(server: MCPServer, call: _Caller) -> None:
    """update_memory, memory_history, forget, list_memories: one memory at a time."""

    @server.tool(description="Correct a memory: new text (and, for a slot such as a city or "
                             "an employer, its new value) as a new version; the old one stays "
                             "in its history.")
    async def update_memory(item_id: str, ctx: Context, content: str | None = None,
                            value: str | None = None, kind: _KIND | None = None,
                            importance: float | None = None,
                            reason: str = "corrected through MCP") -> dict[str, Any]:
        changes: dict[str, Any] = {k: v for k, v in (("content", content), ("value", value), ("kind", kind),
                                     ("importance", importance)) if v is not None}
        if not changes:
            raise ToolError("ValidationError: give at least one of content, value, kind, importance")
        item = await call(ctx, True, "update",
                          lambda h: h.update(item_id, actor="mcp", reason=reason, **changes),
                          lambda i: i.id)
        return dict(item.to_dict())

    @server.tool(description="Every version of a memory, oldest first: what it said, who "
                             "changed it, when and why.")
    async def memory_history(item_id: str, ctx: Context) -> list[dict[str, Any]]:
        versions = await call(ctx, False, "history", lambda h: h.history(item_id))
        return [v.to_dict() for v in versions]

    @server.tool(description="Forget a memory for real (its versions, index entry and vector).")
    async def forget(item_id: str, ctx: Context) -> dict[str, Any]:
        await call(ctx, True, "forget", lambda h: h.forget(item_id), lambda _: item_id)
        return {"forgotten": item_id}

    @server.tool(description="List the user's memories, newest first.")
    async def list_memories(ctx: Context, kind: _KIND | None = None,
                            limit: int = 20) -> list[dict[str, Any]]:
        items = await call(ctx, False, "list",
                           lambda h: h.list(filters={"kind": kind} if kind else None, limit=limit))
        return [i.to_dict() for i in items]


def _add_profile_tools(server: MCPServer, call: _Caller) -> None:
    """get_profile, update_profile and the profile resource."""

    @server.tool(description="The user's core profile: name, role, goals, current matters, "
                             "preferences, language.")
    async def get_profile(ctx: Context) -> dict[str, Any]:
        profile = await call(ctx, False, "profile", lambda h: h.profile())
        return dict(profile.to_dict())

    @server.tool(description="Edit profile fields (a new version; a manual edit beats "
                             "aggregation). Omitted fields stay as they are.")
    async def update_profile(ctx: Context, name: str | None = None, role: str | None = None,
                             goals: list[str] | None = None, current: list[str] | None = None,
                             preferences: list[str] | None = None,
                             language: str | None = None) -> dict[str, Any]:
        fields = {k: v for k, v in (("name", name), ("role", role), ("goals", goals),
                                    ("current", current), ("preferences", preferences),
                                    ("language", language)) if v is not None}
        if not fields:
            raise ValidationError("name at least one profile field to change")
        profile = await call(ctx, True, "update_profile",
                             lambda h: h.update_profile(actor="mcp", **fields))
        return dict(profile.to_dict())

    @server.resource("memstrata://profile", name="profile", mime_type="application/json",
                     description="The user's core profile (JSON)")
    async def profile_resource() -> str:
        # the SDK gives static resources no Context: the resolver falls back to the
        # request McpEndpoint recorded for this call
        profile = await call(None, False, "profile", lambda h: h.profile())
        return json.dumps(profile.to_dict(), ensure_ascii=False)


def local_resolver(handle: UserMemory) -> Resolver:
    """One fixed user (``memstrata mcp --user``)."""
    return lambda ctx, write: (handle, None)


def service_resolver(service: Service) -> Resolver:
    """The user of an MCP-over-HTTP call: from the calling key (authenticated by
    :class:`McpEndpoint`) and, for non-end-user keys, the ``X-Memstrata-User`` header."""

    def resolve(ctx: Context | None, write: bool) -> tuple[UserMemory, Principal | None]:
        request = ctx.request_context.request if ctx is not None else _REQUEST.get()
        who: Principal | None = request.scope.get("memstrata.principal") if request is not None else None
        if request is None or who is None:
            raise MemstrataError("MCP call without an authenticated key")
        user_id = who.key.user_id if who.role == "end-user" else from_header(
            request.headers.get(USER_HEADER), USER_HEADER)
        if not user_id:
            raise ValidationError(f"name the user in the {USER_HEADER} header (or use an "
                                  "end-user key)")
        return who.user(service, user_id, write=write), who

    return resolve


def service_auditor(service: Service) -> Auditor:
    async def audit(ctx: Context | None, action: str, target: str | None, status: int) -> None:
        request = ctx.request_context.request if ctx is not None else _REQUEST.get()
        who: Principal | None = request.scope.get("memstrata.principal") if request is not None else None
        if request is None or who is None:
            return  # unauthenticated: McpEndpoint answered 401 before any tool ran
        try:
            user_id = who.key.user_id if who.role == "end-user" else from_header(
                request.headers.get(USER_HEADER), USER_HEADER)
        except ValidationError:  # refused for its user id: the entry names none
            user_id = None
        entry = AuditEntry(utcnow(), who.tenant, who.key.id, who.role, action, "POST", "/mcp",
                           status, user_id=user_id or None, target=target)
        await anyio.to_thread.run_sync(service.memory.store.append_audit, entry)

    return audit


class McpEndpoint:
    """``/mcp``: checks the API key (401 with the service's error body otherwise), then
    hands the request to the SDK's streamable-HTTP session manager (stateless, so any
    server process can answer any call)."""

    def __init__(self, service: Service, server: MCPServer) -> None:
        self.service = service
        self.server = server

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        from starlette.requests import Request
        from starlette.responses import JSONResponse

        request = Request(scope, receive)
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        try:
            await anyio.to_thread.run_sync(lambda: principal(request, None, token or request.headers.get(
                "x-api-key")))
        except MemstrataError as exc:
            status = status_of(exc)
            await JSONResponse(error_body(status, type(exc).__name__, str(exc),
                                          scope.get("memstrata.request_id")), status_code=status,
                               headers={"WWW-Authenticate": "Bearer"} if status == 401 else None,
                               )(scope, receive, send)
            return
        token_var = _REQUEST.set(request)
        try:
            await self.server.session_manager.asgi_app(scope, receive, send)
        finally:
            _REQUEST.reset(token_var)
