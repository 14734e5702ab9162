"""Mem0's ``Memory`` method names over memstrata: switch by changing one import.

::

    # from mem0 import Memory
    from memstrata.compat.mem0 import Memory

    m = Memory()                                    # or Memory("postgresql://…"), Memory(memory=…)
    m.add(messages, user_id="alice", metadata={"category": "movies"})
    related = m.search("What do you know about me?", user_id="alice")
    for row in related["results"]:
        print(row["memory"], row["score"])

The calls take Mem0's arguments and answer Mem0's shapes (``{"results": [...]}`` rows with
``id``, ``memory``, ``score``, ``metadata``, ``created_at``, ``updated_at``, ``user_id``);
underneath they are :class:`memstrata.UserMemory` calls, documented call by call in
docs/migrating-from-mem0.md. ``agent_id`` is memstrata's agent namespace and ``run_id``
a session. What differs: ``add`` stores the turns and learns from them in the background
(:meth:`Memory.flush` waits; ``infer=False`` stores each message as a memory instead);
``search`` ranks turns and memories together and returns the memories;
``update``/``delete`` keep or erase the item's versions, which ``history`` lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import NotFoundError, ValidationError
from ..memory import Memory as _Memory
from ..types import Filters, Layer, MemoryItem, Status
from ..user import UserMemory

__all__ = ["Memory"]


def _row(item: MemoryItem, score: float | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": item.id, "memory": item.content, "hash": None,
                           "metadata": dict(item.metadata) or None,
                           "created_at": item.created_at.isoformat(),
                           "updated_at": item.updated_at.isoformat(), "user_id": item.user_id}
    if score is not None:
        row["score"] = score
    return row


class Memory:
    """Mem0's ``Memory`` (its open-source library class) over a :class:`memstrata.Memory`.

    ``store`` and ``settings`` are memstrata's (default: ``sqlite:///memstrata.db``, the
    offline embedder); or pass ``memory=`` an open :class:`memstrata.Memory`."""

    def __init__(self, store: Any = None, *, memory: _Memory | None = None, **settings: Any) -> None:
        self.memory = memory if memory is not None else _Memory(store, **settings)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Memory":
        """memstrata's settings as a dict (``{"store": ..., "embedder": ...}``); Mem0's
        provider blocks do not apply and are refused by name."""
        return cls(**dict(config))

    def _handle(self, user_id: str | None, agent_id: str | None) -> UserMemory:
        if not user_id:
            raise ValidationError("memstrata keeps memory per person: pass user_id (agent_id "
                                  "alone names an app namespace, not whose memory it is)")
        return self.memory.user(user_id, agent=agent_id)

    def _owner(self, memory_id: str, user_id: str | None, agent_id: str | None) -> UserMemory:
        """The handle of the user a memory belongs to. Mem0 addresses a memory by id
        alone; memstrata's ids live in their user's scope, so without ``user_id`` each
        user of the store is asked (one read each: pass ``user_id`` when you have it)."""
        if user_id:
            return self._handle(user_id, agent_id)
        for scope in self.memory.users():
            handle = self.memory.user(scope.user_id, agent=scope.namespace or None)
            try:
                handle.get(memory_id)
            except NotFoundError:
                continue
            return handle
        raise NotFoundError(f"no memory {memory_id!r} for any user of this store")

    def add(self, messages: Any, user_id: str | None = None, agent_id: str | None = None,
            run_id: str | None = None, metadata: Mapping[str, Any] | None = None,
            infer: bool = True, **_: Any) -> dict[str, Any]:
        """Store a conversation (a string, one message dict or a list): the turns go to
        the session ``run_id`` (default ``"default"``) and what they say about the user
        is learned in the background. With ``infer=False`` each message is stored as a
        memory as it is. Returns ``{"results": [{"id", "memory", "event"}]}`` — the
        memories added by then."""
        handle = self._handle(user_id, agent_id)
        session = run_id or "default"
        if not infer:
            listed = [messages] if isinstance(messages, (str, Mapping)) else list(messages)
            out = []
            for message in listed:
                text = message if isinstance(message, str) else message.get("content")
                item = handle.remember(str(text), metadata=metadata, session_id=session,
                                       reason="mem0 add(infer=False)")
                out.append({"id": item.id, "memory": item.content, "event": "ADD"})
            return {"results": out}
        if metadata:
            listed = [messages] if isinstance(messages, (str, Mapping)) else list(messages)
            messages = [{"role": "user", "content": m} if isinstance(m, str) else m for m in listed]
            messages = [{**m, "metadata": {**dict(metadata), **dict(m.get("metadata") or {})}}
                        for m in messages]
        added = handle.add(messages, session)
        self.memory.flush()
        sources = set(added.message_ids)
        learned = [i for i in handle.list(limit=1000) if sources & set(i.source_message_ids)]
        return {"results": [{"id": i.id, "memory": i.content, "event": "ADD"} for i in learned]}

    def get(self, memory_id: str, user_id: str | None = None,
            agent_id: str | None = None) -> dict[str, Any]:
        """One memory by id."""
        return _row(self._owner(memory_id, user_id, agent_id).get(memory_id))

    def get_all(self, user_id: str | None = None, agent_id: str | None = None,
                run_id: str | None = None, limit: int = 100, **_: Any) -> dict[str, Any]:
        """The user's memories, newest first (of the session ``run_id`` when given)."""
        filters = {"session_id": run_id} if run_id else None
        return {"results": [_row(i) for i in self._handle(user_id, agent_id).list(
            filters=filters, limit=limit)]}

    def search(self, query: str, user_id: str | None = None, agent_id: str | None = None,
               run_id: str | None = None, limit: int = 100, threshold: float | None = None,
               **_: Any) -> dict[str, Any]:
        """The memories that answer ``query``, best first, with their scores."""
        handle = self._handle(user_id, agent_id)
        filters = Filters(layers=(Layer.SEMANTIC,), statuses=(Status.ACTIVE,),
                          session_ids=(run_id,) if run_id else ())
        options: dict[str, Any] = {"min_score": threshold} if threshold is not None else {}
        hits = handle.search(query, k=limit, filters=filters, **options)
        rows = []
        for hit in hits:
            rows.append(_row(handle.get(hit.id), round(hit.score, 6)))
        return {"results": rows}

    def update(self, memory_id: str, data: str, user_id: str | None = None,
               agent_id: str | None = None) -> dict[str, Any]:
        """Replace a memory's text: a new version, the old one kept in its history."""
        self._owner(memory_id, user_id, agent_id).update(memory_id, content=data, reason="mem0 update()")
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str, user_id: str | None = None,
               agent_id: str | None = None) -> dict[str, Any]:
        """Forget one memory for real (every version, its index entry and vector)."""
        self._owner(memory_id, user_id, agent_id).forget(memory_id)
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, user_id: str | None = None, agent_id: str | None = None,
                   run_id: str | None = None) -> dict[str, Any]:
        """Forget everything of the user (memories, conversations, profile, index)."""
        self._handle(user_id, agent_id).forget_all()
        return {"message": "Memories deleted successfully!"}

    def history(self, memory_id: str, user_id: str | None = None,
                agent_id: str | None = None) -> list[dict[str, Any]]:
        """Every change of a memory, oldest first: ``old_memory``, ``new_memory``,
        ``event`` (ADD, UPDATE, DELETE…), when, and memstrata's who and why."""
        events = {"create": "ADD", "edit": "UPDATE", "supersede": "UPDATE", "delete": "DELETE"}
        out = []
        for v in self._owner(memory_id, user_id, agent_id).history(memory_id):
            out.append({"id": f"{memory_id}:v{v.version}", "memory_id": memory_id,
                        "old_memory": (v.before or {}).get("content"),
                        "new_memory": (v.after or {}).get("content"),
                        "event": events.get(v.op, v.op.upper()), "created_at": v.at.isoformat(),
                        "actor": v.actor, "reason": v.reason})
        return out

    def reset(self) -> None:
        """Forget every user of the store."""
        for scope in self.memory.users():
            self.memory.user(scope.user_id, agent=scope.namespace or None).forget_all()

    def flush(self) -> None:
        """Wait for what memstrata is learning in the background."""
        self.memory.flush()

    def close(self) -> None:
        self.memory.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
