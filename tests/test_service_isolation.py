"""Isolation over HTTP: two tenants × users × every role × every endpoint.

Each (tenant, user) holds an item, a turn and a profile edit whose text is a unique
marker. Every request checks the status (401 without a valid key, 403 where the role or
the end-user's one user forbids it, 404 for another tenant's ids, 2xx otherwise), that
the body names no marker or id the key may not see, and — for writes — that the other
tenant's rows did not change. The route table must cover every route of the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from service_fixture import LiveServer

from memstrata import Memory
from memstrata.types import Filters, Status

TENANTS = {"acme": ("lin", "max"), "globex": ("lin", "zoe")}  # "lin" is in both
ALL = Filters(statuses=tuple(Status))


@dataclass(frozen=True)
class Spec:
    method: str
    path: str
    body: Any = None
    write: bool = False
    admin: bool = False
    per_user: bool = True
    item: bool = False
    destroys: bool = False
    ok: int = 200
    app: bool = False  # admin and app keys only (the tenant's knowledge base)
    reseed: bool = False  # the caller's documents are seeded again before each request


SPECS: dict[str, Spec] = {
    "messages.add": Spec("POST", "/v1/users/{user_id}/messages", {"messages": [{"role": "user", "content": "hello"}]},
                         write=True, ok=201),
    "sessions.list": Spec("GET", "/v1/users/{user_id}/sessions"),
    "sessions.get": Spec("GET", "/v1/users/{user_id}/sessions/{session_id}"),
    "sessions.messages": Spec("GET", "/v1/users/{user_id}/sessions/{session_id}/messages"),
    "sessions.archive": Spec("POST", "/v1/users/{user_id}/sessions/{session_id}/archive", write=True),
    "sessions.resume": Spec("GET", "/v1/users/{user_id}/resume"),
    "users.search": Spec("POST", "/v1/users/{user_id}/search", {"query": "{marker}"}),
    "users.explain": Spec("POST", "/v1/users/{user_id}/search/explain", {"query": "{marker}"}),
    "users.context": Spec("POST", "/v1/users/{user_id}/context",
                          {"messages": [{"role": "user", "content": "last time: {marker}"}],
                           "recall": "deep"}),
    "jobs.list": Spec("GET", "/v1/users/{user_id}/jobs"),
    "usage.get": Spec("GET", "/v1/users/{user_id}/usage"),
    "users.export": Spec("GET", "/v1/users/{user_id}/export"),
    "users.forget": Spec("DELETE", "/v1/users/{user_id}", write=True, destroys=True, ok=200),
    "items.remember": Spec("POST", "/v1/users/{user_id}/items", {"content": "new memory"}, write=True, ok=201),
    "items.list": Spec("GET", "/v1/users/{user_id}/items"),
    "items.get": Spec("GET", "/v1/users/{user_id}/items/{item_id}", item=True),
    "items.update": Spec("PATCH", "/v1/users/{user_id}/items/{item_id}", {"content": "edited"}, write=True, item=True),
    "items.forget": Spec("DELETE", "/v1/users/{user_id}/items/{item_id}", write=True, item=True, destroys=True, ok=200),
    "items.history": Spec("GET", "/v1/users/{user_id}/items/{item_id}/history", item=True),
    "items.undo": Spec("POST", "/v1/users/{user_id}/items/{item_id}/undo", write=True, item=True, destroys=True),
    "items.feedback": Spec("POST", "/v1/users/{user_id}/items/{item_id}/feedback", {"signal": "up"}, write=True,
                           item=True),
    "items.complete": Spec("POST", "/v1/users/{user_id}/items/{item_id}/complete", write=True, item=True),
    "profile.get": Spec("GET", "/v1/users/{user_id}/profile"),
    "profile.update": Spec("PATCH", "/v1/users/{user_id}/profile", {"role": "engineer"}, write=True),
    "profile.history": Spec("GET", "/v1/users/{user_id}/profile/history"),
    "tenant.users": Spec("GET", "/v1/users", per_user=False),
    "tenant.jobs": Spec("GET", "/v1/jobs", per_user=False),
    "tenant.usage": Spec("GET", "/v1/usage", per_user=False),
    "audit.list": Spec("GET", "/v1/audit", per_user=False),
    "keys.me": Spec("GET", "/v1/keys/me", per_user=False),
    "keys.create": Spec("POST", "/v1/keys", {"role": "app"}, admin=True, per_user=False, ok=201),
    "keys.list": Spec("GET", "/v1/keys", admin=True, per_user=False),
    "keys.revoke": Spec("DELETE", "/v1/keys/{key_id}", admin=True, per_user=False),
    "kb.add": Spec("POST", "/v1/kb/documents", {"doc_id": "new", "content": "A new guide."}, write=True,
                   app=True, per_user=False, ok=201),
    "kb.list": Spec("GET", "/v1/kb/documents", per_user=False),
    "kb.get": Spec("GET", "/v1/kb/documents/{doc_id}", per_user=False),
    "kb.chunks": Spec("GET", "/v1/kb/documents/{doc_id}/chunks", per_user=False),
    "kb.remove": Spec("DELETE", "/v1/kb/documents/{doc_id}", write=True, app=True, per_user=False,
                      destroys=True, reseed=True, ok=204),
    "kb.search": Spec("POST", "/v1/kb/search", {"query": "guide"}, per_user=False),
    "kb.stale": Spec("GET", "/v1/kb/stale", per_user=False),
    "users.kb_add": Spec("POST", "/v1/users/{user_id}/kb/documents",
                         {"doc_id": "new", "content": "A new private note."}, write=True, ok=201),
    "users.kb_remove": Spec("DELETE", "/v1/users/{user_id}/kb/documents/{doc_id}", write=True,
                            destroys=True, reseed=True, ok=204),
    "users.kb_search": Spec("POST", "/v1/users/{user_id}/kb/search", {"query": "{marker} note"}),
    "users.timeline": Spec("GET", "/v1/users/{user_id}/timeline"),
    "sessions.summaries": Spec("GET", "/v1/users/{user_id}/sessions/{session_id}/summaries"),
    "items.erasure": Spec("GET", "/v1/users/{user_id}/items/{item_id}/erasure", item=True),
    "sessions.erasure": Spec("GET", "/v1/users/{user_id}/sessions/{session_id}/erasure"),
    "sessions.forget": Spec("DELETE", "/v1/users/{user_id}/sessions/{session_id}/messages", write=True,
                            destroys=True),
    "users.kb_used": Spec("POST", "/v1/users/{user_id}/kb/used", {"chunk_ids": ["kc_none"]}, write=True),
}


def marker(tenant: str, user: str) -> str:
    return f"MARK{tenant}{user}"


@dataclass
class World:
    live: LiveServer
    memory: Memory
    keys: dict[tuple[str, str], str] = field(default_factory=dict)  # (tenant, role) -> token
    items: dict[tuple[str, str], str] = field(default_factory=dict)  # (tenant, user) -> item id

    def seed(self, tenant: str, user: str) -> str:
        """Make sure (tenant, user) holds its marked item, turn and profile edit."""
        handle = self.memory.user(user, agent=tenant)
        mark = marker(tenant, user)
        found = [i for i in handle.list(filters=ALL, limit=100) if i.content == f"{mark} todo"]
        if not found:
            item = handle.remember(f"{mark} todo", kind="todo")
            found = [item]
        if not handle.messages("s1"):
            handle.add([{"role": "user", "content": f"my secret is {mark}"},
                        {"role": "assistant", "content": "noted"}], "s1", extract=False)
        if not handle.profile_history():
            handle.update_profile(name=mark)
        # a private knowledge-base note of the user's, and the tenant's shared guide
        if "guide" not in {d.id for d in handle.kb.list(private=True)}:
            handle.kb.add_text(f"{mark} note: the user's own router sits in the attic.", doc_id="guide",
                               private=True)
        shared = self.memory.knowledge(agent_id=tenant)
        if "guide" not in {d.id for d in shared.list(private=False)}:
            shared.add_text(f"MARK{tenant}kb guide: hold the reset button for ten seconds.",
                            doc_id="guide")
        self.items[(tenant, user)] = found[0].id
        return found[0].id

    def snapshot(self, tenant: str) -> Any:
        rows = []
        for user in TENANTS[tenant]:
            handle = self.memory.user(user, agent=tenant)
            rows.append((sorted((i.id, i.version, i.status.value) for i in handle.list(filters=ALL)),
                         [m.id for m in handle.messages("s1")],
                         [(s.session_id, s.version) for s in handle.sessions()],
                         len(handle.profile_history())))
        documents = sorted(d.id for d in self.memory.knowledge(agent_id=tenant).list(private=False))
        for user in TENANTS[tenant]:
            documents += sorted(d.id for d in self.memory.user(user, agent=tenant).kb.list(private=True))
        return rows, sorted(k.id for k in self.memory.store.list_keys(tenant) if k.active), documents


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    memory = Memory(f"sqlite:///{tmp_path_factory.mktemp('iso') / 'm.db'}", embedder="hash:256",
                    worker="off")
    with LiveServer(memory) as live:
        w = World(live, memory)
        for tenant, users in TENANTS.items():
            for user in users:
                w.seed(tenant, user)
            for role in ("admin", "app", "read-only"):
                w.keys[(tenant, role)] = live.key(tenant, role)
            w.keys[(tenant, "end-user")] = live.key(tenant, "end-user", user_id="lin")
        yield w
    memory.close()


def test_the_table_covers_every_route(world):
    paths = world.live.app.openapi()["paths"]
    served = {(method.upper(), path) for path, ops in paths.items() for method in ops
              if path.startswith("/v1") and not path.startswith("/v1/chat")}
    assert served == {(spec.method, spec.path) for spec in SPECS.values()}


def _fill(value: Any, mark: str) -> Any:
    if isinstance(value, str):
        return value.replace("{marker}", mark)
    if isinstance(value, list):
        return [_fill(v, mark) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, mark) for k, v in value.items()}
    return value


def _call(world: World, token: str | None, spec: Spec, user: str, item: str | None, key_id: str,
          client: Any = None) -> Any:
    path = spec.path.replace("{user_id}", user).replace("{item_id}", item or "").replace(
        "{key_id}", key_id).replace("{session_id}", "s1").replace("{doc_id}", "guide")
    body = _fill(spec.body, marker(*_owner(world, item)) if item else "x") \
        if spec.body is not None else None
    if client is not None:
        return client.request(spec.method, path, json=body)
    with world.live.client(token) as c:
        return c.request(spec.method, path, json=body)


def _owner(world: World, item: str | None) -> tuple[str, str]:
    return next(k for k, v in world.items.items() if v == item)


CALLERS = [(t, r) for t in TENANTS for r in ("admin", "app", "read-only", "end-user")]


def _expected(world: World, spec: Spec, name: str, role: str, caller_tenant: str, owner_tenant: str,
              user: str, key_id: str) -> int:
    if spec.admin and role != "admin":
        return 403
    if spec.app and role not in ("admin", "app"):
        return 403
    if spec.per_user and role == "end-user" and user != "lin":
        return 403
    if spec.write and role == "read-only":
        return 403
    if spec.item and owner_tenant != caller_tenant:
        return 404  # another tenant's item id, even for the same user id
    if name == "keys.revoke" and world.memory.store.get_key(key_id).tenant != caller_tenant:
        return 404
    return spec.ok


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_endpoint_isolates_tenants_users_and_roles(world, name):
    spec = SPECS[name]
    checked = 0
    for caller_tenant, role in CALLERS:
        other = next(t for t in TENANTS if t != caller_tenant)
        # targets: each user of the caller's tenant, and the other tenant's user of the same id
        # (the other tenant's "lin" shares the id of this tenant's "lin": the hardest case)
        targets = ([(caller_tenant, u) for u in TENANTS[caller_tenant]]
                   + [(other, "lin")]) if spec.per_user else [(caller_tenant, "lin")]
        with world.live.client(world.keys[(caller_tenant, role)]) as client:
            for n, (owner_tenant, user) in enumerate(targets):
                item = world.seed(owner_tenant, user) if spec.item else None
                if spec.reseed:  # the path names the caller's own documents
                    world.seed(caller_tenant, user)
                key_id = world.live.service.keys.create(caller_tenant if n % 2 else other,
                                                        "app").key.id if name == "keys.revoke" else ""
                before = world.snapshot(other) if spec.write or spec.admin else None
                response = _call(world, None, spec, user, item, key_id, client)
                expect = _expected(world, spec, name, role, caller_tenant, owner_tenant, user, key_id)
                assert response.status_code == expect, (name, caller_tenant, role, owner_tenant, user,
                                                        response.text[:300])
                # 0 leaks: nothing of the other tenant, nor of other users for end-user keys
                text = response.text
                for t, users in TENANTS.items():
                    for u in users:
                        if t == caller_tenant and (role != "end-user" or u == "lin"):
                            continue
                        assert marker(t, u) not in text, (name, caller_tenant, role, t, u)
                    if t != caller_tenant:
                        assert f"MARK{t}kb" not in text, (name, caller_tenant, role, t)
                        if world.items[(t, u)] != item:  # a 404 may repeat the id it was sent
                            assert world.items[(t, u)] not in text, (name, caller_tenant, role, t, u)
                if before is not None:
                    assert world.snapshot(other) == before, (name, caller_tenant, role,
                                                             "changed the other tenant")
                if spec.destroys and response.status_code < 300:
                    world.seed(owner_tenant, user)
                if name == "users.forget" and response.status_code < 300 and user == "lin":
                    # forgetting a user revokes their end-user keys (a key acts in its own
                    # tenant, whoever the target): the world needs a new one
                    fresh = world.live.key(caller_tenant, "end-user", user_id="lin")
                    world.keys[(caller_tenant, "end-user")] = fresh
                    if role == "end-user":
                        client.headers["Authorization"] = f"Bearer {fresh}"
                checked += 1
    assert checked >= len(CALLERS)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_endpoint_needs_a_valid_key(world, name):
    spec = SPECS[name]
    made = world.live.service.keys.create("acme", "admin")
    world.live.service.keys.revoke(made.key.id)
    item = world.seed("acme", "lin")
    good = world.keys[("acme", "admin")]
    key_id, _, secret = good.removeprefix("msk_").partition("_")
    for token in (None, "msk_nope", f"msk_{key_id}_{'x' * len(secret)}", made.token, good + "x"):
        response = _call(world, token, spec, "lin", item, made.key.id)
        assert response.status_code == 401, (name, token, response.text[:200])
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error"]["type"] == "AuthenticationError"


def test_x_api_key_header_works_too(world):
    with world.live.client(None, **{"X-API-Key": world.keys[("globex", "read-only")]}) as c:
        assert c.get("/v1/keys/me").json()["tenant"] == "globex"


def test_rate_limit_per_key(world):
    limited = world.live.key("acme", "read-only", rate_limit=3)
    with world.live.client(limited) as c:
        codes = [c.get("/v1/keys/me").status_code for _ in range(4)]
        assert codes[:3] == [200, 200, 200] and codes[3] == 429
        late = c.get("/v1/keys/me")
        assert late.status_code == 429 and 1 <= int(late.headers["retry-after"]) <= 60
        assert late.json()["error"]["type"] == "RateLimitError"
    with world.live.client(world.keys[("acme", "read-only")]) as c:  # another key: its own budget
        assert c.get("/v1/keys/me").status_code == 200


def test_audit_records_every_mutation_with_its_key(world):
    token = world.live.key("acme", "app", name="auditor")
    key_id = token.split("_")[1]
    with world.live.client(token) as c:
        item = c.post("/v1/users/max/items", json={"content": "audited"}).json()
        c.patch(f"/v1/users/max/items/{item['id']}", json={"content": "audited twice"},
                headers={"If-Match": '"7"'})  # a refused attempt is recorded too
        c.get(f"/v1/users/max/items/{item['id']}")  # reads are not
        c.post("/v1/users/max/search", json={"query": "audited"})
    with world.live.client(world.keys[("acme", "read-only")]) as c:
        rows = c.get("/v1/audit", params={"key_id": key_id}).json()["data"]
    assert [(r["action"], r["status"], r["user_id"], r["target"]) for r in rows] == [
        ("items.update", 412, "max", item["id"]), ("items.remember", 201, "max", item["id"])]
    assert all(r["role"] == "app" and r["tenant"] == "acme" and r["request_id"] for r in rows)
    with world.live.client(world.keys[("acme", "admin")]) as c:  # what was made or removed, by id
        made = c.post("/v1/keys", json={"role": "read-only"}).json()["key"]["id"]
        c.post("/v1/kb/documents", json={"doc_id": "audited.md", "content": "An audited guide."})
        c.delete("/v1/kb/documents/audited.md")
        c.post("/v1/users/max/messages", json={"messages": [{"role": "user", "content": "hi"}],
                                               "session_id": "audited"})
        rows = c.get("/v1/audit", params={"key_id": world.keys[("acme", "admin")].split("_")[1]}).json()["data"]
    assert [(r["action"], r["target"]) for r in rows[:4]] == [
        ("messages.add", "audited"), ("kb.remove", "audited.md"), ("kb.add", "audited.md"),
        ("keys.create", made)]
    with world.live.client(world.keys[("acme", "end-user")]) as c:  # an end-user sees its own
        c.post("/v1/users/lin/items", json={"content": "audited for lin"})
        mine = c.get("/v1/audit").json()["data"]
        assert mine and all(r["user_id"] == "lin" for r in mine)
        assert c.get("/v1/audit", params={"user_id": "max"}).status_code == 403
    with world.live.client(world.keys[("globex", "admin")]) as c:
        assert all(r["tenant"] == "globex" for r in c.get("/v1/audit").json()["data"])
