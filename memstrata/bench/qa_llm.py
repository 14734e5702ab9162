"""The reader and the judge of ``memstrata bench qa``: any OpenAI-compatible endpoint,
answers cached on disk by request hash.

:class:`CachedChat` wraps :class:`~memstrata.providers.llm.OpenAICompatibleLLM` (one retry
loop, one status→error map: a wrong URL or a refused key is a
:class:`~memstrata.errors.ProviderError` with what to fix) with an SQLite file of answers
keyed by the SHA-256 of the request body (model, messages, temperature, max_tokens) — a
rerun, or a second system sending the same prompt, costs nothing and reports the usage the
API gave the first time. ``calls`` counts what this process actually sent.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ..errors import ConfigError, ProviderError, ProviderResponseError, mask_credentials
from ..providers.http import json_body
from ..providers.llm import OpenAICompatibleLLM

__all__ = ["Answer", "CachedChat", "ContextOverflow", "overflow_ratio"]

_OVERFLOW = re.compile(r"maximum context length|context window|context_length|too many tokens|"
                       r"prompt is too long", re.IGNORECASE)
_SIZES = re.compile(r"maximum context length is (\d+) tokens.*?requested (\d+) tokens|"
                    r"Requested tokens \((\d+)\) exceed context window of (\d+)",
                    re.IGNORECASE | re.DOTALL)


class ContextOverflow(ProviderError):
    """The endpoint refused a prompt longer than the model's window; ``ratio`` (< 1) is how
    much to shrink it by, from the sizes the error names (0.8 when it names none)."""

    def __init__(self, message: str, ratio: float) -> None:
        super().__init__(message)
        self.ratio = ratio


def overflow_ratio(message: str) -> float | None:
    """None unless ``message`` (an endpoint's error) says the prompt was over the window;
    then the window / requested ratio it names, less 10 %, or 0.8."""
    if not _OVERFLOW.search(message):
        return None
    m = _SIZES.search(message)
    if m:
        window, asked = (int(m.group(1)), int(m.group(2))) if m.group(1) else \
            (int(m.group(4)), int(m.group(3)))
        if asked > 0:
            return max(0.1, min(0.9, 0.9 * window / asked))
    return 0.8


@dataclass(frozen=True, slots=True)
class Answer:
    """One chat completion as the bench keeps it."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool


class CachedChat:
    """An OpenAI-compatible chat endpoint behind an on-disk answer cache.

    ``api_key_env`` names the environment variable the key was read from, so an auth
    failure says which one to set.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None, cache: Path,
                 api_key_env: str, timeout_s: float = 300.0) -> None:
        if not base_url.startswith(("http://", "https://")) or not httpx.URL(base_url).host:
            raise ConfigError(f"not an http(s) base URL: {base_url!r} (e.g. http://127.0.0.1:8080/v1)")
        if not model:
            raise ConfigError("a model name is needed (e.g. smollm2, gpt-4o-mini)")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self._llm = OpenAICompatibleLLM(model=model, base_url=base_url, api_key=api_key,
                                        timeout_s=timeout_s, max_retries=2)
        cache.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(cache, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, "
                         "text TEXT NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER)")
        self._db.commit()
        self._lock = threading.Lock()
        self.calls = 0
        self.hits = 0

    def check(self) -> None:
        """Fail early, before any import, when the endpoint cannot be reached or refuses the
        key (``GET /models``; a server without that route passes)."""
        url = mask_credentials(f"{self.base_url}/models")
        try:
            response = self._llm._client.get("/models", timeout=30.0)
        except httpx.TransportError as exc:
            raise ProviderError(f"cannot reach {url} ({exc}): is the server running and the "
                                "URL right? (the local model: memstrata llm serve)") from exc
        if response.status_code in (401, 403):
            raise ProviderError(f"{url} refused the API key (HTTP {response.status_code}): set "
                                f"{self.api_key_env} to a valid key")
        if response.status_code != 404:
            json_body(response, url, self.model)

    def key(self, messages: list[dict[str, Any]], max_tokens: int) -> str:
        body = {"model": self.model, "messages": messages, "temperature": 0.0,
                "max_tokens": max_tokens}
        return hashlib.sha256(json.dumps(body, ensure_ascii=False, sort_keys=True).encode()).hexdigest()

    def complete(self, messages: list[dict[str, Any]], *, max_tokens: int) -> Answer:
        """The answer to ``messages`` at temperature 0, from the cache when it has it.

        Raises :class:`ContextOverflow` when the endpoint says the prompt is over the
        model's window, :class:`ProviderError` (auth, unreachable, ...) otherwise."""
        key = self.key(messages, max_tokens)
        with self._lock:
            row = self._db.execute("SELECT text, prompt_tokens, completion_tokens FROM answers "
                                   "WHERE key = ?", (key,)).fetchone()
        if row is not None:
            self.hits += 1
            return Answer(row[0], int(row[1] or 0), int(row[2] or 0), cached=True)
        try:
            done = self._llm.complete(messages, temperature=0.0, max_tokens=max_tokens,
                                      purpose="bench-qa")
        except ProviderResponseError as exc:
            ratio = overflow_ratio(str(exc))
            if ratio is not None:
                raise ContextOverflow(str(exc), ratio) from exc
            raise
        except ProviderError as exc:
            if "API key" in str(exc):
                raise ProviderError(f"{exc} — the bench reads it from {self.api_key_env}") from exc
            raise
        self.calls += 1
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?)",
                             (key, done.text, done.prompt_tokens, done.completion_tokens))
            self._db.commit()
        return Answer(done.text, done.prompt_tokens, done.completion_tokens, cached=False)

    def close(self) -> None:
        self._llm.close()
        self._db.close()
