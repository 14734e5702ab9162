"""A real memstrata HTTP service for tests: uvicorn on a free loopback port, in a thread.

``with LiveServer(memory) as live:`` serves ``create_app(memory)`` until the block ends
(the app's lifespan runs, so shutdown drains like ``memstrata serve``). ``live.key(...)``
makes an API key; ``live.client(token)`` an httpx client with it.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import uvicorn

from memstrata.server import ServerSettings, create_app

__all__ = ["LiveServer", "serve_asgi"]


class serve_asgi:
    """Any ASGI app on a free loopback port in a thread: ``with serve_asgi(app) as url:``."""

    def __init__(self, app: Any) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return self.url

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(20)
        self._sock.close()


class LiveServer:
    def __init__(self, memory: Any, settings: ServerSettings | None = None, **app_options: Any) -> None:
        self.memory = memory
        self.app = create_app(memory, settings or ServerSettings(rate_limit=0), **app_options)
        self.service = self.app.state.service
        self._sock = socket.socket()
        # accepted sockets inherit it: without, Nagle + delayed ACK cost 40 ms a request
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(self.app, log_config=None, access_log=False,
                                                     lifespan="on", timeout_graceful_shutdown=5))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        daemon=True)

    def __enter__(self) -> "LiveServer":
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(20)
        self._sock.close()

    def key(self, tenant: str, role: str, user_id: str | None = None, **options: Any) -> str:
        return str(self.service.keys.create(tenant, role, user_id=user_id, **options).token)

    def client(self, token: str | None = None, **headers: str) -> httpx.Client:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)
