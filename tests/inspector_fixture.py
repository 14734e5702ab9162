"""A live service with memory made through the REST API, for the inspector's tests.

``seed(live, tenant, user)`` writes, through ``/v1``, a conversation with a tool call
and its result, an extracted item (the worker runs the rule extractor), a remembered
item, a todo and a profile edit — and returns their ids and the API client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx

MESSAGES = [
    {"role": "user", "content": "I switched our routing service from Java to Go last month."},
    {"role": "assistant", "content": "Noted. Shall I look up the Go release notes?",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "search_docs", "arguments": "{\"q\": \"go 1.23\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Go 1.23 released in August."},
    {"role": "user", "content": "I decided to keep Postgres. 我喜欢简短的回答。"},
]


@dataclass
class Seeded:
    api: httpx.Client
    user: str
    session_id: str
    item: dict[str, Any]
    todo: dict[str, Any]
    extracted: list[dict[str, Any]]


OPEN: list[httpx.Client] = []  # closed by close_clients() when a test module's server stops


def close_clients() -> None:
    while OPEN:
        OPEN.pop().close()


def seed(live: Any, tenant: str, user: str, *, marker: str = "") -> Seeded:
    api = live.client(live.key(tenant, "app"))
    OPEN.append(api)
    r = api.post(f"/v1/users/{user}/messages", json={"messages": MESSAGES, "session_id": "s1"})
    assert r.status_code == 201, r.text
    live.memory.flush()
    extracted = api.get(f"/v1/users/{user}/items", params={"status": ["active", "superseded"]}).json()["data"]
    item = api.post(f"/v1/users/{user}/items", json={"content": f"Works mostly in Java {marker}".strip(),
                                                     "kind": "fact", "tags": ["work"]}).json()
    todo = api.post(f"/v1/users/{user}/items", json={"content": "Renew the passport", "kind": "todo"}).json()
    assert api.patch(f"/v1/users/{user}/profile", json={"role": "backend engineer"}).status_code == 200
    return Seeded(api, user, "s1", item, todo, extracted)


def login(live: Any, token: str, **headers: str) -> httpx.Client:
    """A cookie-carrying client logged in to the inspector with ``token``."""
    browser = httpx.Client(base_url=live.url, follow_redirects=False, timeout=30, headers=headers)
    OPEN.append(browser)
    r = browser.post("/ui/login", data={"key": token})
    assert r.status_code == 303, r.text
    return browser


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


def digest_of(html: str) -> str:
    found = re.search(r'name="digest" value="([^"]+)"', html)
    assert found, "no digest on the confirmation"
    return found.group(1)
