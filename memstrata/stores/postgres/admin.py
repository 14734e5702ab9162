"""PostgreSQL: API keys, the audit log and rate-limit windows of the HTTP service
(:class:`~memstrata.stores.base.AdminStore`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from ...errors import ConflictError, NotFoundError
from ..base import ApiKey, AuditEntry
from .connection import PostgresConnection

__all__ = ["PostgresAdmin"]

_KEY_COLUMNS = "id, tenant, role, name, secret_hash, created_at, user_id, rate_limit, created_by, revoked_at"
_AUDIT_COLUMNS = "at, tenant, key_id, role, action, method, path, status, user_id, target, request_id"


def _key(row: dict[str, Any]) -> ApiKey:
    return ApiKey(row["id"], row["tenant"], row["role"], row["name"], row["secret_hash"],
                  row["created_at"], row["user_id"], row["rate_limit"], row["created_by"],
                  row["revoked_at"])


def _audit(row: dict[str, Any]) -> AuditEntry:
    return AuditEntry(row["at"], row["tenant"], row["key_id"], row["role"], row["action"],
                      row["method"], row["path"], row["status"], row["user_id"], row["target"],
                      row["request_id"], row["seq"])


class PostgresAdmin(PostgresConnection):
    """The service's store-wide tables (migration ``0005_p10_service``; reference tables
    on Citus: small, and read by every node)."""

    def put_key(self, key: ApiKey) -> None:
        def taken(detail: object) -> Exception:
            return ConflictError(f"an API key with id {key.id!r} exists already")

        with self.transaction():
            self._many(f"INSERT INTO api_keys ({_KEY_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                       [(key.id, key.tenant, key.role, key.name, key.secret_hash, key.created_at,
                         key.user_id, key.rate_limit, key.created_by, key.revoked_at)], taken=taken)

    def get_key(self, key_id: str) -> ApiKey | None:
        rows = self._x(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id=%s", (key_id,))
        return _key(rows[0]) if rows else None

    def list_keys(self, tenant: str | None = None) -> list[ApiKey]:
        if tenant is None:
            rows = self._x(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id")
        else:
            rows = self._x(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant=%s "
                           "ORDER BY created_at, id", (tenant,))
        return [_key(r) for r in rows]

    def revoke_key(self, key_id: str, at: datetime) -> ApiKey:
        with self.transaction():
            self._x("UPDATE api_keys SET revoked_at=%s WHERE id=%s AND revoked_at IS NULL",
                    (at, key_id))
            key = self.get_key(key_id)
        if key is None:
            raise NotFoundError(f"no API key {key_id!r}; `memstrata keys list` shows them")
        return key

    def append_audit(self, entry: AuditEntry) -> AuditEntry:
        with self.transaction():
            rows = self._x(f"INSERT INTO audit_log ({_AUDIT_COLUMNS}) VALUES "
                           "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING seq",
                           (entry.at, entry.tenant, entry.key_id, entry.role, entry.action,
                            entry.method, entry.path, entry.status, entry.user_id, entry.target,
                            entry.request_id))
        return replace(entry, seq=int(rows[0]["seq"]))

    def pseudonymise_audit(self, tenant: str, user_id: str, pseudonym: str) -> int:
        with self.transaction():
            rows = self._x("UPDATE audit_log SET user_id=%s, path=replace(path, %s, %s) WHERE "
                           "tenant=%s AND user_id=%s RETURNING seq",
                           (pseudonym, f"/users/{user_id}", f"/users/{pseudonym}", tenant, user_id))
        return len(rows)

    def revoke_user_keys(self, tenant: str, user_id: str, pseudonym: str, at: datetime) -> int:
        with self.transaction():
            rows = self._x("UPDATE api_keys SET revoked_at=COALESCE(revoked_at, %s), user_id=%s "
                           "WHERE tenant=%s AND user_id=%s RETURNING id", (at, pseudonym, tenant, user_id))
        return len(rows)

    def list_audit(self, tenant: str, *, user_id: str | None = None, key_id: str | None = None,
                   action: str | None = None, since: datetime | None = None,
                   before_seq: int | None = None, limit: int = 100) -> list[AuditEntry]:
        where: list[str] = ["tenant=%s"]
        params: list[object] = [tenant]
        for column, value in (("user_id", user_id), ("key_id", key_id)):
            if value is not None:
                where.append(f"{column}=%s")
                params.append(value)
        if action is not None:
            where.append("(action=%s OR left(action, %s)=%s)")
            params += [action, len(action) + 1, action + "."]
        if since is not None:
            where.append("at>=%s")
            params.append(since)
        if before_seq is not None:
            where.append("seq<%s")
            params.append(before_seq)
        rows = self._x(f"SELECT seq, {_AUDIT_COLUMNS} FROM audit_log WHERE {' AND '.join(where)} "
                       "ORDER BY seq DESC LIMIT %s", (*params, limit))
        return [_audit(r) for r in rows]

    def hit_rate(self, bucket: str, window: int) -> int:
        with self.transaction():
            rows = self._x("INSERT INTO rate_windows (bucket, window_min, hits) VALUES (%s,%s,1) "
                           "ON CONFLICT (bucket, window_min) DO UPDATE SET hits=rate_windows.hits+1 "
                           "RETURNING hits", (bucket, window))
            hits = int(rows[0]["hits"])
            if hits == 1:  # a new minute: the bucket's older windows are done with
                self._x("DELETE FROM rate_windows WHERE bucket=%s AND window_min<%s", (bucket, window))
        return hits
