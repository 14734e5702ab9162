"""The inspector in a real Chromium (Debian's ``chromium`` driven by Playwright): a person
logs in with their end-user key, corrects a memory, undoes it, gives feedback, forgets
an item and then a session's turns, switches the language — and every effect is checked
through the REST API. Also: stored markup stays inert in the browser, a page of another
origin cannot make the browser change memory, and everything works from the keyboard.

``.ci/run`` installs Chromium when it is missing; elsewhere the module skips, saying why
(on CI, ``CI=true``, a missing browser fails instead). With ``MEMSTRATA_SCREENSHOTS=1``
the screenshots of docs/inspector.md are written to ``docs/images/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from inspector_fixture import OPEN, close_clients, seed
from browser_fixture import chromium_or_skip
from service_fixture import LiveServer, serve_asgi

from memstrata import Memory

CHROMIUM = chromium_or_skip()
DOCS = Path(__file__).resolve().parent.parent / "docs" / "images"
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed "
                                                             "(pip install -e '.[dev]')")

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> 看起来像按钮'


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    memory = Memory(f"sqlite:///{tmp_path_factory.mktemp('ui-browser') / 'm.db'}", embedder="hash:256")
    with LiveServer(memory) as server:
        yield server
        close_clients()
    memory.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _page(browser, locale: str = "en-US"):
    context = browser.new_context(locale=locale, viewport={"width": 1200, "height": 900})
    context.set_default_timeout(10_000)
    return context, context.new_page()


def _shot(page, name: str, tmp_path: Path) -> None:
    target = DOCS if os.environ.get("MEMSTRATA_SCREENSHOTS") else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"inspector-{name}.png"), full_page=False)


def _login(page, live, token: str) -> None:
    page.goto(f"{live.url}/ui/login")
    page.fill("#key", token)
    page.keyboard.press("Enter")
    page.wait_for_url("**/ui/users**")


def test_a_person_corrects_undoes_rates_and_forgets(live, browser, tmp_path):
    made = seed(live, "acme", "lin")
    api = made.api
    item = made.item
    context, page = _page(browser)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _login(page, live, live.key("acme", "end-user", user_id="lin"))
    assert page.url.endswith("/ui/users/lin/about")  # the person's own page first
    assert page.get_by_role("link", name="Overview", exact=True).count() == 0  # no operator pages
    # the engineering pages, as an operator (a tenant key) reaches them
    context.clear_cookies()
    _login(page, live, live.key("acme", "app"))
    page.goto(f"{live.url}/ui/users/lin/about")
    page.get_by_role("link", name="Engineering details: versions, rules, scores").click()
    assert page.url.endswith("/ui/users/lin")
    page.get_by_role("link", name="Overview", exact=True).click()
    assert page.locator("h1").inner_text().startswith("Overview")
    assert page.locator("td[data-kind='todo']").inner_text() == "1"
    _shot(page, "overview-en", tmp_path)

    # correct an item
    page.get_by_role("link", name="Items", exact=True).click()
    page.get_by_role("link", name=item["content"]).click()
    page.fill("#e-content", "Works mostly in Go")
    page.fill("#e-reason", "switched last month")
    page.click("#save-edit")
    page.wait_for_selector(".flash")
    got = api.get(f"/v1/users/lin/items/{item['id']}").json()
    assert (got["content"], got["version"]) == ("Works mostly in Go", 2)
    assert page.locator(".versions ins").first.inner_text() == "Go"
    _shot(page, "item-en", tmp_path)

    # undo it
    page.click("#undo")
    page.wait_for_selector(".flash")
    assert api.get(f"/v1/users/lin/items/{item['id']}").json()["content"] == item["content"]
    assert page.locator("#item-content").inner_text() == item["content"]

    # feedback
    before = api.get(f"/v1/users/lin/items/{item['id']}").json()["confidence"]
    page.click("#thumbs-down")
    page.wait_for_selector(".flash")
    assert api.get(f"/v1/users/lin/items/{item['id']}").json()["confidence"] < before

    # forget an extracted item with its source turns: the confirmation lists them first
    source = next(i for i in made.extracted if i["source_message_ids"])
    page.goto(f"{live.url}/ui/users/lin/items/{source['id']}")
    page.click("#forget")
    assert page.locator("#erase-items li").count() == 1
    page.get_by_label("Also the conversation turns it came from").check()  # the script re-asks
    page.wait_for_url("**turns=1**")
    listed = set(page.locator("#erase-turns li").evaluate_all("els => els.map(e => e.dataset.id)"))
    assert listed == set(source["source_message_ids"])
    _shot(page, "forget-en", tmp_path)
    page.click("#confirm-forget")
    page.wait_for_selector(".flash")
    assert api.get(f"/v1/users/lin/items/{source['id']}").status_code == 404
    left = [m["id"] for m in api.get("/v1/users/lin/sessions/s1/messages").json()["data"]]
    assert left and not set(left) & listed

    # then the rest of the session's turns
    page.get_by_role("link", name="Sessions", exact=True).click()
    page.get_by_role("link", name="s1").click()
    assert page.locator(".tool").first.inner_text().startswith("tool call")
    _shot(page, "session-en", tmp_path)
    page.click("#forget-session")
    assert page.locator("#erase-turns li").count() == len(left)
    page.click("#confirm-forget")
    page.wait_for_selector(".flash")
    assert api.get("/v1/users/lin/sessions/s1/messages").json()["data"] == []
    assert page.locator("#session-count").inner_text() == "0"

    # switch the language: the same page, in Chinese, and it stays so
    page.goto(f"{live.url}/ui/users/lin")
    page.click("a[data-lang='zh']")
    page.wait_for_selector("html[lang='zh-CN']")
    assert page.locator("h1").inner_text().startswith("概览")
    assert "记忆条目" in page.locator("header nav").inner_text()
    _shot(page, "overview-zh", tmp_path)
    page.goto(f"{live.url}/ui/users/lin/items/{item['id']}")
    assert page.get_by_role("button", name="撤销上一次改动").is_visible()
    _shot(page, "item-zh", tmp_path)
    assert errors == []
    context.close()


def test_stored_markup_stays_inert_in_the_browser(live, browser):
    made = seed(live, "acme", "max", marker=HOSTILE)
    context, page = _page(browser, "zh-CN")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    _login(page, live, live.key("acme", "app"))
    for path in ("/ui/users/max", "/ui/users/max/items", f"/ui/users/max/items/{made.item['id']}",
                 f"/ui/users/max/items/{made.item['id']}/forget", "/ui/users/max/search?q=Java"):
        page.goto(live.url + path)
        assert page.evaluate("window.__pwned") is None, path
        assert page.locator("img[src='x']").count() == 0, path
    page.goto(f"{live.url}/ui/users/max/items/{made.item['id']}")
    assert "<script>window.__pwned=1</script>" in page.locator("#item-content").inner_text()
    assert dialogs == []
    context.close()


def test_another_origin_cannot_make_the_browser_change_memory(live, browser):
    made = seed(live, "acme", "ann")
    target = f"{live.url}/ui/users/ann/items/{made.item['id']}/feedback"
    page_html = (f'<form id="f" method="post" action="{target}"><input name="signal" value="down">'
                 f'<input name="csrf" value="guessed"></form><script>document.getElementById("f").submit()</script>')

    async def evil(scope, receive, send):
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": page_html.encode()})

    context, page = _page(browser)
    _login(page, live, live.key("acme", "end-user", user_id="ann"))
    with serve_asgi(evil) as evil_url:
        with page.expect_response(target) as answer:
            page.goto(evil_url)
        # the cookie may travel (same site, another port); the CSRF token cannot
        assert answer.value.status == 403
    assert made.api.get(f"/v1/users/ann/items/{made.item['id']}").json()["version"] == made.item["version"]
    # the audit log has the refused attempt under the person's key: the browser did send
    # the session cookie, and it was the CSRF check that said no
    with live.client(live.key("acme", "admin")) as admin:
        audit = admin.get("/v1/audit", params={"user_id": "ann", "action": "ui.items.feedback"}).json()["data"]
    assert [(e["status"], e["role"]) for e in audit] == [(403, "end-user")]
    context.close()


def test_the_pages_work_from_the_keyboard(live, browser):
    made = seed(live, "acme", "kim")
    context, page = _page(browser)
    _login(page, live, live.key("acme", "end-user", user_id="kim"))
    page.keyboard.press("Tab")  # the first stop is the skip link
    assert page.evaluate("document.activeElement.className") == "skip"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.goto(f"{live.url}/ui/users/kim/items")
    page.keyboard.press("/")  # focuses the text filter
    assert page.evaluate("document.activeElement.name") == "text"
    page.keyboard.type("passport")
    page.keyboard.press("Enter")
    page.wait_for_url("**text=passport**")
    assert page.locator("table.items tbody tr").count() == 1
    link = page.get_by_role("link", name="Renew the passport")
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#mark-done")
    page.focus("#mark-done")
    page.keyboard.press("Enter")
    page.wait_for_selector(".flash")
    assert made.api.get(f"/v1/users/kim/items/{made.todo['id']}").json()["status"] == "done"
    OPEN.append(made.api)
    context.close()


def test_an_operator_sees_why_a_line_entered_the_prompt(live, browser, tmp_path):
    from datetime import timedelta

    from memstrata.types import Scope, UsageRecord, utcnow

    seed(live, "acme", "ops")
    now = utcnow()  # the LLM calls of a day, as the metered LLM stores them
    for hour in range(0, 20, 2):
        for purpose in ("extract", "summary")[: 1 + hour % 3 // 2]:
            live.memory.store.record_llm_usage(Scope("ops", "acme"), UsageRecord(
                now - timedelta(hours=hour), "local:smollm2", purpose, 300 + 40 * hour, 60, 0.4 + hour / 50))
    context, page = _page(browser)
    _login(page, live, live.key("acme", "admin"))
    page.goto(f"{live.url}/ui/users/ops/search")
    page.fill("input[name='q']", "last time, which language did I switch to?")
    page.keyboard.press("Enter")
    page.wait_for_selector("table.hits tbody tr[data-hit]")
    kept = page.locator("tr[data-verdict='kept']").count()
    report = page.evaluate("fetch(location.href + '&format=json').then(r => r.json())")
    assert kept == len([h for h in report["hits"] if h["id"] in report["context"]["report"]["kept_ids"]]) > 0
    assert page.locator("#ctx-tokens").inner_text() == str(report["context"]["report"]["tokens"])
    _shot(page, "search-en", tmp_path)
    page.goto(f"{live.url}/ui/lang?to=zh&next=/ui/ops")
    assert page.locator("svg.chart").count() == 3 and page.locator("svg.chart rect.bar").count() == 72
    assert page.locator("h1").inner_text().startswith("运维")
    _shot(page, "ops-zh", tmp_path)
    context.close()
