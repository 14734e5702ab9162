"""``memstrata serve`` (the HTTP service) and ``memstrata keys`` (its API keys)."""

from __future__ import annotations

import errno
import json
import logging
import signal
import socket
import sys

import click

from ..errors import ConfigError
from ..stores import safe_url
from .main_helpers import SafeFormatter, handle_errors

__all__ = ["serve", "keys", "mcp"]

_STORE = "Storage URL (default: the config file, $MEMSTRATA_STORE or sqlite:///memstrata.db)."


def _need_server_extra():
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(f"the service needs FastAPI and uvicorn ({exc.name} is missing): "
                                   "pip install 'memstrata[server]'") from exc


def _logging(log_format: str, verbose: bool) -> None:
    from ..server.observe import JsonFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else SafeFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("memstrata")
    root.handlers[:] = [handler]
    root.propagate = False
    root.setLevel(logging.INFO if verbose or log_format == "json" else logging.WARNING)
    logging.getLogger("memstrata.access").setLevel(logging.INFO)


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted sockets inherit it: without, Nagle + delayed ACK add 40 ms to a response
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = ("another process listens there: stop it, or pass another --port (0: any free one)"
                if exc.errno == errno.EADDRINUSE else "check --host (an address of this machine)")
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; {hint}") from exc
    return sock


@click.command()
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="TOML file with [server] and [memory] tables (default: $MEMSTRATA_CONFIG).")
@click.option("--host", default=None, help="Address to listen on (default: 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default: 8000; 0: any free one).")
@click.option("--store", default=None, help=_STORE)
@click.option("--embedder", default=None, help="Embedding provider (default: local:e5-small).")
@click.option("--worker", type=click.Choice(["thread", "off"]), default=None,
              help="Run background jobs in this process (thread, the default) or leave them to "
                   "`memstrata worker` processes (off).")
@click.option("--upstream", default=None,
              help="OpenAI-compatible base URL for the memory proxy at /v1/chat/completions.")
@click.option("--rate-limit", type=int, default=None, help="Default requests per minute per key.")
@click.option("--log-format", type=click.Choice(["json", "text"]), default=None,
              help="Log lines as JSON objects (default) or text.")
@click.option("-v", "--verbose", is_flag=True, help="Log at info level in text format too.")
@handle_errors
def serve(config_path, host, port, store, embedder, worker, upstream, rate_limit, log_format,
          verbose) -> None:
    """Serve memstrata over HTTP: the REST API (OpenAPI at /docs and /openapi.json), MCP
    at /mcp, the memory proxy at /v1/chat/completions (with --upstream), /healthz,
    /readyz and /metrics.

    Make a key first: memstrata keys create --tenant acme --role app. SIGTERM or Ctrl-C
    drains: requests in flight finish, the job in hand gets drain_s seconds, pending
    jobs stay in the store for the next worker.
    """
    _need_server_extra()
    import uvicorn

    from ..server import ServerSettings, create_app
    from ..server.protocol import with_header_deadline

    settings = ServerSettings.load(config_path, host=host, port=port, upstream=upstream,
                                   rate_limit=rate_limit, log_format=log_format)
    _logging(settings.log_format, verbose)
    sock = _bind(settings.host, settings.port)  # before the store and models load: fails fast
    memory_settings = {k: v for k, v in (("store", store), ("embedder", embedder),
                                         ("worker", worker)) if v is not None}
    try:
        app = create_app(settings=settings, config=config_path, **memory_settings)
    except BaseException:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    sock.listen(2048)  # callers that read the line below may connect at once: they queue
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False,
                                           timeout_graceful_shutdown=max(1, int(settings.drain_s)),
                                           http=with_header_deadline(settings.header_timeout_s),
                                           lifespan="on"))
    click.echo(f"memstrata: serving {safe_url(app.state.service.memory.store.url)} at "
               f"http://{settings.host}:{bound} (OpenAPI: /docs)", err=True)
    sys.stderr.flush()
    # uvicorn re-raises the signal it stopped on once it is done; with these handlers in
    # place that is a no-op, so a drained stop exits 0 (a second Ctrl-C still interrupts)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run(sockets=[sock])
    click.echo("memstrata: stopped", err=True)


@click.group()
def keys() -> None:
    """API keys of the HTTP service (stored hashed in the store)."""


def _admin(store):
    from ..config import Settings
    from ..server.keys import Keys
    from ..stores import open_store

    opened = open_store(store or Settings.load().store)
    return opened, Keys(opened)


@keys.command("create")
@click.option("--store", default=None, help=_STORE)
@click.option("--tenant", required=True, help="The tenant namespace the key is bound to.")
@click.option("--role", type=click.Choice(["admin", "app", "read-only", "end-user"]), required=True)
@click.option("--user", "user_id", default=None, help="The one user id of an end-user key.")
@click.option("--name", default="", help="A label for people (shown in lists and the audit).")
@click.option("--rate-limit", type=int, default=None,
              help="Requests per minute (0: unlimited; default: the server's rate_limit).")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def create(store, tenant, role, user_id, name, rate_limit, as_json) -> None:
    """Make a key and print it (once: only its hash is stored)."""
    opened, manager = _admin(store)
    with opened:
        made = manager.create(tenant, role, name=name, user_id=user_id, rate_limit=rate_limit,
                              created_by="cli")
    if as_json:
        click.echo(json.dumps({"key": made.key.to_dict(), "token": made.token}))
        return
    click.echo(made.token)
    click.echo(f"key {made.key.id}: {role} of tenant {tenant!r}"
               f"{f' for user {user_id!r}' if user_id else ''} — store it now, it is not shown again",
               err=True)


@keys.command("list")
@click.option("--store", default=None, help=_STORE)
@click.option("--tenant", default=None, help="One tenant (default: all).")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def list_keys(store, tenant, as_json) -> None:
    """List keys (never their secrets), revoked ones included."""
    opened, _ = _admin(store)
    with opened:
        found = opened.list_keys(tenant)
    if as_json:
        click.echo(json.dumps([k.to_dict() for k in found], ensure_ascii=False))
        return
    for k in found:
        state = f"revoked {k.revoked_at:%Y-%m-%d}" if k.revoked_at else "active"
        click.echo(f"{k.id}  {k.tenant:<16} {k.role:<9} {k.user_id or '-':<12} {state:<18} {k.name}")


@keys.command("revoke")
@click.option("--store", default=None, help=_STORE)
@click.argument("key_id")
@handle_errors
def revoke(store, key_id) -> None:
    """Revoke a key: its next request is refused (401)."""
    opened, manager = _admin(store)
    with opened:
        manager.revoke(key_id)
    click.echo(f"revoked {key_id}")


@click.command("mcp")
@click.option("--store", default=None, help=_STORE)
@click.option("--embedder", default=None, help="Embedding provider (default: local:e5-small).")
@click.option("--user", "user_id", required=True, help="The user whose memory the tools act on.")
@click.option("--agent", "agent_id", default=None, help="Agent/app namespace.")
@handle_errors
def mcp(store, embedder, user_id, agent_id) -> None:
    """Serve one user's memory to an MCP client over stdio (the command an assistant
    client such as Claude Desktop or Cursor launches; see docs/service.md). Tools:
    remember, search, get_context, forget, list_memories, get_profile, update_profile;
    resource memstrata://profile."""
    try:
        from ..server.mcp import build_mcp, local_resolver
    except ImportError as exc:
        raise click.ClickException(f"MCP needs the mcp package ({exc.name} is missing): "
                                   "pip install 'memstrata[server]'") from exc
    from ..memory import Memory

    logging.getLogger("memstrata").setLevel(logging.WARNING)  # stdout is the protocol
    with Memory(store, embedder=embedder) as memory:
        build_mcp(local_resolver(memory.user(user_id, agent=agent_id))).run("stdio")
