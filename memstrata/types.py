"""Immutable values that cross every boundary: library, CLI, store, server.

Messages, memory items and their versions, filters, search hits, LLM usage records
and L2 session summaries.

Everything here is a frozen dataclass with ``to_dict()``/``from_dict()`` so that the
Python API, the CLI's JSON output, exports and the HTTP service share one
serialisation. Times are timezone-aware UTC datetimes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from .checks import check_json, check_text
from .errors import ValidationError, shown, with_article
from .ids import MAX_ID_CHARS, check_id
from .text import clip, detect_language

__all__ = [
    "Role",
    "Kind",
    "Status",
    "Layer",
    "Scope",
    "Message",
    "MemoryItem",
    "ItemVersion",
    "Filters",
    "ScoreParts",
    "SearchHit",
    "utcnow",
    "new_id",
    "to_timestamp",
    "from_timestamp",
    "parse_time",
    "UsageRecord",
    "UsageSummary",
    "StructuredSummary",
    "PARTS",
    "DEFAULT_PART_CHARS",
]


class Role(str, Enum):
    """The OpenAI chat roles memstrata accepts."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Kind(str, Enum):
    """What a memory item is about."""

    FACT = "fact"
    PREFERENCE = "preference"
    INSTRUCTION = "instruction"
    TODO = "todo"
    EVENT = "event"


class Status(str, Enum):
    """A memory item's life: active, superseded by a newer version, inactive (decayed), done (todos)."""

    ACTIVE = "active"
    SUPERSEDED = "superseded"
    INACTIVE = "inactive"
    DONE = "done"


class Layer(str, Enum):
    """Where a search hit comes from: raw turns (episodic), memory items (semantic) or
    knowledge-base chunks (knowledge, indexed in a knowledge base's own scope)."""

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    KNOWLEDGE = "knowledge"


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def to_timestamp(value: datetime) -> float:
    return value.timestamp()


def from_timestamp(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def parse_time(value: Any, *, what: str = "time") -> datetime:
    """Accept a datetime, an epoch number or an ISO-8601 string; return aware UTC. An
    epoch that is not a finite number of seconds within years 1-9999 (NaN, 1e20) is a
    ValidationError."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), UTC)
        except (ValueError, OverflowError, OSError):  # NaN, inf, past year 9999
            raise ValidationError(f"{what} {shown(value)} is not an epoch time (seconds since "
                                  "1970 within years 1-9999); pass a datetime or an ISO string") from None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValidationError(
                f"{what} {shown(value)} is not ISO-8601; pass e.g. '2024-05-08T13:56:00+00:00' "
                "or a datetime"
            ) from exc
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise ValidationError(f"{what} must be a datetime, an epoch number or an ISO string, "
                          f"not {type(value).__name__}")


_check_id = check_id


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose memory: a user, optionally inside an agent/app namespace.

    Every row and every query is keyed by (namespace, user_id), which is also the
    distribution key when the PostgreSQL schema is sharded.
    """

    user_id: str
    namespace: str = ""

    def __post_init__(self) -> None:
        check_id(self.user_id, "user_id", reserved=True)
        check_id(self.namespace, "agent_id/namespace", empty=True)

    @property
    def key(self) -> str:
        """A single token naming this scope (used in lexical indexes)."""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"{self.namespace}\x00{self.user_id}").hex


_ROLE_ALIASES = {"developer": "system"}  # OpenAI's newer name for the system role
_TEXT_PARTS = ("text", "input_text", "output_text")


def _content_text(content: Any, where: str) -> tuple[str | None, list[str]]:
    """``(text, types of the non-text parts)`` of a message's content: a string, None,
    or an OpenAI content-part array (text parts joined by line breaks)."""
    if content is None or isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise ValidationError(f"{where}: content must be a string or a list of content parts, "
                              f"not {type(content).__name__}")
    texts: list[str] = []
    others: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise ValidationError(f"{where}: each content part must be a dict with a 'type', "
                                  "like {'type': 'text', 'text': '...'}")
        if part["type"] in _TEXT_PARTS:
            text = part.get("text")
            if not isinstance(text, str):
                raise ValidationError(f"{where}: {with_article(str(part['type']))} part needs a "
                                      "string 'text'")
            texts.append(text)
        else:
            others.append(part["type"])
    return "\n".join(texts), others


def _role(raw_role: Any, where: str) -> Role:
    """A message's role, the ``developer`` alias read as system."""
    try:
        if not isinstance(raw_role, str):
            raise ValueError(raw_role)
        return Role(_ROLE_ALIASES.get(raw_role, raw_role))
    except ValueError:
        raise ValidationError(
            f"{where} has role {shown(raw_role)}; use one of system, developer, user, "
            "assistant, tool") from None


def _tool_calls(raw: Any, where: str) -> tuple[Mapping[str, Any], ...]:
    """Tool calls in the OpenAI shape, checked before anything is stored: a string
    ``id`` and a ``function`` with a string ``name`` (dict arguments become JSON)."""
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        raise ValidationError(f"{where}: tool_calls must be a list")
    calls = []
    for i, call in enumerate(raw):
        if not isinstance(call, Mapping) or not isinstance(call.get("id"), str) or not call["id"]:
            raise ValidationError(f"{where}: tool call {i} needs a string 'id' (and 'type'/"
                                  "'function' as in the OpenAI format)")
        function = call.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str) \
                or not function["name"]:
            raise ValidationError(f"{where}: tool call {shown(call['id'])} needs 'function': "
                                  "{'name': '...', 'arguments': '...'}")
        arguments = function.get("arguments", "")
        if isinstance(arguments, Mapping):
            arguments = json.dumps(check_json(arguments, f"{where}: tool call arguments"),
                                   ensure_ascii=False)
        elif arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            raise ValidationError(f"{where}: tool call {shown(call['id'])}: arguments must be a "
                                  "JSON string or a dict")
        calls.append({**call, "type": call.get("type") or "function",
                      "function": {**function, "arguments": arguments}})
    return tuple(calls)


@dataclass(frozen=True, slots=True)
class Message:
    """One raw chat message in OpenAI format, as stored in the session log.

    ``content`` may be None only for an assistant message that carries ``tool_calls``.
    """

    role: Role
    content: str | None
    created_at: datetime
    id: str = ""
    session_id: str = ""
    seq: int = -1
    name: str | None = None
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    tool_call_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a Message built directly is checked like one from a dict: a malformed value
        # stored once would break every later read of its session
        if not isinstance(self.role, Role):
            raise ValidationError(f"message role must be a Role, not {shown(self.role)}; build "
                                  "messages from dicts with Message.from_dict")
        if self.content is not None:
            if not isinstance(self.content, str):
                raise ValidationError(f"message content must be a string or None, not "
                                      f"{type(self.content).__name__}")
            check_text(self.content, "message content")
        if self.name is not None and (not isinstance(self.name, str) or len(self.name) > MAX_ID_CHARS):
            raise ValidationError("message name must be a string of at most 256 characters")
        if self.name is not None:
            check_text(self.name, "message name")
        if self.tool_calls and self.role is not Role.ASSISTANT:
            raise ValidationError("only assistant messages may carry tool_calls")
        object.__setattr__(self, "tool_calls", _tool_calls(self.tool_calls or None, "message"))
        if self.role is Role.TOOL and (not isinstance(self.tool_call_id, str) or not self.tool_call_id):
            raise ValidationError("a tool message needs the 'tool_call_id' of the call it answers")
        if self.tool_call_id is not None and not isinstance(self.tool_call_id, str):
            raise ValidationError("tool_call_id must be a string")
        if not isinstance(self.metadata, Mapping):
            raise ValidationError("message metadata must be a dict")
        check_json(self.metadata, "message metadata")
        check_json(self.tool_calls, "message tool_calls")

    def to_openai(self) -> dict[str, Any]:
        """The message as the OpenAI chat API expects it."""
        out: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.name:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [dict(c) for c in self.tool_calls]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        return out

    def to_dict(self) -> dict[str, Any]:
        out = self.to_openai()
        out.update(id=self.id, session_id=self.session_id, seq=self.seq,
                   created_at=self.created_at.isoformat(), metadata=dict(self.metadata))
        return out

    @classmethod
    def from_dict(cls, data: Any, *, default_time: datetime | None = None,
                  max_chars: int = 200_000, index: int | None = None) -> "Message":
        """Validate one message as real clients send it (a dict, a Message, or a plain
        string, which is a user message).

        Normalised rather than refused: the ``developer`` role is a system message;
        OpenAI content-part arrays keep their text parts joined by line breaks (the
        other parts' types are kept in ``metadata["parts"]``); an assistant message
        with ``content: None`` or ``""`` (a tool call, or an empty reply from a small
        model) is kept as an empty reply. ``created_at``/``timestamp``/``time`` give
        the original time (for imports); otherwise ``default_time`` (now). Refused with
        a :class:`ValidationError`: an unknown role, content that is not text, a tool
        call without a string ``id`` and ``function.name``, a tool result without its
        ``tool_call_id``, and an empty user or system message.
        """
        if isinstance(data, Message):
            return data
        where = f"message {index}" if index is not None else "message"
        if isinstance(data, str):
            data = {"role": "user", "content": data}
        if not isinstance(data, Mapping):
            raise ValidationError(f"{where} must be a dict like "
                                  f"{{'role': 'user', 'content': '...'}}, not {type(data).__name__}")
        role = _role(data.get("role"), where)
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise ValidationError(f"{where}: metadata must be a dict")
        content, other_parts = _content_text(data.get("content"), where)
        if other_parts:
            metadata = {**metadata, "parts": other_parts}
        if content is not None and len(content) > max_chars:
            raise ValidationError(
                f"{where}: content is {len(content):,} characters, over the limit of "
                f"{max_chars:,}; split it, or raise the max_message_chars setting")
        if data.get("tool_calls") and role is not Role.ASSISTANT:
            raise ValidationError(f"{where}: only assistant messages may carry tool_calls")
        tool_calls = _tool_calls(data.get("tool_calls"), where)
        tool_call_id = data.get("tool_call_id")
        if role is Role.TOOL and (not isinstance(tool_call_id, str) or not tool_call_id):
            raise ValidationError(f"{where}: a tool message needs the 'tool_call_id' of the call it answers")
        if role in (Role.USER, Role.SYSTEM) and not (content and content.strip()) and not other_parts:
            raise ValidationError(f"{where}: content is empty; {with_article(role.value)} message needs text")
        if role is Role.ASSISTANT and content is None and not tool_calls:
            content = ""  # an empty reply (small models return them)
        stamp = data.get("created_at", data.get("timestamp", data.get("time")))
        created = parse_time(stamp, what=f"{where} time") if stamp is not None else (default_time or utcnow())
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise ValidationError(f"{where}: name must be a string")
        seq = data.get("seq", -1)
        return cls(role=role, content=content, created_at=created, name=name or None,
                   id=str(data.get("id") or ""), session_id=str(data.get("session_id") or ""),
                   seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else -1,
                   tool_calls=tool_calls, tool_call_id=tool_call_id if role is Role.TOOL else None,
                   metadata=dict(metadata))

    @property
    def text(self) -> str:
        """The text to index: speaker name (if any) and content."""
        body = self.content or ""
        if self.tool_calls:
            calls = " ".join(str(c["function"]["name"]) for c in self.tool_calls)
            body = f"{body} [calls: {calls}]".strip()
        return f"{self.name}: {body}" if self.name else body


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A durable memory about a user (L3): a fact, preference, instruction, todo or event."""

    id: str
    user_id: str
    kind: Kind
    content: str
    namespace: str = ""
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    confidence: float = 0.8
    importance: float = 0.5
    status: Status = Status.ACTIVE
    version: int = 1
    supersedes: str | None = None
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    last_accessed: datetime | None = None
    access_count: int = 0
    source_session_id: str | None = None
    source_message_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def evolve(self, **changes: Any) -> "MemoryItem":
        return replace(self, **changes)

    @property
    def said_at(self) -> datetime:
        """When what the item states was said: the time of the turn that stated it
        (``metadata["since"]``), else when the item was written (remembered directly, or
        a hand-edited time that does not parse)."""
        since = self.metadata.get("since")
        if isinstance(since, str):
            try:
                return parse_time(since)
            except ValidationError:
                pass
        return self.created_at

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = self.kind.value
        out["status"] = self.status.value
        for key in ("created_at", "updated_at", "last_accessed"):
            value = getattr(self, key)
            out[key] = value.isoformat() if value else None
        out["source_message_ids"] = list(self.source_message_ids)
        out["tags"] = list(self.tags)
        out["metadata"] = dict(self.metadata)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MemoryItem":
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["kind"] = Kind(values["kind"])
        values["status"] = Status(values.get("status", "active"))
        for key in ("created_at", "updated_at", "last_accessed"):
            if values.get(key) is not None:
                values[key] = parse_time(values[key], what=key)
        values["source_message_ids"] = tuple(values.get("source_message_ids") or ())
        values["tags"] = tuple(values.get("tags") or ())
        values["metadata"] = dict(values.get("metadata") or {})
        return cls(**values)


@dataclass(frozen=True, slots=True)
class ItemVersion:
    """One change to a memory item: who did what, when and why, with the values before and after."""

    item_id: str
    version: int
    op: str  # create | boost | supersede | edit | delete | feedback | status | access
    actor: str  # "user", "api", "rule:<id>", "llm:<model>"
    reason: str
    at: datetime
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "version": self.version, "op": self.op,
                "actor": self.actor, "reason": self.reason, "at": self.at.isoformat(),
                "before": self.before, "after": self.after}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ItemVersion":
        return cls(item_id=data["item_id"], version=int(data["version"]), op=data["op"],
                   actor=data["actor"], reason=data["reason"], at=parse_time(data["at"], what="at"),
                   before=data.get("before"), after=data.get("after"))


def _as_tuple(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable):
        out = tuple(value)
        if all(isinstance(v, str) for v in out):
            return out
    raise ValidationError(f"filter {what} must be a string or a list of strings")


@dataclass(frozen=True, slots=True)
class Filters:
    """Metadata filters for search and list. Empty fields do not filter.

    ``status`` defaults to active items only; raw turns have no status and always pass.
    ``since``/``until`` compare a turn's time and an item's :attr:`MemoryItem.said_at` (the
    time of the turn it was drawn from, not when the background job wrote it).
    """

    session_ids: tuple[str, ...] = ()
    kinds: tuple[Kind, ...] = ()
    statuses: tuple[Status, ...] = (Status.ACTIVE,)
    layers: tuple[Layer, ...] = ()
    tags: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def build(cls, value: "Filters | Mapping[str, Any] | None" = None) -> "Filters":
        """From a Filters, None or a dict with keys session_id(s), kind(s), status(es),
        layer(s), tags, since, until."""
        if value is None:
            return cls()
        if isinstance(value, Filters):
            return value
        if not isinstance(value, Mapping):
            raise ValidationError("filters must be a dict or a Filters")
        aliases = {"session_id": "session_ids", "kind": "kinds", "status": "statuses",
                   "layer": "layers", "tag": "tags"}
        if not all(isinstance(k, str) for k in value):
            raise ValidationError(f"filter names are strings, got {shown(list(value))}")
        data = {aliases.get(k, k): v for k, v in value.items()}
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValidationError(f"unknown filter(s) {sorted(unknown)}; known: session_id, kind, "
                                  "status, layer, tags, since, until")
        try:
            kinds = tuple(Kind(k) for k in _as_tuple(data.get("kinds"), "kind"))
            statuses = (tuple(Status(s) for s in _as_tuple(data["statuses"], "status"))
                        if "statuses" in data else (Status.ACTIVE,))
            layers = tuple(Layer(x) for x in _as_tuple(data.get("layers"), "layer"))
        except ValueError as exc:
            raise ValidationError(f"bad filter value: {exc}") from None
        since = parse_time(data["since"], what="since") if data.get("since") is not None else None
        until = parse_time(data["until"], what="until") if data.get("until") is not None else None
        return cls(session_ids=_as_tuple(data.get("session_ids"), "session_id"), kinds=kinds,
                   statuses=statuses, layers=layers, tags=_as_tuple(data.get("tags"), "tags"),
                   since=since, until=until)

    @property
    def is_scope_only(self) -> bool:
        """True when nothing narrows the search below the user (the fast path)."""
        return (not self.session_ids and not self.kinds and not self.tags
                and self.since is None and self.until is None)


@dataclass(frozen=True, slots=True)
class ScoreParts:
    """How a hit was scored: each part in [0, 1] and the weights applied."""

    similarity: float
    dense: float | None
    lexical: float | None
    recency: float
    importance: float
    layer_weight: float
    dense_rank: int | None
    lexical_rank: int | None
    preset: str
    boost: float = 1.0  # speaker boost: the query names this turn's speaker
    role_weight: float = 1.0  # assistant turns and bare questions weigh less (docs/retrieval.md)
    rerank: float | None = None  # the reranker's score, when one reordered the best hits

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ScoreParts":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One retrieved turn, exchange or memory item with its score and the parts of that score.

    ``role`` is who said a turn (``user``/``assistant``; None for items and chunks).
    ``merged_ids`` are the other turns this hit stands for: the acknowledgement of an
    exchange ("I live in Hangzhou." + "OK."), or the turn an item was extracted from;
    :attr:`ids` is every id.
    """

    id: str
    layer: Layer
    text: str
    score: float
    parts: ScoreParts
    created_at: datetime
    session_id: str | None = None
    kind: Kind | None = None
    item: MemoryItem | None = None
    message: Message | None = None
    role: str | None = None
    merged_ids: tuple[str, ...] = ()
    #: when what this hit states stopped being true (a turn or item whose fact was
    #: superseded, at the time of the statement that replaced it); None = current
    stale_since: datetime | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        """This hit's id and the ids it merged."""
        return (self.id, *self.merged_ids)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "layer": self.layer.value, "text": self.text,
                "score": round(self.score, 6), "parts": self.parts.to_dict(),
                "created_at": self.created_at.isoformat(), "session_id": self.session_id,
                "kind": self.kind.value if self.kind else None, "role": self.role,
                "merged_ids": list(self.merged_ids),
                "stale_since": self.stale_since.isoformat() if self.stale_since else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SearchHit":
        """The inverse of :meth:`to_dict` (``item`` and ``message`` are not in it)."""
        return cls(data["id"], Layer(data["layer"]), data["text"], float(data["score"]),
                   ScoreParts.from_dict(data["parts"]), parse_time(data["created_at"]),
                   data.get("session_id"), Kind(data["kind"]) if data.get("kind") else None,
                   role=data.get("role"), merged_ids=tuple(data.get("merged_ids", ())),
                   stale_since=parse_time(data["stale_since"]) if data.get("stale_since") else None)


def dumps(value: Any) -> str:
    """Compact JSON used for every JSON column."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


# ---------------------------------------------------------------- LLM usage


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One provider call: what it cost and how long it took. ``error`` names the
    exception class when the call failed."""

    at: datetime
    model: str
    purpose: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the call succeeded."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the row a store would persist)."""
        out = asdict(self)
        out["at"] = self.at.isoformat()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "UsageRecord":
        """The inverse of :meth:`to_dict`."""
        values = dict(data)
        values["at"] = datetime.fromisoformat(values["at"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """Totals over a set of usage records."""

    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def mean_latency_s(self) -> float:
        """Average seconds per call (0 when there were none)."""
        return self.latency_s / self.calls if self.calls else 0.0

    def __add__(self, other: "UsageSummary") -> "UsageSummary":
        return UsageSummary(self.calls + other.calls, self.failures + other.failures,
                            self.prompt_tokens + other.prompt_tokens,
                            self.completion_tokens + other.completion_tokens,
                            self.latency_s + other.latency_s)

    def add(self, r: UsageRecord) -> "UsageSummary":
        """These totals with one more record counted."""
        return UsageSummary(self.calls + 1, self.failures + (not r.ok),
                            self.prompt_tokens + r.prompt_tokens,
                            self.completion_tokens + r.completion_tokens,
                            self.latency_s + r.latency_s)


# ---------------------------------------------------------------- L2 summaries

PARTS = ("goal", "decisions", "done", "open_questions", "constraints")
DEFAULT_PART_CHARS = 200

_HEADINGS = {
    "en": ("Conversation summary", {"goal": "Goal", "decisions": "Decisions", "done": "Done",
                                    "open_questions": "Open questions",
                                    "constraints": "Constraints and preferences"}),
    "zh": ("对话摘要", {"goal": "核心目标", "decisions": "决定与结论", "done": "已完成",
                     "open_questions": "待解决问题", "constraints": "约束与偏好"}),
}


@dataclass(frozen=True, slots=True)
class StructuredSummary:
    """A session summary in five parts, each at most ``max_chars`` characters.

    Construction rejects a part over the limit; :meth:`clipped` shortens instead.
    ``version`` counts the incremental updates (v1, v2, ...).
    """

    goal: str = ""
    decisions: str = ""
    done: str = ""
    open_questions: str = ""
    constraints: str = ""
    version: int = 0
    max_chars: int = DEFAULT_PART_CHARS

    def __post_init__(self) -> None:
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars < 1:
            raise ValidationError(f"max_chars must be a positive integer, not {shown(self.max_chars)}")
        for part in PARTS:
            value = getattr(self, part)
            if not isinstance(value, str):
                raise ValidationError(f"summary part {part} must be a string")
            if len(value) > self.max_chars:
                raise ValidationError(
                    f"summary part {part} is {len(value)} characters, over the limit of "
                    f"{self.max_chars}; shorten it or build it with StructuredSummary.clipped()")

    @classmethod
    def clipped(cls, *, max_chars: int = DEFAULT_PART_CHARS, version: int = 0,
                **parts: str) -> "StructuredSummary":
        """Build a summary, shortening any part over ``max_chars`` (ending it with "…")."""
        unknown = set(parts) - set(PARTS)
        if unknown:
            raise ValidationError(f"unknown summary part(s) {sorted(unknown)}; "
                                  f"parts: {', '.join(PARTS)}")
        return cls(**{k: clip(v or "", max_chars) for k, v in parts.items()},
                   version=version, max_chars=max_chars)

    @property
    def is_empty(self) -> bool:
        """True when every part is blank."""
        return not any(getattr(self, p).strip() for p in PARTS)

    def render(self, language: str | None = None) -> str:
        """The summary as text, one line per non-empty part, headings in ``language``
        (``"zh"`` or ``"en"``; detected from the parts when None)."""
        if language is None:
            language = detect_language(" ".join(getattr(self, p) for p in PARTS))
        if language not in _HEADINGS:
            raise ValidationError(f"language must be 'zh' or 'en', not {shown(language)}")
        title, names = _HEADINGS[language]
        colon = "：" if language == "zh" else ": "
        lines = [f"- {names[p]}{colon}{getattr(self, p)}" for p in PARTS if getattr(self, p).strip()]
        return "\n".join([title + ("：" if language == "zh" else ":")] + lines) if lines else ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StructuredSummary":
        """The inverse of :meth:`to_dict`; unknown keys are an error."""
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValidationError(f"unknown summary field(s) {sorted(unknown)}")
        return cls(**dict(data))
