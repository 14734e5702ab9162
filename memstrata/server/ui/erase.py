"""Forgetting from the inspector: first the exact list of what will be erased, then the
erasing — the same list, so what the confirmation showed is what goes.

Two things can be forgotten: an item (optionally with the turns it was extracted from)
and a session's turns (optionally with the items extracted from them). Whenever turns
of a session go, the forgetter rebuilds that session's summary from the turns that
remain (it was written from them), and its stored steps v1…vN give way to the rebuilt one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ...errors import ConflictError, NotFoundError
from ...user import UserMemory
from .views import ALL_STATUSES

__all__ = ["Erasure", "plan_item", "plan_session", "erase"]


@dataclass(frozen=True, slots=True)
class Erasure:
    """Exactly what a forget will erase."""

    items: tuple[dict[str, Any], ...] = ()  # id, kind, content, versions
    turns: tuple[dict[str, Any], ...] = ()  # id, session_id, seq, role, content
    summaries: tuple[dict[str, Any], ...] = ()  # session_id, version, message_range_end
    session_id: str | None = None
    with_turns: bool = False
    with_items: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"items": list(self.items), "turns": list(self.turns),
                "summaries": list(self.summaries), "session_id": self.session_id,
                "with_turns": self.with_turns, "with_items": self.with_items,
                "digest": self.digest}

    @property
    def digest(self) -> str:
        """Names exactly the rows listed: a forget sent with the digest of what it was
        shown erases nothing if the list changed meanwhile (a turn arrived, say)."""
        text = "|".join(sorted(self.item_ids)) + "#" + "|".join(sorted(self.turn_ids))
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
    if items:
        for item in handle.list(filters=ALL_STATUSES, limit=10**6):
            if item.source_session_id == session_id or ids & set(item.source_message_ids):
                rows.append(_item_row(handle, item.id)[0])
    return Erasure(items=tuple(rows), turns=turns, summaries=_summaries(handle, {session_id}),
                   session_id=session_id, with_items=items)


def erase(handle: UserMemory, plan: Erasure) -> dict[str, int]:
    """Erase what ``plan`` lists, in one transaction; returns the counts erased."""
    m = handle.memory
    scope = handle.scope
    with m.store.transaction():
        if plan.item_ids:
            m.forgetter.forget(scope, plan.item_ids, messages=False)
        # the forgetter rebuilds the summaries of the sessions whose turns go
        turns = m.forgetter.forget_turns(scope, plan.turn_ids) if plan.turn_ids else 0
    return {"items": len(plan.item_ids), "turns": turns, "summaries": len(plan.summaries)}



