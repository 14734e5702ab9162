"""One HTTP call to an OpenAI-compatible endpoint, with retries and mapped errors.

Shared by the chat provider (:mod:`.llm`) and the embedding provider
(:mod:`.embedders`): 429, 5xx and connection errors are retried with exponential
backoff and full jitter, honouring ``Retry-After`` up to ``max_wait_s``; a timeout is
not retried (the caller — usually a background job — retries later); every failure
becomes one of the :class:`~memstrata.errors.ProviderError` subclasses, chosen by HTTP
status.
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from ..errors import (mask_credentials, ProviderAuthError, ProviderError, ProviderNotFoundError,
                      ProviderRateLimitError, ProviderResponseError, ProviderTimeoutError)

__all__ = ["Retry", "post_json", "json_body", "RETRY_STATUS"]

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Retry:
    """How often and how long to retry."""

    max_retries: int = 3
    backoff_s: float = 0.5
    max_wait_s: float = 30.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        hinted = _retry_after_seconds(retry_after)
        if hinted is not None:
            return min(max(hinted, 0.0), self.max_wait_s)
        # Full jitter keeps many clients from retrying in lockstep.
        return min(self.backoff_s * 2 ** attempt, self.max_wait_s) * random.uniform(0.5, 1.0)


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unparseable: fall back to our own backoff
    return (when - datetime.now(UTC)).total_seconds() if when and when.tzinfo else None


def json_body(response: httpx.Response, url: str, model: str) -> Any:
    """The JSON of a response, or the ProviderError its status means."""
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        status, detail = response.status_code, response.text[:300]
        if status in (401, 403):
            raise ProviderAuthError(f"{url}: authentication failed (HTTP {status}): it rejected "
                                    "the API key; pass api_key= or set OPENAI_API_KEY / "
                                    "MEMSTRATA_LLM_API_KEY / MEMSTRATA_EMBEDDER_API_KEY") from exc
        if status == 404:
            raise ProviderNotFoundError(f"{url} answered 404 for model {model!r}: check the "
                                        f"model name / base URL ({detail})") from exc
        if status == 429:
            raise ProviderRateLimitError(f"{url} is still rate limiting (HTTP 429) after all "
                                         "retries: slow down or raise the quota") from exc
        raise ProviderResponseError(f"{url} failed with HTTP {status}: {detail}") from exc
    try:
        return response.json()
    except ValueError as exc:
        raise ProviderResponseError(f"{url} answered with something that is not JSON: "
                                    f"{response.text[:200]!r}") from exc


def post_json(client: httpx.Client, path: str, body: dict[str, Any], *, model: str,
              retry: Retry, timeout_s: float, sleep: Callable[[float], None],
              inspect: Callable[[httpx.Response], None] | None = None) -> Any:
    """POST ``body`` to ``path`` and return the JSON answer, retrying what is worth it.

    ``inspect`` sees every response first and may raise to stop (the chat provider
    uses it to notice a server that rejects ``response_format``)."""
    url = mask_credentials(f"{str(client.base_url).rstrip('/')}{path}")  # in errors: no credentials
    for attempt in range(retry.max_retries + 1):
        last = attempt == retry.max_retries
        try:
            response = client.post(path, json=body)
        except httpx.TimeoutException as exc:
            raise ProviderTimeoutError(
                f"{url} did not answer within {timeout_s:g}s: raise the timeout "
                "or use a smaller model / shorter input") from exc
        except httpx.TransportError as exc:
            if last:
                raise ProviderError(f"cannot reach {url} ({exc}): is the server running "
                                    "and the base URL right?") from exc
            sleep(retry.delay(attempt, None))
            continue
        if inspect is not None:
            inspect(response)
        if response.status_code in RETRY_STATUS and not last:
            sleep(retry.delay(attempt, response.headers.get("retry-after")))
            continue
        return json_body(response, url, model)
    raise AssertionError("unreachable")  # the last attempt always returns or raises
