"""One rule for a valid id, the same at every entrance, and every id it
accepts reachable by every route and page.

For each generated id (valid or not, by :func:`memstrata.types.check_id`, the library's
rule) the id is used as user id and session id through each way in — the library, the
REST API over a real HTTP connection, MCP over HTTP (the ``X-Memstrata-User`` header), the
proxy (the body's ``user``, the session header), the CLI, the remote ``Client`` — and as a
tenant (``keys create``). An accepted id must be taken by all of them and be reachable
afterwards by the REST routes (its sessions, messages, items, the users list, forgetting
it) and by the inspector's pages (each page and each link on them, a change's redirect);
a refused one must be refused by all of them with a ValidationError / 422 / MCP error (a
REST path that cannot carry it answers no 2xx).
"""

from __future__ import annotations

import asyncio
import html
import itertools
import re
from urllib.parse import quote, unquote

import httpx
import pytest
from click.testing import CliRunner
from fastapi import FastAPI, Request
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from inspector_fixture import close_clients, csrf_of, login
from service_fixture import LiveServer, serve_asgi

from memstrata import Client, Memory
from memstrata.cli.main import cli
from memstrata.errors import ValidationError
from memstrata.server import ServerSettings
from memstrata.types import check_id

mcp = pytest.importorskip("mcp")
from mcp import Client as McpClient  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

TENANT = "acme"
VALID = ["lin", "林 伟", "a@b.c", "x+y", "100%", "%41", "%2e%2e", "?q=1#frag", "back\\slash",
         " lead", "trail ", "a;b=c&d", "…", "ǅ", "a" * 256]
INVALID = ["a/b", "/", "..", ".", "...", ". .", "", " ", "a\x00b", "a\nb", "a\n", "\x85", "\ud800",
           "a" * 257]
IDS = st.one_of(st.sampled_from(VALID + INVALID), st.text(max_size=10))
COUNTER = itertools.count()


def accepted(value: str) -> bool:
    try:
        check_id(value, "id")
        return True
    except ValidationError:
        return False


def upstream_app() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, object]:
        await request.json()
        return {"id": "c1", "object": "chat.completion", "created": 1, "model": "fake",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "Noted."}}]}

    return app


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('ids') / 'm.db'}"
    with Memory(url, embedder="hash:256") as memory, serve_asgi(upstream_app()) as upstream, \
            LiveServer(memory, ServerSettings(rate_limit=0, upstream=f"{upstream}/v1")) as live:
        token = live.key(TENANT, "app")
        api = live.client(token)
        remote = Client(live.url, token)
        yield {"url": url, "memory": memory, "live": live, "token": token, "api": api,
               "remote": remote, "browser": login(live, token)}
        remote.http.close()
        api.close()
        close_clients()


def sendable(value: str) -> bool:
    try:
        value.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _refused_off_the_wire(env, ident: str) -> None:
    """An id no request can carry: the CLI, the client and keys create refuse it too."""
    ran = CliRunner().invoke(cli, ["add", f"--store={env['url']}", "--embedder=hash:256",
                                   f"--user={ident}", "hello"])
    assert ran.exit_code == 1 and "Traceback" not in ran.output, ran.output
    with pytest.raises(ValidationError):
        env["remote"].user(ident)
    with pytest.raises(ValidationError):
        env["live"].key(ident, "app")


def q(value: str) -> str:
    return quote(value, safe="")


async def _mcp_remember(url: str, token: str, user: str, text: str) -> tuple[bool, str]:
    headers = {"Authorization": f"Bearer {token}", "X-Memstrata-User": q(user)}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        async with McpClient(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            made = await client.call_tool("remember", {"content": text})
            words = " ".join(getattr(c, "text", "") for c in made.content)
            return not made.is_error, words


def _links(page: str, ident: str) -> set[str]:
    """The page's links (to follow) after checking that every link and form of the
    user's names the user exactly."""
    found = re.findall(r'(href|action)="(/ui/users/[^"]+)"', page)
    for _, link in found:
        assert unquote(html.unescape(link).split("?")[0].split("/")[3]) == ident, link
    return {html.unescape(link) for kind, link in found if kind == "href"}


def _inspector(browser: httpx.Client, ident: str) -> None:
    """Every page of the user, every link on them, and a change's redirect answer 200."""
    base = f"/ui/users/{q(ident)}"
    pages = [base, f"{base}/about", f"{base}/items", f"{base}/sessions",
             f"{base}/sessions/{q(ident)}", f"{base}/sessions/{q(ident)}/forget",
             f"{base}/search?q=mark"]
    seen: set[str] = set()
    for path in pages:
        r = browser.get(path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        for link in sorted(_links(r.text, ident) - seen):
            seen.add(link)
            got = browser.get(link)
            assert got.status_code == 200, (link, got.status_code, got.text[:300])
        twin = re.search(r'href="([^"]+)" data-twin', r.text)
        assert twin and browser.get(html.unescape(twin.group(1))).status_code == 200, path
    session_page = browser.get(f"{base}/sessions/{q(ident)}").text
    done = browser.post(f"{base}/sessions/{q(ident)}/archive", data={"csrf": csrf_of(session_page)})
    assert done.status_code == 303, done.text[:300]
    assert browser.get(done.headers["location"]).status_code == 200, done.headers["location"]


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(ident=IDS)
@example(ident="a/b")
@example(ident="..")
@example(ident="林 伟")
@example(ident="100%")
@example(ident="?q=1#frag")
def test_every_entrance_takes_the_same_ids_and_every_accepted_id_is_reachable(env, ident):
    ok = accepted(ident)
    mark = f"mark{next(COUNTER)}x"
    memory, api, remote = env["memory"], env["api"], env["remote"]

    # the library
    try:
        memory.user(ident, agent=TENANT).add([{"role": "user", "content": f"library {mark}"}], ident)
        assert ok, f"the library took {ident!r}"
    except ValidationError:
        assert not ok, f"the library refused {ident!r}"

    if not sendable(ident):  # not UTF-8 text: no HTTP request, header or URL can carry it
        assert not ok
        _refused_off_the_wire(env, ident)
        return

    # REST over HTTP: the id in the path and in the body
    user = f"/v1/users/{q(ident)}"
    r = api.post(f"{user}/messages", json={"session_id": ident, "messages": [
        {"role": "user", "content": f"rest {mark}"}]})
    # a path that cannot carry the id ('/', '.', '..', '') reaches no route: 404/405, never 2xx
    assert r.status_code == 201 if ok else r.status_code in (404, 405, 422), (ident, r.status_code, r.text[:200])
    assert ok or "/" not in ident or (r.status_code == 422 and "'/'" in r.text), (ident, r.text[:200])
    body_only = api.post("/v1/users/lin/messages", json={"session_id": ident, "messages": [
        {"role": "user", "content": "hello"}]})
    assert body_only.status_code == (201 if ok else 422), (ident, body_only.text[:200])

    # MCP over HTTP: the user header (percent-encoded UTF-8)
    took, words = asyncio.run(_mcp_remember(env["live"].url, env["token"], ident, f"mcp {mark}"))
    assert took == ok, (ident, words)
    assert ok or "ValidationError" in words, words

    # the proxy: the body's user, the session header
    chat = api.post("/v1/chat/completions", headers={"X-Memstrata-Session": q(ident)}, json={
        "model": "fake", "user": ident, "messages": [{"role": "user", "content": f"proxy {mark}"}]})
    assert chat.status_code == (200 if ok else 422), (ident, chat.text[:200])

    # the CLI
    ran = CliRunner().invoke(cli, ["add", f"--store={env['url']}", "--embedder=hash:256",
                                   f"--agent={TENANT}", f"--user={ident}", f"--session={ident}",
                                   f"cli {mark}"])
    assert (ran.exit_code == 0) == ok, (ident, ran.output)

    # the remote client
    try:
        remote.user(ident).add([{"role": "user", "content": f"client {mark}"}], session_id=ident)
        assert ok, f"the client took {ident!r}"
    except ValidationError:
        assert not ok, f"the client refused {ident!r}"

    # a tenant
    try:
        tenant_key = env["live"].key(ident, "app")
        assert ok, f"keys create took the tenant {ident!r}"
    except ValidationError:
        assert not ok, f"keys create refused the tenant {ident!r}"
        tenant_key = None

    if not ok:
        if q(ident) not in ("", ".", ".."):  # those the client resolves to another page
            assert env["browser"].get(f"/ui/users/{q(ident)}").status_code != 200, ident
        return

    # everything written is reachable: REST, the client, the inspector; then forgotten
    turns = api.get(f"{user}/sessions/{q(ident)}/messages")
    assert turns.status_code == 200, (ident, turns.text[:200])
    texts = " ".join(m["content"] for m in turns.json()["data"])
    for way in ("library", "rest", "proxy", "cli", "client"):
        assert f"{way} {mark}" in texts, (ident, way, texts)
    assert api.get(f"{user}/sessions/{q(ident)}").status_code == 200
    items = api.get(f"{user}/items").json()["data"]
    assert any(i["content"] == f"mcp {mark}" for i in items), (ident, items)
    assert ident in remote.users()
    assert any(m.content == f"client {mark}" for m in remote.user(ident).messages(ident))
    _inspector(env["browser"], ident)
    if tenant_key is not None:
        with httpx.Client(base_url=env["live"].url, timeout=30,
                          headers={"Authorization": f"Bearer {tenant_key}"}) as other:
            assert other.post(f"{user}/messages", json={"session_id": ident, "messages": [
                {"role": "user", "content": "tenant"}]}).status_code == 201
            assert other.get(f"{user}/sessions/{q(ident)}/messages").json()["data"][0]["content"] == "tenant"
    assert api.delete(user).status_code == 200, ident
    assert ident not in remote.users()


@pytest.mark.parametrize("raw, expected", [("lin", "lin"), ("%E6%9E%97%20%E4%BC%9F", "林 伟"),
                                           ("100%25", "100%"), ("%20lead", " lead")])
def test_the_user_header_is_percent_decoded_utf8(raw, expected):
    from memstrata.ids import from_header, to_header

    assert from_header(raw, "x-memstrata-user") == expected
    assert from_header(to_header(expected), "x-memstrata-user") == expected
    assert from_header("林".encode().decode("latin-1"), "x-memstrata-user") == "林"  # raw UTF-8 too
    for bad in ("a%2Fb", "%2E%2E", "%00", "\xff"):
        with pytest.raises(ValidationError):
            from_header(bad, "x-memstrata-user")


def test_the_openapi_pattern_is_the_rule():
    from memstrata.ids import ID_PATTERN, is_valid_id

    for value in VALID:
        assert re.fullmatch(ID_PATTERN, value) and is_valid_id(value) and accepted(value), value
    for value in INVALID:
        assert not is_valid_id(value) and not accepted(value), value
