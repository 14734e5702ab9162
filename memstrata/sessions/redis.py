"""Sessions cached in Redis (``redis://host:6379/0``) or a Redis Cluster (``redis+cluster://host:7000``).

The main store is the record. Every write goes to the main store's session rows and raw
log first (:class:`~memstrata.sessions.store.StoreSessionStore`: the version check and
the write in one transaction), so an acknowledged ``add`` is committed in SQLite or
PostgreSQL before the call returns, whatever happens to Redis. Redis holds the working
set — each session's state as :meth:`load` returns it: version, status, summary and the
recent window — as a write-through cache:

    <prefix>:{<digest of ns, user, session>}:state   hash: version, state (JSON), epoch
    <prefix>:{<digest of ns, user>}:cached           set: the user's sessions cached here

Why it stays true to the store:

* a write's new state is put into the cache only once the store's transaction committed
  (:meth:`~memstrata.stores.base.Lifecycle.on_commit`), and only over an older version,
  so two writers finishing out of order leave the newer state;
* a cache miss (a new session, an expired entry, a Redis restarted empty) reads the
  store and fills the entry only if no write or forget touched it meanwhile (``epoch``);
* forgetting drops the entry (the ``epoch`` goes up, the hash keeps only that counter
  for a minute so a reader that read the store before the forget cannot fill it back);
* a write against a version the store no longer has is a conflict in the store: the
  entry is dropped and the writer reloads from the store.

So losing Redis loses nothing: the next read rebuilds each entry from the store. Redis
being unreachable is still a :class:`~memstrata.errors.StoreUnavailableError` (never a
silently empty session), and ``/readyz`` says so.

Earlier versions held a session's messages *only* in Redis until it was archived
(``:meta`` and ``:log`` keys). Opening the store hands any such held messages to the
main store once (:meth:`RedisSessionStore.drain_legacy`), then deletes those keys.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from ..errors import ConfigError, ConflictError, StoreError, StoreUnavailableError
from ..stores.base import Store
from ..types import Message, Role, Scope, StructuredSummary, parse_time
from .base import DEFAULT_WINDOW_MESSAGES, SessionState, SessionStore
from .store import StoreSessionStore

__all__ = ["RedisSessionStore"]

log = logging.getLogger("memstrata.sessions")

#: Seconds a cached session state lives without being written or read again; a cache
#: entry is a copy, so expiring it loses nothing.
CACHE_TTL_S = 3600
#: Seconds a dropped entry keeps its epoch (so a slow reader cannot fill it back).
TOMBSTONE_TTL_S = 60

# After a commit. ARGV: version, state JSON, ttl. Replaces only an older version.
_PUT = """
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '-1')
if v > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'state', ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""

# After a miss. ARGV: the epoch read before the store was, version, state JSON, ttl.
# Fills only an empty entry that nothing dropped meanwhile.
_FILL = """
if redis.call('HEXISTS', KEYS[1], 'state') == 1 then return 0 end
if (redis.call('HGET', KEYS[1], 'epoch') or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'state', ARGV[3])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
return 1
"""

# Forgetting or a conflict. ARGV: tombstone ttl.
_DROP = """
redis.call('HDEL', KEYS[1], 'version', 'state')
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
return 1
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


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _legacy_message(raw: bytes | str) -> Message:
    data = json.loads(raw)
    return Message(role=Role(data["role"]), content=data["content"],
                   created_at=parse_time(data["created_at"]), id=data["id"],
                   session_id=data["session_id"], seq=data["seq"], name=data.get("name"),
                   tool_calls=tuple(data.get("tool_calls") or ()),
                   tool_call_id=data.get("tool_call_id"), metadata=data.get("metadata") or {})


class RedisSessionStore(SessionStore):
    """Session state in the main store, cached in Redis (write-through)."""

    hot_log = False

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
        self.record = StoreSessionStore(archive_to, window=window)
        self._where = parts.hostname and f"{parts.hostname}:{parts.port or 6379}" or url
        self.cluster = parts.scheme.endswith("+cluster")
        plain = urlunsplit(("rediss" if parts.scheme.startswith("rediss") else "redis",
                            parts.netloc, parts.path, "", ""))
        opts = {"socket_timeout": 10, "socket_connect_timeout": 5}
        try:
            self.client: Any = (RedisCluster.from_url(plain, **opts) if self.cluster
                                else redis.Redis.from_url(plain, **opts))
            self.client.ping()
        except redis.exceptions.RedisError as exc:
            raise _explain(exc, self._where) from exc
        self._put = self.client.register_script(_PUT)
        self._fill = self.client.register_script(_FILL)
        self._drop = self.client.register_script(_DROP)
        if not getattr(archive_to, "read_only", False):
            self.drain_legacy()

    def close(self) -> None:
        self.client.close()

    def ping(self) -> None:
        """Raise StoreUnavailableError unless Redis answers (for ``/readyz``)."""
        self._call(self.client.ping)

    # -- keys ----------------------------------------------------------------------
    # Key names are digests: no user or session id appears in a key name, so a dropped
    # entry's tombstone (its epoch) names nobody, and one hash tag per key keeps each
    # script on one Cluster slot.
    def _key(self, scope: Scope, session_id: str) -> str:
        return f"{self.prefix}:{{{_digest(scope.namespace, scope.user_id, session_id)}}}:state"

    def _user_key(self, scope: Scope) -> str:
        return f"{self.prefix}:{{{_digest(scope.namespace, scope.user_id)}}}:cached"

    def _call(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        import redis

        try:
            return func(*args, **kwargs)
        except redis.exceptions.RedisError as exc:
            raise _explain(exc, self._where) from exc

    # -- the cache ---------------------------------------------------------------------
    def _cache_put(self, state: SessionState) -> None:
        """Put a committed state (runs after the store's commit). A Redis failure here
        is logged, not raised: the write is committed, and an entry left older than the
        store is dropped by the next write's conflict or expires."""
        try:
            self._call(self._put, keys=[self._key(state.scope, state.session_id)],
                       args=[state.version, json.dumps(state.to_dict()), CACHE_TTL_S])
            self._index(state.scope, state.session_id)
        except StoreError as exc:
            log.warning("session cache not updated after a committed write: %s", exc)

    def _index(self, scope: Scope, session_id: str) -> None:
        # the user's set outlives each of its entries (its TTL is renewed with theirs)
        self._call(self.client.sadd, self._user_key(scope), session_id)
        self._call(self.client.expire, self._user_key(scope), CACHE_TTL_S)

    def _cache_drop(self, scope: Scope, session_id: str) -> None:
        self._call(self._drop, keys=[self._key(scope, session_id)], args=[TOMBSTONE_TTL_S])

    def _after_commit(self, state: SessionState) -> None:
        self.store.on_commit(f"redis-session:{self._key(state.scope, state.session_id)}",
                             lambda: self._cache_put(state))

    # -- reads -----------------------------------------------------------------------
    def load(self, scope: Scope, session_id: str) -> SessionState:
        key = self._key(scope, session_id)
        raw, epoch = self._call(self.client.hmget, key, ["state", "epoch"])
        if raw is not None:
            return SessionState.from_dict(json.loads(raw))
        state = self.record.load(scope, session_id)
        if state.exists:  # rebuilt from the store (a miss: new, expired, or Redis lost it)
            self._call(self._fill, keys=[key], args=[_text(epoch) if epoch is not None else "0",
                                                    state.version, json.dumps(state.to_dict()),
                                                    CACHE_TTL_S])
            self._index(scope, session_id)
        return state

    def messages(self, scope: Scope, session_id: str, start: int = 0) -> list[Message]:
        return self.record.messages(scope, session_id, start)

    # -- writes ----------------------------------------------------------------------
    def append(self, scope: Scope, session_id: str, messages: Sequence[Message],
               expected_version: int) -> tuple[SessionState, list[Message]]:
        try:
            state, stored = self.record.append(scope, session_id, messages, expected_version)
        except ConflictError:
            self._cache_drop(scope, session_id)  # the writer read a stale entry: reload from the store
            raise
        self._after_commit(state)
        return state, stored

    def save_summary(self, scope: Scope, session_id: str, summary: StructuredSummary,
                     range_end: int, expected_version: int) -> SessionState:
        try:
            state = self.record.save_summary(scope, session_id, summary, range_end, expected_version)
        except ConflictError:
            self._cache_drop(scope, session_id)
            raise
        self._after_commit(state)
        return state

    def archive(self, scope: Scope, session_id: str) -> tuple[SessionState, list[Message]]:
        state, handed = self.record.archive(scope, session_id)
        if state.exists:
            self._after_commit(state)
        return state, handed

    def expired(self, now: datetime, idle: timedelta, limit: int = 100) -> list[tuple[Scope, str]]:
        return self.record.expired(now, idle, limit)

    def latest(self, scope: Scope, *, exclude: str | None = None) -> SessionState | None:
        return self.record.latest(scope, exclude=exclude)

    # -- forgetting -------------------------------------------------------------------
    def session_ids(self, scope: Scope) -> list[str]:
        return self.record.session_ids(scope)

    def forget_messages(self, scope: Scope, session_id: str, message_ids: Sequence[str]) -> int:
        # the forgetter deletes the turns from the store; the cached recent window may
        # quote them: drop it now and again once the deletion committed
        if message_ids:
            self._cache_drop(scope, session_id)
            self.store.on_commit(f"redis-session:{self._key(scope, session_id)}",
                                 lambda: self._cache_drop(scope, session_id))
        return 0

    def forget_user(self, scope: Scope) -> int:
        cached = {_text(r) for r in self._call(self.client.smembers, self._user_key(scope))}
        removed = 0
        for session_id in sorted(cached):  # one slot per session: one call each on a Cluster
            key = self._key(scope, session_id)
            removed += int(self._call(self.client.hexists, key, "state"))
            self._cache_drop(scope, session_id)
        return removed + int(self._call(self.client.delete, self._user_key(scope)))

    # -- upgrading from held messages ---------------------------------------------------
    def _scan(self, pattern: str) -> list[str]:
        if self.cluster:
            return [_text(k) for k in self._call(lambda: list(self.client.scan_iter(
                match=pattern, count=1000, target_nodes=self.client.PRIMARIES)))]
        return [_text(k) for k in self._call(lambda: list(self.client.scan_iter(
            match=pattern, count=1000)))]

    def drain_legacy(self) -> int:
        """Hand the messages an earlier memstrata held only in Redis (``:log`` keys) to
        the main store, keep their summary, and delete the old keys; returns how many
        messages were handed over. A message already in the store (by id) is skipped,
        so an interrupted drain is safely repeated at the next open."""
        escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in self.prefix)
        handed = 0
        for log_key in self._scan(f"{escaped}:{{*}}:log"):
            tag = log_key[len(self.prefix) + 2:-len("}:log")]
            parts = tag.split(":")
            if len(parts) != 3:
                continue
            scope, session_id = Scope(unquote(parts[1]), unquote(parts[0])), unquote(parts[2])
            meta_key = log_key[:-len(":log")] + ":meta"
            held = [_legacy_message(r) for r in self._call(self.client.lrange, log_key, 0, -1)]
            meta = {_text(k): _text(v) for k, v in
                    self._call(self.client.hgetall, meta_key).items()}
            with self.store.transaction():
                have = {m.id for m in self.store.get_messages(scope, session_id)}
                fresh = [m for m in held if m.id not in have]
                if fresh:
                    self.store.append_messages(scope, session_id, fresh)
                row = self.store.get_session(scope, session_id)
                if row is not None and row.summary is None and meta.get("summary"):
                    self.store.update_session(scope, session_id, row.version,
                                              summary=meta["summary"],
                                              message_range_end=int(meta.get("range_end", 0)))
            handed += len(fresh)
            self._call(self.client.delete, log_key)
            self._call(self.client.delete, meta_key)
        if handed:
            log.warning("handed %d message(s) held in Redis by an earlier memstrata to the "
                        "main store; index them with `memstrata reindex` per user", handed)
        for key in self._scan(f"{escaped}:{{*}}:sessions") + self._scan(f"{escaped}:activity"):
            self._call(self.client.delete, key)
        return handed
