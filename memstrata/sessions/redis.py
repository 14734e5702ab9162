"""Sessions in Redis (``redis://host:6379/0``) or a Redis Cluster (``redis+cluster://host:7000``).

Per session, two keys that share one hash tag, so a Cluster keeps them on one slot and a
Lua script may touch both atomically::

    <prefix>:{<ns>:<user>:<session>}:meta   hash: version, status, count, archived,
                                             summary, range_end, created_at, active_at
    <prefix>:{<ns>:<user>:<session>}:log    list: held messages (JSON), oldest first

and two indexes, each a single key: ``<prefix>:activity`` (sorted set of every session
by last activity, which :meth:`RedisSessionStore.expired` scans) and
``<prefix>:{<ns>:<user>}:sessions`` (one user's sessions by last activity, for resume).
Ids are percent-encoded so a ``{``, ``}`` or ``:`` in an id cannot move the hash tag.

Every write is one Lua script that checks the version first (optimistic locking). The
activity indexes are updated *before* the script runs, so a crash between the two leaves
a session that is swept too early (the sweep re-checks ``active_at``), never one that is
forgotten. Archiving copies the held messages to the main Store (skipping any that an
earlier, interrupted archive already copied — they keep their ids), then trims exactly
those from the list; the meta hash stays as a small tombstone with the summary.

The URL may carry ``?prefix=...`` (default ``memstrata``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

from ..errors import ConfigError, ConflictError, StoreError, StoreUnavailableError
from ..stores.base import Store
from ..types import Message, Role, Scope, StructuredSummary, dumps, from_timestamp, new_id, parse_time
from .base import DEFAULT_WINDOW_MESSAGES, SessionState, SessionStore

__all__ = ["RedisSessionStore"]

_LOAD = """
local meta = redis.call('HGETALL', KEYS[1])
local log = redis.call('LRANGE', KEYS[2], tonumber(ARGV[1]), -1)
return {meta, log}
"""

# ARGV: expected version, now, message JSON...; returns the new version, or -1 - actual
_APPEND = """
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if v ~= tonumber(ARGV[1]) then return -1 - v end
for i = 3, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
if v == 0 then redis.call('HSET', KEYS[1], 'created_at', ARGV[2]) end
local count = tonumber(redis.call('HGET', KEYS[1], 'count') or '0')
redis.call('HSET', KEYS[1], 'version', v + 1, 'count', count + #ARGV - 2, 'status', 'open',
           'active_at', ARGV[2])
return v + 1
"""

# ARGV: expected version, field, value, field, value...
_SET = """
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if v ~= tonumber(ARGV[1]) or v == 0 then return -1 - v end
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], 'version', v + 1)
return v + 1
"""

# ARGV: id of the first handed-over message, how many, now, the sequence number after
# the last one. Trims them only if the list still starts with them (a concurrent
# archiver may have trimmed already). ``archived`` is a sequence number, not a count:
# forgotten held messages leave gaps.
_TRIM = """
local first = redis.call('LINDEX', KEYS[2], 0)
local n = tonumber(ARGV[2])
if first and cjson.decode(first)['id'] == ARGV[1] then
  redis.call('LTRIM', KEYS[2], n, -1)
  local done = tonumber(redis.call('HGET', KEYS[1], 'archived') or '0')
  redis.call('HSET', KEYS[1], 'archived', math.max(done, tonumber(ARGV[4])))
end
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if redis.call('LLEN', KEYS[2]) == 0 and v > 0 then
  redis.call('HSET', KEYS[1], 'status', 'archived', 'version', v + 1)
  return 1
end
return 0
"""

# ARGV: ids of held messages to drop (forgetting); returns how many were dropped. The
# list is rewritten without them and the version bumped, so a concurrent writer retries.
_DROP = """
local drop = {}
for i = 1, #ARGV do drop[ARGV[i]] = true end
local held = redis.call('LRANGE', KEYS[2], 0, -1)
local keep, n = {}, 0
for _, raw in ipairs(held) do
  if drop[cjson.decode(raw)['id']] then n = n + 1 else keep[#keep + 1] = raw end
end
if n > 0 then
  redis.call('DEL', KEYS[2])
  for i = 1, #keep, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(keep, i, math.min(i + 999, #keep)))
  end
  local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
  if v > 0 then redis.call('HSET', KEYS[1], 'version', v + 1) end
end
return n
"""

# on the activity index: forget a member only if it saw no activity after ARGV[2]
_FORGET = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
"""


def _explain(exc: Exception, where: str) -> StoreError:
    import redis

    if isinstance(exc, redis.exceptions.AuthenticationError):
        return StoreUnavailableError(f"Redis at {where} refused the credentials ({exc}); fix "
                                     "the user/password in the sessions URL")
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        return StoreUnavailableError(
            f"cannot reach Redis at {where} ({exc}); start it (redis-server --port ...) or fix "
            "the sessions URL. Session state is not available, so nothing was read or written")
    if isinstance(exc, redis.exceptions.RedisClusterException):
        return StoreUnavailableError(f"Redis Cluster at {where} is not usable ({exc}); check "
                                     "that every node is up and the cluster state is ok")
    return StoreError(f"Redis error at {where}: {exc}")


def _part(value: str) -> str:
    return quote(value, safe="")


def _ts(value: datetime) -> str:
    return repr(value.timestamp())


def _message_json(m: Message) -> str:
    return dumps({**m.to_dict(), "created_at": m.created_at.timestamp()})


def _message(raw: bytes | str) -> Message:
    data = json.loads(raw)
    return Message(role=Role(data["role"]), content=data["content"],
                   created_at=parse_time(data["created_at"]), id=data["id"],
                   session_id=data["session_id"], seq=data["seq"], name=data.get("name"),
                   tool_calls=tuple(data.get("tool_calls") or ()),
                   tool_call_id=data.get("tool_call_id"), metadata=data.get("metadata") or {})


class RedisSessionStore(SessionStore):
    """Hot session state in Redis; archived messages go to ``archive_to`` (the main Store)."""

    hot_log = True

    def __init__(self, url: str, archive_to: Store, *,
                 window: int = DEFAULT_WINDOW_MESSAGES) -> None:
        try:
            import redis
            from redis.cluster import RedisCluster
        except ImportError as exc:
            raise ConfigError("Redis sessions need the redis package: "
                              "pip install 'memstrata[redis]'") from exc
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        self.prefix = query.pop("prefix", ["memstrata"])[0]
        self.url = url
        self.window = window
        self.store = archive_to
        self._where = parts.hostname and f"{parts.hostname}:{parts.port or 6379}" or url
        cluster = parts.scheme.endswith("+cluster")
        plain = urlunsplit(("rediss" if parts.scheme.startswith("rediss") else "redis",
                            parts.netloc, parts.path, "", ""))
        opts = {"socket_timeout": 10, "socket_connect_timeout": 5}
        try:
            self.client: Any = (RedisCluster.from_url(plain, **opts) if cluster
                                else redis.Redis.from_url(plain, **opts))
            self.client.ping()
        except redis.exceptions.RedisError as exc:
            raise _explain(exc, self._where) from exc
        self._load = self.client.register_script(_LOAD)
        self._append = self.client.register_script(_APPEND)
        self._set = self.client.register_script(_SET)
        self._trim = self.client.register_script(_TRIM)
        self._forget = self.client.register_script(_FORGET)
        self._drop = self.client.register_script(_DROP)

    def close(self) -> None:
        self.client.close()

    # -- keys ----------------------------------------------------------------------
    def _keys(self, scope: Scope, session_id: str) -> list[str]:
        tag = f"{self.prefix}:{{{_part(scope.namespace)}:{_part(scope.user_id)}:{_part(session_id)}}}"
        return [f"{tag}:meta", f"{tag}:log"]

    def _user_key(self, scope: Scope) -> str:
        return f"{self.prefix}:{{{_part(scope.namespace)}:{_part(scope.user_id)}}}:sessions"

    @property
    def _activity_key(self) -> str:
        return f"{self.prefix}:activity"

    @staticmethod
    def _member(scope: Scope, session_id: str) -> str:
        return json.dumps([scope.namespace, scope.user_id, session_id])

    def _call(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        import redis

        try:
            return func(*args, **kwargs)
        except redis.exceptions.RedisError as exc:
            raise _explain(exc, self._where) from exc

    # -- reads -----------------------------------------------------------------------
    def _read(self, scope: Scope, session_id: str, window: int) -> tuple[dict[str, str], list[Message]]:
        meta_raw, log = self._call(self._load, keys=self._keys(scope, session_id),
                                   args=[-window if window else 0])
        it = iter(x.decode() if isinstance(x, bytes) else x for x in meta_raw)
        return dict(zip(it, it)), [_message(r) for r in log]

    def _state(self, scope: Scope, session_id: str, meta: dict[str, str],
               log: list[Message]) -> SessionState:
        if not meta:
            return SessionState(scope, session_id)
        summary = meta.get("summary")
        return SessionState(
            scope, session_id, version=int(meta["version"]), status=meta.get("status", "open"),
            message_count=int(meta.get("count", 0)), recent=tuple(log[-self.window:]),
            summary=StructuredSummary.from_dict(json.loads(summary)) if summary else None,
            message_range_end=int(meta.get("range_end", 0)),
            created_at=from_timestamp(float(meta["created_at"])) if "created_at" in meta else None,
            active_at=from_timestamp(float(meta["active_at"])) if "active_at" in meta else None)

    def load(self, scope: Scope, session_id: str) -> SessionState:
        meta, log = self._read(scope, session_id, self.window)
        return self._state(scope, session_id, meta, log)

    def messages(self, scope: Scope, session_id: str, start: int = 0) -> list[Message]:
        meta, held = self._read(scope, session_id, 0)  # window 0: the whole list
        archived = int(meta.get("archived", 0))
        out = self.store.get_messages(scope, session_id, start=start) if start < archived else []
        out = [m for m in out if m.seq < archived]
        return out + [m for m in held if m.seq >= start]

    # -- writes ----------------------------------------------------------------------
    def _touch(self, scope: Scope, session_id: str, at: datetime) -> None:
        # before the write: a crash in between makes an early sweep, never a lost session
        self._call(self.client.zadd, self._activity_key, {self._member(scope, session_id): at.timestamp()})
        self._call(self.client.zadd, self._user_key(scope), {session_id: at.timestamp()})

    def append(self, scope: Scope, session_id: str, messages: Sequence[Message],
               expected_version: int) -> tuple[SessionState, list[Message]]:
        now = datetime.now(UTC)
        base = self.load(scope, session_id).message_count if expected_version else 0
        stored = [Message(role=m.role, content=m.content, created_at=m.created_at,
                          id=m.id or new_id("msg"), session_id=session_id, seq=base + i,
                          name=m.name, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
                          metadata=m.metadata) for i, m in enumerate(messages)]
        self._touch(scope, session_id, now)
        # the script rejects the write unless the version (hence the count) is unchanged
        version = self._call(self._append, keys=self._keys(scope, session_id),
                             args=[expected_version, _ts(now), *map(_message_json, stored)])
        if version < 0:
            raise ConflictError(f"session {session_id!r} of user {scope.user_id!r} is at version "
                                f"{-1 - version}, not {expected_version}: another writer got "
                                "there first; reload the session and retry")
        return self.load(scope, session_id), stored

    def save_summary(self, scope: Scope, session_id: str, summary: StructuredSummary,
                     range_end: int, expected_version: int) -> SessionState:
        version = self._call(self._set, keys=self._keys(scope, session_id),
                             args=[expected_version, "summary", dumps(summary.to_dict()),
                                   "range_end", range_end])
        if version < 0:
            raise ConflictError(f"session {session_id!r} of user {scope.user_id!r} is at version "
                                f"{-1 - version}, not {expected_version}; reload and retry")
        return self.load(scope, session_id)

    def archive(self, scope: Scope, session_id: str) -> tuple[SessionState, list[Message]]:
        meta, held = self._read(scope, session_id, 0)
        if not meta or (meta.get("status") == "archived" and not held):
            return self._state(scope, session_id, meta, held), []
        if held:
            # an interrupted archive may have copied a prefix already: skip those ids
            already = {m.id for m in self.store.get_messages(scope, session_id, start=held[0].seq)}
            fresh = [m for m in held if m.id not in already]
            if fresh:
                self.store.append_messages(scope, session_id, fresh)
            self._call(self._trim, keys=self._keys(scope, session_id),
                       args=[held[0].id, len(held), _ts(datetime.now(UTC)), held[-1].seq + 1])
        else:
            self._call(self._trim, keys=self._keys(scope, session_id), args=["", 0, "0", 0])
        state = self.load(scope, session_id)
        if state.status == "archived":
            self._call(self._forget, keys=[self._activity_key],
                       args=[self._member(scope, session_id), meta.get("active_at", "0")])
        return state, held

    # -- forgetting -------------------------------------------------------------------
    def session_ids(self, scope: Scope) -> list[str]:
        raw = self._call(self.client.zrange, self._user_key(scope), 0, -1)
        return [r.decode() if isinstance(r, bytes) else r for r in raw]

    def forget_messages(self, scope: Scope, session_id: str, message_ids: Sequence[str]) -> int:
        if not message_ids:
            return 0
        return int(self._call(self._drop, keys=self._keys(scope, session_id), args=list(message_ids)))

    def forget_user(self, scope: Scope) -> int:
        removed = 0
        for session_id in self.session_ids(scope):
            for key in self._keys(scope, session_id):  # one slot: one call per key on a Cluster
                removed += int(self._call(self.client.delete, key))
            self._call(self.client.zrem, self._activity_key, self._member(scope, session_id))
        return removed + int(self._call(self.client.delete, self._user_key(scope)))

    def expired(self, now: datetime, idle: timedelta, limit: int = 100) -> list[tuple[Scope, str]]:
        raw = self._call(self.client.zrangebyscore, self._activity_key, "-inf",
                         (now - idle).timestamp(), start=0, num=limit)
        out = []
        for member in raw:
            ns, user, sid = json.loads(member)
            out.append((Scope(user, ns), sid))
        return out

    def latest(self, scope: Scope, *, exclude: str | None = None) -> SessionState | None:
        ids = self._call(self.client.zrevrange, self._user_key(scope), 0, 20)
        for raw in ids:
            sid = raw.decode() if isinstance(raw, bytes) else raw
            if sid == exclude:
                continue
            state = self.load(scope, sid)
            if state.summary is not None:
                return state
        return None

