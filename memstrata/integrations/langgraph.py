"""A LangGraph ``BaseStore`` backed by memstrata: LangGraph agents get hybrid bilingual
search (BM25 + vectors, Chinese and English), a version history of every put, and
forgetting that removes the bytes.

::

    from langgraph.graph import StateGraph
    from memstrata import Memory
    from memstrata.integrations.langgraph import MemstrataStore

    store = MemstrataStore(Memory("sqlite:///memstrata.db"))
    store.put(("memories", "lin"), "tea", {"text": "Lin drinks oolong tea, 乌龙茶"})
    store.search(("memories", "lin"), query="what tea?")
    graph = StateGraph(...).compile(store=store)

How it maps: a LangGraph namespace is one memstrata user scope — its labels joined by
``.`` (a character LangGraph forbids in labels) are the user id, inside the memstrata
namespace ``agent`` (default ``langgraph``). Put a person's memories under one
namespace (``("memories", user_id)``) and ``memory.forget_user("memories.lin",
agent_id="langgraph")`` forgets them everywhere. Each (namespace, key) is one memory
item with a stable id; its value lives in the item's metadata, its searchable text is
the value's string fields (or the ``index`` fields of the put), and every put of an
existing key is a new version (``memory.history``). ``index=False`` keeps an item out of
query ranking. TTLs are not supported (``supports_ttl`` is False).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from langgraph.store.base import (BaseStore, GetOp, Item, ListNamespacesOp, MatchCondition, Op,
                                  PutOp, Result, SearchItem, SearchOp)

from ..errors import NotFoundError, ValidationError, shown
from ..layers.semantic.items import new_item
from ..memory import Memory
from ..types import Filters, MemoryItem
from ..user import UserMemory

__all__ = ["MemstrataStore", "matches", "item_text"]

_META = "langgraph"
_ALL = Filters(statuses=())  # every status: a put is an active item; nothing else is ours
_NO_LIMIT = 10**9


def _user(namespace: Sequence[str]) -> str:
    return ".".join(namespace)


def _namespace(user_id: str) -> tuple[str, ...]:
    return tuple(user_id.split("."))


def _item_id(namespace: Sequence[str], key: str) -> str:
    digest = hashlib.sha256("\x00".join([*namespace, "", key]).encode()).hexdigest()
    return f"lg_{digest[:28]}"


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if value.strip():
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def item_text(value: dict[str, Any], fields: Sequence[str] | None) -> str:
    """The searchable text of a value: its string (and number) leaves, in order — of the
    whole value for ``$`` or no fields, else of each dotted field path."""
    parts: list[str] = []
    for path in fields or ("$",):
        node: Any = value
        if path != "$":
            for step in path.split("."):
                node = node.get(step) if isinstance(node, dict) else None
        parts.extend(_leaves(node))
    return "\n".join(parts) or json.dumps(value, ensure_ascii=False, sort_keys=True)


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(actual, op, v) for op, v in wanted.items())
        return isinstance(actual, dict) and all(_compare(actual.get(k), v) for k, v in wanted.items())
    return bool(actual == wanted)


def _operator(actual: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return bool(actual == wanted)
    if op == "$ne":
        return bool(actual != wanted)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(actual), float(wanted)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValidationError(f"unsupported filter operator {shown(op)}; use $eq, $ne, $gt, $gte, $lt, $lte")


def matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    """Whether ``value`` passes a LangGraph search filter (exact values, nested dicts,
    and ``$eq $ne $gt $gte $lt $lte``)."""
    return all(_compare(value.get(k), v) for k, v in (filter or {}).items())


def _fits(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = (namespace[:len(path)] if condition.match_type == "prefix"
            else namespace[len(namespace) - len(path):])
    return all(p == "*" or p == n for p, n in zip(path, part))


class MemstrataStore(BaseStore):
    """LangGraph's store interface over a :class:`~memstrata.Memory` (see the module)."""

    supports_ttl = False

    def __init__(self, memory: Memory, *, agent: str = "langgraph",
                 index_fields: Sequence[str] | None = None) -> None:
        self.memory = memory
        self.agent = agent
        self.index_fields = tuple(index_fields) if index_fields else ("$",)

    # -- the two methods LangGraph derives everything from ---------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; one result each (None for puts)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValidationError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the work is database and model I/O)."""
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)

    # -- the operations -----------------------------------------------------------------------
    def _handle(self, namespace: Sequence[str]) -> UserMemory:
        return self.memory.user(_user(namespace), agent=self.agent)

    @staticmethod
    def _item(item: MemoryItem, score: float | None = None, *, search: bool = False) -> Item:
        meta = item.metadata[_META]
        fields = {"namespace": tuple(meta["namespace"]), "key": meta["key"], "value": meta["value"],
                  "created_at": item.created_at, "updated_at": item.updated_at}
        return SearchItem(**fields, score=score) if search else Item(**fields)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        try:
            item = self._handle(namespace).get(_item_id(namespace, key))
        except NotFoundError:
            return None
        return self._item(item)

    def _put(self, op: PutOp) -> None:
        handle = self._handle(op.namespace)
        item_id = _item_id(op.namespace, op.key)
        if op.value is None:
            try:
                handle.forget(item_id)
            except NotFoundError:
                pass
            return
        if not isinstance(op.value, dict):
            raise ValidationError(f"a store value must be a dict, not {type(op.value).__name__}")
        fields = self.index_fields if op.index is None else (op.index or None)
        content = item_text(op.value, fields)
        meta = {_META: {"namespace": list(op.namespace), "key": op.key, "value": op.value,
                        "index": op.index is not False}}
        try:
            handle.get(item_id)
        except NotFoundError:  # version 1, under the stable id of (namespace, key)
            item = new_item(handle.scope, content, limit=self.memory.settings.max_message_chars,
                            metadata=meta).evolve(id=item_id)
            self.memory.writer.create(handle.scope, item, actor="langgraph", reason="store.put")
            return
        handle.update(item_id, content=content, metadata=meta, actor="langgraph", reason="store.put")

    def _scopes(self, prefix: Sequence[str]) -> list[tuple[str, ...]]:
        prefix = tuple(prefix)
        return sorted(ns for ns in (_namespace(s.user_id) for s in self.memory.users()
                                    if s.namespace == self.agent) if ns[:len(prefix)] == prefix)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        wanted = op.offset + op.limit
        candidates: list[tuple[float | None, MemoryItem]] = []
        for namespace in self._scopes(op.namespace_prefix):
            items = self._handle(namespace).list(filters=_ALL, limit=_NO_LIMIT)
            candidates += [(None, i) for i in items if _META in i.metadata
                           and matches(i.metadata[_META]["value"], op.filter)]
        if op.query and op.query.strip() and candidates:
            scores: dict[str, float] = {}
            k = min(1000, max(50, wanted * 4))
            for namespace in {tuple(i.metadata[_META]["namespace"]) for _, i in candidates}:
                for hit in self._handle(namespace).search(op.query, k=k, filters={"layer": "semantic"},
                                                          scoring="relevance"):
                    scores[hit.id] = max(hit.score, scores.get(hit.id, 0.0))
            ranked = [(scores.get(i.id) if i.metadata[_META]["index"] else None, i) for _, i in candidates]
            candidates = sorted(ranked, key=lambda c: (c[0] is None, -(c[0] or 0.0)))
        else:  # no query: newest first, like a listing
            candidates.sort(key=lambda c: c[1].updated_at, reverse=True)
        return [self._item(i, score, search=True)  # type: ignore[misc]
                for score, i in candidates[op.offset:wanted]]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = [ns for ns in self._scopes(()) if all(_fits(ns, c) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            found = sorted({ns[:op.max_depth] for ns in found})
        return found[op.offset:op.offset + op.limit]
