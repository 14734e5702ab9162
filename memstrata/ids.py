"""The one rule for a valid id — user, agent (namespace), session, tenant — and how an
id travels in a URL path or an HTTP header.

An id is a string of 1 to 256 characters without control characters (C0, DEL, C1),
lone surrogates or ``/``, holding at least one character other than whitespace and ``.``
(so neither blank nor ``.`` nor ``..``). Every
entrance checks it here: the library (:class:`~memstrata.types.Scope`, session ids),
the REST path parameters (:data:`ID_PATTERN`, also in the OpenAPI document), the MCP
and proxy headers (:func:`from_header`), the proxy body, the CLI and API keys' tenants.

Why these and no more: control characters could join two ids into one internal key;
``/`` ends a path segment even when sent as ``%2F`` (servers decode the path before
routing), and ``.``/``..`` are removed from paths by browsers and HTTP clients even
when escaped (``%2E%2E``). Everything else — spaces, Chinese, ``@ . + % ? # \\`` — is
reachable by every route and inspector page because links quote it (:func:`segment`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any
from urllib.parse import quote, unquote

from .errors import ValidationError, shown

__all__ = ["MAX_ID_CHARS", "ID_PATTERN", "RESERVED_ID_MARK", "check_id", "is_valid_id",
           "segment", "from_header", "to_header"]

MAX_ID_CHARS = 256

#: The rule as a regular expression without look-arounds (Python, pydantic's Rust engine
#: and JSON Schema alike), less the length (at most :data:`MAX_ID_CHARS`) and lone
#: surrogates (which no request can carry: they are not UTF-8).
ID_PATTERN = r"^[^\x00-\x1f\x7f-\x9f/]*[^\s\x00-\x1f\x7f-\x9f/.][^\x00-\x1f\x7f-\x9f/]*$"
_ID = re.compile(ID_PATTERN)
_SURROGATE = re.compile("[\ud800-\udfff]")

#: The first character of ids memstrata makes for itself (a knowledge base's scope): a
#: control character, which no id a caller passes may hold, so the two never meet.
RESERVED_ID_MARK = "\x1f"


def is_valid_id(value: Any) -> bool:
    """Whether ``value`` is a valid (non-empty) id."""
    return (isinstance(value, str) and len(value) <= MAX_ID_CHARS and _ID.fullmatch(value) is not None
            and _SURROGATE.search(value) is None)


def check_id(value: Any, what: str, *, empty: bool = False, reserved: bool = False) -> str:
    """``value`` if it is a valid id, else :class:`ValidationError` saying why.
    ``empty`` also allows ``""`` (the default namespace); ``reserved`` also allows
    memstrata's own ids (starting with :data:`RESERVED_ID_MARK`)."""
    if not isinstance(value, str):  # (shown: a 5,000-level dict's own repr is a RecursionError)
        raise ValidationError(f"{what} must be a non-empty string, got {shown(value)}")
    body = value[1:] if reserved and value.startswith(RESERVED_ID_MARK) else value
    if (empty and value == "") or is_valid_id(body):
        return value
    if not value.strip():
        raise ValidationError(f"{what} must be a non-empty string, got {value!r}")
    if len(value) > MAX_ID_CHARS:
        raise ValidationError(f"{what} is {len(value)} characters; ids are at most {MAX_ID_CHARS}")
    bad = next((i for i, c in enumerate(body) if unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        bad += len(value) - len(body)
        raise ValidationError(f"{what} {value[:40]!r} holds a control character "
                              f"({value[bad]!r} at position {bad}); ids are printable text")
    if "/" in value:
        raise ValidationError(f"{what} {value[:40]!r} holds a '/', which no URL path can carry; "
                              "ids may hold any other printable character")
    raise ValidationError(f"{what} {value!r} holds only dots and spaces; an id needs another "
                          "character (a URL path drops '.' and '..')")


def segment(value: str, what: str = "id") -> str:
    """``value`` checked and escaped as one URL path segment (every byte but letters,
    digits and ``_.-~``): what links, redirects and clients put in a path."""
    return quote(check_id(value, what), safe="")


def to_header(value: str) -> str:
    """An id as an HTTP header value (``X-Memstrata-User``, ``X-Memstrata-Session``):
    percent-encoded UTF-8, since headers are ASCII and lose surrounding spaces."""
    return quote(value, safe="")


def from_header(raw: str | None, what: str) -> str | None:
    """The id an HTTP header names (None when absent or empty): percent-decoded UTF-8
    (what :func:`to_header` makes; a plain ASCII id without ``%`` is itself, and raw
    UTF-8 bytes are accepted too), then checked."""
    if not raw:
        return None
    try:
        text = raw.encode("latin-1").decode("utf-8")
        return check_id(unquote(text, errors="strict") if "%" in text else text, what)
    except UnicodeError:
        raise ValidationError(f"the {what} header is not UTF-8 text; send the id "
                              "percent-encoded (e.g. %E6%9E%97 for 林)") from None
