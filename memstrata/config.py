"""One settings table: it drives ``Settings``, environment variables, CLI flags and docs.

Each setting has a name, a default, a type and one line of help. ``MEMSTRATA_<NAME>``
overrides the default; keyword arguments to :class:`~memstrata.Memory` override both.
``docs/configuration.md`` lists them all (a test checks it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from .errors import ConfigError, type_words

__all__ = ["Settings", "SETTINGS", "Setting", "SCORING_PRESETS", "resolve"]


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its default, type, help line and what values it allows.

    ``choices`` lists the allowed values of a setting with fixed options; ``low`` and
    ``high`` bound a number (inclusive). :meth:`Settings.load` checks them all.
    """

    name: str
    default: Any
    type: type
    help: str
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None

    @property
    def env(self) -> str:
        return f"MEMSTRATA_{self.name.upper()}"

    def check(self, value: Any) -> Any:
        """``value`` if this setting allows it; a ConfigError that says what is allowed."""
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, self.type) or (self.type is not bool and isinstance(value, bool)):
            raise ConfigError(f"setting {self.name} must be {type_words(self.type)}, "
                              f"not {value!r}")
        if self.choices and value not in self.choices:
            raise ConfigError(f"setting {self.name}={value!r} is not allowed; use one of "
                              f"{', '.join(self.choices)}")
        number = float(value) if isinstance(value, (int, float)) else 0.0
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            bounds = (f"between {self.low:g} and {self.high:g}" if self.low is not None
                      and self.high is not None else
                      f"at least {self.low:g}" if self.low is not None else f"at most {self.high:g}")
            raise ConfigError(f"setting {self.name}={value!r} is out of range; it must be {bounds}")
        return value

    @property
    def allowed(self) -> str:
        """The allowed values in words (for the docs), or ``""``."""
        if self.choices:
            return ", ".join(self.choices)
        if self.low is not None and self.high is not None:
            return f"{self.low:g} – {self.high:g}"
        if self.low is not None:
            return f"≥ {self.low:g}"
        return ""


#: The scoring presets of :mod:`memstrata.retrieval.scoring` (a test keeps them equal).
SCORING_PRESETS = ("balanced", "fresh", "decay", "support", "relevance")


SETTINGS: tuple[Setting, ...] = (
    Setting("store", "sqlite:///memstrata.db", str,
            "Storage URL: sqlite:///file.db, memory:// or postgresql://user@host/db"),
    Setting("embedder", "local:e5-small", str,
            "Embedding provider: local:e5-small, local:minilm, hash:256, openai:MODEL, "
            "openai-compatible:URL#MODEL"),
    Setting("namespace", "", str, "Default agent/app namespace for every call"),
    Setting("max_message_chars", 200_000, int, "Longest message content accepted, in characters",
            low=1),
    Setting("scoring", "balanced", str,
            "Scoring preset: balanced (0.6/0.3/0.1), fresh (0.4/0.3/0.3), decay, support, relevance",
            choices=SCORING_PRESETS),
    Setting("candidates", 50, int, "Candidates taken from each of the dense and lexical lists",
            low=1, high=1000),
    Setting("fusion", "weighted", str, "Fusion of dense and lexical lists: weighted or rrf",
            choices=("weighted", "rrf")),
    Setting("dense_weight", 0.43, float, "Weight of the dense list in fusion", low=0.0),
    Setting("lexical_weight", 0.57, float, "Weight of the lexical (BM25) list in fusion",
            low=0.0),
    Setting("body_weight", 3.0, float, "BM25 weight of a document's own text", low=0.0),
    Setting("context_weight", 0.5, float,
            "BM25 weight of a turn's context field (neighbouring turns, date; see docs/retrieval.md)",
            low=0.0),
    Setting("speaker_boost", 0.1, float,
            "Score boost for turns by the one speaker a query names (0 turns it off)",
            low=0.0),
    Setting("latest_ratio", 0.3, float,
            "For a question about now, hits near the top answering it at least this well "
            "(as a share of the best one's similarity) are statements of the same thing, and the "
            "latest said goes first (0 turns it off)", low=0.0, high=1.0),
    Setting("split_questions", True, bool,
            "Search each question of a compound query (\"X? Also, Y?\" / \"X？另外，Y？\") on its own"),
    Setting("expansion_weight", 0.3, float,
            "Query expansion from the best hit (pseudo-relevance feedback): weight of its "
            "other words as a second lexical query (0 turns it off)", low=0.0),
    Setting("calibration", "fitted", str,
            "Dense similarity: fitted (each embedder's cosines calibrated against unrelated "
            "pairs, see docs/retrieval.md) or minmax (normalised within each candidate list)",
            choices=("fitted", "minmax")),
    Setting("lexical_saturation", 8.0, float,
            "BM25 score that gives a lexical part of 0.5 (s / (s + K)); 0 divides by the "
            "list's best instead", low=0.0),
    Setting("assistant_weight", 0.5, float,
            "Weight of the assistant's own turns in search scores (1: trusted as much as the "
            "user's); not applied when the query asks what the assistant said", low=0.0, high=1.0),
    Setting("question_weight", 0.6, float,
            "Weight of a turn that only asks a question when the query is a question too",
            low=0.0, high=1.0),
    Setting("reranker", "", str,
            "Reranker of the best hits: empty = off, rerank:URL#MODEL (llama.cpp, vLLM, "
            "Jina), tei:URL (Hugging Face TEI) or llm (the llm setting as a reranker)"),
    Setting("rerank_k", 20, int, "Best hits the reranker reorders", low=0, high=200),
    Setting("recall_k", 8, int,
            "context(): memories recalled for every turn (0: only on trigger words)", low=0,
            high=100),
    Setting("recall_min_score", 0.1, float,
            "context(): memories scoring under this are not recalled", low=0.0),
    Setting("deep_below", 0.4, float,
            "context(): deep recall (more memories, any role) when no recalled memory "
            "scores this much", low=0.0),
    Setting("embed_on_add", "background", str,
            "When add() embeds new turns: background (in their extraction job; add() returns "
            "in about a millisecond) or inline", choices=("background", "inline")),
    Setting("query_turns", 8, int, "Recent turns added to the query besides the current message",
            low=0),
    Setting("embed_batch", 32, int,
            "Texts per embedding call on the write path (imports; the worker embeds queued "
            "jobs together)", low=1),
    Setting("query_cache", 1024, int,
            "Query vectors kept in memory by query text, least recently used out first "
            "(a repeated query skips the embedding); 0 = embed every query", low=0, high=1_000_000),
    Setting("background_wait_ms", 500.0, float,
            "Longest a background job step waits for the requests in flight (requests go "
            "first; a job step runs at least this often under load); 0 = jobs never wait",
            low=0.0, high=60_000.0),
    Setting("index_memory_mb", 512.0, float,
            "Memory a store's in-process search index may hold, all users together "
            "(least recently searched users are dropped first and reloaded when searched)",
            low=1.0),
    Setting("sessions", "", str,
            "Session store URL: empty = the main store's own session rows (SQLite or "
            "PostgreSQL); redis://host:6379/0 or redis+cluster://host:7000 (add ?prefix=NAME "
            "to share a server)"),
    Setting("summary_every", 10, int, "Messages between two progressive summary steps",
            low=1),
    Setting("session_idle_minutes", 30.0, float,
            "Idle time after which archive_idle() closes and archives a session", low=0.0),
    Setting("session_sweep_minutes", 5.0, float,
            "How often the background worker archives idle sessions (archive_idle()); "
            "0 turns the sweep off", low=0.0),
    Setting("session_window", 50, int, "Recent messages a session state carries", low=1),
    Setting("trigger_words", "上次,我之前说过,我的习惯是,last time,as I said", str,
            "Comma-separated words that switch context() from light warm-up to deep recall"),
    Setting("extraction", "rules", str,
            "L3 extraction after add(): rules (offline, in a background job) or off",
            choices=("rules", "off")),
    Setting("llm", "", str,
            "LLM for extraction, conflict judgment and summaries: empty = offline rules only; "
            "openai:MODEL or openai-compatible:URL#MODEL (see docs/providers.md)"),
    Setting("llm_daily_budget", 0, int,
            "LLM calls per user per UTC day (0 = unlimited); past it, rules only (recorded)",
            low=0),
    Setting("llm_timeout_s", 60.0, float, "Seconds an LLM call may take before it fails",
            low=0.001),
    Setting("llm_max_tokens", 512, int, "Most tokens an LLM answer may have", low=1),
    Setting("worker", "thread", str,
            "Who runs background jobs: thread (inside Memory) or off (a `memstrata worker` "
            "process; flush() then runs them inline)", choices=("thread", "off")),
    Setting("job_lease_s", 60.0, float,
            "Seconds a claimed job stays claimed; a dead worker's job is reclaimed after it",
            low=0.001),
    Setting("job_max_attempts", 3, int, "Attempts before a failing job is marked failed",
            low=1),
    Setting("extract_window", 6, int, "Recent messages an extraction job reads", low=0),
    Setting("dedup_threshold", 0.92, float,
            "Cosine above which a same-kind candidate sharing wording boosts an item",
            low=0.0, high=1.0),
    Setting("conflict_low", 0.70, float,
            "Lower cosine bound of the conflict band; slots decide first", low=0.0, high=1.0),
    Setting("boost_step", 0.05, float, "Confidence added when a memory is stated again", low=0.0, high=1.0),
    Setting("session_only_below", 0.5, float,
            "Confidence under which a candidate stays out of long-term memory", low=0.0, high=1.0),
    Setting("require_repetition", False, bool,
            "Facts and preferences enter long-term memory only after two mentions"),
    Setting("max_items_per_user", 1000, int,
            "Active items per user; maintain() deactivates the lowest-value ones above it",
            low=0),
    Setting("decay_max_age_days", 90.0, float,
            "maintain(): items older than this and recalled at most twice become inactive",
            low=0.0),
    Setting("decay_min_confidence", 0.3, float,
            "maintain(): items under this confidence become inactive", low=0.0, high=1.0),
    Setting("feedback_up", 0.1, float, "Confidence added by a thumbs-up", low=0.0, high=1.0),
    Setting("feedback_down", 0.6, float, "Confidence removed by a thumbs-down", low=0.0, high=1.0),
    Setting("forget_similarity", 0.9, float,
            "Cosine at which a 'forget X' request matches an item without a shared word",
            low=0.0, high=1.0),
    Setting("forget_messages", True, bool,
            "'Forget that' in conversation also deletes the raw turns the items came from"),
    Setting("kb_chunk_chars", 500, int,
            "Knowledge base: longest chunk, in characters (a single longer sentence is cut at "
            "a clause mark)", low=20),
    Setting("kb_min_chunk_chars", 300, int,
            "Knowledge base: chunks shorter than this are merged with the next paragraph "
            "where it fits", low=0),
    Setting("kb_cjk_weight", 1.0, float,
            "Knowledge base: how many characters one CJK character counts as when sizing chunks",
            low=0.1, high=10.0),
    Setting("kb_k", 5, int, "Knowledge base: chunks context() puts into the knowledge quota",
            low=0, high=100),
    Setting("kb_min_score", 0.0, float,
            "Knowledge base: chunks scoring under this are left out of searches and contexts",
            low=0.0),
    Setting("kb_context_weight", 0.5, float,
            "Knowledge base: BM25 weight of a chunk's document title and heading path", low=0.0),
    Setting("kb_neighbour_weight", 0.2, float,
            "Knowledge base: share of the ordering value of the best neighbouring chunk "
            "that continues a chunk's paragraph added to the chunk's when ranking (0: off)",
            low=0.0, high=1.0),
    Setting("kb_stale_recalls", 5, int,
            "Knowledge base: recalls without a use after which a chunk is stale "
            "(down-weighted, listed by `memstrata kb stale`)", low=1),
    Setting("kb_stale_weight", 0.8, float,
            "Knowledge base: score factor of a stale chunk", low=0.0, high=1.0),
    Setting("kb_used_overlap", 0.3, float,
            "Knowledge base: share of a reply's own words found in a recalled chunk for the "
            "chunk to count as used", low=0.0, high=1.0),
    # -- trust: forgetting, files, bounded work ------------------------------------------
    Setting("compact_wait_s", 10.0, float,
            "How long compact() waits for readers of other connections to leave old "
            "snapshots before it reports that the SQLite -wal still holds deleted bytes",
            low=0.0, high=3600.0),
    Setting("erase_within_s", 300.0, float,
            "Seconds within which the pages a forget freed are erased from the files: a "
            "forget schedules one compaction (off the request path; the worker runs it), "
            "so every forget of the window shares it",
            low=1.0, high=86400.0),
    Setting("max_query_parts", 4, int,
            "Questions of a compound query searched one by one (\"X? Also, Y?\"); the rest "
            "are searched together with the last", low=1, high=64),
    Setting("max_query_chars", 1000, int,
            "Characters of a query (or of the user message context() recalls for) that "
            "retrieval reads; a longer one is cut, so its cost stays bounded", low=50,
            high=200_000),
    Setting("quick_check", True, bool,
            "Run SQLite's PRAGMA quick_check when a store file is opened (and before compact): "
            "a damaged file is a StoreError before anything is written to it"),
    Setting("durability", "full", str,
            "What a commit survives: full = an OS crash or power loss too (SQLite "
            "synchronous=FULL, PostgreSQL synchronous_commit=on); normal = a process crash "
            "(SQLite synchronous=NORMAL: a power loss may roll back the last commits; "
            "PostgreSQL: the server's own synchronous_commit). See docs/storage.md",
            choices=("normal", "full")),
    Setting("read_only", False, bool,
            "Open an SQLite store file read-only: search, list and read work and record no "
            "access counts; a write is a StoreError; no worker runs"),
)


def _flag(raw: str, env: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{env}={raw!r} is not a valid flag; use 1/0, true/false, yes/no or on/off")


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved settings; build with :meth:`Settings.load`."""

    store: str = "sqlite:///memstrata.db"
    embedder: str = "local:e5-small"
    namespace: str = ""
    max_message_chars: int = 200_000
    scoring: str = "balanced"
    candidates: int = 50
    fusion: str = "weighted"
    dense_weight: float = 0.43
    lexical_weight: float = 0.57
    body_weight: float = 3.0
    context_weight: float = 0.5
    speaker_boost: float = 0.1
    latest_ratio: float = 0.3
    split_questions: bool = True
    expansion_weight: float = 0.3
    calibration: str = "fitted"
    lexical_saturation: float = 8.0
    assistant_weight: float = 0.5
    question_weight: float = 0.6
    reranker: str = ""
    rerank_k: int = 20
    recall_k: int = 8
    recall_min_score: float = 0.1
    deep_below: float = 0.4
    embed_on_add: str = "background"
    query_turns: int = 8
    embed_batch: int = 32
    query_cache: int = 1024
    background_wait_ms: float = 500.0
    index_memory_mb: float = 512.0
    sessions: str = ""
    summary_every: int = 10
    session_idle_minutes: float = 30.0
    session_sweep_minutes: float = 5.0
    session_window: int = 50
    trigger_words: str = "上次,我之前说过,我的习惯是,last time,as I said"
    extraction: str = "rules"
    llm: str = ""
    llm_daily_budget: int = 0
    llm_timeout_s: float = 60.0
    llm_max_tokens: int = 512
    worker: str = "thread"
    job_lease_s: float = 60.0
    job_max_attempts: int = 3
    extract_window: int = 6
    dedup_threshold: float = 0.92
    conflict_low: float = 0.70
    boost_step: float = 0.05
    session_only_below: float = 0.5
    require_repetition: bool = False
    max_items_per_user: int = 1000
    decay_max_age_days: float = 90.0
    decay_min_confidence: float = 0.3
    feedback_up: float = 0.1
    feedback_down: float = 0.6
    forget_similarity: float = 0.9
    forget_messages: bool = True
    kb_chunk_chars: int = 500
    kb_min_chunk_chars: int = 300
    kb_cjk_weight: float = 1.0
    kb_k: int = 5
    kb_min_score: float = 0.0
    kb_context_weight: float = 0.5
    kb_neighbour_weight: float = 0.2
    kb_stale_recalls: int = 5
    kb_stale_weight: float = 0.8
    kb_used_overlap: float = 0.3
    compact_wait_s: float = 10.0
    erase_within_s: float = 300.0
    max_query_parts: int = 4
    max_query_chars: int = 1000
    quick_check: bool = True
    read_only: bool = False
    durability: str = "full"

    @classmethod
    def load(cls, **overrides: Any) -> "Settings":
        """Defaults, then ``MEMSTRATA_*`` environment variables, then ``overrides``."""
        return replace(cls(), **resolve(SETTINGS, overrides))


def resolve(table: tuple[Setting, ...], overrides: Mapping[str, Any], *,
            base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The checked values of ``table`` that differ from the defaults: ``base`` (say, a
    config file), then ``MEMSTRATA_*`` environment variables, then ``overrides`` (None
    values are ignored). Unknown names and bad values are ConfigErrors."""
    by_name = {s.name: s for s in table}
    values: dict[str, Any] = {}
    for key, value in (base or {}).items():
        if key not in by_name:
            raise ConfigError(f"unknown setting {key!r}; known: {', '.join(sorted(by_name))}")
        values[key] = value
    for setting in table:
        raw = os.environ.get(setting.env)
        if raw is not None:
            try:
                values[setting.name] = (_flag(raw, setting.env) if setting.type is bool
                                        else setting.type(raw))
            except ValueError:
                raise ConfigError(f"{setting.env}={raw!r} is not {type_words(setting.type)}"
                                  ) from None
    for key, value in overrides.items():
        if key not in by_name:
            raise ConfigError(f"unknown setting {key!r}; known: {', '.join(sorted(by_name))}")
        if value is not None:
            values[key] = value
    return {key: by_name[key].check(value) for key, value in values.items()}


def markdown_table(table: tuple[Setting, ...] = SETTINGS) -> str:
    """The settings as the table in ``docs/configuration.md`` (``python -m memstrata.config``
    prints it; a test keeps the docs equal to it)."""
    rows = ["| setting | environment variable | default | allowed | meaning |",
            "|---|---|---|---|---|"]
    for s in table:
        allowed = s.allowed.replace("|", "\\|")
        rows.append(f"| `{s.name}` | `{s.env}` | `{s.default!r}` | {allowed} | {s.help} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
