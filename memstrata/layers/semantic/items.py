"""The one writer of memory items.

Every change to an item — create, boost, supersede, edit, undo, feedback, status (a todo
marked done), decay, eviction — goes through :meth:`ItemWriter.write`: the item row and
its version row (who, when, why, the values before and after) in one transaction, then
the index document, rewritten exactly when it differs from what is indexed
(:meth:`~memstrata.retrieval.indexer.Indexer.needs_reindex`). Hard deletes go through
:mod:`.forget`, which uses the same store seams.

The API's edits are validated here too (:func:`check_changes`), so the library, the CLI
and the service refuse the same things with the same words.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from ...checks import check_count, check_json, check_label, check_text
from ...errors import ConflictError, NotFoundError, ValidationError, shown
from ...retrieval.indexer import Indexer
from ...stores.base import ItemStore, Lifecycle, SearchIndex
from ...text import tokenize
from ...types import Filters, ItemVersion, Kind, Layer, MemoryItem, Scope, Status, new_id, utcnow
from .decide import FeedbackConfig, apply_feedback

__all__ = ["ItemWriter", "EDITABLE", "check_changes", "check_content", "check_unit", "new_item"]

log = logging.getLogger("memstrata.items")

#: Fields an API edit may change.
EDITABLE = ("content", "kind", "subject", "attribute", "value", "confidence", "importance",
            "status", "tags", "metadata")


def check_content(value: Any, what: str, limit: int) -> str:
    """A non-empty string of at most ``limit`` characters that can be stored (no lone
    surrogate: :func:`memstrata.checks.check_text`), or ValidationError."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise ValidationError(f"{what} is empty")
    if len(value) > limit:
        raise ValidationError(f"{what} is {len(value):,} characters, over the limit of {limit:,}; "
                              "shorten it or raise the max_message_chars setting")
    return check_text(value, what)


def check_unit(value: Any, what: str) -> float:
    """A number in [0, 1], or ValidationError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValidationError(f"{what} must be a number between 0 and 1, got {shown(value)}")
    return float(value)


def _kind(value: Any) -> Kind:
    if isinstance(value, str):  # (an Enum's own error would repr any value, however deep)
        try:
            return Kind(value)
        except ValueError:
            pass
    raise ValidationError(f"kind {shown(value)} is not one of {', '.join(k.value for k in Kind)}")


def _tags(value: Any) -> tuple[str, ...]:
    if value is not None and not isinstance(value, (list, tuple, set, frozenset)) \
            or not all(isinstance(t, str) for t in value or ()):
        raise ValidationError("tags must be a list of strings")
    return tuple(value or ())


def check_changes(changes: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """API edits, validated and normalised (content stripped, kind/status as enums)."""
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ValidationError(f"cannot update {sorted(unknown)}; editable: {', '.join(EDITABLE)}")
    out = dict(changes)
    if "content" in out:
        out["content"] = check_content(out["content"], "content", limit).strip()
    for key in ("confidence", "importance"):
        if key in out:
            out[key] = check_unit(out[key], key)
    if "kind" in out:
        out["kind"] = _kind(out["kind"])
    if "status" in out:
        try:
            out["status"] = Status(out["status"])
        except ValueError:
            raise ValidationError(f"status {shown(out['status'])} is not one of "
                                  f"{', '.join(s.value for s in Status)}") from None
    if "tags" in out:
        out["tags"] = _tags(out["tags"])
    if "metadata" in out and not isinstance(out["metadata"], Mapping):
        raise ValidationError("metadata must be a dict")
    if "metadata" in out:
        check_json(out["metadata"], "metadata")
    for key in ("subject", "attribute", "value"):
        if key in out and out[key] is not None and not isinstance(out[key], str):
            raise ValidationError(f"{key} must be a string or None")
    return out


_PIECES = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|\w+|[^\w\s]|\s+")


def follow_value(before: str, after: str, value: str | None) -> str | None:
    """The slot value ``after`` holds where ``before`` held ``value``: a corrected text
    ("User lives in Lisbon" → "User lives in Porto") moves its value with it ("Porto").
    ``value`` when the new text still says it; None when the words that said it are gone
    without a replacement (a value the text no longer supports is not kept)."""
    if not value or value.casefold() in after.casefold():
        return value
    start = before.casefold().find(value.casefold())
    if start < 0:
        return value  # the value was never in the words: nothing to follow
    old = _PIECES.findall(before)  # words, Chinese characters one by one, spaces, marks
    new = _PIECES.findall(after)
    ends = [sum(len(p) for p in old[:i + 1]) for i in range(len(old))]
    first = next(i for i, end in enumerate(ends) if end > start)
    last = next(i for i, end in enumerate(ends) if end >= start + len(value))
    replaced: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        touches = i1 <= last and i2 > first or (op == "insert" and first <= i1 <= last)
        if op == "equal" or not touches:
            continue
        if i1 < first or i2 > last + 1:
            return None  # the change reaches past the value's words: which part is the value?
        replaced += new[j1:j2]
    text = "".join(replaced).strip(" \t\n.,;:!?。，；：！？")
    return text or None


def new_item(scope: Scope, content: Any, *, limit: int, kind: Any = Kind.FACT,
             subject: str | None = None, attribute: str | None = None, value: str | None = None,
             confidence: float = 0.8, importance: float = 0.5, tags: Any = (),
             metadata: Mapping[str, Any] | None = None, session_id: str | None = None,
             now: datetime | None = None) -> MemoryItem:
    """A validated version-1 item for ``scope`` (what ``remember()`` stores)."""
    now = now or utcnow()
    changes = check_changes({"content": content, "kind": kind, "subject": subject,
                             "attribute": attribute, "value": value, "confidence": confidence,
                             "importance": importance, "tags": tags,
                             "metadata": {} if metadata is None else metadata}, limit)
    changes["metadata"] = dict(changes["metadata"])
    return MemoryItem(id=new_id("mem"), user_id=scope.user_id, namespace=scope.namespace,
                      created_at=now, updated_at=now, source_session_id=session_id, **changes)


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


class _ItemBackend(ItemStore, Lifecycle, SearchIndex, Protocol):
    """What the writer needs of a store (the lexical index: to find an item that says
    the same)."""


class ItemWriter:
    """Writes item versions through one store and keeps the index in step."""

    def __init__(self, store: _ItemBackend, indexer: Indexer,
                 feedback: FeedbackConfig = FeedbackConfig()) -> None:
        self.store = store
        self.indexer = indexer
        self.feedback_config = feedback

    def write(self, scope: Scope, new: MemoryItem, old: MemoryItem | None, op: str, actor: str,
              reason: str, at: datetime) -> MemoryItem:
        """One version: the row, its version row (with the previous value) and, when what
        is indexed changed, the index document. A change to an existing item is always
        its next version number (optimistic concurrency reads it)."""
        check_label(actor, "actor")
        check_label(reason, "reason")
        if old is not None:
            new = new.evolve(version=old.version + 1)
        with self.store.transaction():
            self.store.write_item(scope, new, ItemVersion(new.id, new.version, op, actor, reason,
                                                          at, old.to_dict() if old else None,
                                                          new.to_dict()))
            if self.indexer.needs_reindex(old, new):
                self.indexer.index_item(scope, new)
        log.info("item %s of %r: %s v%d by %s (%s)", new.id, scope.user_id, op, new.version,
                 actor, reason)
        return new

    def create(self, scope: Scope, item: MemoryItem, *, actor: str = "api",
               reason: str = "remember() call") -> MemoryItem:
        return self.write(scope, item, None, "create", actor, reason, item.created_at)

    def remember(self, scope: Scope, content: Any, *, limit: int, kind: Any = Kind.FACT,
                 actor: str = "api", reason: str = "remember() call", **fields: Any) -> MemoryItem:
        """``content`` stored directly as a version-1 item (:func:`new_item` checks the
        fields) — unless an active item of the same kind already says it, which is
        returned instead: remembering a thing twice is one memory."""
        same = self.same_item(scope, content, kind)
        if same is not None:
            log.info("remember for %r: item %s already says this; not stored again",
                     scope.user_id, same.id)
            return same
        return self.create(scope, new_item(scope, content, limit=limit, kind=kind, **fields),
                           actor=actor, reason=reason)

    def same_item(self, scope: Scope, content: Any, kind: "Kind | str") -> MemoryItem | None:
        """The active item of ``kind`` whose text is ``content`` (letter case and spacing
        aside), found through the lexical index (an item is indexed when written), or
        None: what ``remember()`` returns instead of storing a thing twice."""
        if not isinstance(content, str) or not content.strip() or not isinstance(kind, str):
            return None  # new_item says what is wrong with it
        try:
            wanted = Kind(kind)
        except ValueError:
            return None
        store = self.store
        # an exact repeat has every term of the text: it ranks among the first
        found = store.lexical_search(scope, tokenize(content), Filters(
            kinds=(wanted,), layers=(Layer.SEMANTIC,), statuses=(Status.ACTIVE,)), 20)
        for doc_id, _ in found:
            try:
                item = store.get_item(scope, doc_id)
            except NotFoundError:
                continue
            if item.kind is wanted and item.status is Status.ACTIVE and _same_text(item.content, content):
                return item
        return None

    def edit(self, scope: Scope, item_id: str, changes: Mapping[str, Any], *, actor: str = "api",
             reason: str = "update() call", limit: int = 200_000,
             expected_version: int | None = None) -> MemoryItem:
        """Apply validated ``changes`` as a new version; with ``expected_version``, a
        ConflictError when the item moved on meanwhile (optimistic concurrency)."""
        checked = check_changes(changes, limit)
        if expected_version is not None:
            check_count(expected_version, "expected_version", minimum=1)
        with self.store.transaction():
            old = self.store.get_item(scope, item_id)
            _check_version(old, expected_version)
            if "content" in checked and "value" not in checked and old.value:
                # a corrected text corrects its slot: the value moves with the words
                checked["value"] = follow_value(old.content, checked["content"], old.value)
            now = utcnow()
            if checked.get("content", old.content) != old.content:
                # the text is now the editor's, no longer a restatement of its source turns
                checked["metadata"] = {**checked.get("metadata", old.metadata), "edited": True}
            new = old.evolve(**checked, updated_at=now)
            return self.write(scope, new, old, "edit", actor, reason, now)

    def feedback(self, scope: Scope, item_id: str, signal: str, *, actor: str = "user") -> MemoryItem:
        with self.store.transaction():
            old = self.store.get_item(scope, item_id)
            now = utcnow()
            new = apply_feedback(old, signal, now, self.feedback_config)
            return self.write(scope, new, old, "feedback", actor, f"thumbs {signal}", now)

    def set_status(self, scope: Scope, item_id: str, status: Status, *, actor: str = "api",
                   reason: str = "") -> MemoryItem:
        with self.store.transaction():
            old = self.store.get_item(scope, item_id)
            now = utcnow()
            new = old.evolve(status=status, updated_at=now)
            return self.write(scope, new, old, "status", actor, reason or f"marked {status.value}", now)

    def undo(self, scope: Scope, item_id: str, *, actor: str = "api") -> MemoryItem | None:
        """Revert an item's last change as a new version. Undoing its creation deletes it
        and, when it superseded another item, makes that one active again (returned)."""
        with self.store.transaction():
            item = self.store.get_item(scope, item_id)  # NotFoundError before the history
            history = self.store.history(scope, item_id)
            last = history[-1]
            now = utcnow()
            if last.before is None:
                restored = None
                if item.supersedes:
                    try:
                        prev = self.store.get_item(scope, item.supersedes)
                    except NotFoundError:
                        prev = None
                    if prev is not None and prev.status is Status.SUPERSEDED:
                        restored = self.write(scope, prev.evolve(status=Status.ACTIVE,
                                                                 updated_at=now),
                                              prev, "undo", actor, f"undo: {item_id} removed", now)
                self.store.delete_item(scope, item_id)
                return restored
            back = MemoryItem.from_dict(last.before).evolve(
                updated_at=now, access_count=item.access_count, last_accessed=item.last_accessed)
            return self.write(scope, back, item, "undo", actor, f"undo {last.op} v{last.version}", now)


def _check_version(item: MemoryItem, expected: int | None) -> None:
    if expected is not None and item.version != expected:
        raise ConflictError(f"item {item.id} is at version {item.version}, not {expected}: "
                            "someone changed it meanwhile; reload it and retry")
