"""Chat completions: the :class:`LLM` seam and its OpenAI-compatible implementation.

One protocol method, :meth:`LLM.complete`. :class:`OpenAICompatibleLLM` speaks the
``/chat/completions`` API that OpenAI, DeepSeek, Qwen (DashScope compatible mode),
Ollama, vLLM and llama.cpp's server all share, over httpx. Providers are named by
string (:func:`parse_provider`)::

    openai:gpt-4o-mini                                  key: api_key= or OPENAI_API_KEY
    openai-compatible:http://127.0.0.1:8080/v1#qwen2.5  key: api_key= or MEMSTRATA_LLM_API_KEY

Every call, successful or not, is recorded in a :class:`UsageSink` (by default an
in-memory :class:`UsageLog`) so token counts and latency are visible per model and
purpose. HTTP and transport failures become :mod:`memstrata.errors` exceptions.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import httpx

from ..errors import ConfigError, ProviderError, ProviderResponseError, ValidationError
from ..types import Message, UsageRecord, UsageSummary
from .http import Retry, post_json
from .structured import Parsed, Schema, extract_json, parse

__all__ = ["LLM", "Completion", "UsageSink", "UsageLog",
           "OpenAICompatibleLLM", "parse_provider", "OPENAI_BASE_URL", "STRUCTURED_MODES"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
# Ways to ask for JSON, best first: OpenAI/vLLM take json_schema; llama-cpp-python and
# older llama.cpp builds take json_object with a "schema" (enforced by a grammar).
STRUCTURED_MODES = ("json_schema", "json_object", "prompt")


@dataclass(frozen=True, slots=True)
class Completion:
    """One chat completion: the text, token usage, latency and, if asked, the schema.

    ``parsed`` validates ``text`` against ``schema`` on demand (pure, cheap), so any
    :class:`LLM` implementation gets tolerant structured output for free.
    """

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    schema: Schema | None = None
    server_schema: bool = False  # True when the server enforced the schema itself

    @property
    def json(self) -> list[Any]:
        """Every JSON value in the text (tolerant: fences, chatter, truncation)."""
        return extract_json(self.text)

    @property
    def parsed(self) -> Parsed:
        """Valid and rejected items of the answer under ``schema``."""
        if self.schema is None:
            raise ValidationError("no schema was requested: call complete(..., schema=...)")
        return parse(self.text, self.schema)


@runtime_checkable
class LLM(Protocol):
    """A chat model. Implement one method; everything above it is derived."""

    model: str

    def complete(self, messages: Sequence[Mapping[str, Any] | Message], *,
                 schema: Schema | None = None, temperature: float = 0.0,
                 max_tokens: int = 1024, purpose: str = "") -> Completion:
        """Answer ``messages`` (OpenAI chat format).

        With ``schema``, ask for JSON of that shape (server-enforced when possible);
        ``Completion.parsed`` then holds the validated items. ``purpose`` labels the
        call in the usage log ("extract", "summary", ...). Raises :class:`ProviderError`.
        """
        ...


# ---------------------------------------------------------------- usage


class UsageSink(Protocol):
    """Where usage records go. A store can implement this to persist them."""

    def record(self, record: UsageRecord) -> None:
        """Keep one record. Must be cheap and must not raise for a full log."""
        ...


class UsageLog:
    """An in-memory, thread-safe, bounded usage log that can be queried and summarised.

    The oldest records are dropped past ``max_records``; summaries cover what is kept.
    """

    def __init__(self, records: Iterable[UsageRecord] = (), *, max_records: int = 100_000) -> None:
        self._records: deque[UsageRecord] = deque(records, maxlen=max_records)
        self._lock = threading.Lock()

    def record(self, record: UsageRecord) -> None:
        """Append one record."""
        with self._lock:
            self._records.append(record)

    def __len__(self) -> int:
        return len(self._records)

    def records(self, *, model: str | None = None, purpose: str | None = None,
                since: datetime | None = None) -> list[UsageRecord]:
        """Records matching every given filter, oldest first."""
        with self._lock:
            rows = list(self._records)
        return [r for r in rows if (model is None or r.model == model)
                and (purpose is None or r.purpose == purpose)
                and (since is None or r.at >= since)]

    def summary(self, *, by: str | None = None, **filters: Any) -> dict[str, UsageSummary]:
        """Totals, grouped ``by`` ``"model"`` or ``"purpose"``, or all under ``"all"``."""
        if by not in (None, "model", "purpose"):
            raise ValidationError("summary(by=...) takes 'model', 'purpose' or None")
        out: dict[str, UsageSummary] = {}
        for r in self.records(**filters):
            key = getattr(r, by) if by else "all"
            out[key] = out.get(key, UsageSummary()).add(r)
        return out


# ---------------------------------------------------------------- provider


@dataclass
class OpenAICompatibleLLM:
    """An OpenAI-compatible ``/chat/completions`` endpoint, called synchronously.

    ``structured_output`` is how a schema is requested, one of :data:`STRUCTURED_MODES`.
    It starts at ``json_schema`` and steps down the first time the server rejects
    ``response_format`` (400/422, or any error that names it); at ``prompt`` the schema
    travels in the prompt only and the tolerant parser does the rest.

    Retries 429, 5xx and connection errors with exponential backoff and jitter,
    honouring ``Retry-After`` up to ``max_wait_s``. A timeout is not retried: the
    caller (a background job) retries later. ``needs_key`` (set for ``openai:``) makes
    a missing key a :class:`ConfigError` at construction rather than a 401 later.
    """

    model: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5
    max_wait_s: float = 30.0
    usage: UsageSink = field(default_factory=UsageLog)
    structured_output: str = "json_schema"
    needs_key: bool = False
    transport: httpx.BaseTransport | None = None
    sleep: Callable[[float], None] = time.sleep
    _client: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.structured_output not in STRUCTURED_MODES:
            raise ConfigError(f"structured_output must be one of {', '.join(STRUCTURED_MODES)}")
        if not self.model:
            raise ConfigError("an LLM needs a model name, e.g. openai:gpt-4o-mini")
        if self.needs_key and not self.api_key:
            raise ConfigError(f"no API key for {self.base_url}: set OPENAI_API_KEY "
                              "or pass api_key=...")
        self.base_url = self.base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._client = httpx.Client(base_url=self.base_url, headers=headers,
                                    timeout=self.timeout_s, transport=self.transport)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> "OpenAICompatibleLLM":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(self, messages: Sequence[Mapping[str, Any] | Message], *,
                 schema: Schema | None = None, temperature: float = 0.0,
                 max_tokens: int = 1024, purpose: str = "") -> Completion:
        """See :meth:`LLM.complete`."""
        body: dict[str, Any] = {
            "model": self.model, "temperature": temperature, "max_tokens": max_tokens,
            "messages": [m.to_openai() if isinstance(m, Message) else dict(m) for m in messages]}
        started = time.monotonic()
        try:
            data, server_schema = self._post_structured(body, schema)
            completion = _completion(data, self.model, schema, server_schema,
                                     time.monotonic() - started)
        except ProviderError as exc:
            self._record(purpose, 0, 0, time.monotonic() - started, type(exc).__name__)
            raise
        self._record(purpose, completion.prompt_tokens, completion.completion_tokens,
                     completion.latency_s, None, model=completion.model)
        return completion

    def _post_structured(self, body: dict[str, Any], schema: Schema | None) -> tuple[Any, bool]:
        if schema is None:
            return self._post(body), False
        hinted = _with_system_hint(body["messages"], "Answer with JSON only, matching this "
                                   "JSON Schema: " + json.dumps(schema.json_schema(), ensure_ascii=False))
        while True:
            mode = self.structured_output
            if mode == "prompt":
                return self._post(dict(body, messages=hinted)), False
            if mode == "json_schema":
                fmt = {"type": "json_schema",
                       "json_schema": {"name": schema.name, "schema": schema.json_schema()}}
                request = dict(body, response_format=fmt)
            else:  # json_object also needs "JSON" in the prompt (OpenAI insists)
                fmt = {"type": "json_object", "schema": schema.json_schema()}
                request = dict(body, response_format=fmt, messages=hinted)
            try:
                return self._post(request, detect_rejected_format=True), True
            except _FormatRejected:
                # Remembered, so a client wastes at most two calls finding its level.
                self.structured_output = STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1]

    def _post(self, body: dict[str, Any], detect_rejected_format: bool = False) -> Any:
        def inspect(response: httpx.Response) -> None:
            if detect_rejected_format and _rejects_format(response):
                raise _FormatRejected()

        return post_json(self._client, "/chat/completions", body, model=self.model,
                         retry=Retry(self.max_retries, self.backoff_s, self.max_wait_s),
                         timeout_s=self.timeout_s, sleep=self.sleep, inspect=inspect)

    def _record(self, purpose: str, tin: int, tout: int, latency: float, error: str | None,
                model: str | None = None) -> None:
        self.usage.record(UsageRecord(datetime.now(UTC), model or self.model, purpose,
                                      tin, tout, latency, error))


def _with_system_hint(messages: list[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    # Into the leading system message: several chat templates refuse a system message
    # anywhere but first.
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0], content=f"{messages[0].get('content') or ''}\n\n{hint}")
        return [first, *messages[1:]]
    return [{"role": "system", "content": hint}, *messages]


class _FormatRejected(Exception):
    """Internal: the server refused response_format; retry with the next mode."""


def _rejects_format(response: httpx.Response) -> bool:
    if response.status_code in (400, 422):
        return True
    # Some servers answer 500 "response_format type must be one of text or json_object".
    text = response.text.lower() if response.status_code >= 500 else ""
    return "response_format" in text or "json_schema" in text


def _completion(data: Any, model: str, schema: Schema | None, server_schema: bool,
                latency: float) -> Completion:
    try:
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        usage = data.get("usage") or {}
        return Completion(text=str(text), model=str(data.get("model") or model),
                          prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0),
                          latency_s=latency, finish_reason=choice.get("finish_reason"),
                          schema=schema, server_schema=server_schema)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ProviderResponseError(f"the chat completion has no choices[0].message: "
                                    f"{str(data)[:200]}") from exc


# ---------------------------------------------------------------- factory


def _openai(rest: str, api_key: str | None, options: dict[str, Any]) -> OpenAICompatibleLLM:
    key = api_key or os.environ.get("OPENAI_API_KEY")
    return OpenAICompatibleLLM(model=rest, base_url=OPENAI_BASE_URL, api_key=key,
                               needs_key=True, **options)


def _compatible(rest: str, api_key: str | None, options: dict[str, Any]) -> OpenAICompatibleLLM:
    base, _, model = rest.partition("#")
    parsed = httpx.URL(base) if base.startswith(("http://", "https://")) else None
    if parsed is None or not parsed.host:
        raise ConfigError(f"openai-compatible needs an http(s) base URL, got {base!r}: "
                          "openai-compatible:http://127.0.0.1:8080/v1#MODEL")
    if not model:
        raise ConfigError("openai-compatible needs the model after '#': "
                          f"openai-compatible:{base}#MODEL")
    key = api_key or os.environ.get("MEMSTRATA_LLM_API_KEY") or None
    return OpenAICompatibleLLM(model=model, base_url=base, api_key=key, **options)


_FACTORIES: dict[str, Callable[[str, str | None, dict[str, Any]], OpenAICompatibleLLM]] = {
    "openai": _openai,
    "openai-compatible": _compatible,
}


def parse_provider(spec: str, *, api_key: str | None = None, **options: Any) -> OpenAICompatibleLLM:
    """Build an LLM from ``"openai:MODEL"`` or ``"openai-compatible:URL#MODEL"``.

    ``options`` go to :class:`OpenAICompatibleLLM` (``timeout_s``, ``max_retries``,
    ``usage``, ...). Raises :class:`ConfigError` for an unknown scheme or missing parts.
    """
    scheme, sep, rest = (spec or "").strip().partition(":")
    if not sep or scheme not in _FACTORIES:
        raise ConfigError(f"unknown LLM provider {spec!r}: use one of "
                          + ", ".join(f"{s}:..." for s in _FACTORIES)
                          + " (e.g. openai:gpt-4o-mini, openai-compatible:http://127.0.0.1:8080/v1#qwen2.5)")
    if not rest.strip():
        raise ConfigError(f"LLM provider {spec!r} names no model")
    try:
        return _FACTORIES[scheme](rest.strip(), api_key, options)
    except TypeError as exc:  # an unknown keyword in options
        raise ConfigError(f"bad LLM option for {spec!r}: {exc}") from exc
