"""The inspector's plumbing: the router, the per-request context (:class:`Ui`), the
HTML/JSON twin of every page, errors as pages, forms, and the security headers.

Every page handler builds a JSON-ready dict and returns ``ui.page(template, data)``:
with ``?format=json`` (or ``Accept: application/json``) that dict *is* the response —
the page's JSON twin — otherwise it is rendered by a Jinja2 template with autoescaping,
so stored text (``<script>``, ``onerror=``, look-alike markup) is shown as text.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import anyio
from fastapi import Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader, select_autoescape

from ...errors import AuthenticationError, MemstrataError, ValidationError
from ...user import UserMemory
from ..auth import service
from ..errors import error_body, status_of
from ..service import Service
from .i18n import LANGUAGES, WORDS, language, translations, translator, value_translator
from .session import UiSession, check_csrf, read_session
from .views import second_person

__all__ = ["UiRoute", "Ui", "HEADERS", "TEMPLATES", "env", "envs", "safe_next", "read_form", "wants_json"]

log = logging.getLogger("memstrata.server.ui")

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

#: No inline script, nothing from elsewhere, no framing: even markup that slipped
#: through escaping could not run.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _environment(lang: str) -> Environment:
    """The templates in ``lang``: ``t('key')``/``v(group, value)`` from the render context,
    and ``{% trans %}``, ``_()``, ``gettext``/``ngettext`` from jinja2's i18n extension,
    all reading that language's gettext catalogue."""
    made = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True),
                       trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.i18n"])
    made.install_gettext_translations(translations(lang), newstyle=True)  # type: ignore[attr-defined]
    made.filters["to_you"] = second_person  # a memory about "User" said to the person
    return made


#: one template environment per language (each caches its compiled templates)
envs = {lang: _environment(lang) for lang in LANGUAGES}
env = envs["en"]


def wants_json(request: Request) -> bool:
    return (request.query_params.get("format") == "json"
            or request.headers.get("accept", "").startswith("application/json"))


def quoted_path(request: Request) -> str:
    """The request's path as a link to it: the decoded path escaped again (an id in it
    may hold '%', '?', '#', spaces or Chinese — memstrata.ids)."""
    return quote(request.scope["path"], safe="/")


def safe_next(value: str | None) -> str:
    """A redirect target inside the inspector (never another site)."""
    if value and value.startswith("/ui") and not value.startswith("//") and "\\" not in value:
        return value
    return "/ui/"


class Ui:
    """One inspector request: the browser's session, its language, and the pages."""

    def __init__(self, request: Request, svc: Service, session: UiSession | None) -> None:
        self.request = request
        self.svc = svc
        self.session = session
        self.lang = language(request)
        self.t = translator(self.lang)
        self.v = value_translator(self.lang)

    @property
    def who(self) -> Any:
        assert self.session is not None
        return self.session.principal

    def user(self, user_id: str, *, write: bool = False) -> UserMemory:
        """The user's memory, if this key may reach it (end-user keys: their own only)."""
        return self.who.user(self.svc, user_id, write=write)

    def users(self) -> list[str]:
        """The tenant's users this key may see."""
        only = self.who.users_filter()
        return [s.user_id for s in self.svc.memory.store.list_users()
                if s.namespace == self.who.tenant and (only is None or s.user_id == only)]

    def page(self, template: str, data: Mapping[str, Any], *, title: str,
             user_id: str | None = None, section: str = "", rest: tuple[str, ...] = (),
             status: int = 200, extra: Mapping[str, Any] | None = None) -> Response:
        """The page, or (``?format=json``) its JSON twin: ``data`` itself (``extra`` is
        for the HTML only: markup made from ``data``, like charts)."""
        if wants_json(self.request):
            return JSONResponse(dict(data), status_code=status, headers=HEADERS)
        return HTMLResponse(self.render(template, data=data, title=title, user_id=user_id,
                                        section=section, rest=rest, **(extra or {})),
                            status_code=status, headers=HEADERS)

    def render(self, template: str, **context: Any) -> str:
        path = quoted_path(self.request)
        query = self.request.url.query
        here = path + ("?" + query if query else "")
        twin = path + ("?" + query + "&" if query else "?") + "format=json"
        flash = self.request.query_params.get("msg")
        return envs[self.lang].get_template(template).render(
            t=self.t, v=self.v, lang=self.lang, languages=LANGUAGES, here=here,
            twin=twin, who=self.who if self.session else None,
            csrf=self.session.csrf if self.session else "",
            flash=flash if flash in WORDS else None, **context)

    def done(self, to: str, message: str, data: Mapping[str, Any] | None = None) -> Response:
        """After a change: JSON for a script, else back to a page with a notice."""
        if wants_json(self.request):
            return JSONResponse(dict(data or {"ok": True}), headers=HEADERS)
        sep = "&" if "?" in to else "?"
        return RedirectResponse(f"{to}{sep}msg={message}", status_code=303, headers=HEADERS)


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form body (last value of each field wins); JSON bodies too."""
    body = await request.body()
    if request.headers.get("content-type", "").startswith("application/json"):
        import json

        try:
            data = json.loads(body or b"{}")
        except ValueError as exc:
            raise ValidationError(f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValidationError("the body must be a JSON object")
        return {str(k): "" if v is None else str(v) for k, v in data.items()}
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[-1] for k, v in parsed.items()}


def _error_page(request: Request, exc: MemstrataError) -> Response:
    status, message = status_of(exc), str(exc)
    rid = request.scope.get("memstrata.request_id")
    if status >= 500 and request.scope.get("memstrata.principal") is None:
        # a visitor who is not signed in learns nothing of the store: the details are logged
        log.error("inspector: %s %s failed before the visitor was signed in (request %s): %s: %s",
                  request.method, request.url.path, rid, type(exc).__name__, exc)
        status, message = 503, translator(language(request))("unavailable")
    if wants_json(request):
        return JSONResponse(error_body(status, type(exc).__name__, message, rid),
                            status_code=status, headers=HEADERS)
    if isinstance(exc, AuthenticationError) and request.method == "GET":
        target = quote(quoted_path(request) + ("?" + request.url.query if request.url.query else ""))
        return RedirectResponse(f"/ui/login?next={target}", status_code=303, headers=HEADERS)
    t = translator(language(request))
    body = (f'<!doctype html><html lang="{language(request)}"><head><meta charset="utf-8">'
            f'<title>{html.escape(t("error"))}</title><link rel="stylesheet" '
            f'href="/ui/static/inspector.css"></head><body><main id="main" class="error">'
            f'<h1>{status} · {html.escape(t("error"))}</h1><p role="alert">{html.escape(message)}</p>'
            f'<p><a href="/ui/">{html.escape(t("back"))}</a></p></main></body></html>')
    return HTMLResponse(body, status_code=status, headers=HEADERS)


class UiRoute(APIRoute):
    """A route whose memstrata errors become an error page (or the JSON error of the
    REST API for the JSON twin); an expired session on a page redirects to the login."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except MemstrataError as exc:
                return _error_page(request, exc)

        return run


def current(request: Request) -> Ui:
    """Dependency: the logged-in request (AuthenticationError when not)."""
    svc = service(request)
    return Ui(request, svc, read_session(request, svc))


def anonymous(request: Request) -> Ui:
    """Dependency: a request that needs no login (the login page itself)."""
    return Ui(request, service(request), None)


async def changing(request: Request) -> tuple[Ui, dict[str, str]]:
    """Dependency of every POST: logged in, a valid CSRF token, from this site."""
    ui = await anyio.to_thread.run_sync(current, request)
    form = await read_form(request)
    assert ui.session is not None
    check_csrf(request, ui.session, form.get("csrf"))
    return ui, form
