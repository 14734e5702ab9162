"""The service's HTTP/1.1 connections: uvicorn's h11 protocol with a deadline on request
headers.

uvicorn bounds an idle kept-alive connection but not one that is sending its headers: a
client that trickles a header line every few seconds ("slowloris") holds a connection
for as long as it likes, and enough of them hold every one. Here each connection has
``header_timeout_s`` to finish a request's headers — counted from connecting, and again
from each response on a kept-alive connection; a connection still inside its headers then
is closed (the body of a request, and a response being streamed, have no such limit).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["with_header_deadline"]

log = logging.getLogger("memstrata.server")


class _HeaderDeadline(H11Protocol):
    header_timeout_s = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def _start_header_timer(self) -> None:
        self._stop_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("closed a connection that sent no complete request headers in %.1f s",
                     self.header_timeout_s)
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_timer()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # the headers are in
            self._stop_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():  # kept alive: the next request's headers
            self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)


def with_header_deadline(seconds: float) -> type[H11Protocol]:
    """uvicorn's ``http`` protocol class with a ``seconds`` deadline on request headers."""
    return type("HeaderDeadlineProtocol", (_HeaderDeadline,), {"header_timeout_s": float(seconds)})
