"""MCP with the SDK's own client: list and call every tool, read the profile resource —
over stdio (``memstrata mcp`` as a subprocess) and over streamable HTTP (``/mcp`` of a
live service, with keys)."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

mcp = pytest.importorskip("mcp")
import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from service_fixture import LiveServer  # noqa: E402

from memstrata import Memory  # noqa: E402
from memstrata.server.mcp import TOOLS  # noqa: E402


def _data(result):
    assert not result.is_error, result
    if result.structured_content is not None:
        value = result.structured_content
        return value.get("result", value) if isinstance(value, dict) and set(value) == {"result"} else value
    return json.loads(result.content[0].text)


async def _exercise(client) -> dict:
    """Call every tool once, in an order that makes each meaningful; return what came back."""
    listed = await client.list_tools()
    assert sorted(t.name for t in listed.tools) == sorted(TOOLS)
    out = {"item": _data(await client.call_tool("remember", {"content": "我喜欢喝乌龙茶", "kind": "preference"}))}
    out["todo"] = _data(await client.call_tool("remember", {"content": "Renew the passport", "kind": "todo"}))
    out["hits"] = _data(await client.call_tool("search", {"query": "乌龙茶", "k": 3}))
    out["context"] = _data(await client.call_tool("get_context", {"query": "what tea do I like, as I said?",
                                                                  "budget": 800}))
    out["listed"] = _data(await client.call_tool("list_memories", {"kind": "todo"}))
    out["profile"] = _data(await client.call_tool("update_profile", {"name": "Lin", "goals": ["ship v2"]}))
    out["read"] = _data(await client.call_tool("get_profile", {}))
    turns = [{"role": "user", "content": "I moved to Lisbon last spring."},
             {"role": "assistant", "content": "How do you like it?"}]
    out["added"] = _data(await client.call_tool("add_messages", {"messages": turns, "session_id": "s1"}))
    out["again"] = _data(await client.call_tool("add_messages", {"messages": turns, "session_id": "s1"}))
    out["updated"] = _data(await client.call_tool("update_memory", {"item_id": out["item"]["id"],
                                                                    "content": "我喜欢喝红茶"}))
    out["versions"] = _data(await client.call_tool("memory_history", {"item_id": out["item"]["id"]}))
    out["no_change"] = await client.call_tool("update_memory", {"item_id": out["item"]["id"]})
    out["forgot"] = _data(await client.call_tool("forget", {"item_id": out["todo"]["id"]}))
    out["after"] = _data(await client.call_tool("list_memories", {}))
    resources = await client.list_resources()
    assert [str(r.uri) for r in resources.resources] == ["memstrata://profile"]
    read = await client.read_resource("memstrata://profile")
    out["resource"] = json.loads(read.contents[0].text)
    out["bad"] = await client.call_tool("forget", {"item_id": "mem_nope"})
    return out


def _check(out: dict) -> None:
    assert out["item"]["kind"] == "preference" and out["item"]["version"] == 1
    assert "乌龙茶" in out["hits"][0]["text"]
    assert any("乌龙茶" in m["content"] for m in out["context"]["messages"])
    assert [i["content"] for i in out["listed"]] == ["Renew the passport"]
    assert out["profile"]["name"] == out["read"]["name"] == out["resource"]["name"] == "Lin"
    assert out["forgot"] == {"forgotten": out["todo"]["id"]}
    # (what the added turns teach may be learned meanwhile, in the background)
    after = [i["content"] for i in out["after"]]
    assert "我喜欢喝红茶" in after and "Renew the passport" not in after and "我喜欢喝乌龙茶" not in after
    assert out["added"]["session_id"] == "s1" and len(out["added"]["message_ids"]) == 2
    # the same turns again: not stored twice
    assert out["again"]["replayed"] and out["again"]["message_ids"] == out["added"]["message_ids"]
    assert out["updated"]["version"] == 2 and out["updated"]["content"] == "我喜欢喝红茶"
    assert [(v["op"], v["after"]["content"]) for v in out["versions"]] == [
        ("create", "我喜欢喝乌龙茶"), ("edit", "我喜欢喝红茶")]
    assert out["no_change"].is_error and "at least one of content" in out["no_change"].content[0].text
    assert out["bad"].is_error and "mem_nope" in out["bad"].content[0].text


def test_mcp_over_stdio(tmp_path):
    db = f"sqlite:///{tmp_path / 'm.db'}"
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "memstrata.cli.main", "mcp", "--store", db, "--embedder", "hash:256", "--user", "lin"])

    async def run():
        async with Client(params) as client:
            return await _exercise(client)

    _check(asyncio.run(run()))
    with Memory(db, embedder="hash:256", worker="off") as memory:  # it was lin's memory, on disk
        assert [i.content for i in memory.list("lin", filters={"kind": "preference"})] == ["我喜欢喝红茶"]
        assert [m.content for m in memory.messages("lin", "s1")] == [
            "I moved to Lisbon last spring.", "How do you like it?"]


def test_mcp_over_streamable_http_with_keys(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as memory, LiveServer(memory) as live:
        app_key, reader = live.key("acme", "app"), live.key("acme", "read-only")
        mine = live.key("acme", "end-user", user_id="zoe")

        async def connect(headers, work):
            async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
                async with Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as client:
                    return await work(client)

        out = asyncio.run(connect({"Authorization": f"Bearer {app_key}", "X-Memstrata-User": "lin"},
                                  _exercise))
        _check(out)
        assert [i.content for i in memory.list("lin", agent_id="acme", filters={"kind": "preference"})] == [
            "我喜欢喝红茶"]
        assert memory.list("lin") == []  # the key's tenant is the namespace

        async def write(client):
            return await client.call_tool("remember", {"content": "x"})

        denied = asyncio.run(connect({"Authorization": f"Bearer {reader}", "X-Memstrata-User": "lin"}, write))
        assert denied.is_error and "read-only" in denied.content[0].text
        asyncio.run(connect({"Authorization": f"Bearer {mine}", "X-Memstrata-User": "lin"}, write))
        assert [i.content for i in memory.list("zoe", agent_id="acme")] == ["x"]  # its own user, always
        audit = memory.store.list_audit("acme", action="mcp")
        assert {a.action for a in audit} >= {"mcp.remember", "mcp.forget", "mcp.update_profile"}
        assert all(a.user_id in ("lin", "zoe") for a in audit)
        for headers in ({}, {"Authorization": "Bearer msk_nope"}):
            response = httpx2.post(f"{live.url}/mcp", headers=headers, json={})
            assert response.status_code == 401 and response.json()["error"]["type"] == "AuthenticationError"
