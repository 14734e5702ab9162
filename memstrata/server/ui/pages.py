"""The inspector's pages of one user: overview, items (with history, correct, undo,
feedback, done, forget), search playground and sessions — each GET page with its JSON
twin, each change a POST with the CSRF token."""

from __future__ import annotations

import logging
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from ...errors import AuthenticationError, ValidationError
from ...requests import ContextRequest, SearchRequest
from ...stores.base import AuditEntry
from ..auth import Principal, service
from ..keys import Keys
from . import views
from .base import HEADERS, STATIC, Ui, UiRoute, anonymous, changing, current, read_form, safe_next
from .erase import Erasure, erase_item, erase_session, plan_item, plan_session
from .i18n import LANGUAGES
from .session import COOKIE, SESSION_S, check_origin, open_session

log = logging.getLogger("memstrata.server.ui")

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)

Page = Annotated[Ui, Depends(current)]
Change = Annotated[tuple[Ui, dict[str, str]], Depends(changing)]
Anon = Annotated[Ui, Depends(anonymous)]

_STATIC = {"inspector.js": "text/javascript", "inspector.css": "text/css"}
_PROFILE_LISTS = ("goals", "current", "preferences")
_PROFILE_TEXTS = ("name", "role", "language")


def _q(part: str) -> str:
    """One path segment of a link or redirect: ids may hold spaces, Chinese, '?', '#',
    '%' (memstrata.ids), so every byte but letters, digits and ``_.-~`` is escaped."""
    return quote(part, safe="")


def _user_audit(ui: Ui, user_id: str, limit: int = 500) -> list[AuditEntry]:
    return ui.svc.memory.store.list_audit(ui.who.tenant, user_id=user_id, limit=limit)


# ---------------------------------------------------------------- login, language, assets


@router.get("/static/{name}")
def static(name: str) -> Response:
    if name not in _STATIC:
        return Response(status_code=404)
    return FileResponse(STATIC / name, media_type=_STATIC[name],
                        headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"})


@router.get("/login")
def login_page(ui: Anon, next: str = "/ui/") -> Response:
    return HTMLResponse(ui.render("login.html", title=ui.t("login"), next=safe_next(next),
                                  failed=None), headers=HEADERS)


@router.post("/login", name="ui.login")
async def login(request: Request) -> Response:
    """Trade a pasted API key for a session cookie (the key is not sent back)."""
    check_origin(request)  # no cookie yet, so no CSRF token: a foreign Origin is refused
    form = await read_form(request)
    svc = service(request)
    ui = Ui(request, svc, None)
    try:
        key = Keys(svc.memory.store).authenticate(form.get("key", "").strip())
        cookie = open_session(svc, key)
    except AuthenticationError as exc:  # shown on the form; the wording is the key checker's own
        return HTMLResponse(ui.render("login.html", title=ui.t("login"),
                                      next=safe_next(form.get("next")), failed=str(exc)),
                            status_code=401, headers=HEADERS)
    except Exception:  # a visitor who is not signed in learns nothing of the store
        log.exception("login: the key could not be checked")
        return HTMLResponse(ui.render("login.html", title=ui.t("login"),
                                      next=safe_next(form.get("next")), failed=ui.t("unavailable")),
                            status_code=503, headers=HEADERS)
    request.scope["memstrata.principal"] = Principal(key)  # the login is audited
    target = safe_next(form.get("next"))
    if target == "/ui/":
        target = f"/ui/users/{_q(key.user_id or '')}/about" if key.role == "end-user" else "/ui/users"
    out = RedirectResponse(target, status_code=303, headers=HEADERS)
    out.set_cookie(COOKIE, cookie, max_age=SESSION_S, path="/ui", httponly=True,
                   samesite="strict", secure=request.url.scheme == "https")
    return out


@router.post("/logout", name="ui.logout")
def logout(change: Change) -> Response:
    out = RedirectResponse("/ui/login", status_code=303, headers=HEADERS)
    out.delete_cookie(COOKIE, path="/ui")
    return out


@router.get("/lang")
def switch_language(to: str, next: str = "/ui/") -> Response:
    """The language switch: a preference cookie (changes no memory)."""
    if to not in LANGUAGES:
        raise ValidationError(f"language must be one of {', '.join(LANGUAGES)}")
    out = RedirectResponse(safe_next(next), status_code=303, headers=HEADERS)
    out.set_cookie("lang", to, max_age=365 * 86400, path="/ui", samesite="lax")
    return out


@router.get("/")
def home(ui: Page) -> Response:
    if ui.who.role == "end-user":  # the person's first page: what is remembered about them
        return RedirectResponse(f"/ui/users/{_q(ui.who.key.user_id)}/about", status_code=303)
    return RedirectResponse("/ui/users", status_code=303)


@router.get("/users")
def users(ui: Page) -> Response:
    data = {"tenant": ui.who.tenant, "users": ui.users()}
    return ui.page("users.html", data, title=ui.t("users"), section="users", rest=("GET /v1/users",))


# ---------------------------------------------------------------- the person's page


@router.get("/users/{user_id}/about")
def about(user_id: str, ui: Page) -> Response:
    """"What do you remember about me?", in sentences, grouped as a person thinks."""
    data = views.about(ui.user(user_id), ui.lang)
    return ui.page("about.html", data, title=ui.t("about_title"), user_id=user_id, section="about",
                   rest=(f"GET /v1/users/{_q(user_id)}/items", f"GET /v1/users/{_q(user_id)}/sessions"),
                   extra={"groups": views.ABOUT_GROUPS})


# ---------------------------------------------------------------- overview and profile


@router.get("/users/{user_id}")
def overview(user_id: str, ui: Page) -> Response:
    handle = ui.user(user_id)
    data = views.overview(handle, _user_audit(ui, user_id))
    return ui.page("overview.html", data, title=ui.t("overview"), user_id=user_id, section="overview",
                   rest=(f"GET /v1/users/{_q(user_id)}/profile",
                         f"GET /v1/users/{_q(user_id)}/profile/history",
                         f"GET /v1/users/{_q(user_id)}/items", f"GET /v1/users/{_q(user_id)}/resume"))


@router.post("/users/{user_id}/profile", name="ui.profile.update")
def edit_profile(user_id: str, change: Change) -> Response:
    ui, form = change
    name = form.get("field", "")
    if name not in _PROFILE_LISTS + _PROFILE_TEXTS:
        raise ValidationError(f"unknown profile field {name!r}")
    raw = form.get("value", "").strip()
    value: Any
    if name in _PROFILE_LISTS:
        value = [v.strip() for v in raw.replace("；", "\n").replace(";", "\n").splitlines() if v.strip()]
        value = value or None
    else:
        value = raw or None
    profile = ui.user(user_id, write=True).update_profile(actor=f"key:{ui.who.key.id}", **{name: value})
    return ui.done(f"/ui/users/{_q(user_id)}", "saved_ok", profile.to_dict())


# ---------------------------------------------------------------- items


@router.get("/users/{user_id}/items")
def items(user_id: str, ui: Page, kind: str | None = None, status: str | None = None,
          layer: str | None = None, tag: str | None = None, text: str | None = None,
          offset: int = 0) -> Response:
    data = views.items_page(ui.user(user_id), kind=kind, status=status, layer=layer, tag=tag,
                            text=text, offset=max(0, offset))
    return ui.page("items.html", data, title=ui.t("items"), user_id=user_id, section="items",
                   rest=(f"GET /v1/users/{_q(user_id)}/items",
                         f"GET /v1/users/{_q(user_id)}/sessions/…/messages"))


@router.get("/users/{user_id}/items/{item_id}")
def item(user_id: str, item_id: str, ui: Page) -> Response:
    data = views.item_page(ui.user(user_id), item_id)
    return ui.page("item.html", data, title=ui.t("items"), user_id=user_id, section="items",
                   rest=(f"GET /v1/users/{_q(user_id)}/items/{_q(item_id)}",
                         f"GET /v1/users/{_q(user_id)}/items/{_q(item_id)}/history"))


def _number(form: dict[str, str], name: str) -> float | None:
    raw = form.get(name, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValidationError(f"{name} must be a number between 0 and 1, not {raw!r}") from None


@router.post("/users/{user_id}/items/{item_id}/edit", name="ui.items.update")
def edit_item(user_id: str, item_id: str, change: Change) -> Response:
    ui, form = change
    handle = ui.user(user_id, write=True)
    current_item = handle.get(item_id)
    changes: dict[str, Any] = {}
    if "content" in form and form.get("voice") == "you":  # written as said to the person
        form["content"] = views.third_person(form["content"])
    if "content" in form and form["content"].strip() != current_item.content:
        changes["content"] = form["content"].strip()
    if form.get("kind") and form["kind"] != current_item.kind.value:
        changes["kind"] = form["kind"]
    for name in ("importance", "confidence"):
        number = _number(form, name)
        if number is not None and number != getattr(current_item, name):
            changes[name] = number
    if "tags" in form:
        tags = tuple(t.strip() for t in form["tags"].replace("，", ",").split(",") if t.strip())
        if tags != current_item.tags:
            changes["tags"] = list(tags)
    back = safe_next(form.get("next")) if form.get("next") else f"/ui/users/{_q(user_id)}/items/{_q(item_id)}"
    if not changes:
        return ui.done(back, "saved_ok", current_item.to_dict())
    expected = form.get("expected_version", "")
    updated = handle.update(item_id, actor=f"key:{ui.who.key.id}",
                            reason=form.get("reason", "").strip() or "corrected in the inspector",
                            expected_version=int(expected) if expected.isdigit() else None, **changes)
    return ui.done(back, "saved_ok", updated.to_dict())


@router.post("/users/{user_id}/items/{item_id}/undo", name="ui.items.undo")
def undo_item(user_id: str, item_id: str, change: Change) -> Response:
    ui, _ = change
    item = ui.user(user_id, write=True).undo(item_id)
    if item is None:
        return ui.done(f"/ui/users/{_q(user_id)}/items", "undone_ok", {"item": None})
    return ui.done(f"/ui/users/{_q(user_id)}/items/{_q(item.id)}", "undone_ok", {"item": item.to_dict()})


@router.post("/users/{user_id}/items/{item_id}/feedback", name="ui.items.feedback")
def feedback_item(user_id: str, item_id: str, change: Change) -> Response:
    ui, form = change
    item = ui.user(user_id, write=True).feedback(item_id, form.get("signal", ""))
    back = safe_next(form.get("next")) if form.get("next") else f"/ui/users/{_q(user_id)}/items/{_q(item_id)}"
    said = "confirmed_ok" if form.get("next") and form.get("signal") == "up" else "feedback_ok"
    return ui.done(back, said, item.to_dict())


@router.post("/users/{user_id}/items/{item_id}/complete", name="ui.items.complete")
def complete_item(user_id: str, item_id: str, change: Change) -> Response:
    ui, form = change
    item = ui.user(user_id, write=True).complete(item_id)
    return ui.done(safe_next(form.get("next")) if form.get("next") else
                   f"/ui/users/{_q(user_id)}/items/{_q(item_id)}", "done_ok", item.to_dict())


def _confirm(ui: Ui, plan: Erasure, *, user_id: str, action: str, back: str,
             option: tuple[str, str, bool], section: str) -> Response:
    data = {**plan.to_dict(), "action": action, "back": back,
            "option": {"name": option[0], "label": option[1], "on": option[2]}}
    return ui.page("forget.html", data, title=ui.t("forget_title"), user_id=user_id, section=section)


@router.get("/users/{user_id}/items/{item_id}/forget")
def forget_item_page(user_id: str, item_id: str, ui: Page, turns: bool = False) -> Response:
    plan = plan_item(ui.user(user_id), item_id, turns=turns)
    person = ui.who.role == "end-user"  # the person came from their page and goes back to it
    return _confirm(ui, plan, user_id=user_id,
                    action=f"/ui/users/{_q(user_id)}/items/{_q(item_id)}/forget",
                    back=f"/ui/users/{_q(user_id)}/" + ("about" if person else f"items/{_q(item_id)}"),
                    option=("turns", "also_turns", turns), section="about" if person else "items")


@router.post("/users/{user_id}/items/{item_id}/forget", name="ui.items.forget")
def forget_item(user_id: str, item_id: str, change: Change) -> Response:
    ui, form = change
    counts = erase_item(ui.user(user_id, write=True), item_id,
                        turns=form.get("turns") in ("1", "true", "on"), digest=form.get("digest", ""))
    after = "about" if ui.who.role == "end-user" else "items"
    return ui.done(f"/ui/users/{_q(user_id)}/{after}", "forgotten_ok", counts)


# ---------------------------------------------------------------- search playground


@router.get("/users/{user_id}/search")
def search(user_id: str, ui: Page, q: str = "", k: int = 10, budget: int = 2000,
           recall: str = "auto", session: str = "default") -> Response:
    handle = ui.user(user_id)
    data: dict[str, Any] = {"query": q, "k": k, "budget": budget, "recall": recall,
                            "session_id": session, "hits": [], "explain": None, "context": None}
    if q.strip():
        result = _explain(handle, SearchRequest.build(q, k=k))
        ctx = handle.context(ContextRequest.build(session, [{"role": "user", "content": q}],
                                                  budget=budget, recall=recall, k=k))
        report = ctx.report.to_dict()
        data["explain"] = {"query_tokens": result.query_tokens,
                           "lexical_candidates": result.lexical_candidates[:20],
                           "dense_candidates": result.dense_candidates[:20]}
        data["hits"] = [{**hit.to_dict(), "why": _why(hit.id, report)} for hit in result.hits]
        data["context"] = ctx.to_dict()
    return ui.page("search.html", data, title=ui.t("search"), user_id=user_id, section="search",
                   rest=(f"POST /v1/users/{_q(user_id)}/search/explain",
                         f"POST /v1/users/{_q(user_id)}/context"))


def _explain(handle: Any, request: SearchRequest) -> Any:
    """``handle.explain(request)`` without counting the hits as accessed (no access statistics): looking
    at the hit list is not the agent recalling them."""
    m = handle.parts
    request = request.checked(m.max_message_chars)
    return m.retriever.search(handle.scope, request, explain=True, touch=False)


def _why(hit_id: str, report: dict[str, Any]) -> dict[str, str]:
    """Why a hit would (not) enter the context: kept, dropped with its reason, or
    not recalled at all."""
    if hit_id in report["kept_ids"]:
        return {"verdict": "kept", "reason": "why_kept"}
    for dropped in report["dropped"]:
        if hit_id in dropped["sources"] or hit_id in dropped["detail"].split():
            return {"verdict": "dropped", "reason": dropped["reason"], "detail": dropped["detail"]}
    if report["recall"] == "light":
        return {"verdict": "not_recalled", "reason": "why_not_recalled"}
    return {"verdict": "not_recalled", "reason": "why_below_k"}


# ---------------------------------------------------------------- sessions


@router.get("/users/{user_id}/sessions")
def sessions(user_id: str, ui: Page) -> Response:
    data = views.sessions_page(ui.user(user_id))
    return ui.page("sessions.html", data, title=ui.t("sessions"), user_id=user_id, section="sessions",
                   rest=(f"GET /v1/users/{_q(user_id)}/sessions",))


@router.get("/users/{user_id}/sessions/{session_id}")
def session(user_id: str, session_id: str, ui: Page) -> Response:
    data = views.session_detail(ui.user(user_id), session_id)
    return ui.page("session.html", data, title=ui.t("sessions"), user_id=user_id, section="sessions",
                   rest=(f"GET /v1/users/{_q(user_id)}/sessions/{_q(session_id)}",
                         f"GET /v1/users/{_q(user_id)}/sessions/{_q(session_id)}/messages"))


@router.post("/users/{user_id}/sessions/{session_id}/archive", name="ui.sessions.archive")
def archive(user_id: str, session_id: str, change: Change) -> Response:
    ui, _ = change
    state = ui.user(user_id, write=True).archive_session(session_id)
    return ui.done(f"/ui/users/{_q(user_id)}/sessions/{_q(session_id)}", "saved_ok", state.to_dict())


@router.get("/users/{user_id}/sessions/{session_id}/forget")
def forget_session_page(user_id: str, session_id: str, ui: Page, items: bool = False) -> Response:
    plan = plan_session(ui.user(user_id), session_id, items=items)
    return _confirm(ui, plan, user_id=user_id,
                    action=f"/ui/users/{_q(user_id)}/sessions/{_q(session_id)}/forget",
                    back=f"/ui/users/{_q(user_id)}/sessions/{_q(session_id)}",
                    option=("items", "also_items", items),
                    section="sessions")


@router.post("/users/{user_id}/sessions/{session_id}/forget", name="ui.sessions.forget")
def forget_session(user_id: str, session_id: str, change: Change) -> Response:
    ui, form = change
    counts = erase_session(ui.user(user_id, write=True), session_id,
                           items=form.get("items") in ("1", "true", "on"), digest=form.get("digest", ""))
    return ui.done(f"/ui/users/{_q(user_id)}/sessions/{_q(session_id)}", "forgotten_ok", counts)
