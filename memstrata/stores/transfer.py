"""Moving memory between stores: a versioned JSON Lines export, and its restore.

``memstrata export`` writes, and ``memstrata restore`` reads, one JSON object per line::

    {"embedder":"local:e5-small","format":"memstrata-export","type":"header","version":1}
    {"type":"session","namespace":"","user_id":"lin","session_id":"s1",...}   # the row in full
    {"type":"message","namespace":"","user_id":"lin","session_id":"s1","seq":0,"id":...}
    {"type":"item","namespace":"","user_id":"lin","id":"mem_…",...,"versions":[{...},...]}
    {"type":"job","namespace":"","user_id":"lin","id":"job_…","status":"done",...}
    {"type":"profile_version","namespace":"","user_id":"lin","version":1,"data":{...},...}
    {"type":"end","counts":{"item":1,"message":2,"session":1,"version":3}}

Users come in (namespace, user_id) order; within a user, sessions by id, each followed
by its messages by sequence number, then items by id, each with its whole version
history, oldest first, then jobs in queue order (pending ones run after a restore, as
they would have) and the versions of the profile overrides. Keys are sorted and
separators fixed, so the same memory exports to the same bytes from SQLite and from
PostgreSQL, and an export restored elsewhere and exported again is byte-identical.

What is *not* exported is what can be rebuilt: the retrieval index (documents, BM25
statistics, vectors) and the embedding cache. A restore writes the rows; the caller
rebuilds each restored user's index with :meth:`memstrata.Memory.reindex` (the CLI does,
with the embedder named in the header unless told otherwise). The trailing ``end``
record carries the counts, so a truncated file is refused rather than half-restored.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..errors import ValidationError, shown
from ..types import Filters, ItemVersion, MemoryItem, Message, Scope, Status, dumps, parse_time
from .base import Job, ProfileVersion, SessionRecord, Store

__all__ = ["FORMAT", "VERSION", "export_jsonl", "read_header", "restore_jsonl", "RestoreResult"]

FORMAT = "memstrata-export"
VERSION = 1
_ALL_ITEMS = Filters(statuses=tuple(Status))
_NO_LIMIT = 10**12


def _scope_fields(scope: Scope) -> dict[str, str]:
    return {"namespace": scope.namespace, "user_id": scope.user_id}


def _session_record(scope: Scope, s: SessionRecord) -> dict[str, Any]:
    return {"type": "session", **_scope_fields(scope), "session_id": s.session_id,
            "created_at": s.created_at.isoformat(), "updated_at": s.updated_at.isoformat(),
            "status": s.status, "version": s.version, "summary": s.summary,
            "message_range_end": s.message_range_end, "metadata": dict(s.metadata)}


def _records(store: Store, scope: Scope) -> Iterator[dict[str, Any]]:
    """One user's records, in export order."""
    for session in sorted(store.list_sessions(scope), key=lambda s: s.session_id):
        yield _session_record(scope, session)
        for message in store.get_messages(scope, session.session_id):
            yield {"type": "message", **_scope_fields(scope), **message.to_dict()}
    items = store.list_items(scope, _ALL_ITEMS, limit=_NO_LIMIT)
    for item in sorted(items, key=lambda i: i.id):
        versions = [v.to_dict() for v in store.history(scope, item.id)]
        yield {"type": "item", **item.to_dict(), "versions": versions}
    for job in store.list_jobs(scope, limit=_NO_LIMIT):
        yield {"type": "job", **_scope_fields(scope), "id": job.id, "kind": job.kind,
               "payload": dict(job.payload), "status": job.status, "attempts": job.attempts,
               "worker": job.worker, "last_error": job.last_error,
               "result": dict(job.result) if job.result is not None else None,
               "lease_until": job.lease_until.isoformat() if job.lease_until else None,
               "created_at": job.created_at.isoformat(), "updated_at": job.updated_at.isoformat()}
    for profile in store.profile_versions(scope):
        yield {"type": "profile_version", **_scope_fields(scope), "version": profile.version,
               "data": dict(profile.data), "actor": profile.actor, "reason": profile.reason,
               "at": profile.at.isoformat()}


def export_jsonl(store: Store, out: TextIO, *, scopes: Sequence[Scope] | None = None) -> Counter[str]:
    """Write the given users (default: every user) of ``store`` to ``out``; return the counts."""
    chosen = store.list_users() if scopes is None else list(scopes)
    counts: Counter[str] = Counter()
    out.write(dumps({"type": "header", "format": FORMAT, "version": VERSION,
                     "embedder": store.get_meta("embedder")}) + "\n")
    for scope in sorted(set(chosen), key=lambda s: (s.namespace, s.user_id)):
        for record in _records(store, scope):
            counts[record["type"]] += 1
            counts["version"] += len(record.get("versions", ()))
            out.write(dumps(record) + "\n")
    out.write(dumps({"type": "end", "counts": dict(sorted(counts.items()))}) + "\n")
    return counts


@dataclass
class RestoreResult:
    """What :func:`restore_jsonl` wrote: the users (to reindex) and counts per record type."""

    scopes: list[Scope] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    embedder: str | None = None


def _parse(lines: Iterable[str], source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{source}:{number}: not JSON ({exc.msg}); is this a "
                                  "`memstrata export` file?") from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise ValidationError(f"{source}:{number}: every line must be an object with a 'type'")
        yield number, record


def _check_header(first: tuple[int, dict[str, Any]] | None, source: str) -> dict[str, Any]:
    if first is None:
        raise ValidationError(f"{source} is empty; expected a `memstrata export` file")
    _, header = first
    if header.get("type") != "header" or header.get("format") != FORMAT:
        raise ValidationError(f"{source} does not start with a {FORMAT} header; for conversations "
                              "(sessions of messages) use `memstrata import`")
    version = header.get("version")
    if not isinstance(version, int) or version > VERSION or version < 1:
        raise ValidationError(f"{source} is {FORMAT} version {shown(version)}; this memstrata reads "
                              f"versions 1 to {VERSION}: upgrade memstrata")
    return header


def read_header(lines: Iterable[str], source: str = "export") -> dict[str, Any]:
    """The header of an export (format, version, the embedder its index was built with)."""
    return _check_header(next(_parse(lines, source), None), source)


def _claim_scope(record: dict[str, Any], existing: set[Scope], seen: set[Scope],
                 result: RestoreResult) -> Scope:
    """The record's scope, refused when the store already holds memory for it (nothing
    is merged); a scope seen for the first time is listed in ``result``."""
    scope = Scope(record["user_id"], record.get("namespace") or "")
    if scope not in seen:
        if scope in existing:
            raise ValidationError(
                f"user {shown(scope.user_id)}" + (f" in namespace {shown(scope.namespace)}"
                                                 if scope.namespace else "")
                + " already has memory in this store; restore into an empty store "
                "(or export with --user for the others)")
        seen.add(scope)
        result.scopes.append(scope)
    return scope


def _session(record: dict[str, Any]) -> SessionRecord:
    return SessionRecord(
        record["session_id"], parse_time(record["created_at"]),
        parse_time(record["updated_at"]), record["status"],
        int(record["version"]), summary=record.get("summary"),
        message_range_end=int(record.get("message_range_end", 0)),
        metadata=record.get("metadata") or {})


def _job(scope: Scope, record: dict[str, Any]) -> Job:
    lease = record.get("lease_until")
    return Job(
        record["id"], scope.namespace, scope.user_id, record["kind"],
        record.get("payload") or {}, record["status"], int(record["attempts"]),
        parse_time(record["created_at"]), parse_time(record["updated_at"]),
        record.get("worker"), parse_time(lease) if lease else None,
        record.get("last_error"), record.get("result"))


def _restore_item(store: Store, scope: Scope, record: dict[str, Any]) -> int:
    """Write an item with its whole version history; returns the number of versions."""
    versions = [ItemVersion.from_dict(v) for v in record.get("versions") or ()]
    if not versions:
        raise ValidationError("an item without its version history")
    item = MemoryItem.from_dict(record)
    for version in versions:
        store.write_item(scope, item, version)
    return len(versions)


def _check_end(ended: dict[str, Any] | None, result: RestoreResult, source: str) -> None:
    """A truncated file, or one whose counts disagree with its end record, is refused."""
    if ended is None:
        raise ValidationError(f"{source} ends without its end record: the file is truncated; "
                              "nothing was restored")
    expected = ended.get("counts") or {}
    if {k: v for k, v in expected.items() if v} != {k: v for k, v in result.counts.items() if v}:
        raise ValidationError(f"{source}: the end record counts {expected} but the file holds "
                              f"{dict(result.counts)}; nothing was restored")


def restore_jsonl(store: Store, lines: Iterable[str], *, source: str = "export") -> RestoreResult:
    """Write an export into ``store`` in one transaction, keeping every id, sequence
    number, time, status and version. Users already present in ``store`` are refused
    (nothing is merged); a file without its ``end`` record, or whose counts disagree
    with it, is refused and nothing is written. The retrieval index is left to rebuild.
    """
    records = _parse(lines, source)
    header = _check_header(next(records, None), source)
    result = RestoreResult(embedder=header.get("embedder"))
    existing = set(store.list_users())
    seen: set[Scope] = set()
    session: tuple[Scope, SessionRecord] | None = None
    messages: list[Message] = []
    ended = None

    with store.transaction():
        for number, record in records:
            kind = record["type"]
            if ended is not None:
                raise ValidationError(f"{source}:{number}: a record after the end record")
            if kind != "message" and session is not None:  # a session's block ends
                store.restore_session(session[0], session[1], messages)
                session = None
            if kind == "end":
                ended = record
                continue
            try:
                scope = _claim_scope(record, existing, seen, result)
                if kind == "session":
                    session, messages = (scope, _session(record)), []
                elif kind == "message":
                    if session is None or (scope, record["session_id"]) != (session[0],
                                                                             session[1].session_id):
                        raise ValidationError("a message outside its session's block")
                    messages.append(Message.from_dict(record, max_chars=_NO_LIMIT))
                elif kind == "item":
                    result.counts["version"] += _restore_item(store, scope, record)
                elif kind == "job":
                    store.restore_jobs(scope, [_job(scope, record)])
                elif kind == "profile_version":
                    store.add_profile_version(scope, ProfileVersion(
                        int(record["version"]), record["data"], record["actor"], record["reason"],
                        parse_time(record["at"])))
                else:
                    raise ValidationError(f"unknown record type {shown(kind)} (written by a newer "
                                          "memstrata?)")
            except (KeyError, TypeError, ValueError) as exc:
                raise ValidationError(f"{source}:{number}: bad {kind} record: {exc}") from exc
            result.counts[kind] += 1
        _check_end(ended, result, source)
    return result
