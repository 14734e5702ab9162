"""``/docs`` (Swagger UI) and ``/redoc`` of the service in a real Chromium with every
request to another host blocked: the pages load their scripts from the service itself
and list the API's operations. Screenshot for docs/service.md with
``MEMSTRATA_SCREENSHOTS=1``."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from browser_fixture import chromium_or_skip
from service_fixture import LiveServer

from memstrata import Memory

CHROMIUM = chromium_or_skip()
DOCS = Path(__file__).resolve().parent.parent / "docs" / "images"
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed "
                                                             "(pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    memory = Memory(f"sqlite:///{tmp_path_factory.mktemp('docs') / 'm.db'}", embedder="hash:256")
    with LiveServer(memory) as server:
        yield server
    memory.close()


@pytest.fixture(scope="module")
def offline_page():
    """A page whose requests to any host but 127.0.0.1 are aborted and recorded."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-background-networking", "--disable-component-update"])
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        context.set_default_timeout(120_000)  # generous: a loaded machine parses 1.5 MB of script slowly
        elsewhere: list[str] = []

        def route(r):
            if urlsplit(r.request.url).hostname == "127.0.0.1":
                r.continue_()
            else:
                elsewhere.append(r.request.url)
                r.abort("internetdisconnected")

        context.route("**/*", route)
        page = context.new_page()
        page.elsewhere = elsewhere
        yield page
        browser.close()


def test_swagger_ui_lists_the_operations_offline(live, offline_page, tmp_path):
    page = offline_page
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live.url}/docs")
    page.wait_for_selector(".opblock-summary-path", state="attached")
    paths = set(page.locator(".opblock-summary-path").evaluate_all(
        "els => els.map(e => e.getAttribute('data-path'))"))
    assert {"/v1/users/{user_id}/messages", "/v1/users/{user_id}/search"} <= paths
    assert page.locator(".opblock").count() >= 40
    assert page.elsewhere == [] and errors == []
    target = DOCS if os.environ.get("MEMSTRATA_SCREENSHOTS") else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / "service-docs-offline.png"))


def test_redoc_renders_offline(live, offline_page):
    page = offline_page
    page.elsewhere.clear()
    page.goto(f"{live.url}/redoc")
    page.wait_for_selector("[data-section-id]", state="attached")
    assert page.get_by_text("memstrata", exact=False).count() > 0
    assert page.elsewhere == []


def test_the_assets_are_served_by_the_service(live):
    import httpx

    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"):
        answer = httpx.get(f"{live.url}/docs/assets/{asset}")
        assert answer.status_code == 200 and len(answer.content) > 1000, asset
    for page in ("/docs", "/redoc"):
        answer = httpx.get(f"{live.url}{page}")
        assert "//cdn" not in answer.text and "/docs/assets/" in answer.text
        assert "default-src 'self'" in answer.headers["content-security-policy"]
