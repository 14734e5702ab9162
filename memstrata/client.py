"""``memstrata.Client`` and ``memstrata.AsyncClient``: the per-user API of
:class:`~memstrata.UserMemory`, over HTTP, blocking or awaitable.

::

    from memstrata import AsyncClient, Client

    with Client("http://127.0.0.1:8000", "msk_…") as client:
        lin = client.user("lin")
        lin.add("I switched from Java to Go", session_id="s1")
        for hit in lin.search("which language?", k=5):
            print(hit.score, hit.text)

    async with AsyncClient("http://127.0.0.1:8000", "msk_…") as client:
        hits = await client.user("lin").search("which language?", k=5)

The handles have the methods of :class:`~memstrata.UserMemory` with the same parameters
(``tests/test_async_parity.py`` checks it) and return the same values, rebuilt with
their ``from_dict``; one conformance suite runs against the local, async, remote and
async-remote faces. Each call is written once, as a generator that yields the HTTP
requests it needs and turns the answers into values (:class:`_Req` below); the blocking
client drives it with :class:`httpx.Client`, the async one with
:class:`httpx.AsyncClient`, so the two cannot disagree on a path, a body or a decoding.
Errors come back as the same :mod:`memstrata.errors` classes; a server that cannot be
reached is a :class:`~memstrata.errors.StoreUnavailableError`. The key's tenant is the
namespace; ``actor`` arguments are ignored: the server records the key.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Generator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import httpx

import memstrata.errors as errors
from .layers.context import ContextResult
from .layers.episodic import Resume
from .layers.semantic.forget import ForgetReport
from .layers.semantic.profile import Profile
from .requests import ContextRequest, SearchRequest
from .retrieval.search import SearchResult
from .sessions import SessionState
from .stores.base import Job, ProfileVersion, SessionInfo, SessionRecord
from .ids import segment
from .types import Filters, ItemVersion, Kind, MemoryItem, Message, Scope, SearchHit, check_id
from .usage import UsageReport
from .user import SURFACE, AddResult, UserMemory

__all__ = ["Client", "AsyncClient", "RemoteUserMemory", "AsyncRemoteUserMemory"]


def _quote(part: str, what: str = "item_id") -> str:
    """A path segment: a valid id (refused here as the server would refuse it — and so
    that '.' or '..' never reach a URL, where the client would resolve them to another
    route), every byte but letters, digits and ``_.-~`` escaped."""
    return segment(part, what)


def _sid(session_id: str) -> str:
    return _quote(session_id, "session_id")


_PAGE = 1000


def _error(response: httpx.Response) -> errors.MemstrataError:
    try:
        body = response.json()["error"]
        kind, message = str(body["type"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        kind, message = "", response.text[:500] or response.reason_phrase
    cls = getattr(errors, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.MemstrataError)):
        cls = errors.ValidationError if 400 <= response.status_code < 500 else errors.MemstrataError
    if cls is errors.RateLimitError:
        return errors.RateLimitError(message, float(response.headers.get("retry-after", 60)))
    return cls(message)


def _filters(filters: Filters) -> dict[str, Any]:
    out: dict[str, Any] = {"session_id": list(filters.session_ids), "kind": [k.value for k in filters.kinds],
                           "status": [s.value for s in filters.statuses],
                           "layer": [x.value for x in filters.layers], "tags": list(filters.tags)}
    for name in ("since", "until"):
        value = getattr(filters, name)
        if value is not None:
            out[name] = value.isoformat()
    return out


def _search_body(request: SearchRequest) -> dict[str, Any]:
    if request.scoring is not None and not isinstance(request.scoring, str):
        raise errors.ValidationError("a remote search takes a scoring preset by name, not an object")
    return {"query": request.query, "k": request.k, "filters": _filters(request.filters),
            "recent": list(request.recent), "scoring": request.scoring, "mode": request.mode,
            "now": request.now.isoformat() if request.now else None,
            "min_score": request.min_score, "roles": list(request.roles)}


def _context_body(request: ContextRequest) -> dict[str, Any]:
    quotas = request.quotas
    if quotas is not None and not isinstance(quotas, (list, tuple, Mapping)):
        quotas = asdict(quotas)
    if request.tokenizer is not None and not isinstance(request.tokenizer, str):
        raise errors.ValidationError("a remote context takes a tokenizer by name, not an object")
    return {"session_id": request.session_id,
            "messages": list(request.messages) if request.messages is not None else None,
            "budget": request.budget, "quotas": list(quotas) if isinstance(quotas, tuple) else quotas,
            "query": request.query, "recall": request.recall, "k": request.k,
            "policy": request.policy, "tokenizer": request.tokenizer,
            "filters": _filters(request.filters), "min_score": request.min_score,
            "roles": list(request.roles)}


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Req:
    """One HTTP request a call needs: ``path`` is absolute (``/v1/…``)."""

    method: str
    path: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Sleep:
    """A pause a call asks for between two requests (a flush polling the job list)."""

    seconds: float


#: A call: yields the requests it needs, is sent each decoded answer, returns the value.
Flow = Generator["_Req | _Sleep", Any, T]


def _pages(path: str, params: Mapping[str, Any] | None = None,
           limit: int | None = None) -> Flow[builtins.list[dict[str, Any]]]:
    """Every row of a paginated list (at most ``limit``), page after page."""
    rows: builtins.list[dict[str, Any]] = []
    offset = 0
    while limit is None or len(rows) < limit:
        page = yield _Req("GET", path, {"params": {**(params or {}), "limit": _PAGE, "offset": offset}})
        rows += page["data"]
        if page["next_offset"] is None:
            break
        offset = page["next_offset"]
    return rows if limit is None else rows[:limit]


def _unfinished(jobs: builtins.list[dict[str, Any]]) -> set[str]:
    return {str(j["id"]) for j in jobs if j["status"] in ("pending", "running")}


def _flush_failures(before: set[str], jobs: builtins.list[dict[str, Any]]) -> None:
    failed = [j for j in jobs if str(j["id"]) in before and j["status"] == "failed"]
    if failed:
        last = failed[-1]
        raise errors.JobError(f"{len(failed)} background job(s) failed after every attempt; last: "
                              f"{last['kind']} job {last['id']} of user {last['user_id']!r}: "
                              f"{last.get('last_error') or 'no error text'} (see client.user(…).jobs())")


class _UserFlows:
    """The calls of one user's handle, each a :data:`Flow` (no I/O here)."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.base = f"/v1/users/{_quote(user_id, 'user_id')}"

    def _one(self, method: str, path: str = "", **kwargs: Any) -> _Req:
        return _Req(method, self.base + path, kwargs)

    def add(self, messages: Any, session_id: str, index: bool, extract: bool | None,
            idempotency_key: str | None) -> Flow[AddResult]:
        if isinstance(messages, Message):
            messages = messages.to_openai()
        if isinstance(messages, Mapping):
            messages = [messages]
        if isinstance(messages, (list, tuple)):
            messages = [m.to_openai() if isinstance(m, Message) else m for m in messages]
        if idempotency_key is not None:  # refused here as the server would refuse it
            check_id(idempotency_key, "idempotency_key")
            if not idempotency_key.isascii():
                raise errors.ValidationError("idempotency_key travels in the Idempotency-Key "
                                             f"header, which is ASCII: not {idempotency_key!r}")
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
        body = yield self._one("POST", "/messages", headers=headers,
                               json={"messages": messages, "session_id": session_id,
                                     "index": index, "extract": extract})
        return AddResult(body["session_id"], [Message.from_dict(m) for m in body["messages"]],
                         replayed=bool(body.get("replayed", False)))

    def messages(self, session_id: str) -> Flow[builtins.list[Message]]:
        rows = yield from _pages(f"{self.base}/sessions/{_sid(session_id)}/messages")
        return [Message.from_dict(m) for m in rows]

    def sessions(self) -> Flow[builtins.list[SessionInfo]]:
        rows = yield from _pages(f"{self.base}/sessions")
        return [SessionRecord.from_dict(s) for s in rows]

    def session(self, session_id: str) -> Flow[SessionState]:
        return SessionState.from_dict((yield self._one("GET", f"/sessions/{_sid(session_id)}")))

    def remember(self, content: str, kind: "Kind | str", subject: str | None, attribute: str | None,
                 value: str | None, confidence: float, importance: float, tags: Any,
                 metadata: Mapping[str, Any] | None, session_id: str | None,
                 reason: str) -> Flow[MemoryItem]:
        body = {"content": content, "kind": kind.value if isinstance(kind, Kind) else kind,
                "subject": subject, "attribute": attribute, "value": value,
                "confidence": confidence, "importance": importance, "tags": list(tags),
                "metadata": dict(metadata) if metadata is not None else None,
                "session_id": session_id, "reason": reason}
        return MemoryItem.from_dict((yield self._one("POST", "/items", json=body)))

    def get(self, item_id: str) -> Flow[MemoryItem]:
        return MemoryItem.from_dict((yield self._one("GET", f"/items/{_quote(item_id)}")))

    def list(self, filters: "Filters | Mapping[str, Any] | None", limit: int,
             offset: int) -> Flow[builtins.list[MemoryItem]]:
        for name, number in (("limit", limit), ("offset", offset)):
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                raise errors.ValidationError(f"{name} must be a non-negative integer, got {number!r}")
        spec = _filters(Filters.build(filters))
        params = {"kind": spec["kind"], "status": spec["status"], "tag": spec["tags"],
                  "session_id": spec["session_id"][0] if spec["session_id"] else None,
                  "since": spec.get("since"), "until": spec.get("until")}
        params = {k: v for k, v in params.items() if v not in (None, [])}
        rows: builtins.list[MemoryItem] = []
        while len(rows) < limit:
            page = yield self._one("GET", "/items", params={**params, "offset": offset,
                                                           "limit": min(_PAGE, limit - len(rows))})
            rows += [MemoryItem.from_dict(i) for i in page["data"]]
            if page["next_offset"] is None:
                break
            offset = page["next_offset"]
        return rows

    def update(self, item_id: str, reason: str, expected_version: int | None,
               changes: Mapping[str, Any]) -> Flow[MemoryItem]:
        body = {k: (v.value if isinstance(v, Kind) else list(v) if isinstance(v, tuple) else v)
                for k, v in changes.items()}
        headers = {"If-Match": f'"{expected_version}"'} if expected_version is not None else {}
        return MemoryItem.from_dict((yield self._one("PATCH", f"/items/{_quote(item_id)}",
                                                     headers=headers, json={**body, "reason": reason})))

    def history(self, item_id: str) -> Flow[builtins.list[ItemVersion]]:
        rows = yield from _pages(f"{self.base}/items/{_quote(item_id)}/history")
        return [ItemVersion.from_dict(v) for v in rows]

    def forget(self, item_id: str, messages: bool) -> Flow[ForgetReport]:
        return ForgetReport.from_dict((yield self._one("DELETE", f"/items/{_quote(item_id)}",
                                                       params={"messages": messages})))

    def forget_all(self, messages: bool) -> Flow[ForgetReport]:
        return ForgetReport.from_dict((yield self._one("DELETE", params={"messages": messages})))

    def feedback(self, item_id: str, signal: str) -> Flow[MemoryItem]:
        return MemoryItem.from_dict((yield self._one("POST", f"/items/{_quote(item_id)}/feedback",
                                                     json={"signal": signal})))

    def complete(self, item_id: str) -> Flow[MemoryItem]:
        return MemoryItem.from_dict((yield self._one("POST", f"/items/{_quote(item_id)}/complete")))

    def undo(self, item_id: str) -> Flow[MemoryItem | None]:
        item = (yield self._one("POST", f"/items/{_quote(item_id)}/undo"))["item"]
        return MemoryItem.from_dict(item) if item is not None else None

    def profile(self, cached: bool) -> Flow[Profile]:
        return Profile.from_dict((yield self._one("GET", "/profile", params={"cached": cached})))

    def update_profile(self, fields: Mapping[str, Any]) -> Flow[Profile]:
        body = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
        return Profile.from_dict((yield self._one("PATCH", "/profile", json=body)))

    def profile_history(self) -> Flow[builtins.list[ProfileVersion]]:
        return [ProfileVersion.from_dict(v) for v in (yield self._one("GET", "/profile/history"))]

    def search(self, query: "str | SearchRequest", options: Mapping[str,
               Any]) -> Flow[builtins.list[SearchHit]]:
        body = _search_body(SearchRequest.build(query, **options))
        return [SearchHit.from_dict(h) for h in (yield self._one("POST", "/search", json=body))["hits"]]

    def explain(self, query: "str | SearchRequest", options: Mapping[str, Any]) -> Flow[SearchResult]:
        body = _search_body(SearchRequest.build(query, **options))
        return SearchResult.from_dict((yield self._one("POST", "/search/explain", json=body)))

    def archive_session(self, session_id: str) -> Flow[SessionState]:
        return SessionState.from_dict((yield self._one("POST", f"/sessions/{_sid(session_id)}/archive")))

    def resume(self, exclude_session: str | None) -> Flow[Resume]:
        params = {"exclude_session": exclude_session} if exclude_session is not None else {}
        return Resume.from_dict((yield self._one("GET", "/resume", params=params)))

    def context(self, session_id: "str | ContextRequest", messages: Any,
                options: Mapping[str, Any]) -> Flow[ContextResult]:
        request = (session_id if isinstance(session_id, ContextRequest)
                   else ContextRequest.build(session_id, messages, **options))
        return ContextResult.from_dict((yield self._one("POST", "/context", json=_context_body(request))))

    def jobs(self, status: str | None, limit: int) -> Flow[builtins.list[Job]]:
        rows = yield from _pages(f"{self.base}/jobs", {"status": status} if status else {}, limit)
        return [Job.from_dict(row) for row in rows]

    def usage(self) -> Flow[UsageReport]:
        return UsageReport.from_dict((yield self._one("GET", "/usage")))

    def export(self) -> Flow[str]:
        text: str = yield self._one("GET", "/export")
        return text


def _check(url: Any, key: Any) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise errors.ConfigError(f"url must be the service's http:// or https:// address, like "
                                 f"http://127.0.0.1:8000, not {url!r}")
    if not isinstance(key, str) or not key.strip() or any(c.isspace() for c in key):
        raise errors.ConfigError("key must be an API key (msk_…, from `memstrata keys create`), "
                                 f"not {key!r}")
    return url.rstrip("/")


def _decode(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise _error(response)
    if response.status_code == 204:
        return None
    if response.headers.get("content-type", "").startswith("application/x-ndjson"):
        return response.text
    return response.json()


def _unreachable(url: str, exc: Exception) -> errors.StoreUnavailableError:
    return errors.StoreUnavailableError(f"cannot reach memstrata at {url} ({exc}); "
                                        "is `memstrata serve` running there?")


#: Seconds between two looks at the job list while a flush waits: doubling, capped.
_FLUSH_POLL = (0.02, 0.5)


def _flush(timeout: float | None) -> Flow[None]:
    """Wait for the jobs unfinished now (not those queued later), then fail if one failed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    first = waiting = _unfinished((yield from _pages("/v1/jobs", {"unfinished": True})))
    pause = _FLUSH_POLL[0]
    while waiting:
        if deadline is not None and time.monotonic() > deadline:
            raise errors.JobError(f"{len(waiting)} background job(s) still unfinished after "
                                  f"{timeout}s; is a worker running on the service?")
        yield _Sleep(pause)
        pause = min(pause * 2, _FLUSH_POLL[1])
        waiting = waiting & _unfinished((yield from _pages("/v1/jobs", {"unfinished": True})))
    if first:
        _flush_failures(first, (yield from _pages("/v1/jobs")))


class Client:
    """A memstrata service at ``url`` (``http://host:8000``), called with API key ``key``.

    ``transport`` is passed to :class:`httpx.Client` (e.g. ``httpx.ASGITransport`` to
    call an app in process)."""

    def __init__(self, url: str, key: str, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = _check(url, key)
        self.http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport,
                                 headers={"Authorization": f"Bearer {key}"})

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call; the decoded JSON (None for 204), or the memstrata error it answered."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        return _decode(response)

    def drive(self, flow: Flow[T]) -> T:
        """Run one call: send each request it yields, hand it the answer."""
        try:
            step = next(flow)
            while True:
                if isinstance(step, _Sleep):
                    time.sleep(step.seconds)
                    step = flow.send(None)
                else:
                    step = flow.send(self.request(step.method, step.path, **step.kwargs))
        except StopIteration as done:
            return done.value

    def user(self, user_id: str) -> "RemoteUserMemory":
        """The handle on one user's memory in the key's tenant."""
        Scope(user_id)  # the id rules of the local API, before any request
        return RemoteUserMemory(self, user_id)

    def users(self) -> builtins.list[str]:
        """The tenant's user ids (an end-user key sees its own)."""
        return [row["user_id"] for row in self.drive(_pages("/v1/users"))]

    def me(self) -> dict[str, Any]:
        """The key this client calls with: id, tenant, role, user."""
        result: dict[str, Any] = self.request("GET", "/v1/keys/me")
        return result

    def flush(self, timeout: float | None = None) -> None:
        """Block until every background job of the key's tenant (an end-user key: its
        user) that was pending or running when called is finished — what
        :meth:`memstrata.Memory.flush` is in process. Raises JobError when one of them
        ended failed, or after ``timeout`` seconds."""
        self.drive(_flush(timeout))

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteUserMemory:
    """One user's memory on a memstrata service. Get one with :meth:`Client.user`."""

    def __init__(self, client: Client, user_id: str) -> None:
        self.client = client
        self.user_id = user_id
        self.flows = _UserFlows(user_id)

    @property
    def base(self) -> str:
        return self.flows.base

    def __repr__(self) -> str:
        return f"RemoteUserMemory(user_id={self.user_id!r}, url={self.client.url!r})"

    def add(self, messages: Any, session_id: str = "default", *, index: bool = True,
            extract: bool | None = None, idempotency_key: str | None = None) -> AddResult:
        return self.client.drive(self.flows.add(messages, session_id, index, extract, idempotency_key))

    def messages(self, session_id: str = "default") -> builtins.list[Message]:
        return self.client.drive(self.flows.messages(session_id))

    def sessions(self) -> builtins.list[SessionInfo]:
        return self.client.drive(self.flows.sessions())

    def session(self, session_id: str = "default") -> SessionState:
        return self.client.drive(self.flows.session(session_id))

    def remember(self, content: str, *, kind: "Kind | str" = Kind.FACT, subject: str | None = None,
                 attribute: str | None = None, value: str | None = None, confidence: float = 0.8,
                 importance: float = 0.5, tags: Any = (), metadata: Mapping[str, Any] | None = None,
                 session_id: str | None = None, actor: str = "api",
                 reason: str = "remember() call") -> MemoryItem:
        return self.client.drive(self.flows.remember(content, kind, subject, attribute, value, confidence,
                                                     importance, tags, metadata, session_id, reason))

    def get(self, item_id: str) -> MemoryItem:
        return self.client.drive(self.flows.get(item_id))

    def list(self, *, filters: "Filters | Mapping[str, Any] | None" = None, limit: int = 100,
             offset: int = 0) -> builtins.list[MemoryItem]:
        return self.client.drive(self.flows.list(filters, limit, offset))

    def update(self, item_id: str, *, actor: str = "api", reason: str = "update() call",
               expected_version: int | None = None, **changes: Any) -> MemoryItem:
        return self.client.drive(self.flows.update(item_id, reason, expected_version, changes))

    def history(self, item_id: str) -> builtins.list[ItemVersion]:
        return self.client.drive(self.flows.history(item_id))

    def forget(self, item_id: str, *, messages: bool = False) -> ForgetReport:
        return self.client.drive(self.flows.forget(item_id, messages))

    def forget_all(self, *, messages: bool = True) -> ForgetReport:
        return self.client.drive(self.flows.forget_all(messages))

    def feedback(self, item_id: str, signal: str) -> MemoryItem:
        return self.client.drive(self.flows.feedback(item_id, signal))

    def complete(self, item_id: str) -> MemoryItem:
        return self.client.drive(self.flows.complete(item_id))

    def undo(self, item_id: str) -> MemoryItem | None:
        return self.client.drive(self.flows.undo(item_id))

    def profile(self, *, cached: bool = False) -> Profile:
        return self.client.drive(self.flows.profile(cached))

    def update_profile(self, *, actor: str = "api", **fields: Any) -> Profile:
        return self.client.drive(self.flows.update_profile(fields))

    def profile_history(self) -> builtins.list[ProfileVersion]:
        return self.client.drive(self.flows.profile_history())

    def search(self, query: "str | SearchRequest", **options: Any) -> builtins.list[SearchHit]:
        return self.client.drive(self.flows.search(query, options))

    def explain(self, query: "str | SearchRequest", **options: Any) -> SearchResult:
        return self.client.drive(self.flows.explain(query, options))

    def archive_session(self, session_id: str = "default") -> SessionState:
        return self.client.drive(self.flows.archive_session(session_id))

    def resume(self, *, exclude_session: str | None = None) -> Resume:
        return self.client.drive(self.flows.resume(exclude_session))

    def context(self, session_id: "str | ContextRequest" = "default", messages: Any = None,
                **options: Any) -> ContextResult:
        return self.client.drive(self.flows.context(session_id, messages, options))

    def jobs(self, *, status: str | None = None, limit: int = 1000) -> builtins.list[Job]:
        return self.client.drive(self.flows.jobs(status, limit))

    def usage(self) -> UsageReport:
        return self.client.drive(self.flows.usage())

    def export(self) -> str:
        """Everything of the user as versioned JSON Lines (``memstrata restore`` reads it)."""
        return self.client.drive(self.flows.export())


for _name in SURFACE:  # one docstring per method: the local twin's
    getattr(RemoteUserMemory, _name).__doc__ = getattr(UserMemory, _name).__doc__


class AsyncClient:
    """:class:`Client` for asyncio: the same arguments, methods and values, awaitable
    (over :class:`httpx.AsyncClient`; ``transport`` is passed to it). Use it as
    ``async with``, or await :meth:`close`."""

    def __init__(self, url: str, key: str, *, timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = _check(url, key)
        self.http = httpx.AsyncClient(base_url=self.url, timeout=timeout, transport=transport,
                                      headers={"Authorization": f"Bearer {key}"})

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call; the decoded JSON (None for 204), or the memstrata error it answered."""
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        return _decode(response)

    async def drive(self, flow: Flow[T]) -> T:
        """Run one call: send each request it yields, hand it the answer."""
        try:
            step = next(flow)
            while True:
                if isinstance(step, _Sleep):
                    await asyncio.sleep(step.seconds)
                    step = flow.send(None)
                else:
                    step = flow.send(await self.request(step.method, step.path, **step.kwargs))
        except StopIteration as done:
            return done.value

    def user(self, user_id: str) -> "AsyncRemoteUserMemory":
        """The handle on one user's memory in the key's tenant."""
        Scope(user_id)
        return AsyncRemoteUserMemory(self, user_id)

    async def users(self) -> builtins.list[str]:
        """The tenant's user ids (an end-user key sees its own)."""
        return [row["user_id"] for row in await self.drive(_pages("/v1/users"))]

    async def me(self) -> dict[str, Any]:
        """The key this client calls with: id, tenant, role, user."""
        result: dict[str, Any] = await self.request("GET", "/v1/keys/me")
        return result

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every background job of the key's tenant (an end-user key: its
        user) that was pending or running when called is finished — what
        :meth:`memstrata.Memory.flush` is in process. Raises JobError when one of them
        ended failed, or after ``timeout`` seconds."""
        await self.drive(_flush(timeout))

    async def close(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncRemoteUserMemory:
    """One user's memory on a memstrata service, awaitable. Get one with :meth:`AsyncClient.user`."""

    def __init__(self, client: AsyncClient, user_id: str) -> None:
        self.client = client
        self.user_id = user_id
        self.flows = _UserFlows(user_id)

    @property
    def base(self) -> str:
        return self.flows.base

    def __repr__(self) -> str:
        return f"AsyncRemoteUserMemory(user_id={self.user_id!r}, url={self.client.url!r})"

    async def add(self, messages: Any, session_id: str = "default", *, index: bool = True,
                  extract: bool | None = None, idempotency_key: str | None = None) -> AddResult:
        return await self.client.drive(self.flows.add(messages, session_id, index, extract, idempotency_key))

    async def messages(self, session_id: str = "default") -> builtins.list[Message]:
        return await self.client.drive(self.flows.messages(session_id))

    async def sessions(self) -> builtins.list[SessionInfo]:
        return await self.client.drive(self.flows.sessions())

    async def session(self, session_id: str = "default") -> SessionState:
        return await self.client.drive(self.flows.session(session_id))

    async def remember(self, content: str, *, kind: "Kind | str" = Kind.FACT, subject: str | None = None,
                       attribute: str | None = None, value: str | None = None, confidence: float = 0.8,
                       importance: float = 0.5, tags: Any = (), metadata: Mapping[str, Any] | None = None,
                       session_id: str | None = None, actor: str = "api",
                       reason: str = "remember() call") -> MemoryItem:
        return await self.client.drive(self.flows.remember(content, kind, subject, attribute, value,
                                                           confidence, importance, tags, metadata,
                                                           session_id, reason))

    async def get(self, item_id: str) -> MemoryItem:
        return await self.client.drive(self.flows.get(item_id))

    async def list(self, *, filters: "Filters | Mapping[str, Any] | None" = None, limit: int = 100,
                   offset: int = 0) -> builtins.list[MemoryItem]:
        return await self.client.drive(self.flows.list(filters, limit, offset))

    async def update(self, item_id: str, *, actor: str = "api", reason: str = "update() call",
                     expected_version: int | None = None, **changes: Any) -> MemoryItem:
        return await self.client.drive(self.flows.update(item_id, reason, expected_version, changes))

    async def history(self, item_id: str) -> builtins.list[ItemVersion]:
        return await self.client.drive(self.flows.history(item_id))

    async def forget(self, item_id: str, *, messages: bool = False) -> ForgetReport:
        return await self.client.drive(self.flows.forget(item_id, messages))

    async def forget_all(self, *, messages: bool = True) -> ForgetReport:
        return await self.client.drive(self.flows.forget_all(messages))

    async def feedback(self, item_id: str, signal: str) -> MemoryItem:
        return await self.client.drive(self.flows.feedback(item_id, signal))

    async def complete(self, item_id: str) -> MemoryItem:
        return await self.client.drive(self.flows.complete(item_id))

    async def undo(self, item_id: str) -> MemoryItem | None:
        return await self.client.drive(self.flows.undo(item_id))

    async def profile(self, *, cached: bool = False) -> Profile:
        return await self.client.drive(self.flows.profile(cached))

    async def update_profile(self, *, actor: str = "api", **fields: Any) -> Profile:
        return await self.client.drive(self.flows.update_profile(fields))

    async def profile_history(self) -> builtins.list[ProfileVersion]:
        return await self.client.drive(self.flows.profile_history())

    async def search(self, query: "str | SearchRequest", **options: Any) -> builtins.list[SearchHit]:
        return await self.client.drive(self.flows.search(query, options))

    async def explain(self, query: "str | SearchRequest", **options: Any) -> SearchResult:
        return await self.client.drive(self.flows.explain(query, options))

    async def archive_session(self, session_id: str = "default") -> SessionState:
        return await self.client.drive(self.flows.archive_session(session_id))

    async def resume(self, *, exclude_session: str | None = None) -> Resume:
        return await self.client.drive(self.flows.resume(exclude_session))

    async def context(self, session_id: "str | ContextRequest" = "default", messages: Any = None,
                      **options: Any) -> ContextResult:
        return await self.client.drive(self.flows.context(session_id, messages, options))

    async def jobs(self, *, status: str | None = None, limit: int = 1000) -> builtins.list[Job]:
        return await self.client.drive(self.flows.jobs(status, limit))

    async def usage(self) -> UsageReport:
        return await self.client.drive(self.flows.usage())

    async def export(self) -> str:
        """Everything of the user as versioned JSON Lines (``memstrata restore`` reads it)."""
        return await self.client.drive(self.flows.export())


for _name in SURFACE:  # one docstring per method: the local twin's
    getattr(AsyncRemoteUserMemory, _name).__doc__ = getattr(UserMemory, _name).__doc__

