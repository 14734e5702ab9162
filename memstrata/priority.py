"""Requests before background jobs.

On a small host a request and the worker's jobs compete for the same cores, the GIL
and the embedding engine (one batch at a time): a search that arrives while a job
embeds 32 turns waits for them. :class:`Foreground` is the rule between them:

* a request (``search``, ``context``, ``add``; an HTTP request as a whole) is counted
  in flight while it runs — :meth:`Foreground.request` in its thread, or
  :meth:`Foreground.enter` / :meth:`Foreground.leave` around it on an event loop;
* the worker's jobs run marked background (:meth:`Foreground.background`), and
  background work *pauses* at its yield points — before a job, between the batches it
  embeds — while a request is in flight or ended less than ``quiet_s`` ago (one client's
  next call comes that soon);
* a pause lasts at most ``max_wait_s``, so a service that is never idle still runs its
  jobs: one step per ``max_wait_s`` at worst;
* while requests come, background embedding goes ``chunk`` texts per engine call
  (:meth:`Foreground.polite`), so a request that arrives mid-batch waits for a few
  texts, not thirty-two.

A pause holds no lock: yield points are only where background work holds none (not
inside a transaction), and a thread inside a request never pauses — a job run inline
by a request does not wait for itself.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from .providers.embedders import Embedder, TextKind

__all__ = ["Foreground", "PoliteEmbedder", "answers_caller"]

_Call = TypeVar("_Call", bound=Callable[..., Any])


def answers_caller(method: _Call) -> _Call:
    """A method that answers a caller, counted in flight while it runs so that background
    jobs wait for it; its object holds the :class:`Foreground` as ``parts.foreground``
    (a user's handle)."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.parts.foreground.request():
            return method(self, *args, **kwargs)
    return call  # type: ignore[return-value]


class Foreground:
    """Requests in flight, and the pauses background work makes for them."""

    def __init__(self, *, max_wait_s: float = 0.5, quiet_s: float = 0.03, chunk: int = 4) -> None:
        self.max_wait_s = max_wait_s
        self.quiet_s = quiet_s
        self.chunk = max(1, chunk)
        self._cond = threading.Condition()
        self._in_flight = 0
        self._last_end = float("-inf")
        self._local = threading.local()
        self.pauses = 0  # pauses that waited (for the bench's report)
        self.paused_s = 0.0

    # -- requests ---------------------------------------------------------------------
    def enter(self) -> None:
        """A request started (its thread unmarked: for an event loop's requests)."""
        with self._cond:
            self._in_flight += 1

    def leave(self) -> None:
        """A request :meth:`enter` counted ended."""
        with self._cond:
            self._in_flight -= 1
            self._last_end = time.monotonic()
            if not self._in_flight:
                self._cond.notify_all()

    @contextmanager
    def request(self) -> Iterator[None]:
        """Count this thread's call as a request while it runs (nested calls once)."""
        depth = getattr(self._local, "request", 0)
        self._local.request = depth + 1
        if not depth:
            self.enter()
        try:
            yield
        finally:
            self._local.request = depth
            if not depth:
                self.leave()

    @contextmanager
    def background(self) -> Iterator[None]:
        """Mark this thread's work as background while it runs: its yield points pause."""
        depth = getattr(self._local, "background", 0)
        self._local.background = depth + 1
        try:
            yield
        finally:
            self._local.background = depth

    @property
    def in_flight(self) -> int:
        """Requests running now."""
        return self._in_flight

    def busy(self) -> bool:
        """Whether a request is in flight or ended less than ``quiet_s`` ago."""
        return bool(self._in_flight) or time.monotonic() - self._last_end < self.quiet_s

    def yields(self) -> bool:
        """Whether this thread's work gives way: background, and not inside a request."""
        return self.max_wait_s > 0 and bool(getattr(self._local, "background", 0)) \
            and not getattr(self._local, "request", 0)

    # -- background -------------------------------------------------------------------
    def pause(self) -> float:
        """A yield point of background work: wait while :meth:`busy`, at most
        ``max_wait_s``; the seconds waited (0 at once outside background work)."""
        if not self.yields() or not self.busy():
            return 0.0
        started = time.monotonic()
        deadline = started + self.max_wait_s
        with self._cond:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                if self._in_flight:
                    self._cond.wait(deadline - now)
                    continue
                quiet = self._last_end + self.quiet_s - now
                if quiet <= 0:
                    break
                self._cond.wait(min(quiet, deadline - now))
        waited = time.monotonic() - started
        self.pauses += 1
        self.paused_s += waited
        return waited

    def polite(self, embedder: Embedder) -> "PoliteEmbedder":
        """``embedder`` for background batches: see :class:`PoliteEmbedder`."""
        return PoliteEmbedder(embedder, self)


class PoliteEmbedder:
    """An embedder for background batches: before each engine call it pauses for the
    requests in flight (:meth:`Foreground.pause`), and while they come it embeds
    ``chunk`` texts per call instead of the whole batch. A text's vector does not
    depend on the batch it is in, so what is stored is the same."""

    def __init__(self, embedder: Embedder, foreground: Foreground) -> None:
        self.embedder = embedder
        self.foreground = foreground
        self.name = embedder.name
        self.dim = embedder.dim
        self.batch_size = embedder.batch_size

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        fg = self.foreground
        if not fg.yields():
            return self.embedder.embed(texts, kind=kind)
        parts: list[np.ndarray] = []
        start = 0
        while start < len(texts) or not parts:
            fg.pause()
            size = fg.chunk if fg.busy() else len(texts) - start
            parts.append(np.asarray(self.embedder.embed(texts[start:start + size], kind=kind),
                                    dtype=np.float32))
            start += size
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
