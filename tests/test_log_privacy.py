"""Logs carry no memory content at INFO, and no credentials at any level.

A whole service session — turns added, searches, context, the memory proxy, MCP, the
inspector's pages and search, a profile edit, forgetting an item and the user — runs with
every ``memstrata`` logger at INFO, and the captured log is scanned for each planted
string (English and Chinese). An upstream URL with a password must not reach a caller
(even an end-user key, through the proxy's 502) or the log.
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from fastapi import FastAPI, Request
from inspector_fixture import close_clients, csrf_of, login
from service_fixture import LiveServer, serve_asgi

from memstrata import Memory
from memstrata.errors import mask_credentials
from memstrata.server import ServerSettings
from memstrata.stores import safe_url

mcp = pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

# one planted string per way in; none may reach the log at INFO
PLANTED = {"turn": "quinceharbour", "turn_zh": "翡翠湾七号", "query": "marzipanlantern",
           "context": "tobogganvelvet", "remembered": "cobaltpelican", "profile": "saffronkestrel",
           "proxy": "glacierwhistle", "mcp": "lanternmoss", "mcp_query": "quartzheron",
           "inspector_query": "amberfjord", "answer": "orchidtelegraph"}
PASSWORD = "pa55w0rd-x9"


def fake_upstream() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, object]:
        await request.json()
        return {"id": "c1", "object": "chat.completion", "created": 1, "model": "fake",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": f"Noted: {PLANTED['answer']}."}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}

    return app


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.names: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(("memstrata", "uvicorn")):
            return  # what `memstrata serve` logs; httpx's lines here are the test's own client
        self.names.add(record.name)
        self.lines.append(self.format(record))
        if record.exc_info:
            self.lines.append(logging.Formatter().formatException(record.exc_info))


@pytest.fixture
def captured():
    """Every record of the loggers `memstrata serve` writes (memstrata's, uvicorn's) at INFO."""
    capture = Capture()
    # on the loggers themselves: `memstrata serve` (or a test that ran it) stops memstrata's
    # records from propagating to the root logger
    loggers = [logging.getLogger(name) for name in ("memstrata", "uvicorn")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(capture)
        lg.setLevel(logging.INFO)
    try:
        yield capture
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(capture)
            lg.setLevel(level)


async def _mcp(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}", "X-Memstrata-User": "lin"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            made = await client.call_tool("remember", {"content": f"I keep a {PLANTED['mcp']} at home"})
            assert not made.is_error
            await client.call_tool("search", {"query": PLANTED["mcp_query"], "k": 3})
            await client.call_tool("get_context", {"query": f"what about {PLANTED['mcp_query']}?"})


def test_a_service_session_logs_no_memory_content_at_info(tmp_path, captured):
    p = PLANTED
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as memory, \
            serve_asgi(fake_upstream()) as upstream, \
            LiveServer(memory, ServerSettings(rate_limit=0, upstream=f"{upstream}/v1")) as live:
        token = live.key("acme", "app")
        api = live.client(token)
        r = api.post("/v1/users/lin/messages", json={"session_id": "s1", "messages": [
            {"role": "user", "content": f"I moved to {p['turn']} last spring. 我住在{p['turn_zh']}。"},
            {"role": "assistant", "content": "Noted."}]})
        assert r.status_code == 201, r.text
        memory.flush()
        for path, body in (("search", {"query": p["query"]}), ("search/explain", {"query": p["query"]}),
                           ("context", {"session_id": "s1", "messages": [
                               {"role": "user", "content": f"Tell me about {p['context']}"}]})):
            assert api.post(f"/v1/users/lin/{path}", json=body).status_code == 200
        item = api.post("/v1/users/lin/items", json={"content": f"Owns a {p['remembered']}"}).json()
        assert api.patch("/v1/users/lin/profile", json={"role": p["profile"]}).status_code == 200
        chat = api.post("/v1/chat/completions", json={"model": "fake", "user": "lin", "messages": [
            {"role": "user", "content": f"Remember the {p['proxy']}, please."}]})
        assert chat.status_code == 200, chat.text
        asyncio.run(_mcp(live.url, token))
        browser = login(live, token)
        for page in ("/ui/users/lin", "/ui/users/lin/items", "/ui/users/lin/sessions/s1",
                     f"/ui/users/lin/items/{item['id']}", "/ui/users/lin/sessions",
                     f"/ui/users/lin/search?q={p['inspector_query']}"):
            assert browser.get(page).status_code == 200, page
        html = browser.get(f"/ui/users/lin/items/{item['id']}").text
        assert browser.post(f"/ui/users/lin/items/{item['id']}/feedback",
                            data={"csrf": csrf_of(html), "signal": "up"}).status_code in (200, 303)
        memory.flush()
        assert api.delete(f"/v1/users/lin/items/{item['id']}").status_code == 200
        assert api.delete("/v1/users/lin").status_code == 200
        close_clients()
        api.close()

    log = "\n".join(captured.lines)
    # INFO lines were written, by the write path and the search among others
    assert "add 2 message(s)" in log and "memstrata.search" in captured.names
    leaked = {name: s for name, s in PLANTED.items() if s.lower() in log.lower()}
    assert leaked == {}, [line for line in captured.lines
                          if any(s.lower() in line.lower() for s in leaked.values())][:5]


def test_an_upstream_password_reaches_no_caller_and_no_log(tmp_path, captured):
    secret_url = f"http://gateway-user:{PASSWORD}@127.0.0.1:9/v1"
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as memory, \
            LiveServer(memory, ServerSettings(rate_limit=0, upstream=secret_url)) as live:
        for key in (live.key("acme", "app"), live.key("acme", "end-user", user_id="zoe")):
            with live.client(key) as client:
                r = client.post("/v1/chat/completions", json={"model": "m", "user": "zoe", "messages": [
                    {"role": "user", "content": "hello"}]})
            assert r.status_code == 502 and PASSWORD not in r.text, r.text
            assert "gateway-user:***@127.0.0.1:9" in r.json()["error"]["message"]
    assert PASSWORD not in "\n".join(captured.lines)


@pytest.mark.parametrize("url,masked", [
    ("http://user:password@gateway/v1", "http://user:***@gateway/v1"),
    ("postgresql://app:s3cr%40t@db:5432/m", "postgresql://app:***@db:5432/m"),
    ("redis://:hunter2@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
    ("postgresql://app@db/m", "postgresql://app@db/m"),  # a user name alone is no secret
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
    ("sqlite:///data/m.db", "sqlite:///data/m.db"),
])
def test_credentials_in_a_url_are_masked(url, masked):
    assert safe_url(url) == masked
    assert mask_credentials(f"cannot reach {url} (refused)") == f"cannot reach {masked} (refused)"
