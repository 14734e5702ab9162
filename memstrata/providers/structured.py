"""Structured output that survives small models.

Local models (and some hosted ones) wrap JSON in code fences, add chatter before and
after it, stop mid-object, use single quotes or trailing commas, repeat the same object
five times, or print confidences of 10^15. Everything here is a pure function over
strings and values: :func:`extract_json` recovers whatever JSON there is, and
:func:`validate` checks each item against a small :class:`Schema`, clamps numbers into
range and rejects bad items one by one while keeping the good ones. Nothing raises on
model output; the caller decides what to do with the rejects (the offline rules fill in).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Field", "Schema", "Rejection", "Parsed", "extract_json", "validate", "parse"]

_DECODER = json.JSONDecoder(strict=False)  # strict=False: raw newlines inside strings
_FENCE = re.compile(r"```[ \t]*(?:json5?|JSON)?[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_][\w\-]*")
_LITERALS = {"true": "true", "false": "false", "null": "null", "True": "true",
             "False": "false", "None": "null"}
_FULLWIDTH = {"：": ":", "，": ",", "｛": "{", "｝": "}", "［": "[", "］": "]"}
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_MAX_CANDIDATES = 200  # bounds the work on pathological output (thousands of '{')


@dataclass(frozen=True, slots=True)
class Field:
    """One key of an item: its type and the values it may take.

    ``type`` is one of ``string``, ``number``, ``integer``, ``boolean`` or ``array``
    (an array of strings). Numbers outside ``[minimum, maximum]`` are clamped, not
    rejected; strings longer than ``max_length`` are cut. A missing optional key takes
    ``default``.
    """

    name: str
    type: str = "string"
    required: bool = False
    enum: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    default: Any = None
    max_length: int | None = None
    description: str = ""

    def json_schema(self) -> dict[str, Any]:
        """This field as a JSON Schema property (for ``response_format``)."""
        if self.type == "array":
            out: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
        else:
            out = {"type": self.type}
        if self.enum:
            out["enum"] = list(self.enum)
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True, slots=True)
class Schema:
    """What a structured answer must look like.

    With ``items_key`` the answer is ``{items_key: [item, ...]}`` and every item is
    validated on its own; with ``items_key=None`` the answer is one object (a verdict,
    a summary) and is the only item.
    """

    name: str
    fields: tuple[Field, ...]
    items_key: str | None = "items"

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the whole answer, as ``response_format`` wants it."""
        item = {"type": "object",
                "properties": {f.name: f.json_schema() for f in self.fields},
                "required": [f.name for f in self.fields if f.required]}
        if self.items_key is None:
            return item
        return {"type": "object", "properties": {self.items_key: {"type": "array", "items": item}},
                "required": [self.items_key]}


@dataclass(frozen=True, slots=True)
class Rejection:
    """An item that failed validation, with the reason (kept for logs and the inspector)."""

    item: Any
    reason: str


@dataclass(frozen=True, slots=True)
class Parsed:
    """The validated items of an answer and the rejected ones."""

    items: tuple[dict[str, Any], ...] = ()
    rejected: tuple[Rejection, ...] = ()
    found_json: bool = False

    @property
    def first(self) -> dict[str, Any] | None:
        """The first valid item, or None (for single-object schemas)."""
        return self.items[0] if self.items else None


# ---------------------------------------------------------------- extraction


def extract_json(text: str | None) -> list[Any]:
    """Every JSON object or array found in ``text``, in order; ``[]`` when there is none.

    Tolerates code fences, text around the JSON, several objects in a row, single
    quotes, trailing commas, Python literals, unquoted keys and output cut off mid-way
    (the incomplete tail is dropped, the complete part kept). Never raises.
    """
    if not text or not text.strip():
        return []
    fenced = [m.group(1) for m in _FENCE.finditer(text) if m.group(1).strip()]
    found: list[Any] = []
    for segment in fenced or [text]:
        found.extend(_scan(segment))
    if not found and fenced:  # the fence held prose; the JSON may be outside it
        found = _scan(_FENCE.sub(" ", text))
    return found


def _scan(text: str) -> list[Any]:
    out: list[Any] = []
    pos, tries = 0, 0
    while tries < _MAX_CANDIDATES:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
        if not starts:
            break
        start = min(starts)
        tries += 1
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            repaired = _repair(text, start)
            if repaired is None:
                pos = start + 1
                continue
            value, end = repaired
        out.append(value)
        pos = max(end, start + 1)
    return out


class _Rewrite:
    """The JSON that :func:`_repair` writes: its tokens, the brackets still open, the last
    structural token (``{ [ : ,``, ``k`` for a key, ``v`` for a value) and the last
    *safe* cut — where the output can end with only closing brackets added."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.stack: list[str] = []
        self.safe: tuple[int, tuple[str, ...]] | None = None
        self.last = ""

    def mark(self) -> None:
        self.safe = (len(self.out), tuple(self.stack))

    def comma_if_dropped(self, starts_value: bool) -> None:
        """A value right after a value inside brackets: small models drop commas."""
        if self.last == "v" and self.stack and starts_value:
            self.mark()
            self.out.append(",")
            self.last = ","

    def at_key(self) -> bool:
        return bool(self.stack) and self.stack[-1] == "{" and self.last in ("{", ",")

    def emit(self, token: str, key: bool) -> None:
        self.out.append(token)
        self.last = "k" if key else "v"

    def open(self, ch: str) -> bool:
        """``{`` or ``[``; False where it cannot stand (a key with no colon)."""
        if self.last == "k":  # a key with no colon: not ours to guess
            return False
        if self.last in ("[", ","):  # an array element: a cut drops it whole
            self.mark()
        self.stack.append(ch)
        self.out.append(ch)
        if self.last not in ("[", ","):  # top level or a key's value: empty is fine
            self.mark()
        self.last = ch
        return True

    def close(self, ch: str) -> bool:
        """``}`` or ``]``; False when it closes nothing that is open."""
        if not self.stack or {"}": "{", "]": "["}[ch] != self.stack[-1]:
            return False
        if self.last == ",":
            self.out.pop(_last_index(self.out, ","))
        self.stack.pop()
        self.out.append(ch)
        self.last = "v"
        if self.stack:
            self.mark()
        return True

    def comma(self) -> None:
        if self.last == "v":
            self.mark()
        if self.last != ",":
            self.out.append(",")
        self.last = ","

    def cut(self, end: int) -> tuple[Any, int] | None:
        """The output up to the last safe cut with its open brackets closed."""
        if self.safe is None:
            return None
        cut, open_stack = self.safe
        body = "".join(self.out[:cut]).rstrip().rstrip(",")
        closing = "".join("}" if s == "{" else "]" for s in reversed(open_stack))
        return _loads(body + closing, end)


def _repair(text: str, start: int) -> tuple[Any, int] | None:
    """Rewrite the JSON-ish value at ``start`` into JSON, closing what was left open.

    Returns the value and the index after it, or None. Cut points after each complete
    value let a truncated answer keep every item that was finished.
    """
    w = _Rewrite()
    i, n = start, len(text)
    while i < n:
        ch = _FULLWIDTH.get(text[i], text[i])
        starts_value = ch in "\"'{[-+.0123456789" or _WORD.match(text, i) is not None
        w.comma_if_dropped(starts_value)
        if ch in "\"'":
            body, i, closed = _read_string(text, i)
            if not closed:
                break
            w.emit(json.dumps(body, ensure_ascii=False), w.at_key())
            continue
        if ch in "{[":
            if not w.open(ch):
                break
        elif ch in "}]":
            if not w.close(ch):
                break
            if not w.stack:
                return _loads("".join(w.out), i + 1)
        elif ch == ",":
            w.comma()
        elif ch == ":":
            w.out.append(":")
            w.last = ":"
        elif ch.isspace():
            w.out.append(" ")
        elif ch in "-+.0123456789":
            m = _NUMBER.match(text, i)
            if not m or m.end() == n:  # a number at the very end may be cut short
                break
            w.emit(_normalise_number(m.group(0)), False)
            i = m.end()
            continue
        else:
            m = _WORD.match(text, i)
            if not m:
                break
            word, key = m.group(0), w.at_key()
            w.emit(json.dumps(word) if key or word not in _LITERALS else _LITERALS[word], key)
            i = m.end()
            continue
        i += 1
    return w.cut(max(i, start + 1))  # scanning resumes where we stopped


def _read_string(text: str, i: int) -> tuple[str, int, bool]:
    quote, j, chars = text[i], i + 1, []
    while j < len(text):
        ch = text[j]
        if ch == "\\" and j + 1 < len(text):
            nxt = text[j + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[j + 2:j + 6] or ""):
                chars.append(chr(int(text[j + 2:j + 6], 16)))
                j += 6
                continue
            chars.append({"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}.get(nxt, nxt))
            j += 2
            continue
        if ch == quote:
            return "".join(chars), j + 1, True
        chars.append(ch)
        j += 1
    return "".join(chars), j, False


def _normalise_number(raw: str) -> str:
    raw = raw.lstrip("+")
    if raw.startswith("-."):
        raw = "-0" + raw[1:]
    elif raw.startswith("."):
        raw = "0" + raw
    return raw + "0" if raw.endswith(".") else raw


def _last_index(items: list[str], token: str) -> int:
    return len(items) - 1 - items[::-1].index(token)


def _loads(candidate: str, end: int) -> tuple[Any, int] | None:
    try:
        return _DECODER.decode(candidate), end
    except ValueError:
        return None


# ---------------------------------------------------------------- validation


def _items_of(values: Iterable[Any], items_key: str | None) -> list[Any]:
    items: list[Any] = []
    for value in values:
        if isinstance(value, list):
            items.extend(value)
        elif isinstance(value, Mapping) and items_key is not None and items_key in value:
            inner = value[items_key]
            items.extend(inner if isinstance(inner, list) else [inner])
        elif isinstance(value, Mapping) and items_key is not None and len(value) == 1 \
                and isinstance(next(iter(value.values())), list):
            items.extend(next(iter(value.values())))  # {"facts": [...]} for {"items": [...]}
        else:
            items.append(value)
    return items


def _coerce_number(spec: Field, raw: Any) -> tuple[Any, str | None]:
    """A number or integer field: "85%" is 0.85, a value out of range is clamped."""
    if isinstance(raw, bool):
        return None, f"{spec.name} must be a number, not a boolean"
    if isinstance(raw, str):
        text = raw.strip().rstrip("%")
        try:
            raw = float(text) / (100 if raw.strip().endswith("%") else 1)
        except ValueError:
            return None, f"{spec.name} must be a number, got {raw!r}"
    if not isinstance(raw, (int, float)) or math.isnan(raw):
        return None, f"{spec.name} must be a number, got {type(raw).__name__}"
    lo = spec.minimum if spec.minimum is not None else -math.inf
    hi = spec.maximum if spec.maximum is not None else math.inf
    value = min(max(float(raw), lo), hi)  # clamp: 1e15 -> 1.0, -3 -> 0.0
    if spec.type == "integer":
        return (int(value) if math.isfinite(value) else None,
                None if math.isfinite(value) else f"{spec.name} is not finite")
    return value, None


def _coerce(spec: Field, raw: Any) -> tuple[Any, str | None]:
    if spec.type in ("number", "integer"):
        return _coerce_number(spec, raw)
    if spec.type == "boolean":
        if isinstance(raw, bool):
            return raw, None
        if isinstance(raw, str) and raw.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
            return raw.strip().lower() in ("true", "yes", "1"), None
        return None, f"{spec.name} must be true or false, got {raw!r}"
    if spec.type == "array":
        seq = [raw] if isinstance(raw, (str, int, float)) else raw
        if not isinstance(seq, list):
            return None, f"{spec.name} must be a list of strings"
        texts = [s.strip() if isinstance(s, str) else json.dumps(s, ensure_ascii=False)
                 for s in seq if s is not None and not isinstance(s, (dict, list))]
        texts = [t[: spec.max_length] if spec.max_length else t for t in texts if t]
        return list(dict.fromkeys(texts)), None
    if isinstance(raw, (dict, list)) or raw is None:
        return None, f"{spec.name} must be a string, got {type(raw).__name__}"
    text = raw.strip() if isinstance(raw, str) else str(raw)
    if spec.enum:
        match = _enum_match(text, spec.enum)
        if match is None:
            return None, f"{spec.name} must be one of {', '.join(spec.enum)}, got {text!r}"
        return match, None
    if spec.max_length and len(text) > spec.max_length:
        text = text[: spec.max_length].rstrip()
    return text, None


def _enum_match(text: str, allowed: tuple[str, ...]) -> str | None:
    key = text.lower().replace("-", "_").replace(" ", "_")
    for value in allowed:
        if key in (value, value + "s", value + "es"):  # "preferences" -> "preference"
            return value
    return None


def _validate_item(raw: Any, schema: Schema) -> tuple[dict[str, Any] | None, str | None]:
    if not isinstance(raw, Mapping):
        return None, f"expected an object, got {type(raw).__name__}"
    lowered = {str(k).strip().lower(): v for k, v in raw.items()}
    item: dict[str, Any] = {}
    for spec in schema.fields:
        value = lowered.get(spec.name.lower())
        empty = value is None or (isinstance(value, str) and not value.strip())
        if empty:
            if spec.required:
                return None, f"missing required key {spec.name!r}"
            item[spec.name] = spec.default
            continue
        coerced, error = _coerce(spec, value)
        if error is not None:
            if spec.required:
                return None, error
            coerced = spec.default  # a bad optional value is dropped, not the item
        item[spec.name] = coerced
    return item, None


def validate(values: Iterable[Any], schema: Schema) -> Parsed:
    """Validate the JSON values found in an answer against ``schema``.

    Each item is checked on its own: bad ones are rejected with a reason, exact
    repeats (a small model's loops) are rejected as duplicates, good ones kept.
    """
    values = list(values)
    items: list[dict[str, Any]] = []
    rejected: list[Rejection] = []
    seen: set[str] = set()
    for raw in _items_of(values, schema.items_key):
        item, reason = _validate_item(raw, schema)
        if item is None:
            rejected.append(Rejection(raw, reason or "invalid"))
            continue
        key = json.dumps(item, sort_keys=True, ensure_ascii=False, default=str)
        if key in seen:
            rejected.append(Rejection(raw, "duplicate of an earlier item"))
            continue
        seen.add(key)
        items.append(item)
    return Parsed(items=tuple(items), rejected=tuple(rejected), found_json=bool(values))


def parse(text: str | None, schema: Schema) -> Parsed:
    """Extract and validate in one step: ``validate(extract_json(text), schema)``."""
    return validate(extract_json(text), schema)
