"""How a browser carries an API key: a signed, HttpOnly session cookie bound to the key,
and a CSRF token for every state-changing request.

The person pastes their key once (``POST /ui/login``); the key itself never goes back to
the browser. The cookie reads ``<key id>.<expiry>.<nonce>.<signature>``, where the
signature is an HMAC over those fields *and the key's stored secret hash*, with a
secret kept in the store (so every server process on one store accepts it). Each
request re-reads the key: a revoked key's cookie stops working at once, and so does
one past its expiry. The cookie is ``SameSite=Strict`` and scoped to ``/ui``.

Every POST under ``/ui`` must carry the CSRF token — an HMAC of the cookie, sent as the
``csrf`` form field or the ``X-CSRF-Token`` header — and, when the browser sends an
``Origin``, one equal to the server's own. A page of another site can neither read the
token nor make the browser send the cookie, so it cannot change anyone's memory.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import Request

from ...errors import AuthenticationError, PermissionDeniedError, RateLimitError
from ...stores.base import ApiKey
from ..auth import Principal
from ..service import Service

__all__ = ["COOKIE", "SESSION_S", "UiSession", "open_session", "read_session", "check_csrf",
           "check_origin"]

COOKIE = "memstrata_ui"
SESSION_S = 12 * 3600  # a login lasts a working day
_META = "ui_cookie_secret"


def _secret(svc: Service) -> bytes:
    store = svc.memory.store
    value = store.get_meta(_META)
    if value is None:
        store.set_meta(_META, secrets.token_hex(32))
        value = store.get_meta(_META)  # another process may have won the race: use its
    assert value is not None
    return bytes.fromhex(value)


def _sign(secret: bytes, *fields: str) -> str:
    return hmac.new(secret, ".".join(fields).encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class UiSession:
    """A logged-in browser: the key it logged in with and its CSRF token."""

    principal: Principal
    cookie: str
    csrf: str

    @property
    def key(self) -> ApiKey:
        return self.principal.key


def open_session(svc: Service, key: ApiKey) -> str:
    """The cookie value for a browser that just proved it holds ``key``."""
    expires = str(int(time.time()) + SESSION_S)
    nonce = secrets.token_urlsafe(12)
    sig = _sign(_secret(svc), key.id, expires, nonce, key.secret_hash)
    return f"{key.id}.{expires}.{nonce}.{sig}"


def _csrf(secret: bytes, cookie: str) -> str:
    return _sign(secret, "csrf", cookie)[:40]


def read_session(request: Request, svc: Service) -> UiSession:
    """The browser's session, or AuthenticationError (no cookie, a forged or expired one,
    or a revoked key). Counts the request against the key's rate limit."""
    cookie = request.cookies.get(COOKIE, "")
    parts = cookie.split(".")
    if len(parts) != 4:
        raise AuthenticationError("not logged in: open /ui/login and paste your API key")
    key_id, expires, nonce, sig = parts
    key = svc.memory.store.get_key(key_id) if key_id.isalnum() else None
    secret = _secret(svc)
    if key is None or not key.active or not expires.isdigit() or int(expires) < time.time() \
            or not hmac.compare_digest(sig, _sign(secret, key_id, expires, nonce, key.secret_hash)):
        raise AuthenticationError("the session is over (expired, or its key was revoked): "
                                  "log in again")
    who = Principal(key)
    request.scope["memstrata.principal"] = who  # audited like the REST API
    limit = key.rate_limit if key.rate_limit is not None else svc.settings.rate_limit
    if limit:
        now = time.time()
        hits = svc.memory.store.hit_rate(key.id, int(now // 60))
        if hits > limit:
            raise RateLimitError(f"key {key.id} made more than {limit} requests this minute",
                                 retry_after=60 - now % 60)
    return UiSession(who, cookie, _csrf(secret, cookie))


def check_origin(request: Request) -> None:
    """A state-changing request whose ``Origin`` (or, lacking it, ``Referer``) names
    another site is refused."""
    sent = request.headers.get("origin") or request.headers.get("referer")
    if not sent:
        return
    if sent == "null":
        raise PermissionDeniedError("cross-site request refused (Origin: null)")
    origin = urlsplit(sent)
    host = request.headers.get("host", "")
    if origin.netloc != host:
        raise PermissionDeniedError(f"cross-site request refused: it came from {origin.netloc!r}, "
                                    f"not from this server ({host!r})")


def check_csrf(request: Request, session: UiSession, sent: str | None) -> None:
    """PermissionDeniedError unless the request carries the session's CSRF token and
    comes from this site."""
    check_origin(request)
    token = sent or request.headers.get("x-csrf-token") or ""
    if not hmac.compare_digest(token.encode(), session.csrf.encode()):
        raise PermissionDeniedError("missing or wrong CSRF token: reload the page and try again")
