"""The memstrata exception tree.

Every error memstrata raises is a :class:`MemstrataError`. Errors from the libraries
underneath (sqlite3, psycopg, redis, httpx) are re-raised as one of these with
``raise ... from exc`` so callers catch one family, and every message says how to fix
the problem.

::

    MemstrataError
    ├── ConfigError            bad URL, unknown provider, missing optional extra
    ├── ValidationError        malformed input: messages, content, ids, filters
    │   └── ToolCallSequenceError   tool calls without results, results without calls
    ├── NotFoundError          unknown item, session or user id
    ├── ConflictError          optimistic-lock failure (someone else wrote first)
    ├── BudgetError            a token budget too small for what must be kept
    ├── JobError               a background job failed, or did not finish in time
    ├── AuthenticationError    no API key, or one that is unknown or revoked (HTTP 401)
    ├── PermissionDeniedError  the key's role or user may not do this (HTTP 403)
    ├── RateLimitError         the key used up its requests for this minute (HTTP 429)
    ├── StoreError             the database failed (corrupt, read-only, unreachable)
    │   └── StoreUnavailableError   the server cannot be reached or refused the login
    └── ProviderError          an embedding or LLM endpoint failed
        ├── ProviderAuthError       401/403: wrong or missing key
        ├── ProviderNotFoundError   404: wrong model name or base URL
        ├── ProviderRateLimitError  429 after all retries
        ├── ProviderTimeoutError    no answer in time
        └── ProviderResponseError   5xx or an answer that cannot be used
"""

from __future__ import annotations

import re
import reprlib

__all__ = [
    "with_article",
    "type_words",
    "mask_credentials",
    "shown",
    "MemstrataError",
    "ConfigError",
    "ValidationError",
    "ToolCallSequenceError",
    "NotFoundError",
    "ConflictError",
    "BudgetError",
    "JobError",
    "AuthenticationError",
    "PermissionDeniedError",
    "RateLimitError",
    "StoreError",
    "StoreUnavailableError",
    "ProviderError",
    "ProviderAuthError",
    "ProviderNotFoundError",
    "ProviderRateLimitError",
    "ProviderTimeoutError",
    "ProviderResponseError",
]


# -- the words of messages: every message that names a thing by a variable says "a" or
# "an" as English does, and names Python types as people say them.

# a vowel letter that sounds like a consonant ("a user", "a one-off", "a European") and a
# silent h ("an hour")
_SOUNDS_LIKE_YOU = ("uni", "use", "usa", "usu", "uti", "ure", "one", "once", "eu")
_SILENT_H = ("hour", "honest", "honor", "honour", "heir")


def with_article(noun: str) -> str:
    """``noun`` after the indefinite article English gives it: ``"an app key"``,
    ``"a read-only key"``, ``"an end-user key"``, ``"a user"``, ``"an 8-bit value"``."""
    word = noun.strip().lower()
    if word.startswith(_SILENT_H):
        return f"an {noun}"
    if word[:1] in ("a", "e", "i", "o", "u") and not word.startswith(_SOUNDS_LIKE_YOU):
        return f"an {noun}"
    if word.startswith(("8", "11", "18")):
        return f"an {noun}"
    return f"a {noun}"


_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string",
               "bool": "true or false", "list": "a list", "tuple": "a list", "dict": "a mapping",
               "NoneType": "nothing (None)"}


def type_words(kind: type) -> str:
    """A Python type as a message says it: ``int`` -> ``"an integer"``, ``float`` ->
    ``"a number"``, ``str`` -> ``"a string"``, ``bool`` -> ``"true or false"``."""
    return _TYPE_WORDS.get(kind.__name__) or with_article(kind.__name__)


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 2, 60, 60, 40
_SHOWN.maxdict = _SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxset = _SHOWN.maxfrozenset = 4


def shown(value: object) -> str:
    """A caller's value as an error message shows it: its repr, cut short and never
    more than two levels deep (a 5,000-level dict's own repr is a RecursionError; a
    300,000-character string would flood the message)."""
    try:
        return _SHOWN.repr(value)
    except Exception:  # a caller's object whose __repr__ fails: say what it is
        return f"<{type(value).__name__} object>"


_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/@:]*)(?::[^\s/@]*)?@")


def mask_credentials(text: str) -> str:
    """``text`` with the password of every URL in it masked, for a log or an error a
    caller sees: ``http://user:secret@gw/v1`` → ``http://user:***@gw/v1``,
    ``redis://:secret@host`` → ``redis://***@host``; a user name alone stays."""
    def mask(m: re.Match[str]) -> str:
        scheme, user = m.group("scheme"), m.group("user")
        if ":" not in m.group(0)[len(scheme):]:
            return m.group(0)  # no password
        return f"{scheme}{user}:***@" if user else f"{scheme}***@"
    return _CREDENTIALS.sub(mask, text)


class MemstrataError(Exception):
    """Base class of every error memstrata raises."""


class ConfigError(MemstrataError):
    """A setting, URL or provider string is wrong, or an optional extra is missing."""


class ValidationError(MemstrataError, ValueError):
    """Input that memstrata refuses: nothing was written."""


class ToolCallSequenceError(ValidationError):
    """A message list whose tool calls and tool results do not pair up."""


class NotFoundError(MemstrataError, KeyError):
    """An id that does not exist (or no longer exists) for this user."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the sentence
        return str(self.args[0]) if self.args else ""


class ConflictError(MemstrataError):
    """An optimistic-lock check failed: reload and retry."""


class BudgetError(MemstrataError, ValueError):
    """A token budget too small for what must always be kept."""


class JobError(MemstrataError):
    """A background job failed (its error is recorded with the job in the store) or
    did not finish in time."""


class AuthenticationError(MemstrataError):
    """The request carries no API key, or one that is unknown or revoked."""


class PermissionDeniedError(MemstrataError):
    """The API key is valid but its role (or its one user) does not allow the call."""


class RateLimitError(MemstrataError):
    """The API key made more requests this minute than its limit allows.

    ``retry_after`` is the number of seconds until the next window opens."""

    def __init__(self, message: str, retry_after: float = 60.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StoreError(MemstrataError):
    """The storage backend failed."""


class StoreUnavailableError(StoreError):
    """The storage server cannot be reached, or refused the credentials or database."""


class ProviderError(MemstrataError):
    """An embedding or LLM provider failed."""


class ProviderAuthError(ProviderError):
    """The provider rejected the API key (HTTP 401/403)."""


class ProviderNotFoundError(ProviderError):
    """The provider does not know the model or the URL (HTTP 404)."""


class ProviderRateLimitError(ProviderError):
    """The provider kept answering 429 after every retry."""


class ProviderTimeoutError(ProviderError):
    """The provider did not answer within the timeout."""


class ProviderResponseError(ProviderError):
    """The provider failed (5xx) or answered with something unusable."""
