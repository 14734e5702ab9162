"""The service's settings: one table, like :mod:`memstrata.config`'s, read from a TOML
file, ``MEMSTRATA_*`` environment variables and ``memstrata serve`` flags (in that
order, later ones winning).

A config file has two tables: ``[server]`` (the settings below) and ``[memory]`` (the
settings of :class:`memstrata.Memory`, see ``docs/configuration.md``)::

    [server]
    port = 8000
    rate_limit = 600
    upstream = "http://127.0.0.1:8080/v1"

    [memory]
    store = "postgresql://memstrata@db/memstrata"
    sessions = "redis://127.0.0.1:6379/0"
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config import SETTINGS, Setting, resolve
from ..errors import ConfigError

__all__ = ["SERVER_SETTINGS", "ServerSettings", "read_config_file"]

SERVER_SETTINGS: tuple[Setting, ...] = (
    Setting("host", "127.0.0.1", str, "Address `memstrata serve` listens on"),
    Setting("port", 8000, int, "Port `memstrata serve` listens on (0: any free one)",
            low=0, high=65535),
    Setting("rate_limit", 600, int,
            "Requests per minute per API key unless the key sets its own (0 = unlimited)", low=0),
    Setting("page_size", 100, int, "Default page size of list endpoints", low=1, high=1000),
    Setting("mcp", True, bool, "Serve MCP (streamable HTTP) at /mcp"),
    Setting("upstream", "", str,
            "OpenAI-compatible base URL the memory proxy forwards /v1/chat/completions to "
            "(e.g. http://127.0.0.1:8080/v1); empty = no proxy"),
    Setting("upstream_key", "", str, "API key sent to the upstream (empty: the caller's "
            "X-Upstream-Authorization header, or none)"),
    Setting("upstream_timeout_s", 120.0, float, "Seconds the proxy waits for the upstream",
            low=0.001),
    Setting("proxy_budget", 2000, int, "Token budget of the context the proxy builds", low=1),
    Setting("proxy_user_header", "X-Memstrata-User", str,
            "Header naming the end user of a proxied call (else the body's `user` field)"),
    Setting("log_format", "json", str, "Access and error logs: json (one object a line) or text",
            choices=("json", "text")),
    Setting("drain_s", 10.0, float,
            "On shutdown, seconds to let the job in hand finish before handing jobs back "
            "(pending jobs stay in the store either way)", low=0.0),
    Setting("header_timeout_s", 10.0, float,
            "Seconds a connection may take to send a request's headers (from connecting, or "
            "from the previous response on a kept-alive connection); slower ones are closed",
            low=0.1),
)


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Resolved service settings; build with :meth:`load`."""

    host: str = "127.0.0.1"
    port: int = 8000
    rate_limit: int = 600
    page_size: int = 100
    mcp: bool = True
    upstream: str = ""
    upstream_key: str = ""
    upstream_timeout_s: float = 120.0
    proxy_budget: int = 2000
    proxy_user_header: str = "X-Memstrata-User"
    log_format: str = "json"
    drain_s: float = 10.0
    header_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if self.upstream and not self.upstream.startswith(("http://", "https://")):
            raise ConfigError(f"upstream must be an OpenAI-compatible base URL like "
                              f"http://127.0.0.1:8080/v1, not {self.upstream!r}")

    @classmethod
    def load(cls, config: "str | Path | None" = None, **overrides: Any) -> "ServerSettings":
        """Defaults, the ``[server]`` table of ``config`` (default: ``$MEMSTRATA_CONFIG``),
        environment variables, then ``overrides``."""
        server, _ = read_config_file(config)
        return replace(cls(), **resolve(SERVER_SETTINGS, overrides, base=server))


def read_config_file(path: "str | Path | None" = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``[server]`` and ``[memory]`` tables of a TOML config file (default:
    ``$MEMSTRATA_CONFIG``; none: two empty tables). A ``[memory]`` value whose
    environment variable is set is left out, so the environment beats the file."""
    path = path if path is not None else os.environ.get("MEMSTRATA_CONFIG") or None
    if path is None:
        return {}, {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the config file {path} is not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - {"server", "memory"})
    if unknown:
        raise ConfigError(f"the config file {path} has unknown table(s) {', '.join(unknown)}; "
                          "use [server] and [memory]")
    server, memory = data.get("server", {}), data.get("memory", {})
    for name, table in (("server", server), ("memory", memory)):
        if not isinstance(table, Mapping):
            raise ConfigError(f"[{name}] in {path} must be a table")
    envs = {s.name: s.env for s in SETTINGS}
    known = set(envs)
    bad = sorted(set(memory) - known)
    if bad:
        raise ConfigError(f"unknown [memory] setting(s) {', '.join(bad)} in {path}; known: "
                          f"{', '.join(sorted(known))}")
    memory = {k: v for k, v in memory.items() if envs[k] not in os.environ}
    return dict(server), memory
