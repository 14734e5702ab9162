"""The checks every entrance runs on a caller's values, written once.

A limit, an offset or a number of seconds, a label (who made a change, why), text
that must be Unicode, and JSON a caller hands over to be stored (metadata, tool-call
arguments): each is refused here with a :class:`~memstrata.errors.ValidationError`
that says what to pass, before it reaches a store or a computation that would fail
with a raw ``TypeError``, ``OverflowError`` or ``RecursionError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ValidationError, shown, with_article

__all__ = ["check_count", "check_seconds", "check_label", "check_text", "check_json",
           "MAX_JSON_DEPTH"]


def check_count(value: Any, what: str, *, minimum: int = 0, maximum: int = 2**31 - 1) -> int:
    """``value`` if it is an int (not a bool) from ``minimum`` to ``maximum``: a limit, an
    offset, a sequence number; else a ValidationError."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ValidationError(f"{what} must be an integer from {minimum:,} to {maximum:,}, got "
                              f"{shown(value)}")
    return value


def check_label(value: Any, what: str, limit: int = 1000) -> str:
    """``value`` if it is a string of at most ``limit`` characters that is Unicode text
    (who made a change, why): else a ValidationError."""
    if not isinstance(value, str) or len(value) > limit:
        raise ValidationError(f"{what} must be a string of at most {limit:,} characters, got "
                              f"{shown(value)}")
    return check_text(value, what)


def check_seconds(value: Any, what: str) -> float:
    """``value`` if it is a finite, non-negative number of seconds (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 10**9:
        raise ValidationError(f"{what} must be a number of seconds from 0 to 10**9, got {shown(value)}")
    return float(value)


#: How deep JSON values a caller passes (metadata, tool-call arguments) may nest.
MAX_JSON_DEPTH = 32
#: The integers a JSON value may hold: 64-bit signed, what every store and client reads.
_JSON_INT = 2**63


def check_json(value: Any, what: str) -> Any:
    """``value`` if it is plain JSON — dicts with string keys, lists (tuples), strings,
    finite numbers (integers within 64 bits), booleans and None — nested at most
    :data:`MAX_JSON_DEPTH` levels, with no cycle and no lone surrogate; else a
    ValidationError naming where the bad part is. (Sets, bytes, objects, NaN and
    deep or cyclic values would otherwise fail at the store, or be stored as another
    value than the one given.)"""
    stack: list[tuple[Any, str, int]] = [(value, what, 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValidationError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels (at {where[:80]})")
        if node is None or isinstance(node, bool):
            continue
        if isinstance(node, str):
            check_text(node, where)
        elif isinstance(node, int):
            if not -_JSON_INT <= node < _JSON_INT:
                raise ValidationError(f"{where[:80]} is an integer beyond 64 bits; pass it as a string")
        elif isinstance(node, float):
            if node != node or node in (float("inf"), float("-inf")):
                raise ValidationError(f"{where[:80]} is {shown(node)}, which JSON cannot hold")
        elif isinstance(node, Mapping):
            for key, child in node.items():
                if not isinstance(key, str):
                    raise ValidationError(f"{where[:80]} has the key {shown(key)}; JSON keys are strings")
                check_text(key, f"{where} key")
                stack.append((child, f"{where}.{key}", depth + 1))
        elif isinstance(node, (list, tuple)):
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(node))
        else:
            raise ValidationError(f"{where[:80]} is {with_article(type(node).__name__)}, which "
                                  "is not JSON (use dicts, lists, strings, numbers, booleans, None)")
    return value


def check_text(value: str, what: str) -> str:
    """``value`` if it can be stored as UTF-8 (no lone surrogate, which Python strings
    may hold and no database can store); ValidationError otherwise."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{what} holds a lone surrogate ({shown(value[exc.start])} at "
                              f"position {exc.start}), which is not Unicode text; decode "
                              "the input with errors='replace'") from None
    return value
