"""Rerankers: a second, slower opinion on the best few hits. Off by default.

One method, :meth:`Reranker.rerank` — a relevance score per document, higher is better.
Two implementations:

* :class:`HTTPReranker` — the ``/rerank`` endpoint that llama.cpp's server (``--reranking``),
  vLLM, Jina and Cohere serve (``{"model", "query", "documents", "top_n"}`` →
  ``{"results": [{"index", "relevance_score"}]}``), or Hugging Face TEI's
  (``{"query", "texts"}`` → ``[{"index", "score"}]``) with ``format="tei"``.
* :class:`LLMReranker` — any chat model of the :mod:`.llm` seam, asked to grade each
  document 0–10 for the query in one JSON answer. Given the :class:`~.metered.MeteredLLM`
  and the searching user's scope, each call is recorded (purpose ``rerank``) and counts
  against that user's ``llm_daily_budget``; once it is spent the search keeps its own
  order (``rerank`` answers None).

Specs (setting ``reranker``): ``""`` (off), ``rerank:http://127.0.0.1:8012#bge-reranker``,
``tei:http://127.0.0.1:8080``, ``llm`` (the configured ``llm`` setting).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import httpx

from ..errors import ConfigError, ProviderResponseError
from .http import Retry, post_json
from .llm import LLM

if TYPE_CHECKING:
    from ..types import Scope
    from .metered import MeteredLLM

__all__ = ["Reranker", "HTTPReranker", "LLMReranker", "parse_reranker"]


class Reranker(Protocol):
    """Scores documents for a query. ``name`` identifies the model in logs."""

    name: str

    def rerank(self, query: str, documents: Sequence[str], *,
               scope: "Scope | None" = None) -> list[float] | None:
        """One relevance score per document, in the documents' order (higher is better);
        None when this reranker may not run for ``scope`` now (its budget is spent)."""
        ...


class HTTPReranker:
    """The ``/rerank`` endpoint of llama.cpp, vLLM, Jina, Cohere (``format="jina"``) or
    TEI (``format="tei"``)."""

    def __init__(self, base_url: str, model: str = "", *, format: Literal["jina", "tei"] = "jina",
                 api_key: str | None = None, timeout_s: float = 30.0, retry: Retry | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"reranker URL must start with http:// or https://, got {base_url!r}")
        self.model = model
        self.format = format
        self.name = f"{format}:{base_url}" + (f"#{model}" if model else "")
        self.timeout_s = timeout_s
        self.retry = retry or Retry()
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)

    def rerank(self, query: str, documents: Sequence[str], *,
               scope: "Scope | None" = None) -> list[float]:
        """See :meth:`Reranker.rerank`; ProviderError on a bad or missing answer."""
        if not documents:
            return []
        body: dict[str, Any]
        if self.format == "tei":
            body = {"query": query, "texts": list(documents)}
        else:
            body = {"query": query, "documents": list(documents), "top_n": len(documents)}
            if self.model:
                body["model"] = self.model
        data = post_json(self._client, "/rerank", body, model=self.model or "reranker",
                         retry=self.retry, timeout_s=self.timeout_s, sleep=self._sleep)
        rows = data.get("results") if isinstance(data, dict) else data
        scores: list[float | None] = [None] * len(documents)
        try:
            for row in rows or ():
                score = row["relevance_score"] if "relevance_score" in row else row["score"]
                scores[int(row["index"])] = float(score)
        except (TypeError, KeyError, ValueError, IndexError) as exc:
            raise ProviderResponseError(f"{self.name}/rerank answered in an unknown shape: "
                                        f"{str(data)[:200]}") from exc
        if any(s is None for s in scores):
            raise ProviderResponseError(f"{self.name}/rerank scored {sum(s is not None for s in scores)}"
                                        f" of {len(documents)} documents")
        return [float(s) for s in scores if s is not None]

    def close(self) -> None:
        self._client.close()


_PROMPT = ("Grade how useful each numbered memory is for answering or continuing from the "
           "query, from 0 (unrelated) to 10 (answers it). Reply with JSON only: "
           '{{"scores": [one number per memory, in order]}}.\n\nQuery: {query}\n\nMemories:\n{docs}')


class LLMReranker:
    """A chat model as a reranker: one call grades every document 0–10. With ``metered``
    (what :class:`~memstrata.Memory` passes), a call for a user is recorded with purpose
    ``rerank`` and counts against ``llm_daily_budget``, like extraction's."""

    def __init__(self, llm: LLM, *, max_tokens: int = 256,
                 metered: "MeteredLLM | None" = None) -> None:
        self.llm = llm
        self.metered = metered
        self.name = f"llm:{llm.model}"
        self.max_tokens = max_tokens

    def rerank(self, query: str, documents: Sequence[str], *,
               scope: "Scope | None" = None) -> list[float] | None:
        """See :meth:`Reranker.rerank`; ProviderResponseError when the answer has no grades,
        None when the user's LLM budget is spent or the call failed (recorded)."""
        if not documents:
            return []
        docs = "\n".join(f"{i + 1}. {' '.join(d.split())[:500]}" for i, d in enumerate(documents))
        messages = [{"role": "user", "content": _PROMPT.format(query=query, docs=docs)}]
        if self.metered is not None and scope is not None:
            done = self.metered.call(scope, "rerank", messages, None, max_tokens=self.max_tokens)
            if done is None:
                return None
            answer = done.text
        else:
            answer = self.llm.complete(messages, max_tokens=self.max_tokens, purpose="rerank").text
        match = re.search(r"\{.*\}", answer, re.DOTALL)
        try:
            scores = [float(x) for x in json.loads(match.group(0))["scores"]] if match else []
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderResponseError(f"{self.name} did not grade the memories: {answer[:200]!r}") from exc
        if len(scores) != len(documents):
            raise ProviderResponseError(f"{self.name} graded {len(scores)} of {len(documents)} "
                                        f"memories: {answer[:200]!r}")
        return scores


def parse_reranker(spec: str, *, llm: LLM | None = None, api_key: str | None = None,
                   metered: "MeteredLLM | None" = None) -> Reranker | None:
    """A reranker from its spec (module docstring); None for ``""``. ``metered`` (the
    Memory's LLM with its usage sink and budget) makes ``llm`` calls count."""
    spec = (spec or "").strip()
    if not spec:
        return None
    if spec == "llm":
        if llm is None:
            raise ConfigError("reranker='llm' needs an LLM: set the llm setting "
                              "(e.g. openai-compatible:http://127.0.0.1:8080/v1#qwen)")
        return LLMReranker(llm, metered=metered)
    scheme, _, rest = spec.partition(":")
    if scheme in ("rerank", "tei") and rest:
        url, _, model = rest.partition("#")
        return HTTPReranker(url, model, format="tei" if scheme == "tei" else "jina", api_key=api_key)
    raise ConfigError(f"bad reranker {spec!r}; use '', rerank:URL#MODEL, tei:URL or llm")
