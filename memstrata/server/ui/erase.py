"""Forgetting from the inspector: first the exact list of what will be erased, then the
erasing — the same list, so what the confirmation showed is what goes.

Two things can be forgotten: an item (optionally with the turns it was extracted from)
and a session's turns (optionally with the items extracted from them). Whenever turns
of a session go, the forgetter rebuilds that session's summary from the turns that
remain (it was written from them), and its stored steps v1…vN give way to the rebuilt one.
An item a session's turns stated that other turns still state too (the user said it again
in another session) is not erased with them: it stays, and its sources shrink to those.

:func:`erase_item` and :func:`erase_session` plan and erase in one transaction under the
user's write lock (``Forgetter.exclusive``): an extraction job that committed items from
these turns a moment before is in the plan; one that commits after starts over without
them. A plan read earlier (the confirmation page) is only compared by its digest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ...errors import ConflictError, NotFoundError
from ...types import utcnow
from ...user import UserMemory
from .views import ALL_STATUSES

__all__ = ["Erasure", "plan_item", "plan_session", "erase", "erase_item", "erase_session"]


@dataclass(frozen=True, slots=True)
class Erasure:
    """Exactly what a forget will erase."""

    items: tuple[dict[str, Any], ...] = ()  # id, kind, content, versions
    turns: tuple[dict[str, Any], ...] = ()  # id, session_id, seq, role, content
    summaries: tuple[dict[str, Any], ...] = ()  # session_id, version, message_range_end
    # items kept, their sources shrinking: id, kind, content, sources (message id -> session)
    shrunk: tuple[dict[str, Any], ...] = ()
    session_id: str | None = None
    with_turns: bool = False
    with_items: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"items": list(self.items), "turns": list(self.turns),
                "summaries": list(self.summaries), "shrunk": list(self.shrunk),
                "session_id": self.session_id,
                "with_turns": self.with_turns, "with_items": self.with_items,
                "digest": self.digest}

    @property
    def digest(self) -> str:
        """Names exactly the rows listed: a forget sent with the digest of what it was
        shown erases nothing if the list changed meanwhile (a turn arrived, say)."""
        text = "|".join(sorted(self.item_ids)) + "#" + "|".join(sorted(self.turn_ids))
        if self.shrunk:
            text += "#" + "|".join(sorted(i["id"] for i in self.shrunk))
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def check(self, digest: str | None) -> None:
        """ConflictError unless ``digest`` (when given) is this plan's."""
        if digest is not None and digest != self.digest:
            raise ConflictError("what would be erased changed since the list was shown (new "
                                "turns or items); review the list again")

    @property
    def item_ids(self) -> list[str]:
        return [i["id"] for i in self.items]

    @property
    def turn_ids(self) -> list[str]:
        return [t["id"] for t in self.turns]


def _item_row(handle: UserMemory, item_id: str) -> tuple[dict[str, Any], set[str]]:
    item = handle.get(item_id)
    versions = handle.history(item_id)
    sources = set(item.source_message_ids)
    for v in versions:
        for value in (v.before, v.after):
            sources.update((value or {}).get("source_message_ids") or ())
    return ({"id": item.id, "kind": item.kind.value, "status": item.status.value,
             "content": item.content, "versions": len(versions)}, sources)


def _summaries(handle: UserMemory, session_ids: set[str]) -> tuple[dict[str, Any], ...]:
    out = []
    for sid in sorted(session_ids):
        state = handle.session(sid)
        if state.summary is not None and not state.summary.is_empty:
            out.append({"session_id": sid, "version": state.summary.version,
                        "message_range_end": state.message_range_end})
    return tuple(out)


def _turn_rows(handle: UserMemory, ids: set[str]) -> tuple[dict[str, Any], ...]:
    rows = []
    for info in handle.sessions():
        for m in handle.messages(info.session_id):
            if m.id in ids:
                rows.append({"id": m.id, "session_id": m.session_id, "seq": m.seq,
                             "role": m.role.value, "content": m.content or ""})
    return tuple(rows)


def plan_item(handle: UserMemory, item_id: str, *, turns: bool) -> Erasure:
    """What forgetting ``item_id`` erases (with ``turns``: and its source turns)."""
    row, sources = _item_row(handle, item_id)
    found = _turn_rows(handle, sources) if turns else ()
    return Erasure(items=(row,), turns=found,
                   summaries=_summaries(handle, {t["session_id"] for t in found}),
                   with_turns=turns)


def plan_session(handle: UserMemory, session_id: str, *, items: bool) -> Erasure:
    """What forgetting a session's turns erases (with ``items``: and the items
    extracted from them, or remembered in that session)."""
    state = handle.session(session_id)
    if not state.exists:
        raise NotFoundError(f"no session {session_id!r} of this user")
    turns = tuple({"id": m.id, "session_id": m.session_id, "seq": m.seq, "role": m.role.value,
                   "content": m.content or ""} for m in handle.messages(session_id))
    ids = {t["id"] for t in turns}
    rows: list[dict[str, Any]] = []
    shrunk: list[dict[str, Any]] = []
    where: dict[str, str] | None = None  # message id -> session, of the other sessions
    if items:
        for item in handle.list(filters=ALL_STATUSES, limit=10**6):
            if item.source_session_id == session_id or ids & set(item.source_message_ids):
                if where is None:
                    where = {m.id: info.session_id for info in handle.sessions()
                             if info.session_id != session_id for m in handle.messages(info.session_id)}
                others = {mid: where[mid] for mid in item.source_message_ids if mid in where}
                if others:  # other sessions state it too: it stays, sourced by them
                    shrunk.append({"id": item.id, "kind": item.kind.value, "content": item.content,
                                   "sources": others})
                else:
                    rows.append(_item_row(handle, item.id)[0])
    return Erasure(items=tuple(rows), turns=turns, summaries=_summaries(handle, {session_id}),
                   shrunk=tuple(shrunk), session_id=session_id, with_items=items)


def erase(handle: UserMemory, plan: Erasure) -> dict[str, int]:
    """Erase what ``plan`` lists, in one transaction under the user's write lock; returns
    the counts erased. Read the plan inside the same lock (:func:`erase_item`,
    :func:`erase_session`), or a job may write from these turns in between."""
    m = handle.parts
    scope = handle.scope
    with m.forgetter.exclusive(scope):
        if plan.item_ids:
            m.forgetter.forget(scope, plan.item_ids, messages=False)
        now = utcnow()
        for row in plan.shrunk:
            old = m.store.get_item(scope, row["id"])
            sources = row["sources"]
            session = old.source_session_id if old.source_session_id in sources.values() \
                else next(iter(sources.values()))
            m.writer.write(scope, old.evolve(source_message_ids=tuple(sources),
                                             source_session_id=session, updated_at=now),
                           old, "edit", "forget", "its turns in another session were forgotten", now)
        # the forgetter rebuilds the summaries of the sessions whose turns go
        turns = m.forgetter.forget_turns(scope, plan.turn_ids) if plan.turn_ids else 0
    return {"items": len(plan.item_ids), "turns": turns, "summaries": len(plan.summaries),
            "shrunk": len(plan.shrunk)}


def erase_item(handle: UserMemory, item_id: str, *, turns: bool,
               digest: str | None = None) -> dict[str, int]:
    """Plan and erase an item (with ``turns``: and its source turns) under the user's
    write lock; with ``digest``, a ConflictError when the plan is not the one shown."""
    with handle.parts.forgetter.exclusive(handle.scope):
        plan = plan_item(handle, item_id, turns=turns)
        plan.check(digest)
        return erase(handle, plan)


def erase_session(handle: UserMemory, session_id: str, *, items: bool,
                  digest: str | None = None) -> dict[str, int]:
    """Plan and erase a session's turns (with ``items``: and the items they alone state)
    under the user's write lock; with ``digest``, a ConflictError when the plan is not
    the one shown."""
    with handle.parts.forgetter.exclusive(handle.scope):
        plan = plan_session(handle, session_id, items=items)
        plan.check(digest)
        return erase(handle, plan)
