"""The inspector over real HTTP (uvicorn, SQLite): login and the session cookie, every
page and its JSON twin, corrections, undo, feedback, forgetting with its confirmation,
and the security properties — stored markup renders inert, an end-user key reaches
only its own user, state-changing requests need the CSRF token and this site's Origin.
(The same flows in a real Chromium: tests/test_inspector_browser.py.)"""

from __future__ import annotations

import html
import html.parser
import re

import httpx
import pytest
from inspector_fixture import OPEN, close_clients, csrf_of, digest_of, login, seed
from service_fixture import LiveServer

from memstrata import Memory

HOSTILE = ('<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=2"> '
           '<a href="javascript:alert(1)">click</a> </td></tr></table><form action="//evil"><button>'
           'Forget for good</button></form> ＜script＞ &lt;b&gt;')


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    memory = Memory(f"sqlite:///{tmp_path_factory.mktemp('ui') / 'm.db'}", embedder="hash:256")
    with LiveServer(memory) as server:
        yield server
        close_clients()
    memory.close()


@pytest.fixture(scope="module")
def lin(live):
    return seed(live, "acme", "lin", marker=HOSTILE)


@pytest.fixture(scope="module")
def max_(live):
    return seed(live, "acme", "max")


def test_login_sets_an_httponly_strict_cookie_and_never_echoes_the_key(live, lin):
    token = live.key("acme", "end-user", user_id="lin")
    browser = login(live, token)
    cookie = browser.post("/ui/login", data={"key": token}).headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    page = browser.get("/ui/users/lin")
    secret = token.split("_", 2)[2]  # msk_<id>_<secret>; the secret may itself hold "_"
    assert page.status_code == 200 and token not in page.text and secret not in page.text
    assert secret not in cookie
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def test_wrong_key_and_no_session_are_refused(live):
    anon = httpx.Client(base_url=live.url, follow_redirects=False)
    OPEN.append(anon)
    assert anon.get("/ui/users/lin").headers["location"].startswith("/ui/login")
    assert anon.get("/ui/users/lin?format=json").status_code == 401
    r = anon.post("/ui/login", data={"key": "msk_0123456789abcdef_" + "x" * 30})
    assert r.status_code == 401 and "unknown or revoked" in r.text
    anon.cookies.set("memstrata_ui", "deadbeefdeadbeef.99999999999.nonce.forged", path="/ui")
    assert anon.get("/ui/users/lin?format=json").status_code == 401


def test_a_revoked_key_ends_its_browser_sessions(live, lin):
    made = live.service.keys.create("acme", "app")
    browser = login(live, made.token)
    assert browser.get("/ui/users/lin?format=json").status_code == 200
    live.service.keys.revoke(made.key.id)
    assert browser.get("/ui/users/lin?format=json").status_code == 401


def test_stored_markup_renders_as_text(live, lin):
    browser = login(live, live.key("acme", "app"))
    for path in ("/ui/users/lin", "/ui/users/lin/items", f"/ui/users/lin/items/{lin.item['id']}",
                 f"/ui/users/lin/items/{lin.item['id']}/forget",
                 "/ui/users/lin/search?q=" + "Java", "/ui/users/lin/items?layer=episodic&text=Java"):
        page = browser.get(path)
        assert page.status_code == 200, path
        body = page.text
        for raw in ("<script>window.__pwned", "<img src=x", 'href="javascript:', '<form action="//evil"'):
            assert raw not in body, (path, raw)
        if "Works mostly" in body:
            assert html.escape("<script>window.__pwned=1</script>", quote=False) in body or \
                "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in body
    # the only scripts on any page are the inspector's own file
    page = browser.get(f"/ui/users/lin/items/{lin.item['id']}").text
    assert page.count("<script") == 1 and '<script src="/ui/static/inspector.js" defer>' in page


def test_an_end_user_key_reaches_only_its_own_user(live, lin, max_):
    browser = login(live, live.key("acme", "end-user", user_id="lin"))
    assert browser.get("/ui/users/lin?format=json").json()["user_id"] == "lin"
    for path in ("/ui/users/max", "/ui/users/max/items", f"/ui/users/max/items/{max_.item['id']}",
                 "/ui/users/max/sessions", "/ui/users/max/sessions/s1", "/ui/users/max/search?q=Java",
                 f"/ui/users/max/items/{max_.item['id']}/forget", "/ui/ops"):
        for suffix in ("", "&format=json" if "?" in path else "?format=json"):
            r = browser.get(path + suffix)
            assert r.status_code == 403, (path + suffix, r.status_code)
            assert "Works mostly in Java" not in r.text and max_.item["id"] not in r.text
    # another user's item named under the own user id is not found either
    assert browser.get(f"/ui/users/lin/items/{max_.item['id']}?format=json").status_code == 404
    assert browser.get("/ui/users?format=json").json()["users"] == ["lin"]
    csrf = csrf_of(browser.get("/ui/users/lin").text)
    r = browser.post(f"/ui/users/max/items/{max_.item['id']}/feedback", data={"csrf": csrf, "signal": "down"})
    assert r.status_code == 403
    assert max_.api.get(f"/v1/users/max/items/{max_.item['id']}").json()["version"] == max_.item["version"]
    # the REST API with the same key says the same
    with live.client(live.key("acme", "end-user", user_id="lin")) as rest:
        assert rest.get("/v1/users/max/items").status_code == 403


def test_another_tenant_sees_none_of_it(live, lin):
    browser = login(live, live.key("globex", "admin"))
    assert browser.get("/ui/users?format=json").json()["users"] == []
    assert browser.get(f"/ui/users/lin/items/{lin.item['id']}?format=json").status_code == 404


def test_state_changing_requests_need_the_csrf_token_and_this_origin(live, lin):
    browser = login(live, live.key("acme", "app"))
    other = login(live, live.key("acme", "app"))
    item = lin.api.post("/v1/users/lin/items", json={"content": "Likes green tea"}).json()
    path = f"/ui/users/lin/items/{item['id']}/edit"
    token = csrf_of(browser.get(f"/ui/users/lin/items/{item['id']}").text)
    for data, headers in (({"content": "x"}, {}),                                   # no token
                          ({"content": "x", "csrf": "0" * 40}, {}),                  # a wrong one
                          ({"content": "x", "csrf": csrf_of(other.get("/ui/users").text)}, {}),  # another session's
                          ({"content": "x", "csrf": token}, {"Origin": "https://evil.example"}),
                          ({"content": "x", "csrf": token}, {"Origin": "null"}),
                          ({"content": "x", "csrf": token}, {"Referer": "https://evil.example/page"})):
        r = browser.post(path, data=data, headers=headers)
        assert r.status_code == 403, (data, headers)
    assert lin.api.get(f"/v1/users/lin/items/{item['id']}").json()["version"] == 1
    # the login form too refuses a foreign Origin
    assert browser.post("/ui/login", data={"key": "x"}, headers={"Origin": "https://evil.example"}).status_code == 403
    # a GET changes nothing
    assert browser.get(f"/ui/users/lin/items/{item['id']}/undo").status_code in (404, 405)
    r = browser.post(path, data={"content": "Likes jasmine tea", "csrf": token},
                     headers={"Origin": live.url})
    assert r.status_code == 303
    assert lin.api.get(f"/v1/users/lin/items/{item['id']}").json()["content"] == "Likes jasmine tea"
    # refused and accepted attempts are both in the audit log, under the inspector's names
    with live.client(live.key("acme", "admin")) as admin:
        audit = admin.get("/v1/audit", params={"action": "ui.items"}).json()["data"]
    actions = [(e["action"], e["status"]) for e in audit]
    assert ("ui.items.update", 303) in actions and ("ui.items.update", 403) in actions


def test_correct_undo_feedback_done_through_the_pages(live, lin):
    browser = login(live, live.key("acme", "end-user", user_id="lin"))
    item = lin.api.post("/v1/users/lin/items", json={"content": "Lives in Berlin"}).json()
    base = f"/ui/users/lin/items/{item['id']}"
    token = csrf_of(browser.get(base).text)
    r = browser.post(f"{base}/edit", data={"csrf": token, "content": "Lives in Hamburg",
                                           "expected_version": "1", "reason": "moved in May"})
    assert r.status_code == 303 and "msg=saved_ok" in r.headers["location"]
    got = lin.api.get(f"/v1/users/lin/items/{item['id']}").json()
    assert got["content"] == "Lives in Hamburg" and got["version"] == 2
    history = browser.get(f"{base}?format=json").json()["versions"]
    assert history[-1]["reason"] == "moved in May" and history[-1]["what"] == "op_corrected"
    assert {"op": "ins", "text": "Hamburg"} in history[-1]["changes"][0]["diff"]
    # a stale edit (the page showed version 1) is refused and changes nothing
    r = browser.post(f"{base}/edit", data={"csrf": token, "content": "Lives in Bonn", "expected_version": "1"})
    assert r.status_code == 409
    assert browser.post(f"{base}/undo", data={"csrf": token}).status_code == 303
    assert lin.api.get(f"/v1/users/lin/items/{item['id']}").json()["content"] == "Lives in Berlin"
    before = lin.api.get(f"/v1/users/lin/items/{item['id']}").json()["confidence"]
    assert browser.post(f"{base}/feedback", data={"csrf": token, "signal": "down"}).status_code == 303
    assert lin.api.get(f"/v1/users/lin/items/{item['id']}").json()["confidence"] < before
    todo = f"/ui/users/lin/items/{lin.todo['id']}/complete"
    assert browser.post(todo, data={"csrf": token}).status_code == 303
    assert lin.api.get(f"/v1/users/lin/items/{lin.todo['id']}").json()["status"] == "done"
    # the profile: a field edit is a new version, shown in the overview's history
    r = browser.post("/ui/users/lin/profile", data={"csrf": token, "field": "goals",
                                                    "value": "ship the Go router\nlearn Rust"})
    assert r.status_code == 303
    assert lin.api.get("/v1/users/lin/profile").json()["goals"][:2] == ["ship the Go router", "learn Rust"]
    overview = browser.get("/ui/users/lin?format=json").json()
    assert overview["profile_history"][0]["data"]["goals"] == ["ship the Go router", "learn Rust"]
    assert {"op_corrected", "op_feedback", "op_remembered", "op_profile"} <= {e["what"] for e in overview["timeline"]}


def test_forgetting_shows_exactly_what_goes_then_erases_it(live):
    made = seed(live, "acme", "zoe")
    browser = login(live, live.key("acme", "app"))
    source = next((i for i in made.extracted if i["source_message_ids"]), None)
    assert source is not None, "the rule extractor made no item from the seeded turns"
    created = browser.get(f"/ui/users/zoe/items/{source['id']}?format=json").json()["versions"][0]
    assert created["what"] == "op_extracted" and created["path"] == "rule"
    assert created["sources"] == {"session_id": "s1", "message_ids": created["after"]["source_message_ids"]}
    assert f"/ui/users/zoe/sessions/s1#m-{created['sources']['message_ids'][0]}" in \
        browser.get(f"/ui/users/zoe/items/{source['id']}").text
    page = browser.get(f"/ui/users/zoe/items/{source['id']}/forget?turns=1")
    plan = browser.get(f"/ui/users/zoe/items/{source['id']}/forget?turns=1&format=json").json()
    assert [i["id"] for i in plan["items"]] == [source["id"]]
    assert {t["id"] for t in plan["turns"]} == set(source["source_message_ids"])
    assert [s["session_id"] for s in plan["summaries"]] in ([], ["s1"])
    token, digest = csrf_of(page.text), digest_of(page.text)
    # a plan that changed since the confirmation (here: without the turns) is refused
    r = browser.post(f"/ui/users/zoe/items/{source['id']}/forget", data={"csrf": token, "digest": digest, "turns": "0"})
    assert r.status_code == 409
    assert made.api.get(f"/v1/users/zoe/items/{source['id']}").status_code == 200
    r = browser.post(f"/ui/users/zoe/items/{source['id']}/forget", data={"csrf": token, "digest": digest, "turns": "1"})
    assert r.status_code == 303
    assert made.api.get(f"/v1/users/zoe/items/{source['id']}").status_code == 404
    left = {m["id"] for m in made.api.get("/v1/users/zoe/sessions/s1/messages").json()["data"]}
    assert not left & set(source["source_message_ids"]) and left
    hits = made.api.post("/v1/users/zoe/search", json={"query": source["content"], "k": 20}).json()["hits"]
    assert source["id"] not in {h["id"] for h in hits}
    # the timeline keeps the fact (not the content) that something was forgotten
    timeline = browser.get("/ui/users/zoe?format=json").json()["timeline"]
    assert any(e["op"] == "forget" and e["item_id"] == source["id"] for e in timeline)
    # then the session's turns, with the items extracted from them
    plan = browser.get("/ui/users/zoe/sessions/s1/forget?items=1&format=json").json()
    assert {t["id"] for t in plan["turns"]} == left
    page = browser.get("/ui/users/zoe/sessions/s1/forget?items=1").text
    r = browser.post("/ui/users/zoe/sessions/s1/forget", data={"csrf": csrf_of(page), "digest": digest_of(page),
                                                               "items": "1"})
    assert r.status_code == 303
    assert made.api.get("/v1/users/zoe/sessions/s1/messages").json()["data"] == []
    state = made.api.get("/v1/users/zoe/sessions/s1").json()
    assert state["summary"] is None or not any(state["summary"][p] for p in
                                               ("goal", "decisions", "done", "open_questions", "constraints"))
    for gone in plan["items"]:
        assert made.api.get(f"/v1/users/zoe/items/{gone['id']}").status_code == 404
    hits = made.api.post("/v1/users/zoe/search", json={"query": "Postgres routing Java Go", "k": 20}).json()["hits"]
    assert not [h for h in hits if h["layer"] == "episodic"]


def test_language_follows_the_browser_then_the_switch(live, lin):
    token = live.key("acme", "app")
    zh = login(live, token, **{"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})
    assert "核心画像" in zh.get("/ui/users/lin").text
    en = login(live, token, **{"Accept-Language": "en-US,en;q=0.9,zh;q=0.5"})
    assert "Core profile" in en.get("/ui/users/lin").text
    r = en.get("/ui/lang", params={"to": "zh", "next": "/ui/users/lin"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/users/lin"
    assert "核心画像" in en.get("/ui/users/lin").text
    assert en.get("/ui/lang", params={"to": "zh", "next": "https://evil.example/"}).headers["location"] == "/ui/"


def test_sessions_and_search_pages_and_their_json_twins(live, lin):
    browser = login(live, live.key("acme", "app"))
    session = browser.get("/ui/users/lin/sessions/s1?format=json").json()
    assert [m["role"] for m in session["messages"]] == ["user", "assistant", "tool", "user"]
    assert session["messages"][1]["tool_calls"][0]["function"]["name"] == "search_docs"
    page = browser.get("/ui/users/lin/sessions/s1").text
    assert "search_docs" in page and "call_1" in page
    found = browser.get("/ui/users/lin/search", params={"q": "last time, which language did I switch to?",
                                                        "format": "json"}).json()
    assert found["hits"] and found["context"]["report"]["recall"] == "deep"
    assert {"similarity", "dense", "lexical", "recency"} <= set(found["hits"][0]["parts"])
    kept = set(found["context"]["report"]["kept_ids"])
    for hit in found["hits"]:
        assert (hit["why"]["verdict"] == "kept") == (hit["id"] in kept)
    report = found["context"]["report"]
    assert 0 < report["tokens"] <= found["budget"] and report["layers"]["memories"] > 0


def test_every_word_the_templates_use_exists_in_both_languages():
    import re
    from pathlib import Path

    from memstrata.server.ui.i18n import WORDS
    from memstrata.server.ui.views import version_label

    used = set()
    for path in Path(__file__).resolve().parent.parent.joinpath("memstrata/server/ui/templates").glob("*.html"):
        used |= set(re.findall(r"\bt\('([a-z_]+)'\)", path.read_text()))
    assert used and used <= set(WORDS), sorted(used - set(WORDS))
    for op in ("create", "edit", "feedback", "status", "undo", "boost", "supersede", "delete"):
        assert version_label(op, "api") in WORDS
    assert all(en.strip() and zh.strip() and en != zh for en, zh in WORDS.values())


def test_every_value_the_pages_show_has_both_languages():
    from memstrata.layers.semantic.profiles import PROFILE_FIELDS
    from memstrata.server.ui import views
    from memstrata.server.ui.i18n import WORDS, value_translator
    from memstrata.sessions import STATUSES
    from memstrata.stores.base import ROLES
    from memstrata.types import Kind, Layer, Role, Status

    groups = {"kind": [k.value for k in Kind], "status": [s.value for s in Status],
              "layer": [x.value for x in Layer], "role": [r.value for r in Role],
              "session": list(STATUSES), "keyrole": list(ROLES), "field": list(PROFILE_FIELDS),
              "recall": ["auto", "light", "deep"], "job": ["pending", "running", "done", "failed"],
              "jobkind": ["extract", "maintain", "profile", "summarise", "consolidate"],
              "itemfield": list(views._SHOWN),
              "ctx": ["system", "profile", "summary", "memories", "knowledge", "recent"],
              "summary": ["goal", "decisions", "done", "open_questions", "constraints"]}
    missing = [f"{g}.{v}" for g, values in groups.items() for v in values if f"{g}.{v}" not in WORDS]
    assert not missing, missing
    v = value_translator("zh")
    assert (v("kind", "fact"), v("status", "active"), v("field", "current")) == ("事实", "有效", "正在做的事")
    assert v("kind", "Works <b>") == "Works <b>" and v("kind", None) == ""  # stored text as it is


class _Text(html.parser.HTMLParser):
    """The words a person sees: text outside code, pre and textarea, and the labels
    screen readers read (aria-label, placeholder)."""

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("code", "pre", "textarea", "script", "style"):
            self._skip += 1
        self.words += [value for name, value in attrs if name in ("aria-label", "placeholder") and value]

    def handle_endtag(self, tag):
        if tag in ("code", "pre", "textarea", "script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.words.append(data.strip())


def test_the_chinese_pages_show_no_english_labels(live):
    import re

    from memstrata.server.ui.i18n import WORDS

    made = seed(live, "zh-check", "max")  # a tenant of its own: its document is not acme's
    assert made.api.post("/v1/kb/documents", json={"doc_id": "zh-check.md", "title": "Check",
                                                    "content": "# One\n\nA line."}).status_code == 201
    admin = login(live, live.key("zh-check", "admin"), **{"Accept-Language": "zh-CN,zh;q=0.9"})
    english = {en for en, _ in WORDS.values()} | {key.partition(".")[2] for key in WORDS if "." in key}
    english |= {"id", "title", "source", "format", "last reviewed", "heading", "purpose", "failures",
                "n", "attempts", "error / result", "target", "writes", "k", "people", "pages",
                "subject · attribute · value"}
    english -= {"English"}  # the language switch names each language in itself
    item = made.item["id"]
    pages = ["/ui/users", "/ui/users/max/about", "/ui/users/max", "/ui/users/max/items",
             "/ui/users/max/items?layer=episodic", f"/ui/users/max/items/{item}",
             f"/ui/users/max/items/{item}/forget", "/ui/users/max/search?q=Go", "/ui/users/max/sessions",
             "/ui/users/max/sessions/s1", "/ui/users/max/sessions/s1/forget", "/ui/kb",
             "/ui/kb/zh-check.md", "/ui/ops"]
    left: dict[str, list[str]] = {}
    for path in pages:
        page = admin.get(path)
        assert page.status_code == 200, (path, page.status_code)
        assert '<html lang="zh-CN">' in page.text
        parser = _Text()
        parser.feed(page.text)
        words = {re.sub(r"\s*\(\d+\)$|[:：]$", "", w).strip() for w in parser.words}
        if found := sorted(words & english):
            left[path] = found
    assert left == {}, left


def test_operations_and_knowledge_pages(live, lin):
    from datetime import timedelta

    from memstrata.types import Scope, UsageRecord, utcnow

    store = live.memory.store
    now = utcnow()
    for hours, tokens in ((3, 120), (1, 80), (1, 40), (0, 10)):
        store.record_llm_usage(Scope("lin", "acme"), UsageRecord(now - timedelta(hours=hours), "test:model",
                                                                 "extract", tokens, 5, 0.25))
    admin = login(live, live.key("acme", "admin"))
    ops = admin.get("/ui/ops?format=json").json()
    calls = [p["value"] for p in ops["series"]["calls"]]
    assert sum(calls) == 4 and calls[-2] == 2 and len(calls) == 24
    tokens = [p["value"] for p in ops["series"]["tokens"]]
    assert tokens[-1] == 15 and tokens[-2] == 130
    assert ops["usage"]["calls"]["extract"]["calls"] == 4
    assert any(o["kind"] == "extract" and o["status"] == "done" for o in ops["jobs"]["outcomes"])
    assert ops["audit"] and all(e["tenant"] == "acme" for e in ops["audit"])
    page = admin.get("/ui/ops").text
    assert page.count('<svg class="chart"') == 3 and "<desc>" in page
    # app and end-user keys: no operations page
    assert login(live, live.key("acme", "app")).get("/ui/ops?format=json").status_code == 403
    # the knowledge base: documents, chunks and their usage
    with live.client(live.key("acme", "app")) as app:
        r = app.post("/v1/kb/documents", json={"doc_id": "returns.md", "title": "Returns <b>policy</b>",
                                               "content": "# Returns\n\nReturns are free within 30 days. "
                                                          "退货运费由我们承担。"})
        assert r.status_code == 201, r.text
    kb = admin.get("/ui/kb?format=json").json()
    assert [d["id"] for d in kb["documents"]] == ["returns.md"]
    doc = admin.get("/ui/kb/returns.md?format=json").json()
    assert doc["chunks"] and {"recalled", "used"} <= set(doc["chunks"][0])
    assert "Returns &lt;b&gt;policy&lt;/b&gt;" in admin.get("/ui/kb").text
    user_view = login(live, live.key("acme", "end-user", user_id="lin")).get("/ui/kb?user=lin&format=json")
    assert user_view.status_code == 200 and [d["id"] for d in user_view.json()["documents"]] == ["returns.md"]


def test_the_rest_twins_of_forgetting_and_the_timeline(live):
    made = seed(live, "acme", "ida")
    api = made.api
    plan = api.get("/v1/users/ida/sessions/s1/erasure", params={"items": True}).json()
    assert len(plan["turns"]) == 4 and plan["items"] and plan["with_items"]
    with live.client(live.key("acme", "read-only")) as reader:  # may look, may not erase
        assert reader.get("/v1/users/ida/sessions/s1/erasure").status_code == 200
        assert reader.delete("/v1/users/ida/sessions/s1/messages").status_code == 403
    api.post("/v1/users/ida/messages", json={"messages": [{"role": "user", "content": "one more"}],
                                             "session_id": "s1", "extract": False})
    r = api.delete("/v1/users/ida/sessions/s1/messages", params={"items": True, "digest": plan["digest"]})
    assert r.status_code == 409  # a turn arrived since the list was shown: nothing erased
    assert len(api.get("/v1/users/ida/sessions/s1/messages").json()["data"]) == 5
    plan = api.get("/v1/users/ida/sessions/s1/erasure", params={"items": True}).json()
    r = api.delete("/v1/users/ida/sessions/s1/messages", params={"items": True, "digest": plan["digest"]})
    assert r.status_code == 200 and r.json() == {"items": len(plan["items"]), "turns": 5,
                                                 "summaries": len(plan["summaries"]),
                                                 "shrunk": len(plan["shrunk"])}
    assert api.get("/v1/users/ida/sessions/s1/messages").json()["data"] == []
    left = {i["id"] for i in api.get("/v1/users/ida/items", params={"status": ["active", "done"]}).json()["data"]}
    assert not left & {i["id"] for i in plan["items"]} and made.item["id"] in left  # not from s1
    timeline = api.get("/v1/users/ida/timeline").json()["data"]
    assert timeline[0]["op"] == "forget" and timeline[0]["reason"] == "sessions.forget"
    preview = api.get(f"/v1/users/ida/items/{made.item['id']}/erasure").json()
    assert [i["id"] for i in preview["items"]] == [made.item["id"]] and preview["turns"] == []


def _ui_routes():
    from memstrata.server.ui import ops, pages

    out = [(m, r.path) for r in pages.router.routes if hasattr(r, "methods") for m in r.methods]
    return out + [(m, "/ui" + r.path) for r in ops.router.routes for m in r.methods]


PUBLIC = {("GET", "/ui/static/{name}"), ("GET", "/ui/login"), ("POST", "/ui/login"), ("GET", "/ui/lang")}


def test_every_inspector_route_needs_a_session_and_keeps_end_users_apart(live, lin, max_):
    routes = _ui_routes()
    assert len(routes) >= 25
    end_user = login(live, live.key("acme", "end-user", user_id="lin"))
    reader = login(live, live.key("acme", "read-only"))
    anon = httpx.Client(base_url=live.url, follow_redirects=False)
    OPEN.append(anon)
    csrf = {c: csrf_of(c.get("/ui/users/lin").text) for c in (end_user, reader)}

    def snapshot():
        return (sorted((i["id"], i["version"], i["status"]) for i in max_.api.get(
                    "/v1/users/max/items", params={"status": ["active", "superseded", "inactive", "done"]}
                ).json()["data"]),
                [m["id"] for m in max_.api.get("/v1/users/max/sessions/s1/messages").json()["data"]],
                len(max_.api.get("/v1/users/max/profile/history").json()))

    before = snapshot()
    for method, template in routes:
        path = (template.replace("{user_id}", "max").replace("{item_id}", max_.item["id"])
                .replace("{session_id}", "s1").replace("{name}", "inspector.css").replace("{doc_id}", "none"))
        if (method, template) in PUBLIC:
            continue
        r = anon.request(method, path, params={"format": "json"})
        assert r.status_code == 401, (method, template, r.status_code)
        if method == "GET":
            assert anon.get(path).headers["location"].startswith("/ui/login"), template
        if "{user_id}" in template:
            data = {"csrf": csrf[end_user], "signal": "down", "content": "hijacked", "field": "name",
                    "value": "hijacked", "digest": "x"}
            r = end_user.request(method, path, data=data if method == "POST" else None)
            assert r.status_code == 403, (method, template, r.status_code)
            assert "hijacked" not in r.text and "Works mostly in Java" not in r.text
        if method == "POST" and "{user_id}" in template:
            path = path.replace("/users/max", "/users/lin").replace(max_.item["id"], lin.item["id"])
            r = reader.post(path, data={"csrf": csrf[reader], "signal": "down", "field": "name", "value": "x"})
            assert r.status_code == 403, ("read-only", template, r.status_code)
    assert snapshot() == before


def test_summary_versions_on_the_session_page_and_forgotten_with_the_turns(live):
    with live.client(live.key("acme", "app")) as api:
        for batch in range(2):
            turns = [{"role": "user", "content": f"I want a quiet hotel {batch}-{i}. I decided on Kyoto."}
                     for i in range(6)]
            assert api.post("/v1/users/eve/messages", json={"messages": turns, "session_id": "trip",
                                                            "extract": False}).status_code == 201
        assert api.post("/v1/users/eve/sessions/trip/archive").status_code == 200
        rest = api.get("/v1/users/eve/sessions/trip/summaries").json()["data"]
        assert [(v["version"], v["range_start"], v["range_end"]) for v in rest] == [(1, 0, 12)]
        browser = login(live, live.key("acme", "end-user", user_id="eve"))
        page = browser.get("/ui/users/eve/sessions/trip?format=json").json()
        assert page["summary_versions"] == list(reversed(rest))
        assert "v1" in browser.get("/ui/users/eve/sessions/trip").text
        plan = api.get("/v1/users/eve/sessions/trip/erasure").json()
        assert [s["session_id"] for s in plan["summaries"]] == ["trip"]
        assert api.delete("/v1/users/eve/sessions/trip/messages", params={"digest": plan["digest"]}).json() \
            == {"items": 0, "turns": 12, "summaries": 1, "shrunk": 0}
        assert api.get("/v1/users/eve/sessions/trip/summaries").json()["data"] == []
        assert api.get("/v1/users/eve/sessions/trip").json()["summary"]["goal"] == ""


class _Links(html.parser.HTMLParser):
    """The hrefs of a page's links."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")


def _links(page: str) -> list[str]:
    parser = _Links()
    parser.feed(page)
    return parser.hrefs


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_person_sees_their_page_and_an_operator_the_engineering_links(live, lin, lang):
    token = live.key("acme", "end-user", user_id="lin")
    key_id = token.split("_")[1]
    person = login(live, token)
    operator = login(live, live.key("acme", "app"))
    for c in (person, operator):
        c.cookies.set("lang", lang, path="/ui")
    mine = person.get("/ui/users/lin/about")
    theirs = operator.get("/ui/users/lin/about")
    assert mine.status_code == theirs.status_code == 200
    # the person: their page, the language switch, who is signed in, log out — nothing else
    assert [h for h in _links(mine.text) if not h.startswith(("/ui/lang", "#"))] == \
        ["/ui/", "/ui/users/lin/about"] + [f"/ui/users/lin/items/{i}/forget" for i in
                                           re.findall(r'<li id="m-([^"]+)"', mine.text)]
    signed_in, only_you = {"en": ("Signed in as lin", "Only someone signed in with your key"),
                           "zh": ("已登录：lin", "只有用你的密钥登录的人")}[lang]
    assert signed_in in mine.text and only_you in mine.text and ">Details<" not in mine.text
    for operator_word in ("REST", "JSON", "/v1/users", key_id, {"en": "Overview", "zh": "概览"}[lang],
                          {"en": "Engineering details", "zh": "技术细节"}[lang], "format=json"):
        assert operator_word not in mine.text, operator_word
    # an operator: the same page with the engineering pages one click away
    hrefs = _links(theirs.text)
    for link in ("/ui/users", "/ui/users/lin", "/ui/users/lin/items", "/ui/users/lin/search",
                 "/ui/users/lin/sessions", "/ui/kb?user=lin", "/ui/users/lin/about?format=json"):
        assert link in hrefs, link
    assert f"/ui/users/lin/items/{lin.item['id']}" in hrefs  # Details
    assert "GET /v1/users/lin/items" in theirs.text and only_you not in theirs.text
    assert {"en": "Signed in with key", "zh": "当前密钥"}[lang] in theirs.text


def test_the_person_page_says_what_each_action_does_and_who_saved_what(live, lin):
    person = login(live, live.key("acme", "end-user", user_id="lin"))
    saved = lin.api.post("/v1/users/lin/items", json={"content": "Book the dentist", "kind": "todo"}).json()
    page = person.get("/ui/users/lin/about").text
    # who saved it: the todo came from the app, not from something the person said
    todo = page[page.index(f'id="m-{saved["id"]}"'):]
    assert "Your assistant saved this on " in todo[:todo.index("</li>")]
    assert "Saved for you" not in page
    # "This is right" says what it does, on the page and on the button
    assert "“This is right” tells me it is true, so I am surer of it" in page
    assert 'title="Tells me this is true, so I am surer of it" aria-describedby="about-intro"' in page
    # "Correct it" is drawn as a button (a <summary>: focusable, Enter and Space open it)
    assert '<summary class="button">Correct it</summary>' in page
    person.cookies.set("lang", "zh", path="/ui")
    zh = person.get("/ui/users/lin/about").text
    assert "你的助手在" in zh and "记下的" in zh and "“没错”告诉我它是真的，我会更确信它" in zh
    # what it does: the confidence rises, and the page thanks the person in those words
    item = lin.api.post("/v1/users/lin/items", json={"content": "User lives in Berlin"}).json()
    token = csrf_of(page)
    r = person.post(f"/ui/users/lin/items/{item['id']}/feedback",
                    data={"csrf": token, "signal": "up", "next": "/ui/users/lin/about"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/users/lin/about?msg=confirmed_ok"
    assert lin.api.get(f"/v1/users/lin/items/{item['id']}").json()["confidence"] > item["confidence"]
    assert "谢谢，我现在更确信这一条了。" in person.get(r.headers["location"]).text
    # forgetting from the person's page brings the person back to it, not to the items table
    plan = person.get(f"/ui/users/lin/items/{item['id']}/forget").text
    assert 'href="/ui/users/lin/about"' in plan
    r = person.post(f"/ui/users/lin/items/{item['id']}/forget", data={"csrf": token, "digest": digest_of(plan)})
    assert r.status_code == 303 and r.headers["location"] == "/ui/users/lin/about?msg=forgotten_ok"


@pytest.mark.parametrize(("said", "stored"), [
    ("You live in Porto", "User lives in Porto"),
    ("I live in Porto", "User lives in Porto"),
    ("Your sister Mia works at a bakery", "User's sister Mia works at a bakery"),
    ("My sister Mia works at a bakery", "User's sister Mia works at a bakery"),
    ("You are allergic to peanuts", "User is allergic to peanuts"),
    ("I'm allergic to peanuts", "User is allergic to peanuts"),
    ("You want short, concise answers", "User wants short, concise answers"),
    ("You often go to Porto", "User often goes to Porto"),
    ("You study law", "User studies law"),
    ("You watch films", "User watches films"),
    ("You play chess", "User plays chess"),
    ("You have two cats", "User has two cats"),
    ("You don't eat meat", "User doesn't eat meat"),
    ("You moved to Lisbon", "User moved to Lisbon"),
    ("You can swim", "User can swim"),
    ("Mia is your sister", "Mia is the user's sister"),
    ("Renew the passport before June", "Renew the passport before June"),
    ("你住在波尔图", "用户住在波尔图"),
    ("我住在波尔图", "用户住在波尔图"),
    ("你的妹妹小米在面包店工作", "用户的妹妹小米在面包店工作"),
    ("你对花生过敏", "用户对花生过敏"),
    ("我们下周去京都", "我们下周去京都"),  # "we": not the person alone
    ("六月前续签护照", "六月前续签护照"),
])
def test_a_correction_written_to_the_person_is_stored_as_memories_are(said, stored):
    from memstrata.server.ui.views import second_person, third_person

    assert third_person(said) == stored
    if stored != said and not said.startswith(("I", "My", "我")):
        assert second_person(stored) == said  # and shown back the way it was written


def test_the_correction_box_holds_the_sentence_and_saves_the_stored_form(live, lin):
    person = login(live, live.key("acme", "end-user", user_id="lin"))
    made = {text: lin.api.post("/v1/users/lin/items", json={"content": text}).json()
            for text in ("User lives in Bremen", "用户对花生过敏", "The user lives in Kiel")}
    page = person.get("/ui/users/lin/about").text

    def box(item_id: str) -> str:
        line = page[page.index(f'id="m-{item_id}"'):]
        return line[:line.index("</li>")]

    bremen, peanuts, kiel = (box(made[t]["id"]) for t in made)
    assert ">You live in Bremen</textarea>" in bremen and 'name="voice" value="you"' in bremen
    assert ">你对花生过敏</textarea>" in peanuts and 'name="voice" value="you"' in peanuts
    # "The user …" would come back as "User …": the box keeps the stored words, as stored
    assert ">The user lives in Kiel</textarea>" in kiel and 'name="voice"' not in kiel
    token = csrf_of(page)
    for text, written, kept in (("User lives in Bremen", "You live in Hamburg", "User lives in Hamburg"),
                                ("用户对花生过敏", "我对芝麻过敏", "用户对芝麻过敏")):
        item = made[text]
        r = person.post(f"/ui/users/lin/items/{item['id']}/edit",
                        data={"csrf": token, "voice": "you", "content": written, "expected_version": "1",
                              "next": "/ui/users/lin/about"})
        assert r.status_code == 303, r.text
        assert lin.api.get(f"/v1/users/lin/items/{item['id']}").json()["content"] == kept
    # unchanged words save nothing (no new version)
    r = person.post(f"/ui/users/lin/items/{made['User lives in Bremen']['id']}/edit",
                    data={"csrf": token, "voice": "you", "content": "You live in Hamburg"})
    assert lin.api.get(f"/v1/users/lin/items/{made['User lives in Bremen']['id']}").json()["version"] == 2
    with live.client(live.key("acme", "app")) as api:
        for item in made.values():
            api.delete(f"/v1/users/lin/items/{item['id']}")


UNAVAILABLE = (("en", "The service is unavailable"), ("zh", "服务暂时不可用"))


def _break_table(path, table: str) -> None:
    """The store breaks under the running service: a table it reads is gone."""
    import sqlite3

    con = sqlite3.connect(path)
    con.execute(f"ALTER TABLE {table} RENAME TO {table}_gone")
    con.commit()
    con.close()


def test_a_store_failure_at_login_says_the_service_is_unavailable(tmp_path, caplog):
    """A visitor who is not signed in learns nothing of the store: before, the login form
    showed the database's own words ("no such table: api_keys"); a browser still holding a
    session cookie got them on an error page. The details are in the log."""
    path = tmp_path / "m.db"
    memory = Memory(f"sqlite:///{path}", embedder="hash:256")
    with LiveServer(memory) as server, caplog.at_level("ERROR", "memstrata.server"):
        token = server.key("acme", "app")
        _break_table(path, "api_keys")
        anon = httpx.Client(base_url=server.url, follow_redirects=False)
        OPEN.append(anon)
        stale = "memstrata_ui=0123456789abcdef.9999999999.nonce.0123abcd"
        for lang, words in UNAVAILABLE:
            r = anon.post("/ui/login", data={"key": token}, headers={"accept-language": lang})
            assert r.status_code == 503 and words in r.text, r.text
            assert "api_keys" not in r.text and "no such table" not in r.text
            for page in ("/ui/users", "/ui/users?format=json"):
                r = anon.get(page, headers={"accept-language": lang, "cookie": stale})
                assert r.status_code == 503 and words in r.text, r.text
                assert "api_keys" not in r.text and "no such table" not in r.text
        assert any("no such table: api_keys" in r.getMessage() for r in caplog.records)
    memory.close()


def test_a_store_failure_after_the_key_is_checked_says_the_service_is_unavailable(tmp_path):
    """The key is good but the session cannot be opened (the cookie secret is in the meta
    table): the same words, not the store's."""
    path = tmp_path / "m.db"
    memory = Memory(f"sqlite:///{path}", embedder="hash:256")
    with LiveServer(memory) as server:
        token = server.key("acme", "app")
        _break_table(path, "meta")
        anon = httpx.Client(base_url=server.url, follow_redirects=False)
        OPEN.append(anon)
        for lang, words in UNAVAILABLE:
            r = anon.post("/ui/login", data={"key": token}, headers={"accept-language": lang})
            assert r.status_code == 503 and words in r.text, r.text
            assert "meta" not in r.text.replace('<meta ', '') and "no such table" not in r.text
    memory.close()
