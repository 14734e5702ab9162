"""Every inspector page, in English and in Chinese, scanned in Chromium by axe-core (the
npm package, pinned in tests/browser/package-lock.json, installed by scripts/test with
``npm ci --prefix tests/browser`` and injected by this test): 0 serious or critical
violations. With ``MEMSTRATA_SCREENSHOTS=1`` it writes the screenshot of each page in each
language that docs/inspector.md shows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_fixture import chromium_or_skip
from inspector_fixture import close_clients, seed
from service_fixture import LiveServer

from memstrata import Memory

CHROMIUM = chromium_or_skip()
AXE = Path(__file__).resolve().parent / "browser" / "node_modules" / "axe-core" / "axe.min.js"
if not AXE.exists():
    why = "axe-core is not installed: npm ci --prefix tests/browser"
    if os.environ.get("CI"):
        raise RuntimeError(why)
    pytest.skip(why, allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")


def _scan(page) -> tuple[list[str], bool]:
    """axe-core over the page: its serious and critical violations, and whether any rule
    passed (the scan ran)."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    bad = [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
           for v in result["violations"] if v["impact"] in ("serious", "critical")]
    return bad, bool(result["passes"])


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    memory = Memory(f"sqlite:///{tmp_path_factory.mktemp('ui-axe') / 'm.db'}", embedder="hash:256")
    with LiveServer(memory) as server:
        yield server
        close_clients()
    memory.close()


DOCS = Path(__file__).resolve().parent.parent / "docs" / "images"
#: the page names of docs/inspector.md's screenshot table, in its order
NAMES = ("login", "users", "about", "overview", "items", "item", "item-forget", "search", "sessions",
         "session", "session-forget", "kb", "document", "ops")


DOCUMENT = "returns.md"


def _pages(live, made) -> list[str]:
    user, item = made.user, made.item["id"]
    return ["/ui/users", f"/ui/users/{user}/about", f"/ui/users/{user}", f"/ui/users/{user}/items",
            f"/ui/users/{user}/items/{item}", f"/ui/users/{user}/items/{item}/forget",
            f"/ui/users/{user}/search?q=Go", f"/ui/users/{user}/sessions",
            f"/ui/users/{user}/sessions/{made.session_id}", f"/ui/users/{user}/sessions/{made.session_id}/forget",
            "/ui/kb", f"/ui/kb/{DOCUMENT}", "/ui/ops"]


def test_docs_show_every_page_in_both_languages():
    doc = (DOCS.parent / "inspector.md").read_text()
    for name in NAMES:
        for lang in ("en", "zh"):
            assert f"images/page-{name}-{lang}.png" in doc, (name, lang)
            assert (DOCS / f"page-{name}-{lang}.png").exists(), (name, lang)


def test_no_serious_violations_on_any_page_in_either_language(live):
    made = seed(live, "acme", "lin")
    with live.client(live.key("acme", "app")) as app:  # a knowledge-base document, both languages
        r = app.post("/v1/kb/documents", json={
            "doc_id": DOCUMENT, "title": "Returns policy / 退货政策",
            "content": "# Returns\n\nReturns are free within 30 days.\n\n# 退货\n\n30 天内退货免运费。"})
        assert r.status_code == 201, r.text
    token = live.key("acme", "admin")
    person = live.key("acme", "end-user", user_id=made.user)
    found: dict[str, list[str]] = {}
    scanned: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        # the scanner itself finds what it should: an image without a text alternative
        probe = browser.new_page()
        probe.set_content('<html lang="en"><title>probe</title><main><img src="x.png"></main></html>')
        probe.add_script_tag(path=str(AXE))
        result = probe.evaluate("axe.run(document)")
        assert [v["impact"] for v in result["violations"] if v["id"] == "image-alt"] == ["critical"]
        probe.close()
        for locale in ("en-US", "zh-CN"):
            # the pages forbid inline scripts (CSP); the scanner is injected, so the scan context
            # lets it in — the pages themselves are served unchanged
            context = browser.new_context(locale=locale, bypass_csp=True)
            context.set_default_timeout(60_000)
            page = context.new_page()
            page.goto(f"{live.url}/ui/login")
            page.fill("#key", token)
            for name, path in zip(NAMES, ["/ui/login"] + _pages(live, made), strict=True):
                if path != "/ui/login":
                    page.goto(live.url + path)
                if os.environ.get("MEMSTRATA_SCREENSHOTS"):  # docs/inspector.md's table
                    page.screenshot(path=str(DOCS / f"page-{name}-{locale[:2]}.png"))
                bad, ran = _scan(page)
                if bad:
                    found[f"{locale} {path}"] = bad
                assert ran, path  # the rules ran on this page
                scanned.append(f"{locale} {path}")
                if path == "/ui/login":
                    page.keyboard.press("Enter")
                    page.wait_for_url("**/ui/users**")
            # the person's own page, as their end-user key shows it (no operator links)
            page.context.clear_cookies()
            page.goto(f"{live.url}/ui/login")
            page.fill("#key", person)
            page.keyboard.press("Enter")
            page.wait_for_url("**/about")
            page.locator("details.correct").first.evaluate("e => e.open = true")  # the box too
            bad, _ = _scan(page)
            if bad:
                found[f"{locale} person's about"] = bad
            scanned.append(f"{locale} person's about")
            context.close()
        browser.close()
    assert len(scanned) == 2 * (len(NAMES) + 1)
    assert found == {}, "\n".join(f"{k}: {v}" for k, v in found.items())
