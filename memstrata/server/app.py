"""The HTTP service: :func:`create_app` builds the FastAPI application.

::

    from memstrata import Memory
    from memstrata.server import create_app

    app = create_app(Memory("sqlite:///memstrata.db"))   # or create_app() from settings
    # uvicorn.run(app) — or `memstrata serve`

The app holds one :class:`Service`: the :class:`~memstrata.Memory` every request
shares (its worker thread runs the background jobs unless ``worker="off"`` and a
``memstrata worker`` process does), the key checker, the settings and the metrics.
Routers live in :mod:`memstrata.server.routes`; more can be mounted with
``create_app(..., routers=[...])`` (the web inspector's ``/ui`` router is one): each
route asks for :data:`~memstrata.server.auth.CurrentPrincipal` and reaches memory only
through :meth:`~memstrata.server.auth.Principal.user`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from starlette.routing import Route

from .. import __version__
from ..errors import NotFoundError
from ..memory import Memory
from ..stores import safe_url
from .errors import install as install_errors
from .docs import install_docs
from .observe import ServiceMiddleware
from .proxy import router as proxy_router
from .routes import admin, inspect, items, knowledge, ops, users
from .schemas import ErrorOut
from .service import Service
from .settings import ServerSettings, read_config_file
from .ui import router as inspector

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["create_app", "Service"]

log = logging.getLogger("memstrata.server")

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "The body is not JSON"},
    401: {"model": ErrorOut, "description": "No API key, or an unknown or revoked one"},
    403: {"model": ErrorOut, "description": "The key's role or user does not allow this"},
    404: {"model": ErrorOut, "description": "Not found in the key's tenant"},
    422: {"model": ErrorOut, "description": "The request is not valid; nothing was written"},
    429: {"model": ErrorOut, "description": "Over the key's rate limit (see Retry-After)"},
}

_DESCRIPTION = """Layered long-term memory for LLM agents, over HTTP.

Every request carries an API key (`Authorization: Bearer msk_…` or `X-API-Key`), made
with `memstrata keys create`. A key belongs to one **tenant** (a namespace: it can reach
no other tenant's data) and has one **role**: `admin` (keys and audit, and everything
`app` may), `app` (any user of its tenant), `read-only` (reads only), `end-user` (one
user id, reads and writes of that user only).

Lists are paginated (`limit`, `offset` → `next_offset`). Item updates take `If-Match`
with the item's `ETag` (its version): a stale one is `412`. Errors are
`{"error": {"type", "message", "status", "request_id"}}`.
"""


def _mcp(svc: Service) -> "MCPServer":
    from .mcp import build_mcp, service_auditor, service_resolver

    server = build_mcp(service_resolver(svc), audit=service_auditor(svc))
    # stateless: any server process can answer any call; the app checks the key first.
    # Host checks are the deployment's (a reverse proxy): the SDK's localhost-only default
    # would refuse every other Host header.
    from mcp.server.transport_security import TransportSecuritySettings

    server.streamable_http_app(stateless_http=True, json_response=True,
                               transport_security=TransportSecuritySettings(
                                   enable_dns_rebinding_protection=False))
    return server


#: What a call to the memory proxy gets on a server without an upstream.
PROXY_OFF = ("the memory proxy is off on this server: /v1/chat/completions answers only when "
             "the server has an upstream model to forward to. Start it with `memstrata serve "
             "--upstream http://127.0.0.1:8080/v1` (any OpenAI-compatible base URL; "
             "`memstrata llm serve` runs a local one there), or set upstream in the [server] "
             "table of the config file or MEMSTRATA_UPSTREAM")


def _proxy_off() -> None:
    raise NotFoundError(PROXY_OFF)


_TAGS = [{"name": "memory", "description": "One user's memory"},
         {"name": "items", "description": "Memory items and their versions"},
         {"name": "profile", "description": "The core profile"},
         {"name": "sessions", "description": "Sessions and raw messages"},
         {"name": "tenant", "description": "Users, jobs and usage of the tenant"},
         {"name": "knowledge", "description": "The knowledge base: the tenant's "
                                              "documents and users' private ones"},
         {"name": "admin", "description": "API keys and the audit log"},
         {"name": "proxy", "description": "OpenAI-compatible memory proxy"},
         {"name": "ops", "description": "Health, readiness, metrics"}]


def create_app(memory: Memory | None = None, settings: ServerSettings | None = None, *,
               config: str | None = None, routers: Sequence[APIRouter] = (),
               **memory_settings: Any) -> FastAPI:
    """The FastAPI app over ``memory`` (default: a :class:`~memstrata.Memory` built from
    the ``[memory]`` table of ``config``, the environment and ``memory_settings``; the
    app then closes it on shutdown). ``routers`` are mounted after the built-in ones."""
    settings = settings or ServerSettings.load(config)
    owns = memory is None
    if memory is None:
        _, from_file = read_config_file(config)
        memory = Memory(**{**from_file, **memory_settings})
    svc = Service(memory, settings, owns_memory=owns)
    mcp_server = _mcp(svc) if settings.mcp else None
    app = FastAPI(title="memstrata", version=__version__, description=_DESCRIPTION,
                  lifespan=_lifespan(svc, mcp_server), responses=_ERRORS, docs_url=None,
                  redoc_url=None, openapi_tags=_TAGS)
    app.state.service = svc
    install_errors(app)
    install_docs(app)  # /docs and /redoc from packaged assets, nothing from a CDN
    _mount(app, svc, routers, mcp_server)
    app.add_middleware(ServiceMiddleware, metrics=svc.metrics, admin=svc.memory.store,
                       foreground=svc.memory.foreground)
    return app


def _lifespan(svc: Service, mcp_server: MCPServer | None) -> Callable[[FastAPI], Any]:
    """What runs around the app: the MCP session manager, then the service's shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log.info("memstrata %s serving %s", __version__, safe_url(svc.memory.store.url))
        async with AsyncExitStack() as stack:
            if mcp_server is not None:  # the SDK's session manager runs with the app
                await stack.enter_async_context(mcp_server.session_manager.run())
            yield
        await svc.aclose()
        svc.shutdown()

    return lifespan


def _mount(app: FastAPI, svc: Service, routers: Sequence[APIRouter],
           mcp_server: MCPServer | None) -> None:
    """The REST routers, the proxy (or why it is off), the inspector, the caller's
    routers and /mcp, in that order."""
    for module in (users, items, inspect, knowledge, admin, ops):
        app.include_router(module.router)
    if svc.settings.upstream:
        app.include_router(proxy_router)
    else:  # an OpenAI client pointed here learns why, not just "404 Not Found"
        app.add_api_route("/v1/chat/completions", _proxy_off, methods=["POST"],
                          include_in_schema=False)
    app.include_router(inspector)  # the web inspector at /ui (docs/inspector.md)
    for router in routers:
        app.include_router(router)
    if mcp_server is not None:
        from .mcp import McpEndpoint

        app.router.routes.append(Route("/mcp", McpEndpoint(svc, mcp_server), name="mcp",
                                       methods=["GET", "POST", "DELETE"]))
