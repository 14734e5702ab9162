"""API keys: made here, shown once, stored only as a SHA-256 of their secret.

A key reads ``msk_<id>_<secret>``: the id finds the stored row (and names the key in
the audit log); the secret is 32 random bytes, so a fast hash is the right one (there
is nothing to brute-force) and the check is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from ..errors import AuthenticationError, ValidationError
from ..stores.base import ROLES, AdminStore, ApiKey
from ..ids import check_id
from ..types import Scope, utcnow

__all__ = ["Keys", "NewKey", "ROLES", "hash_secret"]

_KEY = re.compile(r"^msk_([0-9a-f]{16})_([A-Za-z0-9_-]{20,})$")


def hash_secret(secret: str) -> str:
    """The stored form of a key's secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key just made: ``token`` is the only time the secret is seen."""

    key: ApiKey
    token: str


class Keys:
    """Creating, listing, revoking and checking API keys over an :class:`AdminStore`."""

    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def create(self, tenant: str, role: str, *, name: str = "", user_id: str | None = None,
               rate_limit: int | None = None, created_by: str | None = None) -> NewKey:
        """A new key of ``tenant`` with ``role``; ``user_id`` is required for (and only
        allowed with) the ``end-user`` role."""
        check_id(tenant, "tenant")  # the tenant is the users' namespace: the same rule
        if role not in ROLES:
            raise ValidationError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        if (role == "end-user") != (user_id is not None):
            raise ValidationError("an end-user key needs exactly one user id (--user); other "
                                  "roles reach every user of their tenant and take none")
        if user_id is not None:
            Scope(user_id, tenant)  # the same id rules as everywhere
        if rate_limit is not None and (not isinstance(rate_limit, int) or isinstance(rate_limit, bool)
                                       or rate_limit < 0):
            raise ValidationError(f"rate_limit must be a non-negative integer, got {rate_limit!r}")
        if not isinstance(name, str) or len(name) > 200:
            raise ValidationError("name must be a string of at most 200 characters")
        key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        key = ApiKey(key_id, tenant, role, name or f"{role} key", hash_secret(secret), utcnow(),
                     user_id=user_id, rate_limit=rate_limit, created_by=created_by)
        self.store.put_key(key)
        return NewKey(key, f"msk_{key_id}_{secret}")

    def authenticate(self, token: str | None) -> ApiKey:
        """The active key ``token`` is, or AuthenticationError (the same words for an
        unknown, malformed, wrong or revoked key: nothing to probe)."""
        if not token:
            raise AuthenticationError("no API key: send 'Authorization: Bearer msk_…' (or "
                                      "'X-API-Key: msk_…'); `memstrata keys create` makes one")
        found = _KEY.match(token.strip())
        key = self.store.get_key(found.group(1)) if found else None
        if found is None or key is None or not key.active or not hmac.compare_digest(
                key.secret_hash, hash_secret(found.group(2))):
            raise AuthenticationError("the API key is unknown or revoked")
        return key

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key now (its next request gets 401)."""
        return self.store.revoke_key(key_id, utcnow())
