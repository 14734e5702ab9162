"""SQLite: API keys, the audit log and rate-limit windows of the HTTP service
(:class:`~memstrata.stores.base.AdminStore`)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime

from ...errors import ConflictError, NotFoundError
from ...types import from_timestamp
from ..base import ApiKey, AuditEntry
from .connection import SQLiteConnection

__all__ = ["SQLiteAdmin"]

_KEY_COLUMNS = "id, tenant, role, name, secret_hash, created_at, user_id, rate_limit, created_by, revoked_at"


def _key(row: sqlite3.Row) -> ApiKey:
    created = from_timestamp(row["created_at"])
    assert created is not None
    return ApiKey(row["id"], row["tenant"], row["role"], row["name"], row["secret_hash"], created,
                  row["user_id"], row["rate_limit"], row["created_by"],
                  from_timestamp(row["revoked_at"]))


def _audit(row: sqlite3.Row) -> AuditEntry:
    at = from_timestamp(row["at"])
    assert at is not None
    return AuditEntry(at, row["tenant"], row["key_id"], row["role"], row["action"], row["method"],
                      row["path"], row["status"], row["user_id"], row["target"], row["request_id"],
                      row["seq"])


class SQLiteAdmin(SQLiteConnection):
    """The service's store-wide tables (migration ``0005_p10_service``)."""

    def put_key(self, key: ApiKey) -> None:
        def taken(detail: object) -> Exception:
            return ConflictError(f"an API key with id {key.id!r} exists already")

        with self.transaction():
            self._insert_many(f"INSERT INTO api_keys ({_KEY_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                              [(key.id, key.tenant, key.role, key.name, key.secret_hash,
                                key.created_at.timestamp(), key.user_id, key.rate_limit,
                                key.created_by,
                                key.revoked_at.timestamp() if key.revoked_at else None)],
                              taken=taken)

    def get_key(self, key_id: str) -> ApiKey | None:
        row = self._x(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id=?", (key_id,)).fetchone()
        return _key(row) if row else None

    def list_keys(self, tenant: str | None = None) -> list[ApiKey]:
        if tenant is None:
            rows = self._x(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id")
        else:
            rows = self._x(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant=? "
                           "ORDER BY created_at, id", (tenant,))
        return [_key(r) for r in rows]

    def revoke_key(self, key_id: str, at: datetime) -> ApiKey:
        with self.transaction():
            self._x("UPDATE api_keys SET revoked_at=? WHERE id=? AND revoked_at IS NULL",
                    (at.timestamp(), key_id))
            key = self.get_key(key_id)
        if key is None:
            raise NotFoundError(f"no API key {key_id!r}; `memstrata keys list` shows them")
        return key

    def append_audit(self, entry: AuditEntry) -> AuditEntry:
        with self.transaction():
            done = self._x("INSERT INTO audit_log (at, tenant, key_id, role, action, method, path, "
                           "status, user_id, target, request_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                           (entry.at.timestamp(), entry.tenant, entry.key_id, entry.role,
                            entry.action, entry.method, entry.path, entry.status, entry.user_id,
                            entry.target, entry.request_id))
        return replace(entry, seq=int(done.lastrowid or 0))

    def pseudonymise_audit(self, tenant: str, user_id: str, pseudonym: str) -> int:
        with self.transaction():
            done = self._x("UPDATE audit_log SET user_id=?, path=replace(path, ?, ?) WHERE "
                           "tenant=? AND user_id=?", (pseudonym, f"/users/{user_id}",
                                                      f"/users/{pseudonym}", tenant, user_id))
        return int(done.rowcount)

    def revoke_user_keys(self, tenant: str, user_id: str, pseudonym: str, at: datetime) -> int:
        with self.transaction():
            done = self._x("UPDATE api_keys SET revoked_at=COALESCE(revoked_at, ?), user_id=? "
                           "WHERE tenant=? AND user_id=?", (at.timestamp(), pseudonym, tenant, user_id))
        return int(done.rowcount)

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
            params.append(since.timestamp())
        if before_seq is not None:
            where.append("seq<?")
            params.append(before_seq)
        rows = self._x(f"SELECT * FROM audit_log WHERE {' AND '.join(where)} ORDER BY seq DESC "
                       "LIMIT ?", (*params, limit))
        return [_audit(r) for r in rows]

    def hit_rate(self, bucket: str, window: int) -> int:
        with self.transaction():
            row = self._x("INSERT INTO rate_windows (bucket, window, hits) VALUES (?,?,1) "
                          "ON CONFLICT (bucket, window) DO UPDATE SET hits=hits+1 RETURNING hits",
                          (bucket, window)).fetchone()
            hits = int(row[0]) if row else 1
            if hits == 1:  # a new minute: the bucket's older windows are done with
                self._x("DELETE FROM rate_windows WHERE bucket=? AND window<?", (bucket, window))
        return hits
