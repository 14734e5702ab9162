"""The interactive API documentation, served offline.

FastAPI's own ``/docs`` and ``/redoc`` pages load Swagger UI and ReDoc from a CDN, so on a
machine without internet access they are blank. Here the same pages load the scripts,
stylesheet and icon that the ``fastapi-offline`` package ships inside its wheel
(installed with the ``server`` extra), mounted under ``/docs/assets``: the pages make no
request to any other host. ReDoc is told not to fetch its web fonts, and both pages carry
a Content-Security-Policy that keeps the browser on this origin (ReDoc's footer would
otherwise fetch its logo from the vendor's CDN).
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_URL", "install_docs"]

ASSETS_URL = "/docs/assets"

#: Only this origin; the pages' own inline bootstrap scripts and styles; ReDoc's search
#: runs in a worker made from a blob.
_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def _offline(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = _CSP
    return page


def install_docs(app: FastAPI, *, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Serve Swagger UI at ``docs_url`` and ReDoc at ``redoc_url`` from packaged assets.
    ``app`` must be built with ``docs_url=None, redoc_url=None``."""
    assets = files("fastapi_offline") / "static"
    app.mount(ASSETS_URL, StaticFiles(directory=str(assets)), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    oauth2_redirect = app.swagger_ui_oauth2_redirect_url or f"{docs_url}/oauth2-redirect"

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _offline(get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}", title=f"{app.title} — API",
            oauth2_redirect_url=f"{root}{oauth2_redirect}",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            # no call to the public validator service for the badge
            swagger_ui_parameters={"validatorUrl": None}))

    @app.get(oauth2_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _offline(get_redoc_html(
            openapi_url=f"{root}{openapi_url}", title=f"{app.title} — API reference",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png", with_google_fonts=False))
