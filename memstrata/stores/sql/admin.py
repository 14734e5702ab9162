"""The HTTP service's store-wide tables — API keys, the audit log and rate-limit windows
(:class:`~memstrata.stores.base.AdminStore`, migration ``0005_p10_service``) — written
once for both SQL backends. On Citus they are reference tables: small, read by every node."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from ...errors import ConflictError, NotFoundError
from ..base import ApiKey, AuditEntry
from .dialect import SQLDialect, stored_time, time_out

__all__ = ["SQLAdmin"]

_KEY_COLUMNS = "id, tenant, role, name, secret_hash, created_at, user_id, rate_limit, created_by, revoked_at"
_AUDIT_COLUMNS = "at, tenant, key_id, role, action, method, path, status, user_id, target, request_id"


def _key(row: Any) -> ApiKey:
    return ApiKey(row["id"], row["tenant"], row["role"], row["name"], row["secret_hash"],
                  stored_time(row["created_at"]), row["user_id"], row["rate_limit"],
                  row["created_by"], time_out(row["revoked_at"]))


def _audit(row: Any) -> AuditEntry:
    return AuditEntry(stored_time(row["at"]), row["tenant"], row["key_id"], row["role"],
                      row["action"], row["method"], row["path"], row["status"], row["user_id"],
                      row["target"], row["request_id"], row["seq"])


class SQLAdmin(SQLDialect):
    """:class:`~memstrata.stores.base.AdminStore` over the backend's dialect."""

    def put_key(self, key: ApiKey) -> None:
        def taken(detail: object) -> Exception:
            return ConflictError(f"an API key with id {key.id!r} exists already")

        with self.transaction():
            self._qm(f"INSERT INTO api_keys ({_KEY_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                     [(key.id, key.tenant, key.role, key.name, key.secret_hash,
                       self._time_in(key.created_at), key.user_id, key.rate_limit, key.created_by,
                       self._time_in(key.revoked_at))], taken=taken)

    def get_key(self, key_id: str) -> ApiKey | None:
        rows = self._q(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id=?", (key_id,))
        return _key(rows[0]) if rows else None

    def list_keys(self, tenant: str | None = None) -> list[ApiKey]:
        where, params = ("", ()) if tenant is None else ("WHERE tenant=? ", (tenant,))
        rows = self._q(f"SELECT {_KEY_COLUMNS} FROM api_keys {where}ORDER BY created_at, id", params)
        return [_key(r) for r in rows]

    def revoke_key(self, key_id: str, at: datetime) -> ApiKey:
        with self.transaction():
            self._q("UPDATE api_keys SET revoked_at=? WHERE id=? AND revoked_at IS NULL",
                    (self._time_in(at), key_id))
            key = self.get_key(key_id)
        if key is None:
            raise NotFoundError(f"no API key {key_id!r}; `memstrata keys list` shows them")
        return key

    def append_audit(self, entry: AuditEntry) -> AuditEntry:
        with self.transaction():
            rows = self._q(f"INSERT INTO audit_log ({_AUDIT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                           "RETURNING seq",
                           (self._time_in(entry.at), entry.tenant, entry.key_id, entry.role,
                            entry.action, entry.method, entry.path, entry.status, entry.user_id,
                            entry.target, entry.request_id))
        return replace(entry, seq=int(rows[0]["seq"]))

    def pseudonymise_audit(self, tenant: str, user_id: str, pseudonym: str) -> int:
        with self.transaction():
            rows = self._q("UPDATE audit_log SET user_id=?, path=replace(path, ?, ?) WHERE "
                           "tenant=? AND user_id=? RETURNING seq",
                           (pseudonym, f"/users/{user_id}", f"/users/{pseudonym}", tenant, user_id))
        return len(rows)

    def revoke_user_keys(self, tenant: str, user_id: str, pseudonym: str, at: datetime) -> int:
        with self.transaction():
            rows = self._q("UPDATE api_keys SET revoked_at=COALESCE(revoked_at, ?), user_id=? "
                           "WHERE tenant=? AND user_id=? RETURNING id",
                           (self._time_in(at), pseudonym, tenant, user_id))
        return len(rows)

    def list_audit(self, tenant: str, *, user_id: str | None = None, key_id: str | None = None,
                   action: str | None = None, since: datetime | None = None,
                   before_seq: int | None = None, limit: int = 100) -> list[AuditEntry]:
        where: list[str] = ["tenant=?"]
        params: list[object] = [tenant]
        for column, value in (("user_id", user_id), ("key_id", key_id)):
            if value is not None:
                where.append(f"{column}=?")
                params.append(value)
        if action is not None:
            where.append("(action=? OR substr(action, 1, ?)=?)")
            params += [action, len(action) + 1, action + "."]
        if since is not None:
            where.append("at>=?")
            params.append(self._time_in(since))
        if before_seq is not None:
            where.append("seq<?")
            params.append(before_seq)
        rows = self._q(f"SELECT seq, {_AUDIT_COLUMNS} FROM audit_log WHERE {' AND '.join(where)} "
                       "ORDER BY seq DESC LIMIT ?", (*params, limit))
        return [_audit(r) for r in rows]

    def hit_rate(self, bucket: str, window: int) -> int:
        minute = self._rate_window
        with self.transaction():
            rows = self._q(f"INSERT INTO rate_windows (bucket, {minute}, hits) VALUES (?,?,1) "
                           f"ON CONFLICT (bucket, {minute}) DO UPDATE SET hits=rate_windows.hits+1 "
                           "RETURNING hits", (bucket, window))
            hits = int(rows[0]["hits"])
            if hits == 1:  # a new minute: the bucket's older windows are done with
                self._q(f"DELETE FROM rate_windows WHERE bucket=? AND {minute}<?", (bucket, window))
        return hits
