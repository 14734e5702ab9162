"""The person's first page in a real Chromium: "what do you remember about me?" in
sentences, grouped as a person thinks, each with when and from which message it was
learned and what it replaced, and the three actions — this is right, correct it (the
slot follows the words), forget it — checked through the REST API; in English and in
Chinese. With ``MEMSTRATA_SCREENSHOTS=1`` it writes the screenshots of docs/inspector.md."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_fixture import chromium_or_skip
from inspector_fixture import OPEN, close_clients
from service_fixture import LiveServer

from memstrata import Memory

CHROMIUM = chromium_or_skip()
DOCS = Path(__file__).resolve().parent.parent / "docs" / "images"
sync_api = pytest.importorskip("playwright.sync_api")

CONVERSATION = [
    {"role": "user", "content": "I moved to Lisbon last spring."},
    {"role": "assistant", "content": "How do you like it?"},
    {"role": "user", "content": "My sister Mia works at a bakery."},
    {"role": "assistant", "content": "Nice."},
    {"role": "user", "content": "I'm allergic to peanuts. Please keep your answers short."},
    {"role": "assistant", "content": "Noted."},
]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    memory = Memory(f"sqlite:///{tmp_path_factory.mktemp('ui-person') / 'm.db'}", embedder="hash:256")
    with LiveServer(memory) as server:
        yield server
        close_clients()
    memory.close()


def _shot(page, name, tmp_path):
    target = DOCS if os.environ.get("MEMSTRATA_SCREENSHOTS") else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"inspector-{name}.png"), full_page=True)


def test_the_person_reads_confirms_corrects_and_forgets(live, tmp_path):
    api = live.client(live.key("acme", "app"))
    OPEN.append(api)
    assert api.post("/v1/users/lin/messages", json={"messages": CONVERSATION, "session_id": "s1"}).status_code == 201
    live.memory.flush()
    items = api.get("/v1/users/lin/items").json()["data"]
    city = next(i for i in items if "Lisbon" in i["content"])
    assert city["value"] == "Lisbon"
    api.post("/v1/users/lin/items", json={"content": "Renew the passport before June", "kind": "todo"})
    token = live.key("acme", "end-user", user_id="lin")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(locale="en-US", viewport={"width": 1100, "height": 900})
        context.set_default_timeout(60_000)
        page = context.new_page()
        page.goto(f"{live.url}/ui/login")
        page.fill("#key", token)
        page.keyboard.press("Enter")
        page.wait_for_url("**/ui/users/lin/about")
        assert page.locator("h1").inner_text() == "What I remember about you"
        headings = page.locator("main h2").all_inner_texts()
        assert headings == ["About you", "People in your life", "What you like and avoid",
                            "What you asked me to do", "What we talked about"]
        line = page.locator(f"#m-{city['id']}")
        assert line.locator(".sentence").inner_text() == "You live in Lisbon"
        told = line.locator(".provenance").inner_text()
        assert told.startswith("You told me on ") and told.endswith(": I moved to Lisbon last spring."), told
        assert "Mia" in page.locator("section:has(#h-people)").inner_text()
        assert "peanuts" in page.locator("main").inner_text()
        assert "Renew the passport" in page.locator("section:has(#h-asked)").inner_text()
        assert "ids" not in page.locator(".sentence").all_inner_texts()
        assert "mem_" not in page.locator("main section").first.inner_text()  # no engineering ids
        # the person's header and footer: their page, the language, who is signed in — no operator pages
        assert page.locator("header nav a").all_inner_texts() == ["memstrata inspector", "About me"]
        assert page.locator(".whoami").inner_text() == "Signed in as lin"
        assert page.locator("footer").inner_text().startswith("Only someone signed in with your key")
        assert page.locator("footer a").count() == 0 and "REST" not in page.locator("footer").inner_text()
        assert page.get_by_role("link", name="Details").count() == 0
        assert "saved this on" in page.locator("section:has(#h-asked)").inner_text()
        _shot(page, "about-en", tmp_path)
        # "Correct it" looks and works like a button: a bordered control, opened from the keyboard
        summary = line.locator("summary")
        assert summary.evaluate("e => getComputedStyle(e).borderStyle") == "solid"
        summary.focus()
        page.keyboard.press("Enter")
        assert line.locator("details").evaluate("e => e.open")
        assert line.get_by_label("What is right").input_value() == "You live in Lisbon"
        page.keyboard.press("Enter")  # the summary still has the focus: closes it again
        assert not line.locator("details").evaluate("e => e.open")

        # this is right
        before = api.get(f"/v1/users/lin/items/{city['id']}").json()["confidence"]
        assert line.get_by_role("button", name="This is right").get_attribute("title") == \
            "Tells me this is true, so I am surer of it"
        line.get_by_role("button", name="This is right").click()
        assert page.locator(".flash").inner_text() == "Thanks — I am surer of it now."
        assert page.url.split("?")[0].endswith("/ui/users/lin/about")
        assert api.get(f"/v1/users/lin/items/{city['id']}").json()["confidence"] > before

        # correct it: the text and its slot
        line = page.locator(f"#m-{city['id']}")
        line.locator("summary").click()
        line.get_by_label("What is right").fill("You live in Porto")  # as the person says it
        line.get_by_role("button", name="Save").click()
        page.wait_for_selector(".flash")
        got = api.get(f"/v1/users/lin/items/{city['id']}").json()
        assert (got["content"], got["attribute"], got["value"]) == ("User lives in Porto", city["attribute"], "Porto")
        line = page.locator(f"#m-{city['id']}")
        assert line.locator(".sentence").inner_text() == "You live in Porto"
        assert line.locator("q.replaced").inner_text() == "You live in Lisbon"

        # in Chinese: the same page, the frame in Chinese
        page.click("a[data-lang='zh']")
        page.wait_for_url("**/about**")
        assert page.locator("h1").inner_text() == "我记得的关于你的事"
        assert page.locator("main h2").all_inner_texts()[0] == "关于你"
        told = page.locator(f"#m-{city['id']} .provenance").inner_text()
        assert told.startswith("你在20") and "日告诉我：" in told and "I moved to Lisbon" in told, told
        assert page.locator(".whoami").inner_text() == "已登录：lin"
        assert page.locator("header nav a").all_inner_texts() == ["memstrata 记忆查看器", "关于我"]
        _shot(page, "about-zh", tmp_path)

        # forget it: the confirmation, then gone
        page.locator(f"#m-{city['id']}").locator("a.forget-it").click()
        page.click("#confirm-forget")
        page.wait_for_selector(".flash")
        assert page.url.split("?")[0].endswith("/ui/users/lin/about")  # back on the person's page
        assert api.get(f"/v1/users/lin/items/{city['id']}").status_code == 404
        context.close()
        browser.close()
