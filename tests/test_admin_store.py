"""The AdminStore seam (API keys, audit log, rate-limit windows) on SQLite and PostgreSQL,
and the key rules of ``memstrata.server.keys``."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from pgserver_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

from memstrata import errors
from memstrata.server.keys import Keys, hash_secret
from memstrata.stores import open_store
from memstrata.stores.base import ApiKey, AuditEntry

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    with open_store(url) as opened:
        yield opened


def test_keys_round_trip_and_revoke(store):
    key = ApiKey("k1", "acme", "end-user", "lin's", "h" * 64, T0, user_id="lin", rate_limit=5,
                 created_by="cli")
    store.put_key(key)
    store.put_key(ApiKey("k2", "globex", "app", "g", "x", T0 + timedelta(seconds=1)))
    assert store.get_key("k1") == key
    assert store.get_key("nope") is None
    assert [k.id for k in store.list_keys()] == ["k1", "k2"]
    assert [k.id for k in store.list_keys("globex")] == ["k2"]
    with pytest.raises(errors.ConflictError):
        store.put_key(key)
    first = store.revoke_key("k1", T0 + timedelta(days=1))
    again = store.revoke_key("k1", T0 + timedelta(days=2))
    assert first.revoked_at == again.revoked_at == T0 + timedelta(days=1)  # the first time stays
    with pytest.raises(errors.NotFoundError):
        store.revoke_key("nope", T0)


def test_audit_log_filters_and_pages(store):
    for n in range(5):
        store.append_audit(AuditEntry(T0 + timedelta(minutes=n), "acme", f"k{n % 2}", "app",
                                      ["items.update", "items.forget", "messages.add"][n % 3],
                                      "POST", f"/p/{n}", 200, user_id="lin" if n < 3 else "max",
                                      target=f"mem_{n}", request_id=f"r{n}"))
    store.append_audit(AuditEntry(T0, "globex", "k9", "admin", "keys.create", "POST", "/v1/keys", 201))
    rows = store.list_audit("acme")
    assert [r.path for r in rows] == ["/p/4", "/p/3", "/p/2", "/p/1", "/p/0"]  # newest first
    assert rows[0].seq > rows[1].seq and rows[-1].request_id == "r0"
    assert [r.path for r in store.list_audit("acme", user_id="max")] == ["/p/4", "/p/3"]
    assert [r.path for r in store.list_audit("acme", key_id="k1")] == ["/p/3", "/p/1"]
    assert [r.action for r in store.list_audit("acme", action="items")] == [
        "items.forget", "items.update", "items.forget", "items.update"]
    assert store.list_audit("acme", action="item") == []  # a prefix is a whole segment
    assert [r.path for r in store.list_audit("acme", since=T0 + timedelta(minutes=3))] == ["/p/4", "/p/3"]
    page = store.list_audit("acme", limit=2)
    rest = store.list_audit("acme", before_seq=page[-1].seq)
    assert [r.path for r in page + rest] == [r.path for r in rows]
    assert [r.tenant for r in store.list_audit("globex")] == ["globex"]


def test_rate_windows_count_atomically(store):
    threads = [threading.Thread(target=lambda: [store.hit_rate("k1", 100) for _ in range(10)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.hit_rate("k1", 100) == 41
    assert store.hit_rate("k2", 100) == 1  # per key
    assert store.hit_rate("k1", 101) == 1  # a new minute starts at one


def test_keys_hash_the_secret_and_check_the_role(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'k.db'}") as store:
        keys = Keys(store)
        made = keys.create("acme", "end-user", user_id="lin", name="inspector")
        secret = made.token.removeprefix("msk_").partition("_")[2]  # the secret may hold "_"
        assert store.get_key(made.key.id).secret_hash == hash_secret(secret)
        assert secret not in (tmp_path / "k.db").read_bytes().decode("latin-1")  # never stored
        assert keys.authenticate(made.token) == made.key
        for bad in ("", None, made.token[:-1] + ("A" if made.token[-1] != "A" else "B"), "msk_" + made.key.id + "_" + "a" * 43, "garbage"):
            with pytest.raises(errors.AuthenticationError):
                keys.authenticate(bad)
        keys.revoke(made.key.id)
        with pytest.raises(errors.AuthenticationError, match="unknown or revoked"):
            keys.authenticate(made.token)
        # a tenant is its users' namespace: the one id rule (memstrata.ids), so "a b" is fine
        for tenant, role, user in (("", "app", None), ("a/b", "app", None), ("..", "app", None),
                                   ("a\x00b", "app", None), ("acme", "root", None),
                                   ("acme", "end-user", None), ("acme", "app", "lin")):
            with pytest.raises(errors.ValidationError):
                keys.create(tenant, role, user_id=user)
