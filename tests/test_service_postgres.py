"""The service in its production shape: PostgreSQL + pgvector for the store, Redis for
the sessions — keys, per-user REST, context, the audit log and rate limits."""

from __future__ import annotations

import uuid

from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)
from service_fixture import LiveServer

from memstrata import Memory
from memstrata.server import ServerSettings


def test_service_on_postgres_and_redis(pg_url):
    sessions = f"redis://127.0.0.1:6379/0?prefix=p10-test-{uuid.uuid4().hex[:8]}"
    with Memory(pg_url, embedder="hash:256", sessions=sessions) as memory, \
            LiveServer(memory, ServerSettings(rate_limit=5)) as live:
        token = live.key("acme", "app", rate_limit=0)
        with live.client(token) as c:
            added = c.post("/v1/users/lin/messages", json={"session_id": "s1", "messages": [
                {"role": "user", "content": "我下个月搬去里斯本。"}, {"role": "assistant", "content": "好的"}]})
            assert added.status_code == 201
            item = c.post("/v1/users/lin/items", json={"content": "Moving to Lisbon next month"}).json()
            hits = c.post("/v1/users/lin/search", json={"query": "里斯本", "k": 3}).json()["hits"]
            assert "里斯本" in hits[0]["text"]
            state = c.get("/v1/users/lin/sessions/s1").json()
            assert state["message_count"] == 2 and state["recent"][0]["content"] == "我下个月搬去里斯本。"
            context = c.post("/v1/users/lin/context", json={"session_id": "s1", "messages": [
                {"role": "user", "content": "上次我说要搬去哪里？"}], "budget": 800}).json()
            assert any("Lisbon" in m["content"] or "里斯本" in m["content"] for m in context["messages"][:-1])
            stale = c.patch(f"/v1/users/lin/items/{item['id']}", json={"content": "x"},
                            headers={"If-Match": '"9"'})
            assert stale.status_code == 412
            actions = [a["action"] for a in c.get("/v1/audit").json()["data"]]
            assert actions == ["items.update", "items.remember", "messages.add"]
        memory.flush(timeout=60)  # the add's extraction runs with Redis sessions too
        assert memory.list("lin") == []
        contents = [i.content for i in memory.list("lin", agent_id="acme")]
        assert "Moving to Lisbon next month" in contents and any("里斯本" in c for c in contents)
        with live.client(live.key("acme", "read-only")) as c:  # the server default: 5 a minute
            codes = [c.get("/v1/keys/me").status_code for _ in range(6)]
            assert codes == [200] * 5 + [429]
