"""Forgetting a user revokes their end-user keys; a refused MCP mutation is audited."""

from __future__ import annotations

import asyncio
import sqlite3

import httpx
import pytest
from service_fixture import LiveServer

from memstrata import Memory

mcp = pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402


def test_forgetting_a_user_revokes_their_keys_and_they_name_no_one(tmp_path):
    db = tmp_path / "m.db"
    with Memory(f"sqlite:///{db}", embedder="hash:256") as memory, LiveServer(memory) as live:
        admin = live.client(live.key("acme", "admin"))
        zoe_key, ida_key = live.key("acme", "end-user", user_id="zoe-8c1"), live.key("acme", "end-user", user_id="ida")
        other_tenant = live.key("globex", "end-user", user_id="zoe-8c1")  # same id, another tenant
        with live.client(zoe_key) as zoe:
            assert zoe.post("/v1/users/zoe-8c1/items", json={"content": "Likes rowing"}).status_code == 201
            r = zoe.delete("/v1/users/zoe-8c1")  # an end user forgets themselves
            assert r.status_code == 200, r.text
            assert r.json()["audit"]["revoked_keys"] == 1
            assert zoe.get("/v1/users/zoe-8c1/items").status_code == 401  # the key is gone with them
        with live.client(ida_key) as ida:
            assert ida.get("/v1/users/ida/items").status_code == 200  # another user's key works
        with live.client(other_tenant) as other:
            assert other.get("/v1/users/zoe-8c1/items").status_code == 200  # another tenant's too
        keys = admin.get("/v1/keys").json()["data"]
        mine = [k for k in keys if k["role"] == "end-user" and k["revoked_at"] and k["tenant"] == "acme"]
        assert len(mine) == 1 and mine[0]["user_id"].startswith("forgotten-")
        admin.close()
    rows = sqlite3.connect(db).execute("SELECT * FROM api_keys WHERE tenant='acme'").fetchall()
    assert not [r for r in rows if "zoe-8c1" in repr(r)]


def test_a_refused_mcp_mutation_is_audited(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256") as memory, LiveServer(memory) as live:
        reader = live.key("acme", "read-only")

        async def remember() -> object:
            headers = {"Authorization": f"Bearer {reader}", "X-Memstrata-User": "lin"}
            async with httpx.AsyncClient(headers=headers, timeout=30) as http:
                async with Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as client:
                    return await client.call_tool("remember", {"content": "x"})

        denied = asyncio.run(remember())
        assert denied.is_error  # type: ignore[attr-defined]
        [entry] = memory.store.list_audit("acme", action="mcp.remember")
        assert (entry.status, entry.role, entry.user_id) == (403, "read-only", "lin")
