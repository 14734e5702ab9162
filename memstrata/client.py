"""``memstrata.Client``: the per-user API of :class:`~memstrata.UserMemory`, over HTTP.

::

    from memstrata import Client

    with Client("http://127.0.0.1:8000", "msk_…") as client:
        lin = client.user("lin")
        lin.add("I switched from Java to Go", session_id="s1")
        for hit in lin.search("which language?", k=5):
            print(hit.score, hit.text)

The handle has the methods of :class:`~memstrata.UserMemory` with the same parameters
(``tests/test_async_parity.py`` checks it) and returns the same values, rebuilt with
their ``from_dict``; one conformance suite runs against the local, async and remote
faces. Errors come back as the same :mod:`memstrata.errors` classes; a server that
cannot be reached is a :class:`~memstrata.errors.StoreUnavailableError`. The key's
tenant is the namespace; ``actor`` arguments are ignored: the server records the key.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from typing import Any
from urllib.parse import quote

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
from .types import Filters, ItemVersion, Kind, MemoryItem, Message, Scope, SearchHit, check_id
from .usage import UsageReport
from .user import SURFACE, AddResult, UserMemory

__all__ = ["Client", "RemoteUserMemory"]


def _quote(part: str) -> str:
    """A path segment: every byte but letters, digits and ``_.-~`` escaped."""
    return quote(part, safe="")


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


class Client:
    """A memstrata service at ``url`` (``http://host:8000``), called with API key ``key``.

    ``transport`` is passed to :class:`httpx.Client` (e.g. ``httpx.ASGITransport`` to
    call an app in process)."""

    def __init__(self, url: str, key: str, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise errors.ConfigError(f"url must be the service's http:// or https:// address, like "
                                     f"http://127.0.0.1:8000, not {url!r}")
        if not isinstance(key, str) or not key.strip() or any(c.isspace() for c in key):
            raise errors.ConfigError("key must be an API key (msk_…, from `memstrata keys create`), "
                                     f"not {key!r}")
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport,
                                 headers={"Authorization": f"Bearer {key}"})

    def request(self, method: str, path: str, *, expect: int | None = None, **kwargs: Any) -> Any:
        """One call; the decoded JSON (None for 204), or the memstrata error it answered."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise errors.StoreUnavailableError(f"cannot reach memstrata at {self.url} ({exc}); "
                                               "is `memstrata serve` running there?") from exc
        if response.status_code >= 400:
            raise _error(response)
        if response.status_code == 204:
            return None
        if response.headers.get("content-type", "").startswith("application/x-ndjson"):
            return response.text
        return response.json()

    def pages(self, path: str, params: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Every row of a paginated list, page after page."""
        offset = 0
        while True:
            page = self.request("GET", path, params={**(params or {}), "limit": _PAGE, "offset": offset})
            yield from page["data"]
            if page["next_offset"] is None:
                return
            offset = page["next_offset"]

    def user(self, user_id: str) -> "RemoteUserMemory":
        """The handle on one user's memory in the key's tenant."""
        Scope(user_id)  # the id rules of the local API, before any request
        return RemoteUserMemory(self, user_id)

    def users(self) -> builtins.list[str]:
        """The tenant's user ids (an end-user key sees its own)."""
        return [row["user_id"] for row in self.pages("/v1/users")]

    def me(self) -> dict[str, Any]:
        """The key this client calls with: id, tenant, role, user."""
        result: dict[str, Any] = self.request("GET", "/v1/keys/me")
        return result

    def close(self) -> None:
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
        self.base = f"/v1/users/{_quote(user_id)}"

    def __repr__(self) -> str:
        return f"RemoteUserMemory(user_id={self.user_id!r}, url={self.client.url!r})"

    def _call(self, method: str, path: str = "", **kwargs: Any) -> Any:
        return self.client.request(method, self.base + path, **kwargs)

    def add(self, messages: Any, session_id: str = "default", *, index: bool = True,
            extract: bool | None = None, idempotency_key: str | None = None) -> AddResult:
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
        body = self._call("POST", "/messages", headers=headers,
                          json={"messages": messages, "session_id": session_id,
                                "index": index, "extract": extract})
        return AddResult(body["session_id"], [Message.from_dict(m) for m in body["messages"]],
                         replayed=bool(body.get("replayed", False)))

    def messages(self, session_id: str = "default") -> builtins.list[Message]:
        return [Message.from_dict(m) for m in
                self.client.pages(f"{self.base}/sessions/{_quote(session_id)}/messages")]

    def sessions(self) -> builtins.list[SessionInfo]:
        return [SessionRecord.from_dict(s) for s in self.client.pages(f"{self.base}/sessions")]

    def session(self, session_id: str = "default") -> SessionState:
        return SessionState.from_dict(self._call("GET", f"/sessions/{_quote(session_id)}"))

    def remember(self, content: str, *, kind: "Kind | str" = Kind.FACT, subject: str | None = None,
                 attribute: str | None = None, value: str | None = None,
                 confidence: float = 0.8, importance: float = 0.5, tags: Any = (),
                 metadata: Mapping[str, Any] | None = None, session_id: str | None = None,
                 actor: str = "api", reason: str = "remember() call") -> MemoryItem:
        body = {"content": content, "kind": kind.value if isinstance(kind, Kind) else kind,
                "subject": subject, "attribute": attribute, "value": value,
                "confidence": confidence, "importance": importance, "tags": list(tags),
                "metadata": dict(metadata) if metadata is not None else None,
                "session_id": session_id, "reason": reason}
        return MemoryItem.from_dict(self._call("POST", "/items", json=body))

    def get(self, item_id: str) -> MemoryItem:
        return MemoryItem.from_dict(self._call("GET", f"/items/{_quote(item_id)}"))

    def list(self, *, filters: "Filters | Mapping[str, Any] | None" = None, limit: int = 100,
             offset: int = 0) -> builtins.list[MemoryItem]:
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
            page = self._call("GET", "/items", params={**params, "offset": offset,
                                                      "limit": min(_PAGE, limit - len(rows))})
            rows += [MemoryItem.from_dict(i) for i in page["data"]]
            if page["next_offset"] is None:
                break
            offset = page["next_offset"]
        return rows

    def update(self, item_id: str, *, actor: str = "api", reason: str = "update() call",
               expected_version: int | None = None, **changes: Any) -> MemoryItem:
        body = {k: (v.value if isinstance(v, Kind) else list(v) if isinstance(v, tuple) else v)
                for k, v in changes.items()}
        headers = {"If-Match": f'"{expected_version}"'} if expected_version is not None else {}
        return MemoryItem.from_dict(self._call("PATCH", f"/items/{_quote(item_id)}", headers=headers,
                                               json={**body, "reason": reason}))

    def history(self, item_id: str) -> builtins.list[ItemVersion]:
        return [ItemVersion.from_dict(v)
                for v in self.client.pages(f"{self.base}/items/{_quote(item_id)}/history")]

    def forget(self, item_id: str, *, messages: bool = False) -> ForgetReport:
        return ForgetReport.from_dict(self._call("DELETE", f"/items/{_quote(item_id)}",
                                                 params={"messages": messages}))

    def forget_all(self, *, messages: bool = True) -> ForgetReport:
        return ForgetReport.from_dict(self._call("DELETE", params={"messages": messages}))

    def feedback(self, item_id: str, signal: str) -> MemoryItem:
        return MemoryItem.from_dict(self._call("POST", f"/items/{_quote(item_id)}/feedback",
                                               json={"signal": signal}))

    def complete(self, item_id: str) -> MemoryItem:
        return MemoryItem.from_dict(self._call("POST", f"/items/{_quote(item_id)}/complete"))

    def undo(self, item_id: str) -> MemoryItem | None:
        item = self._call("POST", f"/items/{_quote(item_id)}/undo")["item"]
        return MemoryItem.from_dict(item) if item is not None else None

    def profile(self, *, cached: bool = False) -> Profile:
        return Profile.from_dict(self._call("GET", "/profile", params={"cached": cached}))

    def update_profile(self, *, actor: str = "api", **fields: Any) -> Profile:
        body = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
        return Profile.from_dict(self._call("PATCH", "/profile", json=body))

    def profile_history(self) -> builtins.list[ProfileVersion]:
        return [ProfileVersion.from_dict(v) for v in self._call("GET", "/profile/history")]

    def search(self, query: "str | SearchRequest", **options: Any) -> builtins.list[SearchHit]:
        body = _search_body(SearchRequest.build(query, **options))
        return [SearchHit.from_dict(h) for h in self._call("POST", "/search", json=body)["hits"]]

    def explain(self, query: "str | SearchRequest", **options: Any) -> SearchResult:
        body = _search_body(SearchRequest.build(query, **options))
        return SearchResult.from_dict(self._call("POST", "/search/explain", json=body))

    def archive_session(self, session_id: str = "default") -> SessionState:
        return SessionState.from_dict(self._call("POST", f"/sessions/{_quote(session_id)}/archive"))

    def resume(self, *, exclude_session: str | None = None) -> Resume:
        params = {"exclude_session": exclude_session} if exclude_session is not None else {}
        return Resume.from_dict(self._call("GET", "/resume", params=params))

    def context(self, session_id: "str | ContextRequest" = "default", messages: Any = None,
                **options: Any) -> ContextResult:
        request = (session_id if isinstance(session_id, ContextRequest)
                   else ContextRequest.build(session_id, messages, **options))
        return ContextResult.from_dict(self._call("POST", "/context", json=_context_body(request)))

    def jobs(self, *, status: str | None = None, limit: int = 1000) -> builtins.list[Job]:
        params = {"status": status} if status else {}
        rows = []
        for row in self.client.pages(f"{self.base}/jobs", params):
            rows.append(Job.from_dict(row))
            if len(rows) >= limit:
                break
        return rows

    def usage(self) -> UsageReport:
        return UsageReport.from_dict(self._call("GET", "/usage"))

    def export(self) -> str:
        """Everything of the user as versioned JSON Lines (``memstrata restore`` reads it)."""
        text: str = self._call("GET", "/export")
        return text


for _name in SURFACE:  # one docstring per method: the local twin's
    getattr(RemoteUserMemory, _name).__doc__ = getattr(UserMemory, _name).__doc__
